"""The pure posterior contract: a backend's functions depend only on their arguments and on what its factory got.

* One backend object serves two models in turn (different parameter counts and layouts), its calls interleaved,
  with the numbers of a fresh backend per model — for every backend in ``bk.posteriors.REGISTRY`` (a learned-subspace
  ``subspace_ekf`` after its ``refit``) and through the ``adaptive_noise`` wrapper.
* A saved state loads (``checkpoint.load(template=...)`` with a template from another backend object) into a freshly
  made backend that never had ``init`` called, and gives the original's numbers.
* The hooks: the agent's warm-up through ``refit`` is the former subspace warm-up (SGD on the pulled arms, SVD basis,
  the τ buffered observations filtered); ``τ = 0`` is a random subspace through the initial weights; the
  ``adaptive_noise`` wrapper forwards ``refit`` and ``diagnostics``; the runner records any backend's
  ``diagnostics`` per seed and shows its warnings, in both loops.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toys import ToyBandit

import banditkit as bk
from banditkit import checkpoint
from banditkit.agents import BanditAgent, selected_output
from banditkit.experiments import run
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP

P_ = bk.posteriors
D_IN = 3
X0 = jnp.zeros(D_IN)
# small sizes, passed to a factory only when its signature has the argument
SMALL = dict(rank=3, rank_last=2, buffer_size=8, train_every=2, n_train_steps=2, n_inner=2, batch_size=None,
             n_samples=4, num_samples=4, n_probes=2, dim=4, sgd=dict(n_iters=12, skip=2))
NAMES = sorted(P_.REGISTRY) + ["ekf-adaptive_noise", "subspace_ekf-adaptive_noise"]


def apply_fn(params, x):
    """An MLP of any widths (``dense_0``, ``dense_1``, ..., ``head``): one function serves both models."""
    p = params["params"]
    h = x
    for name in sorted(k for k in p if k != "head"):
        h = jnp.tanh(h @ p[name]["kernel"] + p[name]["bias"])
    return h @ p["head"]["kernel"] + p["head"]["bias"]


PARAMS_A = MLP(features=(4,), out=1).init(jax.random.PRNGKey(0), X0)  # P = 21
PARAMS_B = MLP(features=(6, 3), out=1).init(jax.random.PRNGKey(1), X0)  # P = 49


def make(name):
    factory = P_.get(name)
    takes = inspect.signature(factory).parameters
    return factory(apply_fn, Gaussian(0.1), **{k: v for k, v in SMALL.items() if k in takes})


def _data(seed, n=5):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(n, D_IN)).astype(np.float32)
    return xs, np.tanh(xs.sum(axis=1, keepdims=True)).astype(np.float32)


def _start(post, params, key):
    """``init``, then the data-free ``refit`` of a backend that has one (a learned subspace needs it to learn)."""
    state = post.init(params, example_x=X0)
    if post.refit is not None:
        state = post.refit(key, state, jnp.zeros((0, 1, D_IN)), jnp.zeros((0, 1, 1)), jnp.zeros((0, 1)))
    return state


def _assert_same(a, b):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


class _Jitted:
    """A backend's functions, each jitted once (a jitted function is traced again for each new state layout)."""

    def __init__(self, post):
        self.post = post
        self.step = jax.jit(lambda s, x, y: post.predict(post.update(s, x, y)))
        self.predictive, self.sample, self.mean = jax.jit(post.predictive), jax.jit(post.sample), jax.jit(post.mean)


@pytest.mark.parametrize("name", NAMES)
def test_one_backend_serves_two_models_in_turn(name):
    """init A, init B, update A, update B, ... on ONE backend object (its functions jitted once, traced per model)
    give the numbers of a fresh backend per model, bit for bit."""
    shared = _Jitted(make(name))
    key = jax.random.PRNGKey(5)
    (xa, ya), (xb, yb) = _data(0), _data(1)
    s_a = _start(shared.post, PARAMS_A, key)
    s_b = _start(shared.post, PARAMS_B, key)
    for t in range(len(xa)):  # interleaved
        s_a = shared.step(s_a, xa[t], ya[t])
        s_b = shared.step(s_b, xb[t], yb[t])
    got = dict(
        pred_a=shared.predictive(s_a, xa[0]), sample_b=shared.sample(key, s_b), mean_a=shared.mean(s_a),
        pred_b=shared.predictive(s_b, xb[0]), sample_a=shared.sample(key, s_a), mean_b=shared.mean(s_b),
    )
    for label, params, xs, ys, s in (("a", PARAMS_A, xa, ya, s_a), ("b", PARAMS_B, xb, yb, s_b)):
        fresh = _Jitted(make(name))
        r = _start(fresh.post, params, key)
        for t in range(len(xs)):
            r = fresh.step(r, xs[t], ys[t])
        _assert_same(s, r)
        _assert_same(got[f"pred_{label}"], fresh.predictive(r, xs[0]))
        _assert_same(got[f"sample_{label}"], fresh.sample(key, r))
        _assert_same(got[f"mean_{label}"], fresh.mean(r))
        assert jax.tree_util.tree_structure(got[f"mean_{label}"]) == jax.tree_util.tree_structure(params)


@pytest.mark.parametrize("name", NAMES)
def test_a_loaded_state_works_in_a_backend_that_never_had_init(name, tmp_path):
    key = jax.random.PRNGKey(3)
    xs, ys = _data(2)
    post = make(name)
    state = _start(post, PARAMS_B, key)
    for t in range(3):
        state = post.predict(post.update(state, xs[t], ys[t]))
    path = str(tmp_path / "state.bk")
    checkpoint.save(path, state, posterior=post)
    template = _start(make(name), PARAMS_B, jax.random.PRNGKey(9))  # another backend object's state
    loaded, meta = checkpoint.load(path, template=template)
    assert meta["name"] == post.name
    fresh = make(name)  # never initialised
    _assert_same(loaded, state)
    _assert_same(fresh.update(loaded, xs[3], ys[3]), post.update(state, xs[3], ys[3]))
    _assert_same(fresh.predictive(loaded, xs[4]), post.predictive(state, xs[4]))
    _assert_same(fresh.sample(key, loaded), post.sample(key, state))
    _assert_same(fresh.mean(loaded), post.mean(state))


# -------------------------------------------------------------------------------------------------- the hooks
XS = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
REWARDS = np.tanh(XS[:, 0]).astype(np.float32)


def _subspace_agent(tau, **post):
    return BanditAgent(MLP(features=(4,), out=2), "subspace_ekf", "thompson", warmup_steps=tau,
                       posterior_kwargs=dict(dict(init_cov=0.5, dim=3, sgd=dict(n_iters=20, skip=2)), **post))


def test_agent_warmup_through_refit_is_the_subspace_warmup():
    """At round τ the agent's refit is seed 002's warm-up: SGD from the initial weights on ½(f_a − r)² (the pulled
    arm's output only), the SVD basis of the iterates, the posterior restarted at z = 0 on θ*, then the τ buffered
    observations filtered — computed here by hand with the public pieces."""
    tau, k = 4, 2
    agent = _subspace_agent(tau)
    assert agent.warmup_rounds == tau and agent.posterior.refit is not None
    state = agent.init(jax.random.PRNGKey(0), XS[0])
    params = agent.posterior.mean(state.posterior)
    for t in range(tau):
        state = agent.observe(state, XS[t], t % k, float(REWARDS[t]))
    _assert_same(agent.posterior.mean(state.posterior), params)  # not updated during the warm-up
    key = jax.random.PRNGKey(7)
    got = agent.warmup(key, state)

    onehot = jax.nn.one_hot(np.arange(tau) % k, k)
    basis, offset = P_.subspace_from_sgd(agent.model.apply, params, XS[:tau], onehot * REWARDS[:tau, None], dim=3,
                                         key=key, mask=onehot, n_iters=20, learning_rate=0.05, skip=2)
    post = P_.subspace_ekf(selected_output(agent.model.apply), agent.likelihood, basis=basis, init_cov=0.5)
    want = post.init(jax.flatten_util.ravel_pytree(params)[1](offset))
    for t in range(tau):
        want = post.predict(post.update(want, (XS[t], onehot[t]), REWARDS[t:t + 1]))
    np.testing.assert_allclose(np.asarray(got.posterior.offset), np.asarray(offset), atol=1e-6)
    np.testing.assert_allclose(np.asarray(got.posterior.basis_rows), np.asarray(basis).T, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got.posterior.inner.mean), np.asarray(want.inner.mean), atol=1e-5)
    np.testing.assert_allclose(np.asarray(got.posterior.inner.cov), np.asarray(want.inner.cov), atol=1e-5)


def test_agent_without_warmup_starts_on_a_random_subspace_through_its_weights():
    agent = _subspace_agent(0)
    assert agent.warmup_rounds == 0 and isinstance(agent.init(jax.random.PRNGKey(0), XS[0]).warmup, tuple)
    key = jax.random.PRNGKey(0)
    state = agent.init(key, XS[0])
    k_model, k_basis = jax.random.split(key)
    params = agent.model.init(k_model, XS[0])
    basis, theta = P_.subspace_random(k_basis, params, 3)
    np.testing.assert_array_equal(np.asarray(state.posterior.basis_rows), np.asarray(basis).T)
    np.testing.assert_array_equal(np.asarray(state.posterior.offset), np.asarray(theta))
    np.testing.assert_array_equal(np.asarray(state.posterior.inner.mean), np.zeros(3))


def test_subspace_agent_runs_are_reproducible():
    """The same agent and seed give the same numbers twice, in both loops (the runner's compiled loop and the
    Gymnasium loop agreeing is tests/experiments/test_experiments.py::test_subspace_warmup_same_in_both_loops)."""

    def once(compiled):
        agent = BanditAgent(MLP(features=(4,), out=3), "subspace_ekf", "thompson", warmup_steps=6,
                            posterior_kwargs=dict(dim=3, sgd=dict(n_iters=20, skip=2)))
        return run(ToyBandit(), agent, 10, [1], compiled=compiled, progress=False)

    for compiled in (True, False):
        a, b = once(compiled), once(compiled)
        np.testing.assert_array_equal(a["action"], b["action"])
        np.testing.assert_array_equal(a["cumulative_regret"], b["cumulative_regret"])


def test_learned_subspace_needs_refit_and_refit_has_not_seen_the_data():
    post = P_.subspace_ekf(apply_fn, Gaussian(0.1), dim=4, sgd=dict(n_iters=20, skip=2))
    assert post.refit is not None and post.hyper["dim"] == 4 and post.hyper["fit_basis"] == "svd"
    assert P_.subspace_ekf(apply_fn, basis=np.eye(21, 4)).refit is None  # a fixed subspace
    state = post.init(PARAMS_A)
    xs, ys = _data(4, 6)
    moved = post.update(state, xs[0], ys[0])
    _assert_same(post.mean(moved), PARAMS_A)  # the zero placeholder basis: nothing moves before refit
    fitted = post.refit(jax.random.PRNGKey(0), state, xs[:, None], ys[:, None], jnp.ones((6, 1)))
    np.testing.assert_array_equal(np.asarray(fitted.inner.mean), np.zeros(4))  # z = 0: θ = θ*
    rows = np.asarray(fitted.basis_rows)
    np.testing.assert_allclose(rows @ rows.T, np.eye(4), atol=1e-5)
    _, offset = P_.subspace_from_sgd(apply_fn, PARAMS_A, xs, ys, dim=4, n_iters=20, skip=2, learning_rate=0.05,
                                     key=jax.random.PRNGKey(0))
    np.testing.assert_allclose(np.asarray(fitted.offset), np.asarray(offset), atol=1e-6)
    with pytest.raises(ValueError, match="fit_basis"):
        P_.subspace_ekf(apply_fn, sgd=dict(basis="random"))
    with pytest.raises(ValueError, match=r"dim=50 must be in \[1, P=21\]"):
        P_.subspace_ekf(apply_fn, dim=50).init(PARAMS_A)


def test_adaptive_noise_forwards_refit_and_diagnostics():
    plain = P_.subspace_ekf(apply_fn, Gaussian(0.1), dim=3, sgd=dict(n_iters=20, skip=2))
    wrapped = P_.adaptive_noise("subspace_ekf")(apply_fn, Gaussian(0.1), dim=3, sgd=dict(n_iters=20, skip=2))
    assert wrapped.refit is not None and wrapped.diagnostics is None
    xs, ys = _data(5, 6)
    key = jax.random.PRNGKey(2)
    args = (xs[:, None], ys[:, None], jnp.ones((6, 1)))
    got = wrapped.refit(key, wrapped.init(PARAMS_A, example_x=X0), *args)
    want = plain.refit(key, plain.init(PARAMS_A), *args)
    assert jax.tree_util.tree_structure(got.inner) == jax.tree_util.tree_structure(want)
    for u, v in zip(jax.tree_util.tree_leaves(got.inner), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-6)  # the model times c = 1
    assert P_.adaptive_noise("ekf")(apply_fn, Gaussian(0.1)).refit is None

    def ekf(fn, likelihood=Gaussian(1.0), **kw):  # an ekf that reports the trace of its covariance
        return P_.ekf(fn, likelihood, **kw)._replace(diagnostics=lambda s: {"trace": jnp.trace(s.cov)})

    noisy = P_.adaptive_noise(ekf)(apply_fn, Gaussian(0.1))
    state = noisy.init(PARAMS_A)
    assert float(noisy.diagnostics(state)["trace"]) == pytest.approx(21.0)


@pytest.mark.parametrize("compiled", [True, False])
def test_runner_records_any_backends_diagnostics_and_shows_its_warnings(compiled):
    model = MLP(features=(), out=3)

    def diagnostics(state):
        out = {"updates_seen": [int(state.cov.shape[0]), float(jnp.trace(state.cov) > 0)]}
        return out | {"warning": "the covariance is alive"}

    post = P_.ekf(selected_output(model.apply), Gaussian(0.1))._replace(diagnostics=diagnostics)
    agent = BanditAgent(model, post, "thompson")
    with pytest.warns(RuntimeWarning, match=r"diag: seed\(s\) \[0, 2\]: the covariance is alive"):
        df = run(ToyBandit(), agent, 6, [0, 2], compiled=compiled, progress=False, name="diag")
    timing = df.attrs["timing"]["diag"]
    assert timing["updates_seen"] == {0: [15, 1.0], 2: [15, 1.0]}  # P = 4 · 3 + 3
    assert "warning" not in timing


def test_a_resumed_gymnasium_run_keeps_the_diagnostics_of_the_seeds_finished_before_it_stopped(tmp_path):
    from chunk_stop import Stop, stop_at_chunk

    model = MLP(features=(), out=3)
    post = P_.ekf(selected_output(model.apply), Gaussian(0.1))._replace(
        diagnostics=lambda s: {"trace_positive": float(jnp.trace(s.cov) > 0)})
    ck = str(tmp_path / "run.bk")
    kw = dict(compiled=False, progress=False, name="diag", checkpoint=ck, chunk_size=3, save_every=0)
    with pytest.raises(Stop):  # seed 0 finishes (2 chunks), seed 1 stops in its first chunk
        run(ToyBandit(), BanditAgent(model, post, "thompson"), 6, [0, 1], on_chunk=stop_at_chunk(3), **kw)
    df = run(ToyBandit(), BanditAgent(model, post, "thompson"), 6, [0, 1], **kw)
    assert df.attrs["timing"]["diag"]["trace_positive"] == {0: 1.0, 1: 1.0}
