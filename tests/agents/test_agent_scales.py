"""The old oracle-read units (benchmarks.harness.oracle_units, a benchmark tool since issue 69): known answers on envs
built here; and make_agent no longer reading them."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.agents import make_agent
from banditkit.environments.functional import FunctionalBandit
from benchmarks.harness import oracle_units as scales

K, F = 4, 3


class _Env:
    """A minimal functional bandit: expected reward ``E r_{t,a} = means[a] + slopes[a] · x_t`` plus ``N(0, noise)``."""

    num_actions = K
    per_arm_features = False
    default_model = "mlp"
    task = "bandit"

    def __init__(self, noise: float, amplitude: float = 1.0, **attrs):
        self.noise, self.amplitude = noise, amplitude
        self.__dict__.update(attrs)

    def functional(self, seed: int, steps: int) -> FunctionalBandit:
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(steps, F)).astype(np.float32)
        slopes = np.linspace(-1.0, 1.0, K * F).reshape(K, F)
        expected = self.amplitude * (np.arange(K) / K + x @ slopes.T)
        rewards = expected + rng.normal(scale=np.sqrt(self.noise), size=expected.shape)
        return FunctionalBandit(jnp.asarray(x), jnp.arange(steps, dtype=jnp.int32),
                                jnp.asarray(rewards, jnp.float32), jnp.asarray(expected, jnp.float32))


def _signal(env, rounds=scales.ROUNDS) -> float:
    fb = env.functional(0, rounds)
    return float(np.mean(np.var(np.asarray(fb.expected, np.float64), axis=0)))


def test_reward_noise_recovers_the_true_variance():
    # 256 rounds x 4 arms of N(0, 0.25): the estimate's relative standard error is sqrt(2 / 1024) = 4.4 %
    assert scales.reward_noise(_Env(noise=0.25)) == pytest.approx(0.25, rel=0.15)
    assert scales.reward_noise(_Env(noise=0.0)) == pytest.approx(0.0, abs=1e-9)


def test_obs_noise_is_noise_plus_the_unexplained_share_of_the_signal_in_observed_units():
    env = _Env(noise=0.25, amplitude=3.0)
    s = scales.reward_scale(env)
    want = (scales.reward_noise(env) + scales.UNEXPLAINED_SHARE * _signal(env)) / s**2
    assert scales.default_obs_noise(env) == pytest.approx(want, rel=1e-9)
    # a noise-free env: only the unexplained share, and it does not depend on the reward's units
    a, b = _Env(noise=0.0, amplitude=1.0), _Env(noise=0.0, amplitude=35.0)
    want = scales.UNEXPLAINED_SHARE * _signal(a) / scales.reward_scale(a) ** 2
    assert scales.default_obs_noise(a) == pytest.approx(want)
    assert scales.default_obs_noise(a) == pytest.approx(scales.default_obs_noise(b), rel=1e-5)


def test_declared_noise_and_scale_take_precedence_and_bad_declarations_are_refused():
    env = _Env(noise=0.0, reward_noise=0.04, reward_scale=2.0)
    assert scales.reward_noise(env) == 0.04 and scales.reward_scale(env) == 2.0
    assert scales.default_obs_noise(env) == pytest.approx((0.04 + scales.UNEXPLAINED_SHARE * _signal(env)) / 4.0)
    with pytest.raises(ValueError, match="reward_noise must be a finite variance"):
        scales.reward_noise(_Env(noise=0.0, reward_noise=-1.0))


def test_the_variance_is_capped_at_the_earlier_default():
    # noise s.d. 20 on a reward of scale ~5: the rule would ask for a variance of about 16 in observed units
    env = _Env(noise=400.0)
    assert scales.reward_noise(env) == pytest.approx(400.0, rel=0.15)
    assert scales.default_obs_noise(env) == scales.FALLBACK_OBS_NOISE


def test_an_env_without_a_functional_form_keeps_the_fallback():
    class Opaque:
        num_actions = K

    assert scales.reward_noise(Opaque()) is None
    assert scales.default_obs_noise(Opaque()) == scales.FALLBACK_OBS_NOISE


def test_make_agent_reads_no_rule_from_the_env_and_keeps_what_it_is_told():
    """Issue 69: the old rule (now benchmarks.harness.oracle_units) is no agent default — HiLoFi and LRKF find their
    variance by the evidence of NOISE_GRID's members, LoFi takes OBS_NOISE capped at 10⁻³, the others OBS_NOISE,
    whatever the env's expected rewards say; an explicit variance, a learned one and a non-Gaussian likelihood
    are kept."""
    import gymnasium as gym

    from banditkit.agents.factory import MAX_OBS_NOISE, NOISE_GRID, OBS_NOISE

    assert MAX_OBS_NOISE["lofi"] == 1e-3  # benchmarks/studies/lofi_noise pre-registered this value
    for name in ("Shuttle", "Mushroom"):
        env = gym.make(f"banditkit/{name}-v0", max_steps=50)
        assert make_agent("hilofi-thompson", env).posterior.hyper["obs_noises"] == NOISE_GRID
        assert make_agent("lofi-thompson", env).likelihood.obs_noise == 1e-3
        assert make_agent("lofi-ucb", env).likelihood.obs_noise == 1e-3  # every policy
        assert make_agent("lrkf-thompson", env).posterior.hyper["obs_noises"] == NOISE_GRID
        assert make_agent("diag_ekf-thompson", env).likelihood.obs_noise == OBS_NOISE
        assert make_agent("hilofi-thompson", env, obs_noise=0.3).likelihood.obs_noise == 0.3
        assert "obs_noises" not in make_agent("hilofi-thompson", env, obs_noise=0.3).posterior.hyper
        # a learned variance starts where BanditAgent starts it, above the misfit it comes down from
        assert make_agent("hilofi-thompson-adaptive_noise", env).likelihood.obs_noise == 0.1


def _shrunk(fb: FunctionalBandit) -> FunctionalBandit:
    """``fb`` with every arm's expected reward pulled towards its level (contexts explain 1 % of the old spread):
    ``R_rule = κ v / s²`` falls below LoFi's cap."""
    e = np.asarray(fb.expected, np.float64)
    level = e.mean(axis=0, keepdims=True) + 2.0
    e = level + 0.01 * (e - e.mean(axis=0, keepdims=True))
    return fb._replace(rewards=jnp.asarray(e, jnp.float32), expected=jnp.asarray(e, jnp.float32))
