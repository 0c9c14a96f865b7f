"""``make_agent(spec, env)``: an agent from a ``"POSTERIOR-POLICY"`` string and an environment's defaults.

Spec grammar (case-insensitive; ``-`` separates the two parts, ``_`` or ``-`` inside a name both work)::

    "hilofi-thompson"  "lofi-ucb"  "neural_linear-ts"  "replay_sgd-eps_greedy"  "linear-thompson"
    "hilofi"           -> thompson sampling on that posterior
    "eps_greedy"       -> replay_sgd-epsilon_greedy (a point-estimate baseline; likewise "greedy")
    "hilofi-thompson-adaptive_noise"  -> learns its Gaussian observation variance online
                                         (make_agent(..., adaptive_noise=True); Gaussian filter backends only)

Nothing about the environment's rewards is read (``../shared/API.md`` §14): the agent learns the reward's scale from
the rewards it observes, HiLoFi and LRKF find their observation variance from the data by the evidence of a few
members, and HiLoFi its head prior from the first context it sees.  The reward model comes from
``env.unwrapped.default_model`` (``"mlp"`` when the env does not say):

======================  ===========================================================================
``"lenet5"``            ``LeNet5(out=K)`` (images), multi-output
``"mlp"``               ``MLP(features=(50, 50), out=K)`` (tables), or ``out=1`` on per-arm features
``"embedding_mlp"``     ``EmbeddingMLP(num_items=env.unwrapped.num_items)`` per-arm (KuaiRec)
``"bo_mlp"``            ``MLP(features=(180, 180, 180), out=1)`` (BO surrogate)
======================  ===========================================================================

What a backend gets is read from its registration (:class:`banditkit.posteriors.registry.Backend`), never from its
name: its ``bandit_defaults`` (small ranks that run on a laptop; :data:`DEFAULT_HYPER` lists them), and its
capabilities.  On the default multi-output model a backend with ``arm_blocks`` (``linear``, ``hilofi``,
``neural_linear``, ``kalman_last_layer``) keeps the head's covariance as ``K`` per-arm blocks (``arms=K``: the same
posterior as one dense block, each update touching one arm's block; ``posterior_kwargs=dict(arms=None)`` keeps one
dense block), and one with ``head_prior="unit"`` (HiLoFi) has its head prior set by the agent.  A backend with
``linear_model`` (``linear``) gets a linear model instead (``MLP(features=(), out=K)``: LinTS / LinUCB); its arms
share one noise variance under ``noise="nig"`` (``shared_noise=False``: one per arm, as in seed 002 App. A.1 and
Riquelme et al.).  Pass ``posterior_kwargs=`` / ``policy_kwargs=`` / ``model=`` to override (``subspace_ekf``'s
subspace too: ``posterior_kwargs=dict(dim=..., fit_basis=..., sgd=...)``).  A backend whose posterior declares
``refit`` (a fit to warm-up data: ``subspace_ekf`` without a given basis) gets ``warmup_steps = WARMUP_PER_ARM · K``
round-robin rounds unless ``warmup_steps=`` is given.
"""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym

from banditkit.agents.bandit import AUTO, BanditAgent
from banditkit.agents.spec import AgentSpec
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP, EmbeddingMLP, LeNet5
from banditkit.policies import rules as _rules
from banditkit.posteriors import noise as _noise
from banditkit.posteriors import registry
from banditkit.posteriors.mixture import noise_mixture

#: make_agent's backend defaults by name: a read-only view of each registration's ``bandit_defaults``
#: (:mod:`banditkit.posteriors.registry`), kept for compatibility
DEFAULT_HYPER: Mapping[str, Mapping] = registry.table("bandit_defaults")
DEFAULT_POLICY_HYPER: dict[str, dict] = {
    "epsilon_greedy": dict(epsilon=0.05),
    "ucb": dict(beta=1.0),
}
#: The Gaussian observation variance of the filter backends, in observed units ``r / s`` (``s`` the reward scale the
#: agent learns from the rewards it observes, ``BanditAgent(reward_scale="auto")``).  Nothing about the environment
#: is read: a backend registered with ``noise_mixture`` runs one member per variance of :data:`NOISE_GRID`, weighted
#: by each member's one-step predictive evidence (:func:`banditkit.posteriors.mixture.noise_mixture`: the data pick
#: the variance); another takes :data:`OBS_NOISE` capped by its registration's ``noise_cap`` (LoFi: 10⁻³).
#: Pre-registered and measured against the old oracle-read rule in ``benchmarks/studies/honest_defaults``.
NOISE_GRID: tuple[float, ...] = (1e-3, 1e-2, 1e-1)
OBS_NOISE = 0.1
#: read-only views of the registrations, kept for compatibility: the backends with ``noise_mixture``, each capped
#: backend's ``noise_cap``, and the backends with ``arm_blocks``
NOISE_MIXTURE_BACKENDS = registry.names(noise_mixture=True)
MAX_OBS_NOISE: Mapping[str, float] = registry.table("noise_cap", declared=True)
ARM_BLOCK_BACKENDS = registry.names(arm_blocks=True)
#: warm-up rounds per arm for a backend that declares ``refit`` (a fit to warm-up data: the subspace EKF), unless
#: ``warmup_steps=`` is given.  20: a study with its adoption rule stated in advance
#: (``benchmarks/studies/subspace_bandit_warmup``) found τ = 20·K ahead of 10·K on MNIST, Fashion-MNIST, Shuttle and
#: Adult, from bandit feedback only — the subspace, fixed after the warm-up, is only as good as the data it is fit to.
WARMUP_PER_ARM = 20


#: the spec suffix that learns the Gaussian observation variance online (``make_agent(..., adaptive_noise=True)``)
ADAPTIVE_SUFFIX = _noise.SUFFIX


def split_noise_suffix(spec: str | AgentSpec) -> tuple[str, bool]:
    """``(spec without a trailing -adaptive_noise, whether it had one)``: ``"hilofi-ts-adaptive_noise"`` ->
    ``("hilofi-ts", True)`` (that agent learns its observation variance online)."""
    if isinstance(spec, AgentSpec):
        return f"{spec.posterior}-{spec.policy}", spec.adaptive_noise
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"agent spec must be a non-empty string like 'hilofi-thompson', got {spec!r}")
    core, learns = _noise.split_suffix(spec)
    return "-".join(t for t in core.split("-") if t), learns


def parse_spec(spec: str | AgentSpec) -> tuple[str, str]:
    """``"POSTERIOR-POLICY[-adaptive_noise]"`` -> ``(posterior name, policy name)`` (:class:`AgentSpec` reads it;
    :func:`split_noise_suffix` reads the suffix)."""
    parsed = AgentSpec.parse(spec)
    return parsed.posterior, parsed.policy


def _num_actions(u) -> int:
    """K from the env's ``num_actions``, else its ``Discrete`` action space (a plain Gymnasium env)."""
    k = getattr(u, "num_actions", None)
    if k is None:
        space = getattr(u, "action_space", None)
        if not isinstance(space, gym.spaces.Discrete):
            raise TypeError(f"make_agent needs a bandit env with a Discrete action space (or num_actions), got "
                            f"{type(u).__name__} with action_space {space!r}")
        k = int(space.n)
    return int(k)


def default_model(env, posterior: str = ""):
    """``(model, per_arm)``: the reward model for ``env`` (see the module docstring); a backend registered with
    ``linear_model`` (``"linear"``) gets a linear one.  Reads only the env's structure: the arm count,
    ``per_arm_features``, ``default_model`` (``"mlp"`` when absent) and ``num_items``."""
    u = getattr(env, "unwrapped", env)
    k = _num_actions(u)
    per_arm = bool(getattr(u, "per_arm_features", False))
    kind = getattr(u, "default_model", "mlp")
    out = 1 if per_arm else k
    if posterior and registry.backend(posterior).linear_model:
        return MLP(features=(), out=out), per_arm
    if kind == "lenet5":
        return LeNet5(out=out), per_arm
    if kind == "embedding_mlp":
        num_items = getattr(u, "num_items", None)
        if num_items is None:
            raise ValueError("the env's default model is 'embedding_mlp' but env.unwrapped.num_items is missing")
        return EmbeddingMLP(num_items=int(num_items), out=1), True
    if kind == "bo_mlp":
        return MLP(features=(180, 180, 180), out=1), per_arm
    if kind == "mlp":
        return MLP(features=(50, 50), out=out), per_arm
    raise ValueError(f"unknown default_model {kind!r}; expected one of lenet5, mlp, embedding_mlp, bo_mlp")


def make_agent(
    spec: str | AgentSpec,
    env,
    *,
    model=None,
    posterior_kwargs: dict | None = None,
    policy_kwargs: dict | None = None,
    agent_class: type[BanditAgent] | None = None,
    **agent_kwargs,
) -> BanditAgent:
    """Agent for ``env`` from a spec string (``"hilofi-thompson"``, ``"lofi-ucb"``, ``"eps_greedy"``, ...).

    Args:
      spec: an :class:`~banditkit.agents.spec.AgentSpec` or its text ``"POSTERIOR-POLICY"``, optionally ending in
        ``-adaptive_noise`` (the same as passing ``adaptive_noise=True``); unknown names raise ``ValueError`` listing
        the valid ones.
      env: a Gymnasium env (or its ``unwrapped``): only its structure is read — the arm count (``num_actions`` or a
        ``Discrete`` action space), ``per_arm_features``, ``default_model``, ``num_items``.  Never its rewards, expected
        rewards or contexts: the agent is the same for a shipped env and for an oracle-free twin with the same spaces.
      model: override the default reward model (its head covariance stays one dense block: pass
        ``posterior_kwargs=dict(arms=K)`` to keep one block per arm when the head is a ``K``-output ``Dense``).
      posterior_kwargs / policy_kwargs: override the backend's ``bandit_defaults`` / the policy's defaults.  The
        head prior ``init_cov_last`` of a backend registered with ``head_prior="unit"`` (HiLoFi), unless given, is
        set by the agent at ``init`` from the first context it sees on the default multi-output model
        (``1 / (‖φ(x_0)‖² + 1)``, ``BanditAgent(head_prior="unit")``).
      agent_class: a :class:`BanditAgent` subclass to build instead (same constructor).
      agent_kwargs: passed to :class:`BanditAgent` (``likelihood``, ``obs_noise``, ``reward_scale``,
        ``warmup_steps``, ...).  With a Gaussian likelihood the reward scale is learned from the rewards observed
        (``reward_scale="auto"``: ``r / max |r|`` so far) unless ``reward_scale=`` is given; without ``obs_noise`` or
        ``likelihood`` the observation variance is found from the data — a backend registered with
        ``noise_mixture`` (HiLoFi, LRKF) mixes one member per variance of :data:`NOISE_GRID` by their predictive
        evidence — or is :data:`OBS_NOISE` capped by the registration's ``noise_cap`` (LoFi: 10⁻³); a learned
        variance (``adaptive_noise``) starts at BanditAgent's 0.1.
    """
    text = spec if isinstance(spec, str) else str(spec)  # the agent's label: the user's own words
    spec = AgentSpec.parse(spec)
    post_name, pol_name = spec.posterior, spec.policy
    if spec.adaptive_noise:
        if "adaptive_noise" in agent_kwargs and not agent_kwargs["adaptive_noise"]:
            raise ValueError(f"agent spec {str(spec)!r} asks for a learned observation variance but adaptive_noise="
                             f"{agent_kwargs['adaptive_noise']!r} was passed; drop one of the two")
        agent_kwargs.setdefault("adaptive_noise", True)
    u = getattr(env, "unwrapped", env)
    if getattr(u, "task", "bandit") == "bo":
        raise ValueError(
            "this is a Bayesian-optimisation env (continuous actions): use bk.BayesOpt or bk.bo.optimize with "
            f"surrogate={post_name!r}, not a BanditAgent"
        )
    k = _num_actions(u)
    default, per_arm = default_model(u, post_name)
    backend = registry.backend(post_name)
    factory = backend.factory
    given = dict(posterior_kwargs or {})
    hyper = {**backend.bandit_defaults, **given}  # the registration checked that the factory takes every default
    default_head = model is None and not per_arm  # the env's default model, one output per arm
    kwargs: dict = dict(per_arm=per_arm)
    if backend.head_prior is not None and default_head and "init_cov_last" not in given:
        kwargs["head_prior"] = backend.head_prior  # set at init from the first context the agent sees
    if backend.arm_blocks and default_head and "arms" not in given and hyper.get("rank_last") is None:
        hyper["arms"] = k  # the default K-output head's covariance kept as K per-arm blocks
    if pol_name == "thompson_predictive":
        policy = _rules.thompson(variant="predictive")
    else:
        pkw = dict(DEFAULT_POLICY_HYPER.get(pol_name, {}))
        pkw.update(policy_kwargs or {})
        policy = _rules.POLICIES[pol_name](**pkw)
    lik = agent_kwargs.get("likelihood")
    if lik is None or isinstance(lik, Gaussian):  # Bernoulli/Categorical observations stay in {0, 1}
        # the scale learned from the rewards the agent observes; the Gaussian variance from the data by evidence
        # (a noise mixture) or the constant (NOISE_GRID, OBS_NOISE); a learned variance keeps BanditAgent's start
        kwargs["reward_scale"] = AUTO
        fixed = lik is not None or "obs_noise" in agent_kwargs or agent_kwargs.get("adaptive_noise")
        if not fixed and backend.noise_mixture:
            factory = noise_mixture(factory, NOISE_GRID)
        elif not fixed:
            kwargs["obs_noise"] = OBS_NOISE if backend.noise_cap is None else min(OBS_NOISE, backend.noise_cap)
    if backend.refits(hyper):
        # a backend that refits to warm-up data (the subspace EKF) gets 20 round-robin rounds per arm to refit to
        kwargs["warmup_steps"] = WARMUP_PER_ARM * k
    kwargs["spec"] = text
    if not agent_kwargs.get("adaptive_noise"):  # a wrapped backend keeps the wrapper's name, adaptive_noise(NAME)
        kwargs["posterior_name"] = post_name
    kwargs.update(agent_kwargs)
    cls = BanditAgent if agent_class is None else agent_class
    if not (isinstance(cls, type) and issubclass(cls, BanditAgent)):
        raise TypeError(f"agent_class must be a BanditAgent subclass, got {cls!r}")
    # the default model has K outputs; a user's model says how many it has (found at init)
    return cls(model if model is not None else default, factory, policy, posterior_kwargs=hyper,
               num_actions=None if not default_head else k, **kwargs)
