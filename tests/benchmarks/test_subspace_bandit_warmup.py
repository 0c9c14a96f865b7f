"""The subspace EKF's bandit-feedback warm-up (issue 55, benchmarks/studies/subspace_bandit_warmup): the study's
variants are make_agent's default with one change each, and the warm-up fit they rely on has a known answer."""

import jax
import numpy as np
import optax
from toys import ToyBandit

from banditkit.agents import BanditAgent, make_agent
from banditkit.models import MLP
from benchmarks import agents as A
from benchmarks.harness import options
from benchmarks.studies import subspace_bandit_warmup as study

K, D, N_PER_ARM = 3, 2, 6


def test_variants_are_the_default_with_one_change_each():
    env = ToyBandit()
    k = int(env.unwrapped.num_actions)
    variants = A.subspace_warmup_variants(k)
    assert tuple(variants) == A.SUBSPACE_WARMUP_VARIANTS
    built = {name: f(env) for name, f in variants.items()}
    user = make_agent("subspace_ekf-thompson", env)  # as a user gets it
    base = built["sub_default"]
    # sub_default is the default before the study (tau = 10 K); make_agent's default is sub_tau20's 20 K since
    assert base.posterior.hyper == user.posterior.hyper and base.warmup_steps == 10 * k
    assert user.warmup_steps == built["sub_tau20"].warmup_steps == 20 * k
    assert base.likelihood == user.likelihood  # make_agent's observation variance, not the protocol's 0.1
    assert built["sub_tau20"].warmup_steps == 20 * k and built["sub_tau50"].warmup_steps == 50 * k
    for name in ("sub_tau20", "sub_tau50"):
        assert built[name].posterior.hyper == base.posterior.hyper
    sgd = base.posterior.hyper["sgd"]
    assert built["sub_clip1"].posterior.hyper["sgd"] == dict(sgd, clip_norm=1.0)
    assert built["sub_adam"].posterior.hyper["sgd"] == dict(sgd, clip_norm=1.0)  # + the optimiser (not a plain value)
    assert built["sub_rnd"].posterior.hyper == dict(base.posterior.hyper, fit_basis="random")
    for name in A.SUBSPACE_WARMUP_VARIANTS[1:]:
        assert built[name].warmup_steps in (10 * k, 20 * k, 50 * k)
    # opt-in in the mnist suite's seed-002 set: the protocol's default run is unchanged
    s002 = A.seed002_agents(num_actions=k, warmup_per_arm=2)
    assert set(A.SUBSPACE_WARMUP_VARIANTS) <= set(s002)
    assert not set(A.SUBSPACE_WARMUP_VARIANTS) & set(options.select(s002, ""))


def _per_arm_least_squares(xs, actions, rewards):
    """θ of the linear K-output model ``f(x) = Wᵀx + b`` that minimises Σ_i ½ (f_{a_i}(x_i) − r_i)²: each arm's
    least squares on its own rounds (the other arms' outputs are not observed), in ravel order (bias, kernel)."""
    bias, kernel = np.zeros(K), np.zeros((D, K))
    for a in range(K):
        rows = actions == a
        design = np.concatenate([np.ones((rows.sum(), 1)), xs[rows]], axis=1)
        coef = np.linalg.lstsq(design, rewards[rows], rcond=None)[0]
        bias[a], kernel[:, a] = coef[0], coef[1:]
    return np.concatenate([bias, kernel.ravel()])


def test_bandit_warmup_fit_with_clipped_adam_reaches_per_arm_least_squares():
    """Known answer: on a linear K-output model the bandit-feedback warm-up loss is minimised by each arm's least
    squares on the rounds that pulled it.  The clipped-Adam fit (``sub_adam``'s optimiser, through the agent's
    warm-up and ``subspace_ekf.refit``) reaches it, from weights far enough away that the clip is active at first;
    given every arm's reward (``warmup(key, state, targets)``, the reference's label leak) it reaches the other known
    answer."""
    tau = K * N_PER_ARM
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(tau, D)).astype(np.float32)
    actions = np.arange(tau) % K  # the round-robin warm-up
    every_arm = (xs @ rng.normal(size=(D, K)) + rng.normal(size=K) + 0.1 * rng.normal(size=(tau, K))).astype(np.float32)
    rewards = every_arm[np.arange(tau), actions]
    sgd = dict(optimizer=optax.adam(0.05), clip_norm=1.0, n_iters=3000, skip=2)
    agent = BanditAgent(MLP(features=(), out=K), "subspace_ekf", "thompson", warmup_steps=tau, obs_noise=0.1,
                        posterior_kwargs=dict(dim=3, sgd=sgd))
    state = agent.init(jax.random.PRNGKey(0), xs[0])
    state = state._replace(posterior=state.posterior._replace(offset=state.posterior.offset + 5.0))
    for t in range(tau):
        state = agent.observe(state, xs[t], int(actions[t]), float(rewards[t]))
    fitted = agent.warmup(jax.random.PRNGKey(1), state)
    want = _per_arm_least_squares(xs.astype(np.float64), actions, rewards.astype(np.float64))
    np.testing.assert_allclose(np.asarray(fitted.posterior.offset), want, atol=2e-3)
    # the label leak the study avoids: every arm's reward revealed, each arm's least squares over all τ rounds
    leak = agent.warmup(jax.random.PRNGKey(1), state, every_arm)
    stacked = np.repeat(xs.astype(np.float64), K, axis=0)
    want_leak = _per_arm_least_squares(stacked, np.tile(np.arange(K), tau), every_arm.ravel().astype(np.float64))
    np.testing.assert_allclose(np.asarray(leak.posterior.offset), want_leak, atol=2e-3)
    assert np.max(np.abs(want_leak - want)) > 0.05  # the two answers are told apart at this tolerance


def test_study_dataset_flag():
    assert study._split_dataset(["--steps", "5", "--dataset", "fashion_mnist"]) == ("fashion_mnist", ["--steps", "5"])
    assert study._split_dataset(["--dataset=mnist", "--seeds", "3"]) == ("mnist", ["--seeds", "3"])
    assert study._split_dataset([]) == ("mnist", [])
    try:
        study._split_dataset(["--dataset", "cifar"])
    except SystemExit as e:
        assert "fashion_mnist" in str(e)
    else:
        raise AssertionError("an unknown --dataset must be refused")
