"""The simulator's units: a reward scale and observation variance read from an environment's *expected* rewards.

**Not an agent default, and never one again.**  Until issue 69 ``make_agent`` set these from
``env.unwrapped.functional(0, 256)`` — the simulator's answers, which no deployed agent has.  ``make_agent`` now learns
the scale from the rewards it observes and mixes observation variances by their evidence
(:mod:`banditkit.agents.factory`); this module stays in the benchmarks so the studies that ran with the old defaults
(``default_noise``, ``lofi_noise``, ``hilofi_gap``, ...) re-run as they were, and so the old defaults can be raced
against the honest ones (``benchmarks/studies/honest_defaults``).

What follows is the old rule as it was.

An agent observes ``y = r / s`` (``s`` the reward scale) through ``Gaussian(R)``.  Both numbers come from what the
environment declares, or from its own episode arrays (``env.unwrapped.functional(0, n)``: the realised and the
expected reward of every arm over the first ``n`` rounds, the noise pre-drawn), so one rule serves rewards in
``{0, 1}``, ratings in ``1..5`` and payoffs of ``±35`` without per-environment settings:

``s``  the env's ``reward_scale`` attribute, else ``max_{t,a} |E r_{t,a}|`` (:func:`reward_scale`).

``R``  (:func:`default_obs_noise`), in the units of ``y``::

        R = min(ν + κ · v, R₀),   ν = mean_{t,a} (r_{t,a} − E r_{t,a})² / s²,   v = mean_a Var_t(E r_{t,a}) / s²,

    ``ν`` the reward's own noise variance (the env's ``reward_noise`` attribute, a variance in reward units, takes
    its place when declared) and ``v`` the per-arm variance of the expected reward over contexts — the signal a
    reward model has to explain.  ``κ v`` is the share of that signal a network fitted online is not expected to
    explain (``κ = 0.1``: a prior ``R²`` of 0.9), which a linearised filter meets as noise: with ``R = ν`` alone a
    noise-free environment (``ν = 0``) would ask for an exact fit of every observation, and the filter's
    linearisation error would be taken for signal.  ``R₀ = 0.1`` (``FALLBACK_OBS_NOISE``, the agents' variance
    before this rule) caps it: with rewards scaled to ``max |E r| = 1`` a larger variance (noise s.d. above a third
    of the reward's range) makes the Thompson draws wide and the filter's steps small, and on Mushroom, whose noise
    is ``ν = 0.42``, ``R = ν + κ v = 0.45`` lost to 0.1 with each of HiLoFi-, LoFi- and LRKF-TS
    (``benchmarks/studies/default_noise``).  An environment without a functional form or a declared noise keeps
    ``R₀``.
"""

from __future__ import annotations

import numpy as np

#: the share of the expected reward's per-arm variance taken as unexplained by the reward model (a prior R² of 0.9)
UNEXPLAINED_SHARE = 0.1
#: the largest variance the rule returns, and the one kept when the environment offers neither a declaration nor a
#: functional form (the agents' default before the rule)
FALLBACK_OBS_NOISE = 0.1
#: rounds of ``functional(0, ROUNDS)`` read to estimate the reward's scale and noise
ROUNDS = 256
#: the smallest variance the rule returns (keeps the Gaussian likelihood proper on a constant-reward environment)
MIN_OBS_NOISE = 1e-6


def _unwrapped(env):
    return getattr(env, "unwrapped", env)


def _episode(u, rounds: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(rewards, expected)``, each ``(rounds, K)``, of ``u.functional(0, rounds)``; ``None`` when unavailable."""
    if not hasattr(u, "functional"):
        return None
    try:
        fb = u.functional(0, rounds)
        rewards, expected = np.asarray(fb.rewards, np.float64), np.asarray(fb.expected, np.float64)
    except Exception:  # noqa: BLE001 - a scale estimate must never stop agent construction
        return None
    if rewards.shape != expected.shape or rewards.size == 0 or not np.all(np.isfinite(rewards)):
        return None
    return rewards.reshape(rewards.shape[0], -1), expected.reshape(expected.shape[0], -1)


def reward_scale(env, rounds: int = ROUNDS, _ep=None) -> float:
    """The env's ``reward_scale`` attribute, else ``max |expected reward|`` over the first ``rounds`` rounds of
    ``functional(0, rounds)`` (1.0 when that is unavailable or zero).  Agents observe ``r / reward_scale``, so one
    set of default hyper-parameters (unit-scale priors) suits envs whose rewards are ±35 or ±1."""
    u = _unwrapped(env)
    declared = getattr(u, "reward_scale", None)
    if declared is not None:
        return float(declared)
    ep = _episode(u, rounds) if _ep is None else _ep
    if ep is None:
        return 1.0
    scale = float(np.max(np.abs(ep[1])))
    return scale if np.isfinite(scale) and scale > 0 else 1.0


def reward_noise(env, rounds: int = ROUNDS, _ep=None) -> float | None:
    """The variance of a reward about its expectation, in reward units: the env's ``reward_noise`` attribute, else
    ``mean_{t,a} (r − E r)²`` over ``functional(0, rounds)``; ``None`` when the env offers neither."""
    u = _unwrapped(env)
    declared = getattr(u, "reward_noise", None)
    if declared is not None:
        value = float(declared)
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{type(u).__name__}.reward_noise must be a finite variance >= 0, got {declared!r}")
        return value
    ep = _episode(u, rounds) if _ep is None else _ep
    if ep is None:
        return None
    return float(np.mean((ep[0] - ep[1]) ** 2))


def default_obs_noise(env, scale: float | None = None, rounds: int = ROUNDS) -> float:
    """``R = min(ν + κ v, R₀)`` in the units ``r / scale`` (module docstring); ``R₀ = FALLBACK_OBS_NOISE`` without a
    functional form.  ``scale`` defaults to :func:`reward_scale`."""
    return units(env, scale, rounds)[1]


def units(env, scale: float | None = None, rounds: int = ROUNDS) -> tuple[float, float]:
    """``(reward scale, observation variance)``: :func:`reward_scale` (unless ``scale`` is given) and
    :func:`default_obs_noise` from one read of the env's episode (``make_agent`` calls this)."""
    u = _unwrapped(env)
    ep = _episode(u, rounds)
    s = reward_scale(u, rounds, _ep=ep) if scale is None else float(scale)
    noise = reward_noise(u, rounds, _ep=ep)
    if noise is None or ep is None:  # without the episode the signal's variance is unknown
        return s, FALLBACK_OBS_NOISE
    signal = float(np.mean(np.var(ep[1], axis=0)))
    value = (noise + UNEXPLAINED_SHARE * signal) / s**2
    return s, float(np.clip(value, MIN_OBS_NOISE, FALLBACK_OBS_NOISE))


#: make_agent's per-backend cap on the rule's variance before issue 69 (LoFi: ``benchmarks/studies/lofi_noise``)
MAX_OBS_NOISE_BEFORE = {"lofi": 1e-3}


def make_agent_as_before(spec: str, env, **kwargs):
    """``make_agent(spec, env, **kwargs)`` with the defaults it had before issue 69, read from the simulator: the
    reward scale and the observation variance of :func:`units` (LoFi's capped at 10⁻³), HiLoFi's head prior from the
    env's first 256 contexts (:func:`banditkit.agents.priors.unit_head_prior`) and a fixed scale that never moves the
    posterior.  For the studies that ran with those defaults (their tables re-run as they were) and to race the old
    defaults against the honest ones; what ``kwargs`` sets is kept."""
    from banditkit.agents import make_agent, priors
    from banditkit.agents.factory import default_model, parse_spec, split_noise_suffix
    from banditkit.likelihoods import Gaussian

    post, _ = parse_spec(spec)
    learns = split_noise_suffix(spec)[1] or kwargs.get("adaptive_noise")
    u = _unwrapped(env)
    given = dict(kwargs.get("posterior_kwargs") or {})
    lik = kwargs.get("likelihood")
    out = dict(kwargs)
    if lik is None or isinstance(lik, Gaussian):
        scale, noise = units(u, kwargs.get("reward_scale"))
        out["reward_scale"] = scale
        if lik is None and "obs_noise" not in kwargs and not learns:
            out["obs_noise"] = min(noise, MAX_OBS_NOISE_BEFORE.get(post, noise))
    per_arm = bool(getattr(u, "per_arm_features", False))
    if post == "hilofi" and kwargs.get("model") is None and not per_arm and "init_cov_last" not in given:
        unit = priors.unit_head_prior(u, default_model(u, post)[0])
        if unit is not None:
            out["posterior_kwargs"] = {**given, "init_cov_last": unit}
    return make_agent(spec, env, **out)
