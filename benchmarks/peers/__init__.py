"""The contextual-bandit libraries people install, as peers of banditkit's agents: one interface and a registry.

A peer is an online learner over a shared context ``x`` (``(d,)``, the env's observation) and ``K`` arms::

    learner = PEERS[name].make(num_actions=K, seed=s)
    round t:  a_t = learner.choose(x_t)           # an int in [0, K)
              learner.update(x_t, a_t, r_t)       # r_t = the chosen arm's reward only (bandit feedback)

:func:`benchmarks.peers.play.run_peers` plays each peer on ``env.unwrapped.functional(seed, steps)`` — the contexts
and pre-drawn rewards banditkit's compiled runner feeds its agents, in float32 as they see them — and returns the
harness's :class:`~benchmarks.harness.run.Result` with the runner's columns, so the suites' tables, merges and plots
treat a peer as one more agent.  Each peer's library is imported only when the peer is made (:func:`missing` says
which cannot be here); the modules, one per library: :mod:`.vw` (Vowpal Wabbit), :mod:`.mabwiser` (MABWiser),
:mod:`.contextualbandits` (contextualbandits).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Learner(Protocol):
    """One seed's peer: ``choose`` an arm for a context, then ``update`` with that arm's reward."""

    def choose(self, x: np.ndarray) -> int: ...

    def update(self, x: np.ndarray, action: int, reward: float) -> None: ...


@dataclass(frozen=True)
class PeerSpec:
    """A registered peer: ``make(num_actions, seed) -> Learner``; ``library`` names the library for tables,
    ``module`` is its import name and ``requirement`` the pip requirement that installs it; ``config`` says in words
    what the peer is set to."""

    name: str
    library: str
    module: str
    requirement: str
    config: str
    make: Callable[..., Learner]


def _lazy(module: str, attr: str, **kwargs) -> Callable[..., Learner]:
    """``make(num_actions, seed)`` that imports ``benchmarks.peers.MODULE`` (and so its library) only when called."""

    def make(num_actions: int, seed: int) -> Learner:
        factory = getattr(importlib.import_module(f"benchmarks.peers.{module}"), attr)
        return factory(num_actions=num_actions, seed=seed, **kwargs)

    return make


#: pip requirements of the peer libraries (the ``[bench]`` extra)
REQUIREMENTS = {"vowpalwabbit": "vowpalwabbit>=9.10", "mabwiser": "mabwiser>=2.7",
                "contextualbandits": "contextualbandits>=0.3.30"}

PEERS: dict[str, PeerSpec] = {
    "vw_squarecb": PeerSpec(
        "vw_squarecb", "Vowpal Wabbit", "vowpalwabbit", REQUIREMENTS["vowpalwabbit"],
        "Vowpal Wabbit `--cb_explore_adf --squarecb -q sa` (SquareCB, its defaults gamma_scale 10, gamma_exponent "
        "0.5; cost = -reward)",
        _lazy("vw", "VWLearner", explore="--squarecb")),
    "vw_egreedy": PeerSpec(
        "vw_egreedy", "Vowpal Wabbit", "vowpalwabbit", REQUIREMENTS["vowpalwabbit"],
        "Vowpal Wabbit `--cb_explore_adf --epsilon 0.05 -q sa` (epsilon-greedy, its default epsilon; cost = -reward)",
        _lazy("vw", "VWLearner", explore="--epsilon 0.05")),
    "mabwiser_lints": PeerSpec(
        "mabwiser_lints", "MABWiser", "mabwiser", REQUIREMENTS["mabwiser"],
        "MABWiser `LearningPolicy.LinTS()` (its defaults: alpha 1, l2_lambda 1, no scaling)",
        _lazy("mabwiser", "MABWiserLearner", policy="LinTS")),
    "mabwiser_linucb": PeerSpec(
        "mabwiser_linucb", "MABWiser", "mabwiser", REQUIREMENTS["mabwiser"],
        "MABWiser `LearningPolicy.LinUCB()` (its defaults: alpha 1, l2_lambda 1, no scaling)",
        _lazy("mabwiser", "MABWiserLearner", policy="LinUCB")),
    "cb_lints": PeerSpec(
        "cb_lints", "contextualbandits", "contextualbandits", REQUIREMENTS["contextualbandits"],
        "contextualbandits `online.LinTS(sample_from=\"ci\")` (a ridge per arm with intercept, lambda 1, v_sq 1: its "
        "defaults; the default `sample_from=\"coef\"` draws from the wrong covariance in 0.3.30)",
        _lazy("contextualbandits", "LinTSLearner")),
    "cb_bootstrapped_ts": PeerSpec(
        "cb_bootstrapped_ts", "contextualbandits", "contextualbandits", REQUIREMENTS["contextualbandits"],
        "contextualbandits `online.BootstrappedTS(linreg.LinearRegression(method=\"chol\"))` (10 resamples, its "
        "default; `batch_train=True`: online updates; `njobs_arms=1`: one core; the default `method=\"sm\"` gets "
        "weighted updates wrong in 0.3.30)",
        _lazy("contextualbandits", "BootstrappedTSLearner")),
}


def missing(names: list[str] | None = None) -> dict[str, str]:
    """``{peer: reason}`` for the peers (all, or ``names``) whose library cannot be imported here."""
    out = {}
    for name in PEERS if names is None else names:
        spec = PEERS[name]
        try:
            importlib.import_module(spec.module)
        except ImportError as e:
            out[name] = f"not installed ({e.name}): `pip install '{spec.requirement}'` (or `pip install -e '.[bench]'`)"
    return out


def select(subset: str) -> list[str]:
    """The peers named in ``subset`` (comma list; ``""`` = all, ``"none"`` = none); unknown names raise
    ``SystemExit`` with the valid ones."""
    if not subset:
        return list(PEERS)
    names = [s.strip() for s in subset.split(",") if s.strip()]
    if names == ["none"]:
        return []
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; choose from {list(PEERS)} (or 'none')")
    return names


def check_context(x: np.ndarray, who: str) -> np.ndarray:
    """``x`` as a float64 vector; a per-arm feature matrix (``(K, F)``, e.g. KuaiRec) is refused with the reason."""
    x = np.asarray(x, np.float64)
    if x.ndim != 1:
        raise ValueError(f"{who} plays environments with one shared context vector per round; got a context of shape "
                         f"{x.shape} (per-arm features): run it on a shared-context env such as Shuttle or Adult")
    return x
