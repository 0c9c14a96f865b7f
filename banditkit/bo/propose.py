"""The proposal step of :class:`~banditkit.bo.BayesOpt` as a pure function: ``k`` new points from a fitted model and
the data, nothing mutated (the optimiser records them as pending).

For each of the ``k`` points: Thompson sampling maximises one posterior draw (a function draw by the acquisition
search, :func:`banditkit.bo.acquisition.maximise`; a joint draw on the candidates by its argmax); EI / PI / UCB
maximise the analytic score of the model conditioned on every pending point and the points chosen so far with the
best standardised value as their observation (a *constant liar*).  The point is snapped to a valid one; if it is
within ``min_distance`` (max-norm in the cube) of an evaluated, pending, chosen or failed point, the best-ranked
candidate that is not replaces it.

The search space (:func:`search_space`): the fixed Sobol candidates over the cube, or with a trust region the box
around the incumbent and candidates inside it (:mod:`banditkit.bo.trust_region`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from banditkit.bo import acquisition as _acq
from banditkit.bo import trust_region as _tr
from banditkit.bo.points import Points
from banditkit.bo.space import Categorical


class Model(NamedTuple):
    """What scores a point: the surrogate, its compiled acquisition ``kernels``, its ``fit``, the optimiser's
    ``config`` (maximiser, ``min_distance``, ``trust_region``, ...) and the ``acquisition`` name."""

    surrogate: Any
    kernels: Any
    fit: Any
    config: dict
    acquisition: str


class Data(NamedTuple):
    """What the optimiser has seen, in the unit cube: evaluated ``u (n, D)`` with maximised values ``s (n,)``,
    ``pending (m, D)``, ``failed (f, D)``, the trust region ``tr`` and the optimiser's ``seed``."""

    u: np.ndarray
    s: np.ndarray
    pending: np.ndarray
    failed: np.ndarray
    tr: _tr.TrustRegion
    seed: int


def near(points: np.ndarray, x: np.ndarray, tol: float) -> bool:
    """Whether ``x`` is within ``tol`` (max-norm, unit cube) of a row of ``points``; ``tol=0`` means exact repeats."""
    return bool(np.min(np.max(np.abs(points - x), axis=1)) <= max(tol, 1e-9))


def key_stream(key: jax.Array) -> Callable[[], jax.Array]:
    """A ``next_key()`` drawing successive subkeys of ``key`` (``key, sub = split(key)``, ``sub`` returned) — the
    ``keys`` of :func:`propose`, as ``BayesOpt.ask(seed=)`` makes them."""
    box = [key]

    def next_key():
        box[0], sub = jax.random.split(box[0])
        return sub

    return next_key


def propose(k: int, model: Model, data: Data, points: Points, candidates: jax.Array,
            keys: Callable[[], jax.Array]) -> np.ndarray:
    """``(k, D)`` new unit-cube points, distinct from each other and from every evaluated, pending and failed point
    (up to ``min_distance``) where the space allows (see the module docstring); ``keys()`` gives the randomness."""
    cfg, fit, sur, kern = model.config, model.fit, model.surrogate, model.kernels
    dtype = sur.dtype
    best = float(np.max((data.s - fit.shift) / fit.scale))
    cands, lo, hi = search_space(model, data, points, candidates, keys)
    mixed = points.space if points.discrete else None
    chosen: list[np.ndarray] = []
    for _ in range(k):
        if model.acquisition == "thompson":
            if sur.function_draws:
                draw = sur.draw(fit.state, keys())
                x, _, order = _acq.maximise(kern.thompson, draw, cands, lo, hi, cfg, mixed)
            else:
                x, _, order = (np.asarray(a) for a in kern.finite_draw(fit.state, keys(), cands))
        else:
            pend = np.concatenate([data.pending, np.reshape(chosen, (-1, points.dim))], axis=0)
            state = fit.state if not pend.shape[0] else sur.fantasize(
                fit, data.u, data.s, pend, np.full(pend.shape[0], best))  # constant liar: the best value so far
            args = (state, jnp.asarray(best, dtype), _acq.weights(model.acquisition, dtype))
            x, _, order = _acq.maximise(kern.analytic, args, cands, lo, hi, cfg, mixed)
        x = points.snap(x)
        taken = np.concatenate([data.u, data.pending, np.reshape(chosen, (-1, points.dim)), data.failed], axis=0)
        if taken.shape[0] and near(taken, x, cfg["min_distance"]):
            x = points.snap(replacement(taken, cands, order, x, points, cfg["min_distance"],
                                        [data.seed, data.u.shape[0], taken.shape[0]]))
        chosen.append(x)
    return np.stack(chosen)


def replacement(taken: np.ndarray, cands: jax.Array, order: np.ndarray, x: np.ndarray, points: Points, tol: float,
                seed: list[int]) -> np.ndarray:
    """A repeat of a taken point: the best-ranked candidate (``order``) that is new; in a space with discrete
    parameters, failing that a random valid point that is new (drawn from ``seed``); failing that ``x`` itself."""
    c = np.asarray(cands, np.float64)
    for j in np.asarray(order):
        if not near(taken, c[j], tol):
            return c[j]
    if points.discrete:
        for cand in points.space.sample(np.random.default_rng(seed), 256):
            if not near(taken, cand, tol):
                return cand
    return x


def search_space(model: Model, data: Data, points: Points, candidates: jax.Array,
                 keys: Callable[[], jax.Array]) -> tuple[jax.Array, jax.Array | None, jax.Array | None]:
    """``(candidates (N, d), lo (d,), hi (d,))`` the acquisition is maximised over: the fixed Sobol set in the unit
    cube (``lo = hi = None``, the kernels' static unit-cube case), or with ``trust_region`` the box around the
    incumbent and candidates inside it (:mod:`banditkit.bo.trust_region`), snapped to valid points (a categorical
    parameter, which a box does not localise, keeps the incumbent's choice with probability ``1 − min(1, L)``, else
    takes a Sobol candidate's)."""
    if not model.config["trust_region"]:
        return candidates, None, None
    center = data.u[int(np.argmax(data.s))]
    lo, hi = _tr.box(center, data.tr.length)
    dtype = model.surrogate.dtype
    lo, hi, c = (jnp.asarray(v, dtype) for v in (lo, hi, center))
    cands = _tr.candidates(keys(), candidates, c, lo, hi)
    if points.discrete:
        space = points.space
        cands = np.array(cands, np.float64)
        # a box says nothing about unordered choices: each categorical of a candidate is redrawn (the Sobol
        # candidate's choice) with probability min(1, L), else it keeps the incumbent's
        rng = np.random.default_rng(int(jax.random.randint(keys(), (), 0, 2**31 - 1)))
        base = np.asarray(candidates, np.float64)
        for p, sl in zip(space.params, space.slices, strict=True):
            if isinstance(p, Categorical):
                redraw = rng.random(cands.shape[0]) < min(1.0, data.tr.length)
                cands[redraw, sl] = base[redraw, sl]
        cands = jnp.asarray(space.snap(cands), dtype)
    return cands, lo, hi
