"""HiLoFi's conditional Thompson draw (``sample_outputs``, issue 58): the outputs of an affine head drawn given the
hidden draw have the law of the outputs at a full parameter draw.

Oracle: the last layer's covariance written out densely from the state, independently of ``covblocks`` (per-arm
blocks placed on the diagonal by their index, a square root multiplied out, a low-rank factor ``CᵀC + q̄I``), and
``J = ∂fn/∂ℓ`` by forward-mode differentiation at the hidden draw ``h̃``.  ``sample_outputs(key)`` and ``sample(key)``
share ``h̃``, so the residual ``r = draw − fn(h̃, μ_ℓ)`` of each draw is ``N(0, J Σ_ℓ Jᵀ)`` given ``h̃``; whitened by
the oracle's Cholesky factor it is ``N(0, I)``.  Over ``N = 20,000`` keys the sample mean of the whitened residuals
has standard error ``1/√N ≈ 0.007`` and each sample covariance entry about ``√2/√N ≈ 0.01``; the bounds (0.04 and
0.06) are 4–6 standard errors.  A covariance 15% off moves a whitened variance by 0.13, which the covariance bound
refuses (checked in every case).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.agents.bandit import BanditAgent, selected_output
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP
from banditkit.posteriors import arms as arm_layout

K = 3
N = 20_000
MODEL = MLP(features=(4,), out=K)
X = jnp.linspace(-1.0, 1.0, 5)

CASES = {
    "per_arm_sqrt": dict(arms=K),
    "per_arm_dense": dict(arms=K, dynamics_cov=0.05),
    "full_sqrt": dict(),
    "full_gain": dict(dynamics_cov=0.05, dynamics_mode="gain"),
    "lolofi": dict(rank_last=4, dynamics_cov=0.05),
}


def _posterior(kw, draw="conditional"):
    return bk.posteriors.hilofi(selected_output(MODEL.apply), Gaussian(0.1), rank=3, init_cov_hidden=0.5,
                                draw=draw, **kw)


def _state(post):
    params = MODEL.init(jax.random.PRNGKey(0), X)
    st = post.init(params)
    for t in range(4):  # a few observations, so the blocks are no longer their priors
        st = post.predict(post.update(st, (X * (t + 1), jax.nn.one_hot(t % K, K)), jnp.asarray([0.3 * t])))
    return st


def _dense_last(st, kw) -> np.ndarray:
    """``Σ_ℓ (D_ℓ, D_ℓ)`` written out from the state (with the pending ``q̄_ℓ`` the draw includes)."""
    d = st.mean_last.size
    if "rank_last" in kw:
        cov = np.asarray(st.cov_last.dense(), np.float64)
        return cov.T @ cov + float(st.q_last) * np.eye(d)
    cov = np.asarray(st.cov_last, np.float64)
    dense = kw.get("dynamics_cov", 0) > 0  # last_cov="auto": a dense Σ_ℓ with q_ℓ > 0 (q̄_ℓ pending in "gain")
    if "arms" in kw:
        index = arm_layout.arm_index(st.space, K, "hilofi", True)
        out = np.zeros((d, d))
        for k in range(K):
            block = cov[k] if dense else cov[k].T @ cov[k]
            out[np.ix_(index[k], index[k])] = block
    else:
        out = cov if dense else cov.T @ cov
    return out + float(st.q_last) * np.eye(d)


def _whitened(post, st, kw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per key, ``L⁻¹ (draw − fn(h̃, μ_ℓ))`` with ``L Lᵀ = J Σ_ℓ Jᵀ`` of the oracle at that key's hidden draw, for the
    conditional draw and for the full parameter draw; and the conditional draw whitened by an oracle 15% off."""
    space = st.space
    fn = lambda p: MODEL.apply(p, X)  # noqa: E731
    sig = jnp.asarray(_dense_last(st, kw))

    def one(key):
        draw = post.sample(key, st)
        h, _ = space.split(draw)  # the hidden draw sample_outputs shares
        f_l = lambda ell: fn(space.merge(h, ell))  # noqa: E731
        m = f_l(st.mean_last)
        jac = jax.jacfwd(f_l)(st.mean_last)  # (K, D_ℓ)
        v = jac @ sig @ jac.T + 1e-9 * jnp.eye(K)
        white = lambda c, r: jax.scipy.linalg.solve_triangular(c, r, lower=True)  # noqa: E731
        chol, wrong = jnp.linalg.cholesky(v), jnp.linalg.cholesky(1.15 * v)
        new = post.sample_outputs(key, st, fn) - m
        return white(chol, new), white(chol, fn(draw) - m), white(wrong, new)

    keys = jax.random.split(jax.random.PRNGKey(7), N)
    return tuple(np.asarray(w, np.float64) for w in jax.jit(jax.vmap(one))(keys))


def _errors(w: np.ndarray) -> tuple[float, float]:
    """Largest ``|mean|`` and largest ``|cov − I|`` entry of whitened residuals ``w (N, K)``."""
    return float(np.abs(w.mean(0)).max()), float(np.abs(np.cov(w.T) - np.eye(w.shape[1])).max())


@pytest.mark.parametrize("case", list(CASES))
def test_conditional_draw_has_the_oracle_mean_and_covariance(case):
    kw = CASES[case]
    post = _posterior(kw)
    new, old, wrong = _whitened(post, _state(post), kw)
    mean_err, cov_err = _errors(new)
    assert mean_err < 0.04 and cov_err < 0.06, (case, mean_err, cov_err)
    # the full parameter draw, whitened by the same oracle: the law the conditional draw must match
    mean_err, cov_err = _errors(old)
    assert mean_err < 0.04 and cov_err < 0.06, (case, "joint", mean_err, cov_err)
    # the bound has power: the same draws against a covariance 15% off are refused
    assert _errors(wrong)[1] > 0.06, (case, "power")


def test_joint_declares_no_hook_and_the_conditional_draw_shares_the_hidden_draw():
    assert _posterior(CASES["per_arm_sqrt"], draw="joint").sample_outputs is None
    assert _posterior(CASES["per_arm_sqrt"], draw="joint").hyper["draw"] == "joint"
    with pytest.raises(ValueError, match="draw="):
        _posterior({}, draw="both")
    # "auto" (the default): declared where the joint draw would factor a dense Σ_ℓ, not for a kept root
    auto = lambda kw: bk.posteriors.hilofi(selected_output(MODEL.apply), rank=3, **kw).sample_outputs  # noqa: E731
    assert auto(dict(arms=K)) is None and auto({}) is None and auto(dict(rank_last=2, dynamics_cov=0.1)) is None
    assert auto(dict(arms=K, dynamics_cov=0.1)) is not None and auto(dict(last_cov="dense")) is not None
    # with a point-mass head (init_cov_last = 0, no observation) the outputs are fn(h̃, μ_ℓ) exactly: the same
    # numbers as the full draw of the same key
    post = bk.posteriors.hilofi(selected_output(MODEL.apply), Gaussian(0.1), rank=3, init_cov_last=0.0, arms=K,
                                draw="conditional")
    st = post.init(MODEL.init(jax.random.PRNGKey(0), X))
    fn = lambda p: MODEL.apply(p, X)  # noqa: E731
    key = jax.random.PRNGKey(3)
    np.testing.assert_allclose(post.sample_outputs(key, st, fn), fn(post.sample(key, st)), rtol=1e-5, atol=1e-6)


def test_agent_uses_the_conditional_draw_only_for_an_affine_head():
    ctx = X

    def agent(model, **kw):
        post = dict(rank=3, arms=K, dynamics_cov=0.01)  # q > 0: a dense per-arm head, where draw="auto" declares it
        a = BanditAgent(model, bk.posteriors.hilofi, "thompson", posterior_kwargs=post, **kw)
        return a, a.init(jax.random.PRNGKey(0), ctx)

    a, st = agent(MODEL)
    assert a.affine_head
    key = jax.random.PRNGKey(5)
    want = jnp.argmax(a.posterior.sample_outputs(key, st.posterior, lambda p: MODEL.apply(p, ctx)))
    action, _ = a.act(key, st, ctx)
    assert int(action) == int(want)
    # the compiled form (vmapped keys) agrees with the eager calls
    keys = jax.random.split(key, 8)
    acts = jax.jit(jax.vmap(lambda k: a.choose(k, st, ctx)))(keys)
    assert [int(v) for v in acts] == [int(a.act(k, st, ctx)[0]) for k in keys]

    class Wrapped:  # a user model: not known to end in a Dense head
        def init(self, key, x):
            return MODEL.init(key, x)

        def apply(self, params, x):
            return MODEL.apply(params, x)

    b, _ = agent(Wrapped())
    assert not b.affine_head
    reward_fn, _ = b.candidates(b.posterior, ctx)
    assert not hasattr(reward_fn, "draw")
    c, _ = agent(Wrapped(), affine_head=True)
    assert hasattr(c.candidates(c.posterior, ctx)[0], "draw")
