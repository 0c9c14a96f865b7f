"""The functional contract, checked on EVERY backend in ``bk.posteriors.REGISTRY`` (collected at import time, so
backends written later are covered as they land) plus ``subspace_ekf``.

For each backend, on a tiny MLP, inside ONE ``jax.jit``: ``vmap`` over init keys (independent states per seed),
``lax.scan`` over time of ``predict → update``; ``predictive`` shapes, ``sample``/``mean`` return the params
pytree; ``dynamics_cov > 0`` and ``forgetting < 1`` (when the factory takes them) change the state of the scanned
run relative to the stationary run.  Classification: ``Bernoulli`` and ``Categorical`` updates on a logistic
problem raise the predicted probability of the observed labels and stay finite with huge logits.

Per-backend keyword arguments come from a table of small sizes filtered by each factory's signature (an
unknown backend gets the entries its signature accepts, e.g. ``example_x``, ``buffer_size``).
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fast_compile import compiled_call

import banditkit as bk
from banditkit.likelihoods import Bernoulli, Categorical, Gaussian
from banditkit.models.nets import MLP
from banditkit.posteriors.kalman_last_layer import current_forgetting

P_ = bk.posteriors
D_IN, T = 3, 6
X0 = jnp.zeros(D_IN)

# small sizes, passed to a factory only when its signature has the argument
SMALL = dict(
    rank=3, rank_last=2, buffer_size=8, train_every=3, n_train_steps=3, n_inner=3, batch_size=None,
    n_samples=8, num_samples=8, n_probes=2, example_x=X0,
)
# per-backend overrides (only where a default would make the behavioural checks meaningless at T steps)
OVERRIDES = {
    "vbll": dict(learning_rate=1e-2),
    "online_vbll": dict(learning_rate=1e-2),
    "last_layer_laplace": dict(learning_rate=1e-2),
}


def _template(out):
    return MLP(features=(4,), out=out).init(jax.random.PRNGKey(0), X0)


NAMES = sorted(P_.REGISTRY)


def factory(name, out):
    if name != "subspace_ekf":
        return P_.REGISTRY[name]
    basis, _ = P_.subspace_random(jax.random.PRNGKey(7), _template(out), 5)  # offset: the params given to init
    return lambda apply_fn, likelihood, **kw: P_.subspace_ekf(apply_fn, likelihood, basis=basis, **kw)


def accepted(name) -> set[str]:
    target = P_.subspace_ekf if name == "subspace_ekf" else P_.REGISTRY[name]
    return set(inspect.signature(target).parameters)


def make(name, out, apply_fn, likelihood, **hyper):
    ok = accepted(name)
    kw = {k: v for k, v in SMALL.items() if k in ok}
    kw.update(OVERRIDES.get(name, {}))
    kw.update(hyper)
    return factory(name, out)(apply_fn, likelihood, **kw)


def _model(out):
    model = MLP(features=(4,), out=out)
    return model, model.apply


def _stream(key, n, out):
    kx, kw = jax.random.split(key)
    xs = jax.random.normal(kx, (n, D_IN))
    w = jax.random.normal(kw, (D_IN, out))
    return xs, jnp.tanh(xs @ w)


def _run(post, params, xs, ys):
    state = post.init(params)

    def body(s, xy):
        return post.update(post.predict(s), xy[0], xy[1]), None

    return jax.lax.scan(body, state, (xs, ys))[0]


def _max_diff(a, b):
    """Largest absolute difference over the floating leaves of two (numpy) state pytrees."""
    return max(float(np.max(np.abs(np.asarray(u, np.float64) - np.asarray(v, np.float64))))
               for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
               if np.issubdtype(np.asarray(u).dtype, np.floating))




def _run_configs(name, out, apply_fn, lik, params, xs, ys, configs):
    """Final states of the scanned run for each ``(dynamics_cov, forgetting)`` config, stacked on axis 0.

    The hyper-parameters are traced (``vmap`` over configs: one compiled graph); a backend that needs them as
    Python numbers falls back to one graph per config.
    """
    ok = accepted(name)

    def hyper(q, g):
        return {k: v for k, v in (("dynamics_cov", q), ("forgetting", g)) if k in ok}

    qs = jnp.array([c[0] for c in configs])
    gs = jnp.array([c[1] for c in configs])
    try:
        return jax.vmap(lambda q, g: _run(make(name, out, apply_fn, lik, **hyper(q, g)), params, xs, ys))(qs, gs)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError, TypeError):
        runs = [_run(make(name, out, apply_fn, lik, **hyper(q, g)), params, xs, ys) for q, g in configs]
        return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *runs)


def _logistic(key, n, out):
    kx, kw = jax.random.split(key)
    xs = 2.0 * jax.random.normal(kx, (n, D_IN))
    w = 3.0 * jax.random.normal(kw, (D_IN, max(out, 2)))
    logits = xs @ w
    if out == 1:
        return xs, (logits[:, :1] > 0).astype(jnp.float32)
    return xs, jax.nn.one_hot(jnp.argmax(logits, -1), out)


def _stack(*trees):
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *trees)


def _gaussian_part(name):
    """Traced computation for the Gaussian contract checks, and the host-side checks of its outputs."""
    out = 2
    model, apply_fn = _model(out)
    ok = accepted(name)
    lik = Gaussian(0.5)
    post = make(name, out, apply_fn, lik)
    configs = [(0.0, 1.0)]
    if "dynamics_cov" in ok:
        configs.append((0.5, 1.0))
    if "forgetting" in ok:
        configs.append((0.0, 0.5))
    x_star = jnp.ones(D_IN)

    def one_seed(key):
        k_init, k_data, k_sample = jax.random.split(key, 3)
        params = model.init(k_init, X0)
        xs, ys = _stream(k_data, T, out)
        states = _run_configs(name, out, apply_fn, lik, params, xs, ys, configs)
        state = jax.tree_util.tree_map(lambda a: a[0], states)  # the stationary run
        post.init(params)  # this instance has not seen the params yet (the runs used their own instances)
        m, c = post.predictive(state, x_star)
        return states, m, c, post.sample(k_sample, state), post.mean(state)

    def traced(key):
        return jax.vmap(one_seed)(jax.random.split(key, 2))

    def check(res):
        states, m, c, draw, point = res
        params0 = _template(out)
        assert m.shape == (2, out) and c.shape == (2, out, out), (m.shape, c.shape)
        for tree in (draw, point):
            assert jax.tree_util.tree_structure(tree) == jax.tree_util.tree_structure(params0)
            for leaf, ref in zip(jax.tree_util.tree_leaves(tree), jax.tree_util.tree_leaves(params0), strict=True):
                assert leaf.shape == (2, *ref.shape)
                assert np.all(np.isfinite(leaf))
        assert np.all(np.isfinite(m)) and np.all(np.isfinite(c))
        np.testing.assert_allclose(c, np.swapaxes(c, 1, 2), rtol=1e-5, atol=1e-6)
        assert np.all(np.linalg.eigvalsh(c) > 0), "predictive covariance must be positive definite"
        # vmap over init keys gives independent states (seeds differ)
        assert np.max(np.abs(m[0] - m[1])) > 1e-6
        # drift and forgetting really act inside the scanned run (compare with the stationary run, per seed)
        stationary = jax.tree_util.tree_map(lambda a: a[:, 0], states)
        for i, (q, _g) in enumerate(configs[1:], start=1):
            other = jax.tree_util.tree_map(lambda a, i=i: a[:, i], states)
            what = "dynamics_cov" if q > 0 else "forgetting"
            assert _max_diff(other, stationary) > 1e-4, f"{name}: {what} had no effect on the scanned state"

    return traced, check


def _classification_part(name):
    """Bernoulli and Categorical runs: p(labels) rises; huge logits with contradicting labels stay finite."""
    n = 12
    cases = []
    for out, lik in ((1, Bernoulli()), (3, Categorical())):
        model, apply_fn = _model(out)
        try:
            post = make(name, out, apply_fn, lik)
        except (TypeError, ValueError) as e:  # a documented restriction (e.g. a Gaussian-only regression head)
            print(f"{name} rejects {lik.name}: {e}")
            continue
        xs, ys = _logistic(jax.random.PRNGKey(3), n, out)
        cases.append((lik.name, post, model, xs, ys))

    def traced(key):
        res = {}
        for lik_name, post, model, xs, ys in cases:
            params = model.init(key, X0)
            huge = jax.tree_util.tree_map_with_path(
                lambda p, v: v * 1e3 if "head" in jax.tree_util.keystr(p) else v, params
            )
            flipped = 1.0 - ys if ys.shape[-1] == 1 else ys[:, ::-1]
            x2, y2 = jnp.concatenate([xs, xs]), jnp.concatenate([ys, ys])
            y2_h = jnp.concatenate([flipped, flipped])
            states = jax.vmap(lambda p, y, post=post, x2=x2: _run(post, p, x2, y))(
                _stack(params, huge), _stack(y2, y2_h)
            )
            # [prior, after the stream, huge logits after contradicting labels]
            three = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), post.init(params), states)
            means, covs = jax.vmap(lambda s, post=post, xs=xs: jax.vmap(lambda x: post.predictive(s, x))(xs))(three)
            if ys.shape[-1] == 1:
                p_lab = jnp.mean(jnp.sum(ys * means + (1 - ys) * (1 - means), -1), -1)
            else:
                p_lab = jnp.mean(jnp.sum(ys * means, -1), -1)
            state_h = jax.tree_util.tree_map(lambda a: a[1], states)
            fin = jnp.array([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree_util.tree_leaves(state_h)
                             if jnp.issubdtype(leaf.dtype, jnp.floating)]).all()
            res[lik_name] = (p_lab[0], p_lab[1], fin & jnp.all(jnp.isfinite(means[2])) & jnp.all(jnp.isfinite(covs[2])))
        return res

    def check(res):
        for lik_name, (before, after, finite) in res.items():
            assert bool(finite), f"{name}/{lik_name}: non-finite state or predictive after huge-logit updates"
            assert float(after) > float(before) + 0.02, f"{name}/{lik_name}: p(labels) {before:.3f} -> {after:.3f}"

    return traced, check, [c[0] for c in cases]


@pytest.mark.parametrize("name", NAMES)
def test_contract(name):
    """One compiled graph per backend (compile time dominates): the Gaussian contract and the classification
    checks of the module docstring."""
    g_traced, g_check = _gaussian_part(name)
    c_traced, c_check, liks = _classification_part(name)
    g_res, c_res = compiled_call(lambda k: (g_traced(k), c_traced(k)), jax.random.PRNGKey(4))
    g_check(g_res)
    c_check(c_res)
    if len(liks) < 2:
        print(f"{name}: classification checked only for {liks} (the backend rejects the other likelihoods)")


def test_kalman_last_layer_learns_forgetting_on_switching_stream():
    """The labelling rule flips sign half-way: the learned γ stays ≈ 1 before and drops below 1 after."""
    model = MLP(features=(8,), out=1)
    params = model.init(jax.random.PRNGKey(0), X0)
    post = P_.kalman_last_layer(model.apply, Gaussian(0.05), init_cov=1.0, forgetting=1.0, forgetting_lr=1e-2)
    n = 60
    xs = jax.random.normal(jax.random.PRNGKey(1), (n, D_IN))
    feats = jax.vmap(lambda x: model.apply(params, x, return_features=True))(xs)
    w = jax.random.normal(jax.random.PRNGKey(2), (feats.shape[1],))
    sign = jnp.where(jnp.arange(n) < n // 2, 1.0, -1.0)
    ys = (sign * (feats @ w))[:, None]

    @jax.jit
    def go(params):
        def body(s, xy):
            s = post.update(post.predict(s), xy[0], xy[1])
            return s, current_forgetting(s)

        return jax.lax.scan(body, post.init(params), (xs, ys))[1]

    gammas = np.asarray(go(params))
    assert np.all(np.isfinite(gammas))
    before, after = gammas[n // 2 - 1], gammas[-1]
    assert before > 0.99, gammas
    assert after < 0.98 and after < before - 0.01, gammas


def test_subspace_from_sgd_basis_follows_the_trajectory():
    model = MLP(features=(6,), out=2)
    params = model.init(jax.random.PRNGKey(0), X0)
    xs, ys = _stream(jax.random.PRNGKey(5), 32, 2)
    basis, offset = P_.subspace_from_sgd(model.apply, params, xs, ys, dim=3, n_iters=60, skip=2, learning_rate=0.05)
    theta0 = jax.flatten_util.ravel_pytree(params)[0]
    assert basis.shape == (theta0.size, 3) and offset.shape == theta0.shape
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-5)
    space = P_.ParamSpace(params)

    def loss(theta):
        f = jax.vmap(lambda x: model.apply(space.unravel(theta), x))(xs)
        return jnp.mean(jnp.sum((f - ys) ** 2, -1))

    assert float(loss(offset)) < 0.7 * float(loss(theta0))
    travel = offset - theta0
    captured = jnp.linalg.norm(basis.T @ travel) / jnp.linalg.norm(travel)
    assert float(captured) > 0.9, float(captured)
    # the subspace filter starts at the least-squares coordinates: mean(init(params)) = projection onto θ* + span(A)
    post = P_.subspace_ekf(model.apply, Gaussian(0.1), basis=basis, offset=offset)
    mean0 = jax.flatten_util.ravel_pytree(post.mean(post.init(params)))[0]
    proj = offset + basis @ (basis.T @ (theta0 - offset))
    np.testing.assert_allclose(mean0, proj, atol=1e-4)


def test_subspace_from_sgd_random_basis_keeps_the_fit_and_draws_the_basis():
    """``basis="random"`` (seed 002's EKF-Sub-RND): the same SGD offset θ* as the SVD subspace, an orthonormal
    basis that depends on the key and not on the trajectory; it needs a key and allows d > kept iterates."""
    model = MLP(features=(6,), out=2)
    params = model.init(jax.random.PRNGKey(0), X0)
    xs, ys = _stream(jax.random.PRNGKey(5), 32, 2)
    kw = dict(n_iters=60, skip=2, learning_rate=0.05)
    svd, offset = P_.subspace_from_sgd(model.apply, params, xs, ys, dim=3, key=jax.random.PRNGKey(1), **kw)
    rnd, offset_r = P_.subspace_from_sgd(model.apply, params, xs, ys, dim=3, key=jax.random.PRNGKey(1),
                                         basis="random", **kw)
    np.testing.assert_allclose(np.asarray(offset_r), np.asarray(offset), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(rnd.T @ rnd, np.eye(3), atol=1e-5)
    assert float(jnp.max(jnp.abs(svd.T @ rnd))) < 0.9  # not the trajectory's principal directions
    other, _ = P_.subspace_from_sgd(model.apply, params, xs, ys, dim=3, key=jax.random.PRNGKey(2), basis="random",
                                   **kw)
    assert not np.allclose(np.asarray(other), np.asarray(rnd), atol=1e-3)
    big, _ = P_.subspace_from_sgd(model.apply, params, xs, ys, dim=35, key=jax.random.PRNGKey(1), basis="random",
                                 **kw)  # 35 > 30 kept iterates: only an SVD basis is limited by them
    assert big.shape == (offset.size, 35)
    with pytest.raises(ValueError, match="key"):
        P_.subspace_from_sgd(model.apply, params, xs, ys, dim=3, basis="random", **kw)
    with pytest.raises(ValueError, match="'svd' or 'random'"):
        P_.subspace_from_sgd(model.apply, params, xs, ys, dim=3, basis="pca", **kw)


def test_subspace_basis_rows_is_the_same_filter_as_basis():
    """``basis_rows=Aᵀ (d, P)`` (the layout the filter computes with, and the agent's) and ``basis=A (P, d)`` give
    the same filter, from NumPy or JAX input, traced (scan, jit) or not; giving both is an error (neither: a learned
    subspace, tests/posteriors/test_posterior_contract_pure.py)."""
    model, apply_fn = _model(2)
    params = _template(2)
    theta0 = jax.flatten_util.ravel_pytree(params)[0]
    basis, offset = P_.subspace_random(jax.random.PRNGKey(3), params, 4)
    offset = offset + 0.1  # a non-trivial start: init solves least squares for z_0 through the basis
    xs, ys = _stream(jax.random.PRNGKey(1), 6, 2)
    by = {}
    for label, kw in [("cols", dict(basis=basis)), ("rows", dict(basis_rows=basis.T)),
                      ("np_cols", dict(basis=np.asarray(basis))), ("np_rows", dict(basis_rows=np.asarray(basis.T)))]:
        post = P_.subspace_ekf(apply_fn, Gaussian(0.1), offset=offset, init_cov=0.3, **kw)
        state = _run(post, params, xs, ys)  # updates inside lax.scan
        mean = jax.flatten_util.ravel_pytree(post.mean(state))[0]
        by[label] = (np.asarray(mean), np.asarray(post.predictive(state, xs[0])[1]),
                     np.asarray(jax.flatten_util.ravel_pytree(jax.jit(post.sample)(jax.random.PRNGKey(9), state))[0]))
        assert post.hyper["dim"] == 4
    for label in ("rows", "np_cols", "np_rows"):
        for a, b in zip(by[label], by["cols"], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(by["cols"][0], theta0)  # the filter moved
    with pytest.raises(ValueError, match="not both"):
        P_.subspace_ekf(apply_fn, basis=basis, basis_rows=basis.T)
    with pytest.raises(ValueError, match="basis_rows"):
        P_.subspace_ekf(apply_fn, basis_rows=basis[:, 0])  # not a matrix
    with pytest.raises(ValueError, match="dim=3 but the basis has d=4"):
        P_.subspace_ekf(apply_fn, basis=basis, dim=3)
    with pytest.raises(ValueError, match=r"\(d, P\)"):
        P_.subspace_ekf(apply_fn, basis_rows=basis).init(params)  # (P, d) given as rows


def test_subspace_from_sgd_divergence_is_an_error_eagerly_and_clip_norm_prevents_it():
    """A step size far past stability blows the SGD up: an eager call says so (and what to change), a jitted call
    returns the NaN for the runner's health check, and ``clip_norm`` keeps the same run finite."""
    model = MLP(features=(6,), out=2)
    params = model.init(jax.random.PRNGKey(0), X0)
    xs, ys = _stream(jax.random.PRNGKey(5), 32, 2)
    ys = 100.0 * ys  # large residuals: gradients of order 1e2-1e3
    kw = dict(dim=3, n_iters=60, skip=2, learning_rate=5.0)
    with pytest.raises(FloatingPointError, match="diverged.*learning_rate=5.0.*clip_norm"):
        P_.subspace_from_sgd(model.apply, params, xs, ys, **kw)
    _, offset = jax.jit(lambda p: P_.subspace_from_sgd(model.apply, p, xs, ys, **kw))(params)
    assert not np.all(np.isfinite(np.asarray(offset)))
    basis, offset = P_.subspace_from_sgd(model.apply, params, xs, ys, clip_norm=1e-3, **kw)
    assert np.all(np.isfinite(np.asarray(offset))) and np.all(np.isfinite(np.asarray(basis)))
    theta0 = jax.flatten_util.ravel_pytree(params)[0]
    # each clipped step moves θ by at most lr · c (momentum 0.9 at most multiplies that by 10)
    assert float(jnp.linalg.norm(offset - theta0)) <= 60 * 5.0 * 1e-3 * 10 + 1e-6
    with pytest.raises(ValueError, match="clip_norm"):
        P_.subspace_from_sgd(model.apply, params, xs, ys, clip_norm=0.0, **kw)


def test_bad_inputs_raise_clear_errors():
    model, apply_fn = _model(2)
    with pytest.raises(ValueError, match="method"):
        P_.diag_ekf(apply_fn, method="full")
    with pytest.raises(ValueError, match="forgetting"):
        P_.diag_ekf(apply_fn, forgetting=1.5)
    with pytest.raises(ValueError, match="dynamics_cov"):
        P_.kalman_last_layer(apply_fn, dynamics_cov=-1.0)
    with pytest.raises(ValueError, match="link"):
        P_.kalman_last_layer(apply_fn, link="probit")
    with pytest.raises(ValueError, match="basis"):
        P_.subspace_ekf(apply_fn, basis=jnp.ones(5))  # not (P, d); no basis at all is allowed
    with pytest.raises(ValueError, match="dim"):
        P_.subspace_ekf(apply_fn, basis=jnp.eye(5)[:, :2], dim=3)
    post = P_.subspace_ekf(apply_fn, basis=jnp.eye(5))
    with pytest.raises(ValueError, match="rows"):
        post.init(_template(2))
    with pytest.raises(ValueError, match="last_layer"):
        P_.kalman_last_layer(apply_fn, last_layer="nope").init(_template(2))
    xs, ys = _stream(jax.random.PRNGKey(0), 4, 2)
    with pytest.raises(ValueError, match="dim"):
        P_.subspace_from_sgd(apply_fn, _template(2), xs, ys, dim=50, n_iters=20)
    with pytest.raises(ValueError, match="loss"):
        P_.subspace_from_sgd(apply_fn, _template(2), xs, ys, dim=2, n_iters=20, loss="hinge")


@pytest.mark.parametrize("name", NAMES)
def test_fresh_state_can_be_donated_to_a_jitted_step(name):
    """``jax.jit(step, donate_argnums=0)`` on the state straight from ``init`` (an in-place update, as the runner's
    scan does and as the speed benchmark times it): no two leaves of the state may share a buffer."""
    model, apply_fn = _model(1)
    post = make(name, 1, apply_fn, Gaussian(0.5))
    state = post.init(model.init(jax.random.PRNGKey(0), X0))
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y), donate_argnums=0)
    for t in range(2):
        state = step(state, X0 + t, jnp.ones(1))
    jax.block_until_ready(state)
    assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(state)
               if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating))
