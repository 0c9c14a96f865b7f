"""Exact-oracle tests (float64): on linear-Gaussian models every exact backend equals a closed-form filter.

The oracle is a plain numpy Kalman filter written here, with the design matrix built by hand from the model's
definition (not from JAX), over a sequence of predict/update steps — stationary, and with drift ``q > 0`` and
forgetting ``γ < 1``.  Backends not registered yet are skipped with the reason printed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fast_compile import compiled_call

import banditkit as bk
from banditkit.likelihoods import Gaussian
from banditkit.posteriors.kalman_last_layer import current_forgetting

P_ = bk.posteriors
D_IN, C_OUT, T = 3, 2, 6
R_VAR, V0 = 0.3, 0.7
CONFIGS = [(0.0, 1.0), (0.05, 0.9)]  # (dynamics_cov q, forgetting γ)
ATOL = 1e-9


def lin_apply(p, x):
    """``f = xᵀW + b``: linear in the parameters, ``W (3, 2)``, ``b (2,)``; ravel order ``[b, W.ravel()]``."""
    return x @ p["w"] + p["b"]


def lin_design(x):
    """Hand-written ``H (2, 8)`` of :func:`lin_apply` in ``ravel_pytree`` order (keys sorted: ``b``, ``w``)."""
    h = np.zeros((C_OUT, C_OUT + D_IN * C_OUT))
    for c in range(C_OUT):
        h[c, c] = 1.0
        for i in range(D_IN):
            h[c, C_OUT + i * C_OUT + c] = x[i]
    return h


def kalman_oracle(theta0, v0, designs, ys, r, q, g, x_star_design, *, prior_mean=None, preserve=None):
    """Closed-form Kalman filter: returns the mean after every step and the predictive (mean, cov) at x*.

    Time update ``μ ← γμ (+ (1−γ) prior_mean)``, ``Σ ← γ²Σ + (q + (1−γ²) preserve) I``; measurement update in
    the textbook form ``Σ − K S Kᵀ``.
    """
    mu = np.array(theta0, float)
    sig = v0 * np.eye(mu.size)
    means, pmeans, pcovs = [], [], []
    for h, y in zip(designs, ys, strict=True):
        mu = g * mu + ((1 - g) * prior_mean if prior_mean is not None else 0.0)
        sig = g**2 * sig + (q + ((1 - g**2) * preserve if preserve is not None else 0.0)) * np.eye(mu.size)
        s = h @ sig @ h.T + r * np.eye(h.shape[0])
        k = sig @ h.T @ np.linalg.inv(s)
        mu = mu + k @ (y - h @ mu)
        sig = sig - k @ s @ k.T
        means.append(mu.copy())
        pmeans.append(x_star_design @ mu)
        pcovs.append(x_star_design @ sig @ x_star_design.T + r * np.eye(h.shape[0]))
    return np.array(means), np.array(pmeans), np.array(pcovs)




def _scan_outputs(post, params, xs, ys, x_star):
    state = post.init(params)

    def body(s, xy):
        s = post.update(post.predict(s), xy[0], xy[1])
        m, c = post.predictive(s, x_star)
        flat = jax.flatten_util.ravel_pytree(post.mean(s))[0]
        return s, (flat, m, c)

    return jax.lax.scan(body, state, (xs, ys))[1]


def run_backend(post, params, xs, ys, x_star):
    """``lax.scan`` of predict → update; returns flat means, predictive means and covariances at ``x_star``."""
    return compiled_call(lambda p, a, b: _scan_outputs(post, p, a, b, x_star), params, xs, ys)


def run_configs(build, configs, params, xs, ys, x_star):
    """:func:`run_backend` for every ``(q, γ)`` in ``configs``, hyper-parameters traced: one compiled graph."""
    qs = jnp.array([c[0] for c in configs])
    gs = jnp.array([c[1] for c in configs])
    fn = lambda p, a, b: jax.vmap(lambda q, g: _scan_outputs(build(q, g), p, a, b, x_star))(qs, gs)
    return compiled_call(fn, params, xs, ys)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(T, D_IN))
    ys = rng.normal(size=(T, C_OUT))
    x_star = rng.normal(size=D_IN)
    params = {"w": rng.normal(size=(D_IN, C_OUT)), "b": rng.normal(size=C_OUT)}
    return params, xs, ys, x_star


def _need(name):
    return P_.REGISTRY[name]


def _factories():
    """name -> builder(q, γ, n_params) for the backends that must be exact on a linear-Gaussian model."""
    lik = Gaussian(R_VAR)
    return {
        "ekf": lambda q, g, n: P_.ekf(lin_apply, lik, init_cov=V0, dynamics_cov=q, forgetting=g),
        "linear": lambda q, g, n: P_.linear(lin_apply, lik, init_cov=V0, dynamics_cov=q, forgetting=g),
        "subspace_ekf": lambda q, g, n: P_.subspace_ekf(
            lin_apply, lik, basis=jnp.eye(n), offset=jnp.zeros(n), init_cov=V0, dynamics_cov=q, forgetting=g
        ),
        "lofi": lambda q, g, n: _need("lofi")(
            lin_apply, lik, rank=n, init_cov=V0, dynamics_cov=q, forgetting=g, inflation="none"
        ),
        "lrkf": lambda q, g, n: _need("lrkf")(lin_apply, lik, rank=n, init_cov=V0, dynamics_cov=q, forgetting=g),
    }


@pytest.mark.parametrize("name", ["ekf", "linear", "subspace_ekf", "lofi", "lrkf"])
def test_full_rank_backends_equal_kalman_oracle(x64, name):
    params, xs, ys, x_star = _data()
    theta0 = np.concatenate([params["b"], params["w"].ravel()])
    n = theta0.size
    configs = CONFIGS
    if name == "lrkf":
        # lrkf folds q into its factor *after* the measurement update (seed 003's P_{d,+q} surrogate), so it is
        # exact only for q = 0 (its docstring says so); forgetting γ < 1 is still checked exactly.
        configs = [(0.0, g) for _, g in CONFIGS]
    build = lambda q, g: _factories()[name](q, g, n)
    outs = run_configs(build, configs, jax.tree_util.tree_map(jnp.asarray, params), xs, ys, x_star)
    for i, (q, g) in enumerate(configs):
        means, pm, pc = (o[i] for o in outs)
        o_means, o_pm, o_pc = kalman_oracle(
            theta0, V0, [lin_design(x) for x in xs], ys, R_VAR, q, g, lin_design(x_star)
        )
        np.testing.assert_allclose(means, o_means, atol=ATOL, rtol=1e-8, err_msg=f"q={q}, gamma={g}")
        np.testing.assert_allclose(pm, o_pm, atol=ATOL, rtol=1e-8, err_msg=f"q={q}, gamma={g}")
        np.testing.assert_allclose(pc, o_pc, atol=ATOL, rtol=1e-8, err_msg=f"q={q}, gamma={g}")
        # the run really moved away from the prior (a test that cannot pass by doing nothing)
        assert np.abs(o_means[-1] - theta0).max() > 0.05


def hidden_apply(p, x):
    """Hidden block ``s (3,)`` scales the inputs; linear head ``f = (x ⊙ s)ᵀW + b``."""
    return (x * p["body"]["s"]) @ p["head"]["w"] + p["head"]["b"]


def test_hilofi_frozen_hidden_equals_oracle_on_last_layer(x64):
    hilofi = _need("hilofi")
    q = 0.05
    params, xs, ys, x_star = _data(1)
    s0 = np.array([0.5, -1.2, 2.0])
    tree = {"body": {"s": jnp.asarray(s0)}, "head": {"w": jnp.asarray(params["w"]), "b": jnp.asarray(params["b"])}}
    post = hilofi(
        hidden_apply, Gaussian(R_VAR), rank=2, init_cov_hidden=0.0, init_cov_last=V0,
        dynamics_cov_hidden=0.0, dynamics_cov_last=q,
    )
    means, pm, pc = run_backend(post, tree, xs, ys, x_star)
    theta_last = np.concatenate([params["b"], params["w"].ravel()])
    o_means, o_pm, o_pc = kalman_oracle(
        theta_last, V0, [lin_design(x * s0) for x in xs], ys, R_VAR, q, 1.0, lin_design(x_star * s0)
    )
    # ravel order: body/s (3) then head/b, head/w
    np.testing.assert_allclose(means[:, :3], np.tile(s0, (T, 1)), atol=ATOL)
    np.testing.assert_allclose(means[:, 3:], o_means, atol=ATOL, rtol=1e-8)
    np.testing.assert_allclose(pm, o_pm, atol=ATOL, rtol=1e-8)
    np.testing.assert_allclose(pc, o_pc, atol=ATOL, rtol=1e-8)


@pytest.mark.parametrize("method", ["variational", "decoupled"])
def test_diag_ekf_exact_when_posterior_stays_diagonal(x64, method):
    """Each observation touches one parameter (one-hot design) ⇒ the exact posterior is diagonal."""
    rng = np.random.default_rng(2)
    d = 4
    idx = rng.integers(0, d, size=T)
    xs = np.eye(d)[idx] * rng.uniform(0.5, 2.0, size=(T, 1))
    ys = rng.normal(size=(T, 1))
    x_star = np.eye(d)[idx[-1]]
    theta0 = rng.normal(size=d)
    build = lambda q, g: P_.diag_ekf(lambda p, x: jnp.atleast_1d(x @ p), Gaussian(R_VAR), init_cov=V0,
                                     dynamics_cov=q, forgetting=g, method=method)
    outs = run_configs(build, CONFIGS, jnp.asarray(theta0), xs, ys, x_star)
    for i, (q, g) in enumerate(CONFIGS):
        means, pm, pc = (o[i] for o in outs)
        o_means, o_pm, o_pc = kalman_oracle(theta0, V0, [x[None, :] for x in xs], ys, R_VAR, q, g, x_star[None, :])
        np.testing.assert_allclose(means, o_means, atol=ATOL, rtol=1e-8)
        np.testing.assert_allclose(pm, o_pm, atol=ATOL, rtol=1e-8)
        np.testing.assert_allclose(pc, o_pc, atol=ATOL, rtol=1e-8)


def test_diag_ekf_is_not_full_ekf_with_correlated_design(x64):
    """Sanity: with a dense design the diagonal filter must differ from the exact one (the test above can fail)."""
    params, xs, ys, x_star = _data(3)
    tree = jax.tree_util.tree_map(jnp.asarray, params)
    full = run_backend(P_.ekf(lin_apply, Gaussian(R_VAR), init_cov=V0), tree, xs, ys, x_star)
    diag = run_backend(P_.diag_ekf(lin_apply, Gaussian(R_VAR), init_cov=V0), tree, xs, ys, x_star)
    assert np.abs(full[0] - diag[0]).max() > 1e-3


@pytest.mark.parametrize("model", ["dot_scalar", "multi_output"])
def test_linear_nig_equals_closed_form_posterior(x64, model):
    """Sequential NIG updates equal the batch posterior of seed 002 eqs. 17–20; predictive = Student-t moments."""
    rng = np.random.default_rng(4)
    a0, b0, v0 = 3.0, 2.0, 0.8
    if model == "dot_scalar":
        w0 = rng.normal(size=4)
        xs = rng.normal(size=(9, 4))
        ys = xs @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.3 * rng.normal(size=9)
        ys = ys[:, None]
        designs = [x[None, :] for x in xs]
        x_star = rng.normal(size=4)
        h_star = x_star[None, :]
        post = P_.linear(None, init_cov=v0, noise="nig", a0=a0, b0=b0)
        params, theta0 = jnp.asarray(w0), w0
    else:
        params_np, xs, _, x_star = _data(5)
        xs = rng.normal(size=(9, D_IN))
        ys = rng.normal(size=(9, C_OUT))
        designs = [lin_design(x) for x in xs]
        h_star = lin_design(x_star)
        post = P_.linear(lin_apply, Gaussian(123.0), init_cov=v0, noise="nig", a0=a0, b0=b0)
        params = jax.tree_util.tree_map(jnp.asarray, params_np)
        theta0 = np.concatenate([params_np["b"], params_np["w"].ravel()])
    n_draws = 20000 if model == "dot_scalar" else 1

    def go(params, xs, ys, keys):
        state = post.init(params)
        state = jax.lax.scan(lambda s, xy: (post.update(s, xy[0], xy[1]), None), state, (xs, ys))[0]
        draws = jax.vmap(lambda k: jax.flatten_util.ravel_pytree(post.sample(k, state))[0])(keys)
        return (state, *post.predictive(state, x_star), draws)

    keys = jax.random.split(jax.random.PRNGKey(0), n_draws)
    state, m, c, draws = compiled_call(go, params, xs, ys, keys)
    x_mat = np.concatenate(designs, axis=0)
    y_vec = np.concatenate(list(ys))
    s0_inv = np.eye(theta0.size) / v0
    sig_n = np.linalg.inv(s0_inv + x_mat.T @ x_mat)
    mu_n = sig_n @ (s0_inv @ theta0 + x_mat.T @ y_vec)
    a_n = a0 + y_vec.size / 2
    b_n = b0 + 0.5 * (y_vec @ y_vec + theta0 @ s0_inv @ theta0 - mu_n @ np.linalg.inv(sig_n) @ mu_n)
    np.testing.assert_allclose(state.mean, mu_n, atol=1e-9)
    np.testing.assert_allclose(state.cov, sig_n, atol=1e-9)
    np.testing.assert_allclose(state.a, a_n, atol=1e-12)
    np.testing.assert_allclose(state.b, b_n, rtol=1e-9)
    np.testing.assert_allclose(m, h_star @ mu_n, atol=1e-9)
    np.testing.assert_allclose(c, b_n / (a_n - 1) * (h_star @ sig_n @ h_star.T + np.eye(h_star.shape[0])), rtol=1e-9)
    if model != "dot_scalar":
        return
    # two-level Thompson draw: Cov[θ] = E[σ²] Σ = b/(a−1) Σ  (Monte Carlo, 20k draws; one model is enough)
    emp = np.cov(np.asarray(draws).T)
    np.testing.assert_allclose(np.asarray(draws).mean(0), mu_n, atol=0.05 * np.sqrt(np.diag(sig_n)).max() + 1e-3)
    np.testing.assert_allclose(emp, b_n / (a_n - 1) * sig_n, atol=0.06 * (b_n / (a_n - 1)) * np.abs(sig_n).max())


def test_linear_known_noise_rejects_bad_input():
    with pytest.raises(ValueError, match="noise"):
        P_.linear(lin_apply, noise="student")
    with pytest.raises(TypeError, match="Gaussian"):
        P_.linear(lin_apply, bk.likelihoods.Bernoulli(), noise="nig")
    with pytest.raises(ValueError, match="init_cov"):
        P_.linear(lin_apply, init_cov=0.0)


def klm_apply(p, x):
    """Fixed hidden scale and a linear scalar head: ``f = (x ⊙ s)ᵀ w + b``."""
    return jnp.atleast_1d((x * p["body"]["s"]) @ p["head"]["w"] + p["head"]["b"])


@pytest.mark.parametrize("shrink_mean", [True, False])
def test_kalman_last_layer_fixed_gamma_equals_oracle(x64, shrink_mean):
    """γ fixed: the seed-001 filter (variance-preserving drift toward the prior) equals the closed form."""
    rng = np.random.default_rng(6)
    g, q, sw2 = 0.8, 0.02, 0.9
    s0 = np.array([1.5, -0.5, 0.7])
    w0, b0 = rng.normal(size=3), rng.normal(size=1)
    xs = rng.normal(size=(T, 3))
    ys = rng.normal(size=(T, 1))
    x_star = rng.normal(size=3)
    tree = {"body": {"s": jnp.asarray(s0)}, "head": {"w": jnp.asarray(w0), "b": jnp.asarray(b0)}}
    post = P_.kalman_last_layer(
        klm_apply, Gaussian(R_VAR), init_cov=sw2, dynamics_cov=q, forgetting=g, learn_forgetting=False,
        shrink_mean=shrink_mean,
    )
    means, pm, pc = run_backend(post, tree, xs, ys, x_star)
    phi = lambda x: np.concatenate([[1.0], x * s0])[None, :]  # ravel order head/b, head/w
    theta0 = np.concatenate([b0, w0])
    o_means, o_pm, o_pc = kalman_oracle(
        theta0, sw2, [phi(x) for x in xs], ys, R_VAR, q, g, phi(x_star),
        prior_mean=theta0, preserve=sw2,
    ) if shrink_mean else _oracle_no_shrink(theta0, sw2, [phi(x) for x in xs], ys, q, g, phi(x_star))
    np.testing.assert_allclose(means[:, :3], np.tile(s0, (T, 1)), atol=ATOL)  # hidden fixed
    np.testing.assert_allclose(means[:, 3:], o_means, atol=ATOL, rtol=1e-8)
    np.testing.assert_allclose(pm, o_pm, atol=ATOL, rtol=1e-8)
    np.testing.assert_allclose(pc, o_pc, atol=ATOL, rtol=1e-8)


def _oracle_no_shrink(theta0, sw2, designs, ys, q, g, h_star):
    mu, sig = theta0.copy(), sw2 * np.eye(theta0.size)
    out = ([], [], [])
    for h, y in zip(designs, ys, strict=True):
        sig = g**2 * sig + (q + (1 - g**2) * sw2) * np.eye(mu.size)
        s = h @ sig @ h.T + R_VAR
        k = sig @ h.T / s
        mu = mu + (k * (y - h @ mu)).ravel()
        sig = sig - k @ s @ k.T
        out[0].append(mu.copy())
        out[1].append(h_star @ mu)
        out[2].append(h_star @ sig @ h_star.T + R_VAR)
    return tuple(np.array(o) for o in out)


def test_kalman_last_layer_gamma_step_matches_seed001_closed_form(x64):
    """One δ step equals seed 001's closed-form gradient (digest §5, prior mean 0, q = 0)."""
    rng = np.random.default_rng(7)
    sw2, lr, g0 = 0.9, 0.05, 0.95
    s0 = np.array([1.0, 2.0, -1.0])
    tree = {"body": {"s": jnp.asarray(s0)}, "head": {"w": jnp.zeros(3), "b": jnp.zeros(1)}}
    post = P_.kalman_last_layer(
        klm_apply, Gaussian(R_VAR), init_cov=sw2, forgetting=g0, forgetting_lr=lr, forgetting_grad_clip=None
    )
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    state = post.init(tree)
    for _ in range(4):  # move (m, A) away from the prior
        x = rng.normal(size=3)
        state = step(state, x, np.array([3.0]) + x.sum())
    m_prev, a_prev, delta_prev = np.asarray(state.mean), np.asarray(state.cov), float(state.delta)
    x, y = rng.normal(size=3), -4.0
    new = step(state, x, np.array([y]))
    phi = np.concatenate([[1.0], x * s0])
    gam = np.exp(-0.5 * delta_prev)
    u, c, r = phi @ m_prev, phi @ a_prev @ phi, sw2 * phi @ phi
    v = gam**2 * c + (1 - gam**2) * r + R_VAR
    e = y - gam * u
    dlog_dgamma = (e / v) * u + (e**2 / (2 * v**2) - 1 / (2 * v)) * 2 * gam * (c - r)
    expected = max(0.0, delta_prev + lr * (-gam / 2) * dlog_dgamma)
    np.testing.assert_allclose(float(new.delta), expected, rtol=1e-10)
    assert float(current_forgetting(new)) < g0  # a surprising observation lowers γ
