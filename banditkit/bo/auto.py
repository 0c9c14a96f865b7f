"""``surrogate="auto"``: a surrogate and acquisition chosen from how many evaluations the optimiser has seen.

The rule (pre-registered in ``benchmarks/studies/bo_heldout/README.md``)::

    n ≤ N₀ = 100 evaluations told:  the exact GP with expected improvement   (surrogate="gp",     acquisition="ei")
    n > N₀:                         HiLoFi with Thompson sampling           (surrogate="hilofi", acquisition="thompson")

Why: the GP's refit costs ``O(n³)`` per evaluation, negligible at ``n ≤ 100`` (a fraction of a second here), and
the committed tables have the GP-EI best at small budgets and on the one real task; an online filter costs the same
per evaluation at any ``n``.  At the switch the network is fed every evaluation once, in order (its standardisation
fixed from all of them), then one filter step per evaluation.  The maximiser and the trust region follow each
phase's measured defaults unless the user fixed them; the trust region's state carries over.

:class:`~banditkit.bo.BayesOpt` asks :func:`phase` at construction and after every ``tell``.
"""

from __future__ import annotations

from typing import Any

AUTO = "auto"
SWITCH_AT = 100  # N₀: the last evaluation count at which the GP phase is used
EARLY = ("gp", "ei")
LATE = ("hilofi", "thompson")


def is_auto(surrogate: Any) -> bool:
    """Whether a ``BayesOpt(surrogate=...)`` argument asks for this rule."""
    return isinstance(surrogate, str) and surrogate.strip().lower() == AUTO


def phase(n_evals: int, switch_at: int | None = None) -> tuple[str, str]:
    """``(surrogate, acquisition)`` for an optimiser that has been told ``n_evals`` evaluations: :data:`EARLY` while
    ``n_evals ≤ switch_at`` (default :data:`SWITCH_AT`), :data:`LATE` after."""
    return EARLY if n_evals <= (SWITCH_AT if switch_at is None else switch_at) else LATE


def check_arguments(acquisition: Any, model: Any, surrogate_kwargs: Any) -> None:
    """``ValueError`` for options that cannot apply to both phases (``surrogate="auto"`` picks them itself)."""
    if acquisition is not None:
        raise ValueError(f"surrogate='auto' chooses its acquisition (EI with the GP, Thompson sampling with HiLoFi); "
                         f"drop acquisition={acquisition!r}, or name a surrogate ('gp', 'hilofi', ...) to choose one")
    if model is not None:
        raise ValueError("surrogate='auto' starts with a GP, which takes no model; drop model= or pass "
                         "surrogate='hilofi' (or another network backend) with it")
    if surrogate_kwargs:
        raise ValueError(f"surrogate='auto' switches between a GP and a network, which take different "
                         f"surrogate_kwargs; drop surrogate_kwargs={surrogate_kwargs!r} or name one surrogate")
