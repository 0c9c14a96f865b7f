"""HiLoFi / LoLoFi / LRKF against exact dense oracles on a linear-Gaussian model, plus scale and robustness checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.likelihoods import Categorical, Gaussian
from banditkit.models.nets import MLP
from banditkit.posteriors import hilofi, lolofi, lrkf
from banditkit.posteriors.base import ParamSpace

DH, DL, CY = 7, 4, 2  # hidden size, last-layer size, outputs
R = 0.3


def _linear_model(dtype=jnp.float64):
    rng = np.random.default_rng(0)
    params = {
        "body": {"w": jnp.asarray(rng.normal(size=(CY, 3)), dtype), "b": jnp.zeros(1, dtype)},  # D_h = 7
        "head": {"w": jnp.asarray(rng.normal(size=(CY, DL // CY)), dtype)},  # D_ℓ = 4
    }

    def apply_fn(p, x):  # y = W_b x_h + b + W_l x_l  (linear in every parameter); x is a pytree
        xh, xl = x
        return p["body"]["w"] @ xh + p["body"]["b"] + p["head"]["w"] @ xl

    return params, apply_fn


def _data(n, seed=1):
    rng = np.random.default_rng(seed)
    return [
        ((jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.normal(size=DL // CY))), jnp.asarray(rng.normal(size=CY)))
        for _ in range(n)
    ]


def _jac(apply_fn, space, x):
    """Full Jacobian ``(C, P)`` in ``space.ravel`` order (the model is linear, so any point will do)."""
    fn = jax.jit(jax.jacrev(lambda t, xx: apply_fn(space.unravel(t), xx)))
    return np.asarray(fn(jnp.zeros(space.size, space.dtype), x))


def _jac_blocks(apply_fn, space, h, ell, x):
    """``(H̃, L̃)`` for the hidden/last split."""
    fn = jax.jit(jax.jacrev(lambda a, b, xx: apply_fn(space.merge(a, b), xx), argnums=(0, 1)))
    return tuple(np.asarray(j) for j in fn(jnp.asarray(h), jnp.asarray(ell), x))


def _kf_step(mu, sig, h, y, yhat, r, gamma, qdiag):
    """Closed-form Kalman filter: predict θ ← γθ, Σ ← γ²Σ + diag(q); Joseph update."""
    mu, sig = gamma * mu, gamma**2 * sig + np.diag(qdiag)
    s = h @ sig @ h.T + r
    k = sig @ h.T @ np.linalg.inv(s)
    a = np.eye(mu.size) - k @ h
    return mu + k @ (y - yhat), a @ sig @ a.T + k @ r @ k.T


def _run(post, params, data, jit_step=True):
    state = post.init(params)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y)) if jit_step else None
    for x, y in data:
        state = step(state, x, y)
    return state


@pytest.mark.parametrize("q,mode", [(0.0, "carry"), (0.05, "carry"), (0.05, "gain")])
def test_lrkf_full_rank_equals_kalman_filter(x64, q, mode):
    params, apply_fn = _linear_model()
    space = ParamSpace(params)
    p, gamma, data = space.size, 0.9, _data(4)
    post = lrkf(apply_fn, Gaussian(R), rank=p, init_cov=0.8, dynamics_cov=q, forgetting=gamma, dynamics_mode=mode)
    state = post.init(params)
    mu, sig = np.asarray(space.ravel(params)), 0.8 * np.eye(p)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    for x, y in data:
        h = _jac(apply_fn, space, x)
        yhat = h @ (gamma * mu)  # linear model, no offset
        if q == 0.0:
            mu, sig = _kf_step(mu, sig, h, np.asarray(y), yhat, R * np.eye(CY), gamma, np.zeros(p))
        else:  # carry: the documented surrogate, q(I − KH)(I − KH)ᵀ replaced by qI (seed 003, Prop. E.3);
            # gain: the gain of γ²Σ + qI, the Joseph form applied to γ²Σ alone (q dropped afterwards)
            sp = gamma**2 * sig + q * np.eye(p)
            k = sp @ h.T @ np.linalg.inv(h @ sp @ h.T + R * np.eye(CY))
            a = np.eye(p) - k @ h
            mu = gamma * mu + k @ (np.asarray(y) - yhat)
            sig = a @ (gamma**2 * sig) @ a.T + R * k @ k.T + (q * np.eye(p) if mode == "carry" else 0.0)
        state = step(state, x, y)
        np.testing.assert_allclose(state.mean, mu, atol=1e-10)
        np.testing.assert_allclose(state.cov.dense().T @ state.cov.dense(), sig, atol=1e-10)
        yh, cov = post.predictive(state, x)
        np.testing.assert_allclose(cov, h @ sig @ h.T + R * np.eye(CY), atol=1e-10)
        if q > 0:  # the next step's predictive holds q̄ again, in either mode
            _, cov_next = post.predictive(post.predict(state), x)
            sp = gamma**2 * sig + q * np.eye(p)
            np.testing.assert_allclose(cov_next, h @ sp @ h.T + R * np.eye(CY), atol=1e-10)


def _sigma_last(post, state):
    """HiLoFi's last-layer covariance whichever form the state keeps (``post.hyper["last_cov"]``)."""
    c = np.asarray(state.cov_last)
    return c if post.hyper["last_cov"] == "dense" else c.T @ c


@pytest.mark.parametrize("last_cov", ["sqrt", "dense", "auto"])
def test_hilofi_frozen_hidden_is_kalman_filter_on_last_layer(x64, last_cov):
    """init_cov_hidden = 0: the hidden block never moves; the last layer is an exact KF (with q_ℓ and γ)."""
    params, apply_fn = _linear_model()
    space = ParamSpace(params, "head")
    gamma, q_l = 0.95, 0.02
    post = hilofi(
        apply_fn, Gaussian(R), rank=3, init_cov_hidden=0.0, init_cov_last=1.5, dynamics_cov_last=q_l, forgetting=gamma,
        last_cov=last_cov,
    )
    assert post.hyper["last_cov"] == ("dense" if last_cov == "auto" else last_cov)
    state = post.init(params)
    h0, l0 = (np.asarray(v) for v in space.split(params))
    mu = np.concatenate([h0, l0])
    sig = np.diag(np.r_[np.zeros(h0.size), 1.5 * np.ones(l0.size)])
    qdiag = np.r_[np.zeros(h0.size), q_l * np.ones(l0.size)]
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    for x, y in _data(4):
        h = np.concatenate(_jac_blocks(apply_fn, space, h0, l0, x), axis=1)
        mu, sig = _kf_step(mu, sig, h, np.asarray(y), h @ (gamma * mu), R * np.eye(CY), gamma, qdiag)
        state = step(state, x, y)
        np.testing.assert_allclose(np.r_[state.mean_hidden, state.mean_last], mu, atol=1e-10)
        np.testing.assert_allclose(_sigma_last(post, state), sig[h0.size :, h0.size :], atol=1e-10)
        np.testing.assert_allclose(state.cov_hidden.dense(), 0.0)


def _blockdiag_oracle(apply_fn, space, params, data, c_h, c_l, q_h, q_l, gamma, mode="carry"):
    """Dense HiLoFi target: block-diagonal prior, per-block Joseph form with R, cross-covariance dropped.

    ``mode="carry"``: q joins Σ_ℓ before the update and Σ_h after it (``P_{d,+q}``); ``"gain"``: q is in ``S`` and
    both gains only, and each block's Joseph form is applied to its covariance without q."""
    h0, l0 = (np.asarray(v) for v in space.split(params))
    mh, ml, sh, sl = h0.copy(), l0.copy(), c_h * np.eye(h0.size), c_l * np.eye(l0.size)
    out = []
    for x, y in data:
        mh, ml = gamma * mh, gamma * ml
        sh_base, sl_base = gamma**2 * sh, gamma**2 * sl
        sh_p, sl_p = sh_base + q_h * np.eye(h0.size), sl_base + q_l * np.eye(l0.size)
        jh, jl = _jac_blocks(apply_fn, space, mh, ml, x)
        yhat = np.asarray(apply_fn(space.merge(jnp.asarray(mh), jnp.asarray(ml)), x))
        s = jh @ sh_p @ jh.T + jl @ sl_p @ jl.T + R * np.eye(CY)
        kh, kl = sh_p @ jh.T @ np.linalg.inv(s), sl_p @ jl.T @ np.linalg.inv(s)
        e = np.asarray(y) - yhat
        mh, ml = mh + kh @ e, ml + kl @ e
        ah, al = np.eye(h0.size) - kh @ jh, np.eye(l0.size) - kl @ jl
        if mode == "carry":
            sh = ah @ sh_base @ ah.T + R * kh @ kh.T + q_h * np.eye(h0.size)
            sl = al @ sl_p @ al.T + R * kl @ kl.T
        else:
            sh = ah @ sh_base @ ah.T + R * kh @ kh.T
            sl = al @ sl_base @ al.T + R * kl @ kl.T
        out.append((mh, ml, sh, sl))
    return out


@pytest.mark.parametrize("last_cov", ["sqrt", "dense"])
@pytest.mark.parametrize(
    "q_h,q_l,gamma,mode", [(0.0, 0.0, 1.0, "carry"), (0.04, 0.02, 0.9, "carry"), (0.04, 0.02, 0.9, "gain")]
)
def test_hilofi_full_hidden_rank_equals_blockdiagonal_filter(x64, q_h, q_l, gamma, mode, last_cov):
    params, apply_fn = _linear_model()
    space = ParamSpace(params, "head")
    data = _data(4)
    post = hilofi(
        apply_fn,
        Gaussian(R),
        rank=50,
        init_cov_hidden=0.7,
        init_cov_last=1.3,
        dynamics_cov_hidden=q_h,
        dynamics_cov_last=q_l,
        forgetting=gamma,
        last_cov=last_cov,
        dynamics_mode=mode,
    )  # rank 50 > D_h: clipped to D_h
    state = post.init(params)
    assert state.cov_hidden.dense().shape == (space.size_hidden, space.size_hidden)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    for (x, y), (mh, ml, sh, sl) in zip(
        data, _blockdiag_oracle(apply_fn, space, params, data, 0.7, 1.3, q_h, q_l, gamma, mode), strict=True
    ):
        state = step(state, x, y)
        np.testing.assert_allclose(state.mean_hidden, mh, atol=1e-10)
        np.testing.assert_allclose(state.mean_last, ml, atol=1e-10)
        np.testing.assert_allclose(state.cov_hidden.dense().T @ state.cov_hidden.dense(), sh, atol=1e-10)
        np.testing.assert_allclose(_sigma_last(post, state), sl, atol=1e-10)


@pytest.mark.parametrize("mode", ["carry", "gain"])
@pytest.mark.parametrize("last_cov", ["sqrt", "dense"])
def test_hilofi_last_layer_draws_have_the_filtered_covariance(x64, last_cov, mode):
    """Thompson draws of the last layer: sample mean → μ_ℓ and sample covariance → Σ_ℓ (+ the pending q̄_ℓ I in
    ``"gain"`` mode), in both forms."""
    params, apply_fn = _linear_model()
    space = ParamSpace(params, "head")
    post = hilofi(apply_fn, Gaussian(R), rank=2, init_cov_hidden=0.3, init_cov_last=1.3, dynamics_cov=0.05,
                  last_cov=last_cov, dynamics_mode=mode)
    state = post.predict(_run(post, params, _data(5)))
    draws = jax.vmap(lambda k: space.split(post.sample(k, state))[1])(jax.random.split(jax.random.PRNGKey(0), 20000))
    draws = np.asarray(draws)
    sig = _sigma_last(post, state) + float(state.q_last) * np.eye(DL)
    assert float(state.q_last) == (0.05 if mode == "gain" else 0.0)
    np.testing.assert_allclose(draws.mean(0), state.mean_last, atol=4 * np.sqrt(np.max(np.diag(sig)) / 20000))
    np.testing.assert_allclose(np.cov(draws.T), sig, atol=0.05 * np.max(np.diag(sig)))


def test_hilofi_rejects_unknown_last_cov():
    params, apply_fn = _linear_model()
    with pytest.raises(ValueError, match="last_cov"):
        hilofi(apply_fn, Gaussian(R), last_cov="cholesky")
    for make in (hilofi, lrkf):
        with pytest.raises(ValueError, match="dynamics_mode='pending' must be 'carry'"):
            make(apply_fn, Gaussian(R), dynamics_mode="pending")


@pytest.mark.parametrize("mode", ["carry", "gain"])
def test_lolofi_full_ranks_equals_hilofi(x64, mode):
    params, apply_fn = _linear_model()
    kw = dict(rank=DH, init_cov_hidden=0.7, init_cov_last=1.3, forgetting=0.9, dynamics_mode=mode)
    if mode == "gain":  # q in the gain only: HiLoFi's full last layer and LoLoFi's P_d agree
        kw["dynamics_cov"] = 0.03
    data = _data(5)
    post_a = hilofi(apply_fn, Gaussian(R), **kw)
    a = _run(post_a, params, data)
    b = _run(lolofi(apply_fn, Gaussian(R), rank_last=DL, **kw), params, data)
    np.testing.assert_allclose(a.mean_hidden, b.mean_hidden, atol=1e-10)
    np.testing.assert_allclose(a.mean_last, b.mean_last, atol=1e-10)
    np.testing.assert_allclose(_sigma_last(post_a, a), b.cov_last.dense().T @ b.cov_last.dense(), atol=1e-10)
    ch_a, ch_b = a.cov_hidden.dense(), b.cov_hidden.dense()
    np.testing.assert_allclose(ch_a.T @ ch_a, ch_b.T @ ch_b, atol=1e-10)


def test_lrkf_low_rank_is_eckart_young_of_the_update(x64):
    """rank d < P: one step gives the exact gain for the rank-d prior and the best rank-d posterior factor."""
    params, apply_fn = _linear_model()
    space = ParamSpace(params)
    p, d = space.size, 3
    post = lrkf(apply_fn, Gaussian(R), rank=d, init_cov=0.9, seed=3)
    s0 = post.init(params)
    ((x, y),) = _data(1)
    s1 = post.update(s0, x, y)
    c0, h = np.asarray(s0.cov.dense()), _jac(apply_fn, space, x)
    sig = c0.T @ c0
    np.testing.assert_allclose(sig @ sig, 0.9 * sig, atol=1e-12)  # prior variance 0.9 on a rank-d subspace
    mu, post_cov = _kf_step(
        np.asarray(s0.mean), sig, h, np.asarray(y), h @ np.asarray(s0.mean), R * np.eye(CY), 1.0, np.zeros(p)
    )
    evals, evecs = np.linalg.eigh(post_cov)
    best = evecs[:, -d:] @ np.diag(evals[-d:]) @ evecs[:, -d:].T
    np.testing.assert_allclose(s1.mean, mu, atol=1e-10)
    np.testing.assert_allclose(s1.cov.dense().T @ s1.cov.dense(), best, atol=1e-10)
    np.testing.assert_array_equal(s1.cov.basis, s0.cov.basis)  # q = 0: the basis stays; only M moved


@pytest.mark.parametrize("q", [0.0, 0.05])
def test_low_rank_block_as_mix_and_basis_equals_the_factor_kernel(x64, q):
    """``C = M B``: with ``q = 0`` the block moves ``M`` only (``B`` stays the initial rows) and every step equals
    :func:`linalg.lowrank_kalman_update` on the dense ``C`` (itself checked against the dense surrogate in
    test_linalg); with ``q > 0`` the new rows leave ``B``'s span, so the update writes ``B = C``, ``M = I``."""
    from banditkit.posteriors import linalg

    params, apply_fn = _linear_model()
    space = ParamSpace(params)
    gamma = 0.9
    post = lrkf(apply_fn, Gaussian(R), rank=3, init_cov=0.8, dynamics_cov=q, forgetting=gamma, seed=2)
    state = post.init(params)
    basis0 = np.asarray(state.cov.basis)
    mu, c, g = (jnp.asarray(v) for v in (state.mean, state.cov.dense(), state.gram))
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    for x, y in _data(6):
        h = jnp.asarray(_jac(apply_fn, space, x))
        mu, c, g, qbar = gamma * mu, gamma * c, gamma**2 * g, q  # predict (q̄ was consumed by the last update)
        a = c @ h.T
        s = a.T @ a + qbar * (h @ h.T) + R * jnp.eye(CY)
        s_chol = linalg.chol_upper(s)
        st = linalg.lowrank_kalman_weights(g, h, a, s_chol, linalg.sqrt_psd(R * jnp.eye(CY)), jnp.asarray(y) - h @ mu,
                                           qbar, q > 0)
        mu, c, g = linalg.lowrank_kalman_update(mu, c, st, s_chol, h)
        state = step(state, x, y)
        np.testing.assert_allclose(state.mean, mu, atol=1e-10)
        np.testing.assert_allclose(state.cov.dense(), c, atol=1e-10)
        np.testing.assert_allclose(state.gram, g, atol=1e-10)
        if q == 0:
            np.testing.assert_array_equal(state.cov.basis, basis0)
        else:
            np.testing.assert_array_equal(state.cov.mix, np.eye(3))


def test_dynamics_and_forgetting_act(x64):
    params, apply_fn = _linear_model()
    ((x, y),) = _data(1)
    space = ParamSpace(params, "head")
    jh, jl = _jac_blocks(apply_fn, space, *space.split(params), x)
    for name, post in [
        ("hilofi", hilofi(apply_fn, Gaussian(R), rank=2, dynamics_cov=0.1, forgetting=0.8)),
        ("lolofi", lolofi(apply_fn, Gaussian(R), rank=2, rank_last=2, dynamics_cov=0.1, forgetting=0.8)),
        ("lrkf", lrkf(apply_fn, Gaussian(R), rank=2, dynamics_cov=0.1, forgetting=0.8)),
    ]:
        s0 = post.init(params)
        s1 = post.predict(s0)
        # forgetting shrinks the mean
        for a, b in zip(jax.tree_util.tree_leaves(post.mean(s1)), jax.tree_util.tree_leaves(params), strict=True):
            np.testing.assert_allclose(a, 0.8 * np.asarray(b), atol=1e-12, err_msg=name)
        # predictive covariance: γ² × old epistemic + q J Jᵀ + R, exactly
        _, c0 = post.predictive(s0, x)
        _, c1 = post.predictive(s1, x)
        jj = jh @ jh.T + jl @ jl.T
        np.testing.assert_allclose(
            c1, 0.64 * (np.asarray(c0) - R * np.eye(CY)) + 0.1 * jj + R * np.eye(CY), atol=1e-10, err_msg=name
        )


def test_dynamics_noise_keeps_uncertainty_over_time(x64):
    params, apply_fn = _linear_model()
    data = _data(15)
    x = data[0][0]
    for make in [
        lambda q: hilofi(apply_fn, Gaussian(R), rank=3, dynamics_cov=q),
        lambda q: lrkf(apply_fn, Gaussian(R), rank=3, dynamics_cov=q),
    ]:
        v = {}
        for q in [0.0, 0.05]:
            post = make(q)
            v[q] = np.trace(post.predictive(_run(post, params, data), x)[1])
        assert v[0.05] > v[0.0] + 0.05


def _mlp(out=1, features=(8, 8), din=5):
    model = MLP(features=features, out=out)
    return model, model.init(jax.random.PRNGKey(0), jnp.zeros(din))


def test_categorical_ten_classes_finite():
    model, params = _mlp(out=10, features=(8,))
    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.normal(size=(8, 5)), jnp.float32)
    ys = jax.nn.one_hot(rng.integers(10, size=8), 10)
    for post in [
        hilofi(model.apply, Categorical(), rank=5),
        lolofi(model.apply, Categorical(), rank=5, rank_last=6),
        lrkf(model.apply, Categorical(), rank=5),
    ]:
        state = jax.lax.scan(lambda s, xy, p=post: (p.update(p.predict(s), *xy), None), post.init(params), (xs, ys))[0]
        assert all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree_util.tree_leaves(state)), post.name
        m, c = jax.jit(post.predictive)(state, jnp.ones(5))
        assert m.shape == (10,) and c.shape == (10, 10) and bool(jnp.all(jnp.isfinite(c)))
        np.testing.assert_allclose(float(jnp.sum(m)), 1.0, rtol=1e-5)


@pytest.mark.parametrize("q", [1e-3, 0.0])
def test_tracked_gram_stays_exact_in_float32(q):
    """The state keeps diag(C Cᵀ) instead of recomputing it; it must match the factor after many steps (with
    q = 0 the factor is M B with B fixed, so this also checks that M's products keep C's rows orthogonal)."""
    model, params = _mlp()
    post = hilofi(model.apply, Gaussian(0.1), rank=6, dynamics_cov=q)
    state = post.init(params)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    rng = np.random.default_rng(1)
    for _ in range(150):
        x = rng.normal(size=5).astype(np.float32)
        state = step(state, jnp.asarray(x), jnp.asarray([np.sin(x.sum())], jnp.float32))
    cc = np.asarray(state.cov_hidden.dense(), np.float64) @ np.asarray(state.cov_hidden.dense(), np.float64).T
    scale = np.max(np.diag(cc))
    np.testing.assert_allclose(np.diag(cc), state.gram_hidden, rtol=1e-3, atol=1e-5 * scale)
    assert np.max(np.abs(cc - np.diag(np.diag(cc)))) < 1e-4 * scale


def test_sample_moments_and_structure(x64):
    params, apply_fn = _linear_model()
    post = lrkf(apply_fn, Gaussian(R), rank=3, dynamics_cov=0.05)
    state = post.predict(post.init(params))  # pending q = 0.05
    draws = jax.vmap(lambda k: ParamSpace(params).ravel(post.sample(k, state)))(
        jax.random.split(jax.random.PRNGKey(0), 20000)
    )
    cov = np.cov(np.asarray(draws).T)
    target = np.asarray(state.cov.dense().T @ state.cov.dense()) + 0.05 * np.eye(cov.shape[0])
    np.testing.assert_allclose(cov, target, atol=0.04)
    hp = hilofi(apply_fn, Gaussian(R), rank=2)
    hs = hp.init(params)
    draw = hp.sample(jax.random.PRNGKey(1), hs)
    assert jax.tree_util.tree_structure(draw) == jax.tree_util.tree_structure(params)


def test_scan_and_vmap_over_seeds():
    model, params = _mlp()
    post = hilofi(model.apply, Gaussian(0.1), rank=4, dynamics_cov=1e-4, forgetting=0.999)
    xs = jax.random.normal(jax.random.PRNGKey(0), (10, 5))
    ys = jnp.sin(xs.sum(1, keepdims=True))

    def run(state):
        def body(s, xy):
            return post.update(post.predict(s), *xy), None

        return jax.lax.scan(body, state, (xs, ys))[0]

    s0 = post.init(params)
    s1 = jax.jit(run)(s0)
    batched = jax.vmap(run)(jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), s0))
    np.testing.assert_allclose(batched.mean_hidden[1], s1.mean_hidden, rtol=1e-5, atol=1e-6)


def test_million_parameter_mlp_one_step():
    """P ≈ 1.0M at rank 10: init and one step must not allocate anything P × P (that would be 4 TB)."""
    model = MLP(features=(1000, 1000), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(10))
    post = hilofi(model.apply, Gaussian(0.1), rank=10)
    state = post.init(params)
    assert state.cov_hidden.basis.shape == (10, 1_012_000) and state.cov_last.shape == (1001, 1001)
    state = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))(state, jnp.ones(10), jnp.ones(1))
    assert all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree_util.tree_leaves(state))
    assert float(jnp.max(jnp.abs(state.mean_hidden - ParamSpace(params, "head").split(params)[0]))) > 0


def test_bad_input_is_rejected():
    model, params = _mlp()
    with pytest.raises(ValueError, match="rank"):
        hilofi(model.apply, rank=0)
    with pytest.raises(ValueError, match="init_cov_hidden"):
        hilofi(model.apply, init_cov_hidden=-1.0)
    with pytest.raises(ValueError, match="forgetting"):
        lrkf(model.apply, forgetting=0.0)
    with pytest.raises(ValueError, match="rank_last"):
        lolofi(model.apply, rank_last=None)
    with pytest.raises(ValueError, match="last_layer"):
        hilofi(model.apply, last_layer="nope").init(params)
    with pytest.raises(ValueError, match="init_cov"):
        lrkf(model.apply, init_cov=-1.0)
    with pytest.raises(ValueError, match="rank_last"):
        hilofi(model.apply, rank_last=0)
    post = lrkf(model.apply, rank=2)
    state = post.init(params)
    with pytest.raises(ValueError, match="shape"):
        post.update(state, jnp.ones(5), jnp.ones(3))


def _tanh_net(p, x):
    """One hidden layer of any width: the same ``apply_fn`` for models of different sizes."""
    return jnp.tanh(x @ p["body"]["w"]) @ p["head"]["w"] + p["head"]["b"]


def _tanh_params(width, seed=0):
    rng = np.random.default_rng(seed)
    return {"body": {"w": jnp.asarray(rng.normal(size=(5, width)), jnp.float32)},
            "head": {"w": jnp.asarray(rng.normal(size=(width, 1)), jnp.float32), "b": jnp.zeros(1)}}


@pytest.mark.parametrize("make", [
    lambda: hilofi(_tanh_net, rank=2, dynamics_cov=0.01), lambda: lolofi(_tanh_net, rank=2, rank_last=3),
    lambda: hilofi(_tanh_net, rank=2, arms=1), lambda: lrkf(_tanh_net, rank=2, dynamics_cov=0.01),
])
def test_layout_lives_in_the_state(make):
    """One backend on two models in turn, and a state filtered by a fresh backend that never ran ``init``."""
    post, x, y = make(), jnp.ones(5), jnp.ones(1)
    models = [(_tanh_params(3), None), (_tanh_params(6), None)]
    models = [(p, post.init(p)) for p, _ in models]  # both inits first: nothing is kept from the first one
    for params, state in models:
        state = post.update(post.predict(state), x, y)
        for tree in (post.mean(state), post.sample(jax.random.PRNGKey(1), state)):
            assert jax.tree_util.tree_structure(tree) == jax.tree_util.tree_structure(params)
            assert [v.shape for v in jax.tree_util.tree_leaves(tree)] == \
                [v.shape for v in jax.tree_util.tree_leaves(params)]
        fresh = make()
        for u, v in zip(post.predictive(state, x), fresh.predictive(state, x), strict=True):
            np.testing.assert_array_equal(u, v)
        for u, v in zip(*(jax.tree_util.tree_leaves(p.update(state, x, y)) for p in (post, fresh)), strict=True):
            np.testing.assert_array_equal(u, v)


def test_zero_prior_variance_freezes_the_block():
    """``init_cov = 0`` is a point-mass prior (a covariance factor of zeros), accepted by every low-rank backend."""
    model, params = _mlp()
    state = hilofi(model.apply, rank=2, init_cov_hidden=0.0).init(params)
    post = hilofi(model.apply, rank=2, init_cov_hidden=0.0)
    new = post.update(state, jnp.ones(5), jnp.ones(1))
    np.testing.assert_array_equal(new.mean_hidden, state.mean_hidden)
    assert float(jnp.max(jnp.abs(new.mean_last - state.mean_last))) > 0
    post = lrkf(model.apply, rank=2, init_cov=0.0)
    state = post.init(params)
    np.testing.assert_array_equal(post.update(state, jnp.ones(5), jnp.ones(1)).mean, state.mean)


def test_registry_names():
    for n in ["hilofi", "lolofi", "lrkf"]:
        assert bk.posteriors.get(n) is getattr(bk.posteriors, n)

