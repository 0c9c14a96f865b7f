"""The grid of a sweep: scalar axes batched in one compiled program, structural axes as separate programs.

A *scalar* axis is a number that enters the agent's arithmetic only: it can be a traced value, so every
configuration of the scalar axes runs in one program, ``vmap``-ped alongside the seeds.  :data:`SCALAR_AXES` lists
them and where each goes::

    obs_noise                                      BanditAgent(obs_noise=...)   Gaussian observation variance R
    init_cov, init_cov_hidden, init_cov_last       posterior_kwargs             prior variances
    dynamics_cov, dynamics_cov_hidden/_last        posterior_kwargs             random-walk drift q
    forgetting                                     posterior_kwargs             γ in θ ← γθ
    epsilon | beta | xi                            policy_kwargs                ε-greedy's ε, UCB's β, EI / PI's ξ

A *structural* axis changes array shapes or the program itself (``rank``, ``rank_last``, ``arms``, ``last_cov``,
``warmup_steps``, ...): each of its values is a separate program, compiled once.  It goes to the posterior factory,
the policy or :class:`~banditkit.agents.BanditAgent`, whichever takes that keyword.

The configurations are the Cartesian product of the axes, in the order given, the last axis varying fastest.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from banditkit.experiments.frames import COLUMNS

#: scalar axes (batched in one program) -> the keyword group they are passed in: "agent", "posterior" or "policy"
SCALAR_AXES: dict[str, str] = {
    "obs_noise": "agent",
    "init_cov": "posterior",
    "init_cov_hidden": "posterior",
    "init_cov_last": "posterior",
    "dynamics_cov": "posterior",
    "dynamics_cov_hidden": "posterior",
    "dynamics_cov_last": "posterior",
    "forgetting": "posterior",
    "epsilon": "policy",
    "beta": "policy",
    "xi": "policy",
}

#: the policy each policy axis belongs to
POLICY_AXES = {"epsilon": "epsilon_greedy", "beta": "ucb", "xi": ("expected_improvement", "probability_of_improvement")}

_RESERVED = set(COLUMNS) | {"propensity"}


def _values(name: str, values: Any) -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, range)) and not hasattr(values, "tolist"):
        raise ValueError(f"grid axis {name!r} must be a list of values, got {values!r}")
    out = list(values.tolist() if hasattr(values, "tolist") else values)
    if not out:
        raise ValueError(f"grid axis {name!r} has no values")
    return out


def check_scalar_grid(grid: Mapping[str, Any] | None) -> dict[str, list[float]]:
    """``grid`` checked: every axis a name of :data:`SCALAR_AXES` with a non-empty list of finite real numbers.

    A structural or unknown axis raises ``ValueError`` that says to pass it as ``structural=`` (one program per
    value)."""
    if grid is None:
        return {}
    if not isinstance(grid, Mapping):
        raise TypeError(f"grid must be a dict {{axis: [values]}}, got {type(grid).__name__}")
    out: dict[str, list[float]] = {}
    for name, values in grid.items():
        if name not in SCALAR_AXES:
            raise ValueError(
                f"grid axis {name!r} is not a scalar hyper-parameter that can be batched in one compiled program "
                f"(those are {sorted(SCALAR_AXES)}); an axis that changes shapes or the program (rank, backend, "
                f"model size, ...) must run as a separate program: pass it as structural={{{name!r}: [...]}} "
                "(compiled once per value)"
            )
        vals = _values(name, values)
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
                raise ValueError(f"grid axis {name!r}: every value must be a finite number, got {v!r}; a non-numeric "
                                 f"axis is structural: pass it as structural={{{name!r}: [...]}}")
        if len(set(map(float, vals))) != len(vals):
            raise ValueError(f"grid axis {name!r} repeats a value: {vals}")
        out[name] = [float(v) for v in vals]
    return out


def check_structural(structural: Mapping[str, Any] | None, scalar: Mapping[str, Any]) -> dict[str, list]:
    """``structural`` checked: ``{axis: [values]}`` with axis names distinct from the scalar grid's and the frame's
    columns."""
    if structural is None:
        return {}
    if not isinstance(structural, Mapping):
        raise TypeError(f"structural must be a dict {{axis: [values]}}, got {type(structural).__name__}")
    out = {}
    for name, values in structural.items():
        if name in scalar:
            raise ValueError(f"axis {name!r} is in both grid and structural; give it once")
        out[name] = _values(name, values)
    return out


def check_names(names: Sequence[str]) -> None:
    """Axis names become columns: they must not clash with the frame's own columns."""
    for name in names:
        if not isinstance(name, str) or not name or name in _RESERVED or name == "agent":
            raise ValueError(f"axis name {name!r} must be a non-empty string other than the frame's columns "
                             f"{sorted(_RESERVED)}")


def points(axes: Mapping[str, Sequence]) -> list[dict[str, Any]]:
    """The Cartesian product of ``axes`` as a list of ``{axis: value}`` (``[{}]`` for no axes), last axis fastest."""
    names = list(axes)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]


def split_kwargs(point: Mapping[str, Any], post_accepts, policy_name: str, agent_accepts) -> tuple[dict, dict, dict]:
    """``(agent_kwargs, posterior_kwargs, policy_kwargs)`` of one configuration.

    Scalar axes go where :data:`SCALAR_AXES` says; a structural axis goes to the posterior factory if it takes that
    keyword (``post_accepts(name)``), else to the policy, else to the agent (``agent_accepts(name)``).  An axis the
    agent does not use raises ``ValueError`` (a sweep over it would run the same agent several times)."""
    agent_kw: dict = {}
    post_kw: dict = {}
    pol_kw: dict = {}
    for name, v in point.items():
        where = SCALAR_AXES.get(name)
        if where == "policy":
            owners = POLICY_AXES[name]
            owners = (owners,) if isinstance(owners, str) else owners
            if policy_name not in owners:
                raise ValueError(f"axis {name!r} is a parameter of the {' / '.join(owners)} policy, not of "
                                 f"{policy_name!r}; drop it or sweep an agent with that policy")
            pol_kw[name] = v
        elif where == "agent":
            agent_kw[name] = v
        elif where == "posterior" or post_accepts(name):
            if not post_accepts(name):
                raise ValueError(f"axis {name!r}: this agent's posterior has no such hyper-parameter; drop the axis")
            post_kw[name] = v
        elif name in _policy_keywords(policy_name):
            pol_kw[name] = v
        elif agent_accepts(name):
            agent_kw[name] = v
        else:
            raise ValueError(f"structural axis {name!r} is taken by neither the posterior, the policy "
                             f"{policy_name!r} nor the agent; check its spelling")
    return agent_kw, post_kw, pol_kw


def _policy_keywords(policy_name: str) -> set[str]:
    import inspect

    from banditkit.policies import rules

    factory = rules.POLICIES.get(policy_name)
    return set(inspect.signature(factory).parameters) if factory is not None else set()
