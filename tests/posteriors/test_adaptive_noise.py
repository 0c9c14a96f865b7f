"""``adaptive_noise``: the VB adaptive Kalman filter against a hand-written numpy oracle, the scaled-model identity
for every supported backend, convergence to a known noise variance, the agent switch and its errors."""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from chunk_stop import Stop, stop_at_chunk
from fast_compile import compiled_call

import banditkit as bk
from banditkit.likelihoods import Bernoulli, Gaussian
from banditkit.posteriors.noise import SUPPORTED, noise_variance

P_ = bk.posteriors


def lin_apply(p, x):
    """``f = xᵀw + b`` (one output); ravel order ``[b, w]``."""
    return jnp.atleast_1d(x @ p["w"] + p["b"][0])


def vb_akf_oracle(ys, xs, v0, r0, nu0, rho, n_iter):
    """Särkkä & Nummenmaa's VB adaptive Kalman filter in parameter space, numpy, written from the equations:
    per step ``n`` passes of (Kalman update with ``r = β/α``; ``β = β⁻ + ½((y − h m⁺)² + h P⁺ hᵀ)``), the final
    update with the last ``r``, then the forgetting ``α, β ← ρα, ρβ``.  Returns the means and the variances r."""
    d = xs.shape[1] + 1
    m, p = np.zeros(d), v0 * np.eye(d)
    a, b = nu0 / 2, nu0 / 2 * r0
    means, rs = [], []
    for x, y in zip(xs, ys, strict=True):
        h = np.concatenate([[1.0], x])
        a_new, b_new = a + 0.5, b
        for _ in range(n_iter):
            r = b_new / a_new if _ else b / a
            s = h @ p @ h + r
            k = p @ h / s
            m_post, p_post = m + k * (y - h @ m), p - np.outer(k, k) * s
            b_new = b + 0.5 * ((y - h @ m_post) ** 2 + h @ p_post @ h)
        r = b_new / a_new
        s = h @ p @ h + r
        k = p @ h / s
        m, p = m + k * (y - h @ m), p - np.outer(k, k) * s
        a, b = rho * a_new, rho * b_new
        means.append(m.copy())
        rs.append(r)
    return np.array(means), np.array(rs)


@pytest.mark.parametrize("rho", [1.0, 0.9])
def test_ekf_with_learned_noise_equals_vb_akf_oracle(x64, rho):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(12, 3))
    ys = xs @ np.array([0.5, -1.0, 2.0]) + 0.3 + 0.5 * rng.normal(size=12)
    params = {"b": jnp.zeros(1), "w": jnp.zeros(3)}
    post = P_.adaptive_noise("ekf", prior_count=3.0, forgetting=rho, iterations=2)(
        lin_apply, Gaussian(0.2), init_cov=0.7)

    def run(xs, ys):
        def step(s, xy):
            s = post.predict(post.update(s, xy[0], xy[1]))
            return s, (jax.flatten_util.ravel_pytree(post.mean(s))[0], noise_variance(s))
        # the variance used by each update is r̂ after it and before the forgetting: β/α is unchanged by ρ
        return jax.lax.scan(step, post.init(params), (xs, ys))[1]

    means, rs = compiled_call(run, jnp.asarray(xs), jnp.asarray(ys))
    want_means, want_rs = vb_akf_oracle(ys, xs, 0.7, 0.2, 3.0, rho, 2)
    np.testing.assert_allclose(means, want_means, atol=1e-10)
    np.testing.assert_allclose(rs, want_rs, rtol=1e-10)
    assert not np.allclose(want_rs, 0.2)  # the variance did move


def _model_params():
    model = bk.models.MLP(features=(6,), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(3))
    return model, jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), params)


HYPER = {"ekf": {}, "diag_ekf": {}, "lofi": dict(rank=3), "hilofi": dict(rank=3),
         "lolofi": dict(rank=3, rank_last=4), "lrkf": dict(rank=5, dynamics_cov=1e-3)}


@pytest.mark.parametrize("name", sorted(HYPER))
def test_update_equals_backend_built_with_the_learned_variance(x64, name):
    """The scaled-model update with ``c = √(r_0/r̂)`` is the backend's own update with ``Gaussian(r̂)``."""
    model, params = _model_params()
    post = P_.adaptive_noise(name, prior_count=0.5)(model.apply, Gaussian(0.1), **HYPER[name])
    xs = jax.random.normal(jax.random.PRNGKey(1), (5, 3), jnp.float64)
    ys = jnp.array([2.4, -1.3, 3.2, 0.1, 4.5])

    def run(xs, ys):
        s = post.init(params)
        for t in range(4):
            s = post.predict(post.update(s, xs[t], ys[t]))
        return s, post.update(s, xs[4], ys[4])

    before, after = jax.jit(run)(xs, ys)
    r = float(noise_variance(after))
    base = P_.get(name)(model.apply, Gaussian(r), **HYPER[name])
    base.init(params)

    def compare(before, after):
        ref = base.update(before.inner, xs[4], ys[4])
        flat = lambda p: jax.flatten_util.ravel_pytree(p)[0]  # noqa: E731
        return (flat(post.mean(after)), flat(base.mean(ref)), jax.vmap(lambda x: post.predictive(after, x))(xs),
                jax.vmap(lambda x: base.predictive(ref, x))(xs))

    mean, mean_ref, pred, pred_ref = compiled_call(compare, before, after)
    np.testing.assert_allclose(mean, mean_ref, atol=1e-12)
    np.testing.assert_allclose(pred[0], pred_ref[0], atol=1e-12)
    np.testing.assert_allclose(pred[1], pred_ref[1], atol=1e-12)  # the predictive carries r̂, not the starting 0.1
    assert abs(r - 0.1) > 0.02  # the learned variance is far from the start: c = √(r_0/r̂) is not 1


def test_learns_a_known_noise_variance():
    """Linear model with Gaussian noise of variance 0.25: from a start 25× too large, r̂ ends within 10 %."""
    rng = np.random.default_rng(3)
    n = 3000
    xs = rng.normal(size=(n, 2)).astype(np.float32)
    ys = (xs @ np.array([1.0, -0.5]) + 0.2 + 0.5 * rng.normal(size=n)).astype(np.float32)
    post = P_.adaptive_noise("ekf", forgetting=1.0)(lin_apply, Gaussian(6.25), init_cov=1.0)
    params = {"b": jnp.zeros(1), "w": jnp.zeros(2)}

    def run(xs, ys):
        s = jax.lax.scan(lambda s, xy: (post.predict(post.update(s, xy[0], xy[1])), None), post.init(params),
                         (xs, ys))[0]
        return noise_variance(s), post.predictive(s, jnp.zeros(2))[1][0, 0]

    r, var = compiled_call(run, jnp.asarray(xs), jnp.asarray(ys))
    assert abs(r / 0.25 - 1) < 0.1, r
    assert var >= r  # the predictive adds the learned variance to the (small) epistemic part


def test_bandit_agent_switch_runs_and_learns(tmp_path):
    env = gymnasium.make("banditkit/Wheel-v0")
    agent = bk.agents.make_agent("lofi-thompson", env, adaptive_noise=dict(forgetting=0.99), obs_noise=0.5)
    assert agent.name.startswith("adaptive_noise(lofi)")
    kw = dict(steps=60, seeds=1, progress=False, chunk_size=20)
    df = bk.run(env, agent, **kw)
    assert np.isfinite(df["regret"]).all()
    # the (posterior, noise belief) state checkpoints and resumes exactly: stopped after its second chunk
    ck = tmp_path / "vb.bk"

    with pytest.raises(Stop):
        bk.run(env, agent, checkpoint=ck, save_every=0, on_chunk=stop_at_chunk(2), **kw)
    rest = bk.run(env, agent, checkpoint=ck, **kw)
    pd.testing.assert_frame_equal(rest, df[df.step >= 20].reset_index(drop=True))
    key = jax.random.PRNGKey(0)
    ctx = env.unwrapped.functional(0, 1).contexts[0]
    state = agent.init(key, ctx)
    for t in range(20):
        a, state = agent.act(jax.random.fold_in(key, t), state, ctx)
        state = agent.observe(state, ctx, a, 0.0)
    assert float(noise_variance(state.posterior)) < 0.5  # rewards without noise pull the variance down


def test_subspace_agent_with_learned_noise():
    env = gymnasium.make("banditkit/Wheel-v0")
    agent = bk.agents.make_agent("subspace_ekf-thompson", env, adaptive_noise=True, warmup_steps=10,
                                 posterior_kwargs=dict(dim=4, sgd=dict(n_iters=20)))
    assert agent.warmup_rounds == 10  # the wrapper passes the backend's refit through
    df = bk.run(env, agent, steps=30, seeds=1, progress=False)
    assert np.isfinite(df["regret"]).all()


def test_errors_say_what_to_do():
    model = bk.models.MLP(features=(6,), out=1)
    with pytest.raises(ValueError, match="neural_linear"):
        P_.adaptive_noise("neural_linear")
    with pytest.raises(ValueError, match="Gaussian"):
        P_.adaptive_noise("lofi")(model.apply, Bernoulli())
    for bad in (dict(prior_count=0.0), dict(forgetting=1.5), dict(floor=0.0), dict(iterations=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            P_.adaptive_noise("ekf", **bad)
    built = P_.lofi(bk.agents.selected_output(model.apply), Gaussian(0.1))
    with pytest.raises(ValueError, match="built Posterior"):
        bk.agents.BanditAgent(model, built, adaptive_noise=True)
    assert set(SUPPORTED) <= set(P_.REGISTRY)


def test_bayesopt_takes_the_wrapped_backend_with_its_defaults():
    """A wrapped factory gets the BO defaults of the backend it wraps and only keywords that backend takes."""
    opt = bk.BayesOpt([(0.0, 1.0), (0.0, 2.0)], surrogate=P_.adaptive_noise("lofi"), features=(16,),
                      n_candidates=64, seed=0, surrogate_kwargs=dict(rank=4))
    assert opt.surrogate == "lofi-adaptive_noise"  # the name posteriors.get resolves back to this factory
    assert opt.surrogate_kwargs == {"rank": 4, "init_cov": 1e-2}  # lofi's BO prior, no HiLoFi-only last_layer
    for _ in range(6):
        x = opt.ask()
        opt.tell(x, float(np.sum((np.asarray(x) - 0.3) ** 2)))
    assert len(opt.history) == 6 and np.isfinite(opt.best[1])


def test_the_name_suffix_is_the_wrapper():
    """``get("NAME-adaptive_noise")`` is ``adaptive_noise("NAME")`` — one memoised object, so kernels keyed on the
    factory are shared — and ``name_of`` gives the name back; re-wrapping with other settings is refused."""
    wrapped = P_.get("Lofi-Adaptive-Noise")
    assert wrapped is P_.adaptive_noise("lofi") is P_.adaptive_noise(P_.lofi) is P_.adaptive_noise(wrapped)
    assert wrapped.backend is P_.lofi and P_.name_of(wrapped) == "lofi-adaptive_noise"
    assert P_.name_of(P_.lofi) == "lofi" and P_.name_of(P_.adaptive_noise("lofi", forgetting=0.99)) is None
    assert P_.split_suffix("hilofi_adaptive_noise") == ("hilofi", True)
    assert P_.split_suffix("adaptive_noise") == ("adaptive_noise", False)
    with pytest.raises(ValueError, match="learns its noise already"):
        P_.adaptive_noise(wrapped, forgetting=0.99)
    with pytest.raises(ValueError, match="not a Gaussian filter"):
        P_.get("neural_linear-adaptive_noise")
    with pytest.raises(ValueError, match="unknown posterior backend 'nope'"):
        P_.get("nope-adaptive_noise")
    model = bk.models.MLP(features=(6,), out=3)
    agent = bk.agents.BanditAgent(model, "lofi-adaptive_noise", "thompson", num_actions=3, adaptive_noise=True)
    assert agent.posterior_name == "adaptive_noise(lofi)"  # the flag on a suffixed name wraps once


def test_bayesopt_saves_and_loads_a_suffixed_surrogate_by_name(tmp_path):
    """``surrogate="lofi-adaptive_noise"`` is stored by name: ``load`` needs no factory and continues exactly."""
    opt = bk.BayesOpt([(0.0, 1.0)] * 2, surrogate="lofi-adaptive_noise", features=(8,), n_candidates=32, seed=1,
                      surrogate_kwargs=dict(rank=2))
    for _ in range(6):
        x = opt.ask()
        opt.tell(x, float(np.sum((np.asarray(x) - 0.3) ** 2)))
    opt.save(tmp_path / "o.bk")
    back = bk.BayesOpt.load(tmp_path / "o.bk")
    assert back.surrogate == "lofi-adaptive_noise"
    assert float(P_.noise_variance(back.posterior[1])) == pytest.approx(float(P_.noise_variance(opt.posterior[1])))
    np.testing.assert_allclose(back.ask(), opt.ask())
    with pytest.raises(ValueError, match="marginal likelihood"):
        bk.BayesOpt([(0.0, 1.0)], surrogate="gp-adaptive_noise")
