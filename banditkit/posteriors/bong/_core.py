"""The two interfaces the BONG grid composes: an estimator's output (:class:`Est`) and a variational family
(:class:`Family`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

Array = jax.Array
State = Any


class Est(NamedTuple):
    """Estimator output: ``g (P,)`` and one of: factor ``B (K, P)`` with ``G = −BᵀB``, dense ``G (P, P)``, or
    ``diag(G) (P,)``.  With a factor, ``coef (K,)`` has ``g = Bᵀ coef`` exactly (every factor estimator's ``g`` lies
    in the row space of its ``B``), which lets BONG take its mean step in gain form."""

    g: Array
    factor: Array | None = None
    dense: Array | None = None
    diag: Array | None = None
    coef: Array | None = None


def keep_prior(prior: State) -> State:
    """The default :attr:`Family.anchor`: the KL terms read the prior state itself."""
    return prior


class Family(NamedTuple):
    """One variational family of the grid: its state and how each rule moves it.

    ``init(μ_0 (P,), key, space) -> state``, ``predict(state, γ, q) -> state`` (moment form ``γ²Σ + qI``),
    ``quad(state, H (C, P)) -> H Σ Hᵀ (C, C)``, ``sample(key, state) -> θ (P,)`` (an exact draw of ``N(μ, Σ)``);
    the rules: ``bong(state, est)`` (one unit natural step), ``blr(anchor, state, est)`` (one natural step of the
    online VI loss) and ``bbb(anchor, state, est)`` (one plain gradient step; BOG is BBB with one iteration), where
    ``anchor = anchor(prior)`` holds what the KL term needs of the predicted prior, computed once per update.
    ``hessian``: the form in which this family takes the MC-Hessian estimate (``"dense"``, ``"diag"``, or
    ``None`` when it has none).
    """

    init: Callable[[Array, Array, Any], State]
    predict: Callable[[State, Array, Array], State]
    quad: Callable[[State, Array], Array]
    sample: Callable[[Array, State], Array]
    bong: Callable[[State, Est], State]
    blr: Callable[[Any, State, Est], State]
    bbb: Callable[[Any, State, Est], State]
    anchor: Callable[[State], Any] = keep_prior
    hessian: str | None = None
