"""``make_agent(spec, env)``: an agent from a ``"POSTERIOR-POLICY"`` string and an environment's defaults.

Spec grammar (case-insensitive; ``-`` separates the two parts, ``_`` or ``-`` inside a name both work)::

    "hilofi-thompson"  "lofi-ucb"  "neural_linear-ts"  "replay_sgd-eps_greedy"  "linear-thompson"
    "hilofi"           -> thompson sampling on that posterior
    "eps_greedy"       -> replay_sgd-epsilon_greedy (a point-estimate baseline; likewise "greedy")
    "hilofi-thompson-adaptive_noise"  -> learns its Gaussian observation variance online
                                         (make_agent(..., adaptive_noise=True); Gaussian filter backends only)

The reward model comes from ``env.unwrapped.default_model``:

======================  ===========================================================================
``"lenet5"``            ``LeNet5(out=K)`` (images), multi-output
``"mlp"``               ``MLP(features=(50, 50), out=K)`` (tables), or ``out=1`` on per-arm features
``"embedding_mlp"``     ``EmbeddingMLP(num_items=env.unwrapped.num_items)`` per-arm (KuaiRec)
``"bo_mlp"``            ``MLP(features=(180, 180, 180), out=1)`` (BO surrogate)
======================  ===========================================================================

On the default multi-output model, ``linear``, ``hilofi``, ``neural_linear`` and ``kalman_last_layer`` keep the
head's covariance as ``K`` per-arm blocks (``arms=K``: the same posterior as one dense block, each update touching
one arm's block); ``posterior_kwargs=dict(arms=None)`` keeps one dense block.  The ``linear`` posterior gets a
linear model instead (``MLP(features=(), out=K)``: LinTS / LinUCB); its arms share one noise variance under
``noise="nig"`` (``shared_noise=False``: one per arm, as in seed 002 App. A.1 and Riquelme et al.).
Backend hyper-parameters default to :data:`DEFAULT_HYPER` (small ranks that run on a laptop); pass
``posterior_kwargs=`` / ``policy_kwargs=`` / ``model=`` to override (``subspace_ekf``'s subspace too:
``posterior_kwargs=dict(dim=..., fit_basis=..., sgd=...)``).  A backend that declares ``refit`` (a fit to warm-up
data: ``subspace_ekf``) gets ``warmup_steps = WARMUP_PER_ARM · K`` round-robin rounds unless ``warmup_steps=`` is given.
"""

from __future__ import annotations

from banditkit.agents import priors as _priors
from banditkit.agents import scales as _scales
from banditkit.agents.bandit import BanditAgent, accepts_keyword, backends
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP, EmbeddingMLP, LeNet5
from banditkit.policies import rules as _rules
from banditkit.posteriors import noise as _noise

# Defaults for bandit runs (filtered by each factory's signature, so a missing keyword is never passed).
DEFAULT_HYPER: dict[str, dict] = {
    "ekf": dict(init_cov=1.0),
    "diag_ekf": dict(init_cov=0.01),
    "linear": dict(init_cov=1.0, noise="nig"),
    "lofi": dict(rank=10, init_cov=0.01),
    # init_cov_last: the fallback; on the default multi-output model make_agent sets it from the env's contexts,
    # 1 / E[‖φ(x)‖² + 1] (banditkit.agents.priors.unit_head_prior: the head's prior moves an output by about the
    # largest expected reward; benchmarks/studies/hilofi_gap)
    "hilofi": dict(rank=10, init_cov_hidden=0.01, init_cov_last=1.0),
    # q = 1e-4: with q = 0 a low-rank factor never leaves its initial random rows, so LoLoFi's and LRKF's weights
    # move only inside a fixed random subspace; q = 1e-4 beat q = 0 on every seed of Shuttle, Adult, Mushroom,
    # MovieLens and MNIST (23 / 23) and ranked best of q ∈ {0, 1e-6, 1e-4, 1e-2} × {carry, gain} on average
    # (benchmarks/results/diag_dynamics.md).  HiLoFi stays at q = 0: its dense last layer learns freely, and any
    # q ≥ 1e-4 lost to q = 0 there.
    "lolofi": dict(rank=10, rank_last=10, init_cov_hidden=0.01, init_cov_last=1.0, dynamics_cov=1e-4),
    "lrkf": dict(rank=10, init_cov=0.1, dynamics_cov=1e-4),
    "subspace_ekf": dict(init_cov=1.0),
    "neural_linear": dict(),
    "kalman_last_layer": dict(init_cov=1.0),
    "replay_sgd": dict(),
    "bong": dict(family="dlr", rank=10, init_cov=0.1),
}
DEFAULT_POLICY_HYPER: dict[str, dict] = {
    "epsilon_greedy": dict(epsilon=0.05),
    "ucb": dict(beta=1.0),
}
POINT_ESTIMATE_POLICIES = ("epsilon_greedy", "greedy")
#: the largest Gaussian observation variance make_agent gives a backend, in observed units ``r / reward_scale``, where
#: it differs from :func:`banditkit.agents.scales.default_obs_noise`'s cap: ``R = min(R_rule, cap)``.  LoFi: 10⁻³, a
#: tempering of its predictive spread, not a noise estimate — LoFi keeps an observation's information that does not
#: fit its rank-``L`` factor only through the diagonal of its precision, which forgets the correlations that make a
#: dense direction certain, so its Thompson draws stay wide where the data have pinned the function down (Mushroom,
#: rounds 2000–5000: draw s.d. 0.21 against linear-TS's 0.022; ``benchmarks/studies/lofi_prior``).  Pre-registered
#: and accepted at 20 seeds, paired against ``R_rule`` on six environments (``benchmarks/studies/lofi_noise``).  HiLoFi
#: and LRKF keep ``R_rule`` (at 10⁻³ both collapsed on Mushroom, ``benchmarks/studies/default_noise``).
MAX_OBS_NOISE: dict[str, float] = {"lofi": 1e-3}
#: warm-up rounds per arm for a backend that declares ``refit`` (a fit to warm-up data: the subspace EKF), unless
#: ``warmup_steps=`` is given.  20 (was 10): a study with its adoption rule stated in advance
#: (``benchmarks/studies/subspace_bandit_warmup``) found τ = 20·K ahead of 10·K on MNIST, Fashion-MNIST, Shuttle and
#: Adult, from bandit feedback only — the subspace, fixed after the warm-up, is only as good as the data it is fit to.
WARMUP_PER_ARM = 20
# Backends whose head covariance make_agent keeps as K per-arm blocks (``arms=K``) on the default multi-output model:
# the same posterior as one dense block, at O(P_k²) per update instead of O(K² P_k²) (banditkit.posteriors.arms)
ARM_BLOCK_BACKENDS = ("linear", "hilofi", "neural_linear", "kalman_last_layer")


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def _policy_key(token: str) -> str | None:
    key = _norm(token)
    key = _rules.ALIASES.get(key, key)
    return key if key in _rules.POLICIES or key == "thompson_predictive" else None


#: the spec suffix that learns the Gaussian observation variance online (``make_agent(..., adaptive_noise=True)``)
ADAPTIVE_SUFFIX = _noise.SUFFIX


def _tokens(spec: str) -> tuple[list[str], bool]:
    """The spec's ``-``-separated tokens without a trailing ``adaptive_noise`` (or ``adaptive-noise``), and whether
    it had one."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"agent spec must be a non-empty string like 'hilofi-thompson', got {spec!r}")
    core, learns = _noise.split_suffix(spec)
    return [t for t in core.split("-") if t], learns


def split_noise_suffix(spec: str) -> tuple[str, bool]:
    """``(spec without a trailing -adaptive_noise, whether it had one)``: ``"hilofi-ts-adaptive_noise"`` ->
    ``("hilofi-ts", True)`` (that agent learns its observation variance online)."""
    tokens, learns = _tokens(spec)
    return "-".join(tokens), learns


def parse_spec(spec: str) -> tuple[str, str]:
    """``"POSTERIOR-POLICY[-adaptive_noise]"`` -> ``(posterior name, policy name)`` (see the module docstring;
    :func:`split_noise_suffix` reads the suffix)."""
    tokens = _tokens(spec)[0]
    table = backends()
    # longest posterior prefix that names a backend, the rest is the policy
    for cut in range(len(tokens), 0, -1):
        post = _norm("_".join(tokens[:cut]))
        if post in table:
            rest = tokens[cut:]
            if not rest:
                return post, "thompson"
            pol = _policy_key("_".join(rest))
            if pol is None:
                valid = sorted(_rules.POLICIES) + sorted(_rules.ALIASES)
                raise ValueError(f"unknown policy {'-'.join(rest)!r} in agent spec {spec!r}; policies: {valid}")
            return post, pol
    pol = _policy_key("_".join(tokens))
    if pol in POINT_ESTIMATE_POLICIES:
        return "replay_sgd", pol
    raise ValueError(
        f"cannot read agent spec {spec!r}: write 'POSTERIOR-POLICY' with POSTERIOR one of {sorted(table)} and "
        f"POLICY one of {sorted(_rules.POLICIES)} (aliases {sorted(_rules.ALIASES)}), e.g. 'hilofi-thompson'"
    )


def default_model(env, posterior: str = ""):
    """``(model, per_arm)``: the reward model for ``env`` (see the module docstring)."""
    u = getattr(env, "unwrapped", env)
    k = int(u.num_actions)
    per_arm = bool(getattr(u, "per_arm_features", False))
    kind = getattr(u, "default_model", "mlp")
    out = 1 if per_arm else k
    if posterior == "linear":
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


def _filtered(factory, hyper: dict) -> dict:
    """The entries of ``hyper`` that ``factory`` accepts (all of them if it takes ``**kwargs``)."""
    return {k: v for k, v in hyper.items() if accepts_keyword(factory, k)}


def make_agent(
    spec: str,
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
      spec: ``"POSTERIOR-POLICY"``, optionally ending in ``-adaptive_noise`` (the same as passing
        ``adaptive_noise=True``); unknown names raise ``ValueError`` listing the valid ones.
      env: a Gymnasium env (or its ``unwrapped``) exposing ``num_actions``, ``per_arm_features``,
        ``default_model`` and optionally ``reward_scale`` (else estimated:
        :func:`banditkit.agents.scales.reward_scale`).
      model: override the default reward model (its head covariance stays one dense block: pass
        ``posterior_kwargs=dict(arms=K)`` to keep one block per arm when the head is a ``K``-output ``Dense``).
      posterior_kwargs / policy_kwargs: override :data:`DEFAULT_HYPER` / the policy's defaults.  HiLoFi's head prior
        ``init_cov_last``, unless given, is :func:`banditkit.agents.priors.unit_head_prior` on the default
        multi-output model (``1 / E[‖φ(x)‖² + 1]`` over the env's first contexts; the constant without them).
      agent_class: a :class:`BanditAgent` subclass to build instead (same constructor).
      agent_kwargs: passed to :class:`BanditAgent` (``likelihood``, ``obs_noise``, ``warmup_steps``, ...).
        Without ``obs_noise`` or ``likelihood`` the Gaussian observation variance comes from the env's own rewards:
        :func:`banditkit.agents.scales.default_obs_noise` (``R = min(ν + 0.1 v, 0.1)``: the reward's noise plus a
        tenth of the expected reward's per-arm variance, in observed units), capped per backend by
        :data:`MAX_OBS_NOISE` (LoFi: 10⁻³); a learned variance (``adaptive_noise``) starts at BanditAgent's 0.1.
    """
    post_name, pol_name = parse_spec(spec)
    if split_noise_suffix(spec)[1]:
        if "adaptive_noise" in agent_kwargs and not agent_kwargs["adaptive_noise"]:
            raise ValueError(f"agent spec {spec!r} asks for a learned observation variance but adaptive_noise="
                             f"{agent_kwargs['adaptive_noise']!r} was passed; drop one of the two")
        agent_kwargs.setdefault("adaptive_noise", True)
    u = getattr(env, "unwrapped", env)
    if getattr(u, "task", "bandit") == "bo":
        raise ValueError(
            "this is a Bayesian-optimisation env (continuous actions): use bk.BayesOpt or bk.bo.optimize with "
            f"surrogate={post_name!r}, not a BanditAgent"
        )
    if not hasattr(u, "num_actions"):
        raise TypeError(f"make_agent needs a banditkit environment (with num_actions), got {type(u).__name__}")
    default, per_arm = default_model(u, post_name)
    factory = backends()[post_name]
    hyper = _filtered(factory, DEFAULT_HYPER.get(post_name, {}))
    hyper.update(posterior_kwargs or {})
    if post_name == "hilofi" and model is None and not per_arm and "init_cov_last" not in (posterior_kwargs or {}):
        unit = _priors.unit_head_prior(u, default)  # None without a functional form: the constant stays
        if unit is not None:
            hyper["init_cov_last"] = unit
    if (post_name in ARM_BLOCK_BACKENDS and model is None and not per_arm and "arms" not in (posterior_kwargs or {})
            and hyper.get("rank_last") is None):
        hyper["arms"] = int(u.num_actions)  # the default K-output head's covariance kept as K per-arm blocks
    if pol_name == "thompson_predictive":
        policy = _rules.thompson(variant="predictive")
    else:
        pkw = dict(DEFAULT_POLICY_HYPER.get(pol_name, {}))
        pkw.update(policy_kwargs or {})
        policy = _rules.POLICIES[pol_name](**pkw)
    kwargs = dict(per_arm=per_arm)
    lik = agent_kwargs.get("likelihood")
    if lik is None or isinstance(lik, Gaussian):  # Bernoulli/Categorical observations stay in {0, 1}
        # the scale and the Gaussian variance from one read of the env's own rewards (banditkit.agents.scales); a
        # learned variance keeps BanditAgent's start, which lies above the misfit it comes down from (posteriors.noise)
        scale, obs_noise = _scales.units(u, agent_kwargs.get("reward_scale"))
        kwargs["reward_scale"] = scale
        if lik is None and "obs_noise" not in agent_kwargs and not agent_kwargs.get("adaptive_noise"):
            kwargs["obs_noise"] = min(obs_noise, MAX_OBS_NOISE.get(post_name, obs_noise))
    kwargs.update(agent_kwargs)
    cls = BanditAgent if agent_class is None else agent_class
    if not (isinstance(cls, type) and issubclass(cls, BanditAgent)):
        raise TypeError(f"agent_class must be a BanditAgent subclass, got {cls!r}")
    agent = cls(model if model is not None else default, factory, policy, posterior_kwargs=hyper, **kwargs)
    if "warmup_steps" not in agent_kwargs and agent.posterior.refit is not None:
        # a backend that refits to warm-up data (the subspace EKF) gets 20 round-robin rounds per arm to refit to
        agent.warmup_steps = WARMUP_PER_ARM * int(u.num_actions)
    agent.spec = spec
    if not kwargs.get("adaptive_noise"):  # a wrapped backend keeps the wrapper's name, adaptive_noise(NAME)
        agent.posterior_name = post_name
    return agent
