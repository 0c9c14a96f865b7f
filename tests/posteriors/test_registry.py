"""Backend registrations (``banditkit.posteriors.registry``) and the agents ``make_agent`` builds from them.

The equivalence test pins what ``make_agent`` passes to the agent it builds — reward model, backend factory (or its
noise-mixture wrapper), posterior kwargs, observation variance, head prior, per-arm blocks, warm-up rounds, label —
for every registered backend in several situations, against rules frozen here from the code before the registry
(``agents/factory.py`` at bffe13c: ``DEFAULT_HYPER``, ``ARM_BLOCK_BACKENDS``, ``NOISE_MIXTURE_BACKENDS``,
``MAX_OBS_NOISE``, ``WARMUP_PER_ARM``, the ``"hilofi"`` head-prior and ``"linear"`` model branches).  It passed
against that code before the refactor.
"""

from __future__ import annotations

import numpy as np
import pytest

import banditkit as bk
from banditkit.agents import BanditAgent, make_agent
from banditkit.environments.arrays import ArrayBandit
from banditkit.likelihoods import Bernoulli, Gaussian
from banditkit.models import MLP

K = 3

# --- the rules before the registry, frozen (agents/factory.py and bo/surrogate_nn.py at bffe13c) ----------------
OLD_DEFAULT_HYPER = {
    "ekf": dict(init_cov=1.0),
    "diag_ekf": dict(init_cov=0.01),
    "linear": dict(init_cov=1.0, noise="nig"),
    "lofi": dict(rank=10, init_cov=0.01),
    "hilofi": dict(rank=10, init_cov_hidden=0.01, init_cov_last=1.0),
    "lolofi": dict(rank=10, rank_last=10, init_cov_hidden=0.01, init_cov_last=1.0, dynamics_cov=1e-4),
    "lrkf": dict(rank=10, init_cov=0.1, dynamics_cov=1e-4),
    "subspace_ekf": dict(init_cov=1.0),
    "neural_linear": dict(),
    "kalman_last_layer": dict(init_cov=1.0),
    "replay_sgd": dict(),
    "bong": dict(family="dlr", rank=10, init_cov=0.1),
}
OLD_ARM_BLOCKS = ("linear", "hilofi", "neural_linear", "kalman_last_layer")
OLD_NOISE_MIXTURE = ("hilofi", "lrkf")
OLD_NOISE_GRID = (1e-3, 1e-2, 1e-1)
OLD_MAX_OBS_NOISE = {"lofi": 1e-3}
OLD_SUPPORTED = ("ekf", "diag_ekf", "lofi", "hilofi", "lolofi", "lrkf", "subspace_ekf")
OLD_SURROGATE_DEFAULTS = {
    "hilofi": dict(rank=50, init_cov_hidden=0.1, init_cov_last=1.0),
    "lolofi": dict(rank=50, init_cov_hidden=0.1, init_cov_last=1.0),
    "lrkf": dict(rank=50, init_cov=1e-2),
    "lofi": dict(rank=50, init_cov=1e-2),
    "diag_ekf": dict(init_cov=1e-2),
    "ekf": dict(init_cov=1e-2),
}
OLD_WARMUP_PER_ARM = 20
OLD_REFIT = ("subspace_ekf",)  # backends whose built posterior declares refit (subspace_ekf: without a given basis)
GAUSSIAN_ONLY = ("neural_linear", "linear", "vbll", "online_vbll")  # refuse a Bernoulli likelihood
ALL_BACKENDS = ("ekf", "diag_ekf", "lofi", "hilofi", "lolofi", "lrkf", "subspace_ekf", "neural_linear",
                "kalman_last_layer", "linear", "replay_sgd", "bong", "vbll", "online_vbll", "last_layer_laplace")


class Recorded(BanditAgent):
    """A BanditAgent that keeps the arguments it was built with (``make_agent(agent_class=Recorded)``)."""

    def __init__(self, model, posterior, policy, **kwargs):
        self.given = dict(model=model, posterior=posterior, **kwargs)
        super().__init__(model, posterior, policy, **kwargs)


class PerArm(ArrayBandit):
    """A table bandit whose contexts are one feature row per arm ``(T, K, F)``."""

    per_arm_features = True


def _multi_output() -> ArrayBandit:
    rng = np.random.default_rng(0)
    return ArrayBandit(rng.normal(size=(8, 4)), rng.normal(size=(8, K)))


def _per_arm() -> ArrayBandit:
    rng = np.random.default_rng(0)
    return PerArm(rng.normal(size=(8, K, 4)), rng.normal(size=(8, K)))


# situation: (env kind, make_agent keywords, spec suffix)
SITUATIONS = {
    "default": ("multi", {}, "thompson"),
    "ucb": ("multi", {}, "ucb"),
    "per_arm": ("per_arm", {}, "thompson"),
    "own_model": ("multi", dict(model=MLP(features=(6,), out=K)), "thompson"),
    "head_prior_given": ("multi", dict(posterior_kwargs=dict(init_cov_last=0.5)), "thompson"),
    "arms_given": ("multi", dict(posterior_kwargs=dict(arms=None)), "thompson"),
    "bernoulli": ("multi", dict(likelihood=Bernoulli()), "thompson"),
    "obs_noise": ("multi", dict(obs_noise=0.05), "thompson"),
    "warmup_given": ("multi", dict(warmup_steps=7), "thompson"),
    "adaptive": ("multi", {}, "thompson-adaptive_noise"),
}


def _accepts(factory, key: str) -> bool:
    from banditkit.posteriors.registry import accepts_keyword

    return accepts_keyword(factory, key)


def _expected(name: str, situation: str) -> dict:
    """The configuration the rules before the registry give (agents/factory.py at bffe13c)."""
    kind, kw, policy = SITUATIONS[situation]
    if name in GAUSSIAN_ONLY and isinstance(kw.get("likelihood"), Bernoulli):
        return dict(error="ValueError" if "vbll" in name else "TypeError")
    factory = bk.posteriors.REGISTRY[name]
    given_post = dict(kw.get("posterior_kwargs") or {})
    hyper = {k: v for k, v in OLD_DEFAULT_HYPER.get(name, {}).items() if _accepts(factory, k)}
    hyper.update(given_post)
    per_arm = kind == "per_arm"
    default_multi = "model" not in kw and not per_arm
    head_prior = "unit" if name == "hilofi" and default_multi and "init_cov_last" not in given_post else None
    if name in OLD_ARM_BLOCKS and default_multi and "arms" not in given_post and hyper.get("rank_last") is None:
        hyper["arms"] = K
    adaptive = policy.endswith("adaptive_noise")
    lik = kw.get("likelihood")
    gaussian = lik is None or isinstance(lik, Gaussian)
    fixed = lik is not None or "obs_noise" in kw or adaptive
    factory_name, obs_noise = name, kw.get("obs_noise", 0.1)
    if gaussian and not fixed and name in OLD_NOISE_MIXTURE:
        factory_name = f"noise_mixture({name})"
    elif gaussian and not fixed:
        obs_noise = min(0.1, OLD_MAX_OBS_NOISE.get(name, 0.1))
    refits = name in OLD_REFIT
    warmup = kw.get("warmup_steps", OLD_WARMUP_PER_ARM * K if refits else 0)
    if "model" in kw:
        model = ("MLP", (6,), K)
    elif name == "linear":
        model = ("MLP", (), 1 if per_arm else K)
    else:
        model = ("MLP", (50, 50), 1 if per_arm else K)
    return dict(
        model=model,
        factory=factory_name,
        posterior_kwargs=hyper,
        num_actions=None if per_arm or "model" in kw else K,
        per_arm=per_arm,
        likelihood=type(lik).__name__ if lik is not None else "Gaussian",
        obs_noise=obs_noise if gaussian else None,
        auto_scale=gaussian,
        head_prior=head_prior,
        adaptive=adaptive,
        warmup_steps=warmup,
        refit=refits,
        policy=policy.split("-")[0],
        posterior_name=f"adaptive_noise({name})" if adaptive else name,
        spec=f"{name}-{policy}",
    )


def _observed(agent: Recorded) -> dict:
    g = agent.given
    model = g["model"]
    lik = agent.likelihood
    return dict(
        model=(type(model).__name__, tuple(model.features), model.out),
        factory=g["posterior"].__name__,
        posterior_kwargs=dict(g.get("posterior_kwargs") or {}),
        num_actions=g.get("num_actions"),
        per_arm=agent.per_arm,
        likelihood=type(lik).__name__,
        obs_noise=lik.obs_noise if isinstance(lik, Gaussian) else None,
        auto_scale=agent.auto_scale,
        head_prior=agent.head_prior,
        adaptive=bool(g.get("adaptive_noise")),
        warmup_steps=agent.warmup_steps,
        refit=agent.posterior.refit is not None,
        policy=agent.policy.name,
        posterior_name=agent.posterior_name,
        spec=agent.spec,
    )


def _cases():
    for name in ALL_BACKENDS:
        for situation in SITUATIONS:
            if situation == "adaptive" and name not in OLD_SUPPORTED:
                continue
            given = SITUATIONS[situation][1].get("posterior_kwargs", {})
            if not all(_accepts(bk.posteriors.REGISTRY[name], k) for k in given):
                continue  # the backend has no such keyword
            yield name, situation


def test_make_agent_builds_the_agents_of_the_rules_before_the_registry():
    """Every backend × situation: make_agent's agent equals the frozen rules' (the whole table in one test: building
    an agent costs milliseconds; a parametrised test would cost its collection more)."""
    envs = {"multi": _multi_output(), "per_arm": _per_arm()}
    assert set(bk.posteriors.REGISTRY) == set(ALL_BACKENDS)  # a new backend: add its row to the rules above
    mismatches = []
    for name, situation in _cases():
        kind, kw, policy = SITUATIONS[situation]
        try:
            got = _observed(make_agent(f"{name}-{policy}", envs[kind], agent_class=Recorded, **kw))
        except (TypeError, ValueError) as e:  # the backend refuses the situation (with its own clear message)
            got = dict(error=type(e).__name__)
        want = _expected(name, situation)
        if got != want:
            diff = {k: (got.get(k), want.get(k)) for k in {*got, *want} if got.get(k) != want.get(k)}
            mismatches.append(f"{name}/{situation}: {diff}")
    assert not mismatches, "\n".join(mismatches)


def test_adaptive_noise_refuses_what_is_no_gaussian_filter():
    env = _multi_output()
    for name in sorted(set(ALL_BACKENDS) - set(OLD_SUPPORTED)):
        with pytest.raises(ValueError, match="not a Gaussian filter"):
            make_agent(f"{name}-thompson-adaptive_noise", env)


def test_a_given_subspace_basis_turns_the_warmup_off():
    """subspace_ekf refits to warm-up data only without a given basis (its registration's ``refit`` function)."""
    env = _multi_output()
    learned = make_agent("subspace_ekf-thompson", env)
    fixed = make_agent("subspace_ekf-thompson", env, posterior_kwargs=dict(basis_rows=np.eye(2, 10, dtype=np.float32)))
    assert learned.posterior.refit is not None and learned.warmup_steps == OLD_WARMUP_PER_ARM * K
    assert fixed.posterior.refit is None and fixed.warmup_steps == 0 and fixed.warmup_rounds == 0


# --- the registry itself --------------------------------------------------------------------------------------------
def test_the_derived_views_equal_the_tables_they_replace():
    from banditkit.agents import factory as F
    from banditkit.bo import surrogate_nn
    from banditkit.posteriors import noise, registry

    assert {k: v for k, v in F.DEFAULT_HYPER.items() if k in OLD_DEFAULT_HYPER} == OLD_DEFAULT_HYPER
    assert all(not v for k, v in F.DEFAULT_HYPER.items() if k not in OLD_DEFAULT_HYPER)  # the rest: the factory's own
    assert dict(surrogate_nn.SURROGATE_DEFAULTS) == OLD_SURROGATE_DEFAULTS
    assert dict(F.MAX_OBS_NOISE) == OLD_MAX_OBS_NOISE
    assert set(F.ARM_BLOCK_BACKENDS) == set(OLD_ARM_BLOCKS) and set(F.NOISE_MIXTURE_BACKENDS) == set(OLD_NOISE_MIXTURE)
    assert set(noise.SUPPORTED) == set(OLD_SUPPORTED) and F.NOISE_GRID == OLD_NOISE_GRID
    assert set(registry.names(learns_own_noise=True)) == {"neural_linear", "linear", "vbll", "online_vbll"}
    with pytest.raises(TypeError):
        F.DEFAULT_HYPER["hilofi"]["rank"] = 3  # read-only: a registration is changed where it is declared


def test_every_registration_resolves_by_name():
    from banditkit.posteriors import registry

    assert tuple(bk.posteriors.REGISTRY) == registry.names()
    for name in registry.names():
        reg = registry.backend(name)
        assert bk.posteriors.get(name) is reg.factory is bk.posteriors.REGISTRY[name]
        assert bk.posteriors.get(f" {name.upper().replace('_', '-')} ") is reg.factory  # one normalisation
        assert bk.posteriors.name_of(reg.factory) == name and registry.of(reg.factory) is reg
        if reg.gaussian_filter:
            assert bk.posteriors.name_of(bk.posteriors.get(f"{name}-adaptive_noise")) == f"{name}-adaptive_noise"


def test_unknown_names_and_capabilities_error_clearly():
    from banditkit.posteriors import registry

    with pytest.raises(ValueError, match=r"unknown posterior backend 'nope'; choose one of \['bong'"):
        registry.backend("nope")
    with pytest.raises(ValueError, match="unknown posterior backend"):
        bk.posteriors.get("nope-adaptive_noise")
    with pytest.raises(ValueError, match="unknown posterior backend"):
        bk.agents.factory.default_model(_multi_output(), "nope")
    assert registry.find("nope") is None and registry.of(print) is None
    with pytest.raises(ValueError, match="unknown backend capability 'flies'; a Backend declares"):
        registry.names(flies=True)
    with pytest.raises(ValueError, match="unknown backend capability"):
        registry.table("flies")
    with pytest.raises(TypeError, match="a string like 'hilofi'"):
        registry.normalise(3)


def test_a_registration_is_checked():
    from banditkit.posteriors import registry
    from banditkit.posteriors.registry import Backend

    ekf = bk.posteriors.ekf
    with pytest.raises(ValueError, match=r"bandit_defaults names \['rank'\], which its factory does not accept"):
        Backend(name="my_ekf", factory=ekf, bandit_defaults=dict(rank=3))
    with pytest.raises(ValueError, match="lower case with '_' inside"):
        Backend(name="My-EKF", factory=ekf)
    with pytest.raises(ValueError, match="not both"):
        Backend(name="my_ekf", factory=ekf, gaussian_filter=True, learns_own_noise=True)
    with pytest.raises(ValueError, match="noise_cap must be a variance > 0"):
        Backend(name="my_ekf", factory=ekf, noise_cap=0.0)
    with pytest.raises(ValueError, match="is registered already"):
        registry.register(Backend(name="ekf", factory=bk.posteriors.lofi))
    with pytest.raises(TypeError, match="register takes a Backend"):
        registry.register(ekf)
    assert registry.backend("hilofi").bandit_defaults["rank"] == 10 and registry.backend("hilofi").bo_defaults[
        "rank"] == 50  # HiLoFi's three ranks, each once: make_agent's, BayesOpt's, the factory's own (20)
    assert bk.agents.make_agent("hilofi", _multi_output()).posterior.hyper["rank"] == 10
    opt = bk.BayesOpt([(0.0, 1.0)], surrogate="HiLoFi", features=(8,), n_candidates=16, direction="minimize")
    assert opt.surrogate_kwargs == dict(rank=50, init_cov_hidden=0.1, init_cov_last=1.0, last_layer="head")


def test_the_docs_page_registers_a_backend_that_works_everywhere(capsys):
    """docs/adding_a_backend.md runs as written: its backend resolves by name, make_agent applies its defaults and
    adaptive_noise wraps it (then the test removes it again)."""
    import pathlib
    import re

    from banditkit.posteriors import registry

    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "adding_a_backend.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    ns: dict = {"__name__": "docs_adding_a_backend"}
    try:
        for i, block in enumerate(blocks):
            exec(compile(block, f"docs/adding_a_backend.md block {i + 1}", "exec"), ns)  # noqa: S102 - our docs
        assert capsys.readouterr().out.split() == ["tempered_ekf", "2.0", "adaptive_noise(tempered_ekf)"]
        assert bk.posteriors.get("Tempered-EKF") is ns["tempered_ekf"]
        assert "tempered_ekf" in bk.posteriors.noise.SUPPORTED
    finally:
        registry.unregister("tempered_ekf")
    assert "tempered_ekf" not in bk.posteriors.REGISTRY
