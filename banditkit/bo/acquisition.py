"""Acquisition functions of :class:`~banditkit.bo.BayesOpt` and their maximisation over a (mixed) search space.

Scores, on the standardised target ``z`` of a surrogate with predictive moments ``μ(u), σ(u)``
(:mod:`banditkit.bo.surrogate`), ``z*`` the best standardised target so far:

``thompson``  one posterior draw ``f̃``; maximise ``u ↦ f̃(u)``.
``ei``        ``EI(u) = d Φ(d/σ) + σ φ(d/σ)``, ``d = μ(u) − z* − ξ``.
``pi``        ``Φ((μ(u) − z* − ξ)/σ(u))``.
``ucb``       ``μ(u) + β σ(u)``.

The L-BFGS maximiser works on ``log EI`` / ``log PI`` (:mod:`banditkit.policies.acquisition`: the same maximiser,
no underflow far from the data); the projected ascent on the scores themselves.  One compiled kernel serves EI, PI
and UCB: ``weights (3,)`` is one-hot over them.

Maximisation (:func:`maximise`) over ``[0, 1]^D``, the encoding of a search space (:mod:`banditkit.bo.space`):

1. rank a fixed candidate set ``X_c (N, D)`` (scrambled Sobol, snapped to valid points, or the trust region's
   candidates) by the score, in chunks (:func:`banditkit.bo.search.rank_candidates`);
2. refine the best ``n_starts`` on the *continuous* coordinates — projected normalised ascent or box-bounded
   L-BFGS-B (:mod:`banditkit.bo.search`), the other coordinates held;
3. for a space with discrete parameters (integers, steps, categories), alternate with *neighbour moves*: from each
   start, score every point that differs in one discrete parameter (every other choice of a categorical, every
   value of a short grid, adjacent and spread-out values of a long one: :meth:`Space.neighbors`), move to the
   best if it beats the start, refine the continuous coordinates again; stop after ``rounds`` rounds or when no
   start moves.  Every category is one move away, so the search can reach any of them.
4. return the best point over the starts (never worse than the best candidate).

For a space without discrete parameters steps 3 is skipped and the search is the box optimiser's of before.

A surrogate whose Thompson draws exist only jointly on a finite set (the exact GP) is maximised over the candidates
by the draw's argmax (no refinement: a draw on a finite set has no gradient).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from banditkit.bo import search
from banditkit.policies.acquisition import (
    expected_improvement_score,
    log_expected_improvement_score,
    log_probability_of_improvement_score,
    probability_of_improvement_score,
    ucb_score,
)

ACQUISITIONS = ("thompson", "ei", "pi", "ucb")
ALIASES = {
    "ts": "thompson",
    "thompson_sampling": "thompson",
    "expected_improvement": "ei",
    "probability_of_improvement": "pi",
    "upper_confidence_bound": "ucb",
}
MAXIMIZERS = {"ascent": dict(n_starts=4, refine_steps=10), "lbfgs": dict(n_starts=8, refine_steps=200)}
NEIGHBOR_ROUNDS = 4  # rounds of discrete neighbour moves per ask (each followed by a continuous refinement)
NEIGHBORS_PER_PARAM = 16


def parse(acquisition: str) -> str:
    """The canonical name of an acquisition (aliases such as ``"ts"``, ``"expected_improvement"`` accepted)."""
    acq = str(acquisition).strip().lower().replace("-", "_")
    acq = ALIASES.get(acq, acq)
    if acq not in ACQUISITIONS:
        raise ValueError(f"unknown acquisition {acquisition!r}; choose one of {list(ACQUISITIONS)}")
    return acq


def weights(acquisition: str, dtype) -> jax.Array:
    """One-hot ``(3,)`` over (EI, PI, UCB)."""
    return jnp.asarray([acquisition == a for a in ("ei", "pi", "ucb")], dtype)


def analytic_score(m: jax.Array, sd: jax.Array, best: jax.Array, w: jax.Array, cfg: dict) -> jax.Array:
    """EI, PI or UCB as ``w`` says (the projected ascent's objective)."""
    return (w[0] * expected_improvement_score(m, sd, best, cfg["xi"])
            + w[1] * probability_of_improvement_score(m, sd, best, cfg["xi"])
            + w[2] * ucb_score(m, sd, cfg["beta"]))


def log_score(m: jax.Array, sd: jax.Array, best: jax.Array, w: jax.Array, cfg: dict) -> jax.Array:
    """``log EI``, ``log PI`` or UCB as ``w`` (one-hot over EI, PI, UCB) says: the L-BFGS objective."""
    return jnp.where(
        w[0] > 0,
        log_expected_improvement_score(m, sd, best, cfg["xi"]),
        jnp.where(w[1] > 0, log_probability_of_improvement_score(m, sd, best, cfg["xi"]),
                  ucb_score(m, sd, cfg["beta"])),
    )


class SearchKernels(NamedTuple):
    """Compiled pieces of the search for one ``score(args, u)``: ``rank(args, X) -> (vals, order)``,
    ``box_ascent(args, X, lo, hi) -> (x, a, order)`` (steps 1–2 in one call), ``refine_each(args, starts, lo, hi,
    mask) -> (xs, scores)``, ``value_and_grad(args, X) -> (a, ∇a)`` and ``batch(args, X) -> scores``."""

    rank: Callable
    box_ascent: Callable
    refine_each: Callable
    value_and_grad: Callable
    batch: Callable


def search_kernels(score: Callable[[Any, jax.Array], jax.Array], cfg: dict) -> SearchKernels:
    """Jitted search pieces for ``score(args, u) -> ()`` with the refinement settings of ``cfg``."""

    def rank(args, cands):
        return search.rank_candidates(lambda u: score(args, u), cands)

    def box_ascent(args, cands, lo, hi):
        return search.maximize(lambda u: score(args, u), cands, n_starts=cfg["n_starts"], steps=cfg["refine_steps"],
                               step_size=cfg["step_size"], lo=lo, hi=hi)

    def refine_each(args, starts, lo, hi, mask):
        return search.refine_each(lambda u: score(args, u), starts, cfg["refine_steps"], cfg["step_size"], lo, hi,
                                  mask)

    return SearchKernels(
        jax.jit(rank), jax.jit(box_ascent), jax.jit(refine_each),
        jax.jit(jax.vmap(jax.value_and_grad(score, argnums=1), in_axes=(None, 0))),
        jax.jit(jax.vmap(score, in_axes=(None, 0))),
    )


class Kernels(NamedTuple):
    """A surrogate's compiled acquisition code for one configuration: ``thompson`` (search kernels of a draw, or
    ``None``), ``finite_draw(state, key, X) -> (x, value, order)`` (or ``None``) and ``analytic``."""

    thompson: SearchKernels | None
    finite_draw: Callable | None
    analytic: SearchKernels


_KERNELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CFG_KEYS = ("maximizer", "n_starts", "refine_steps", "step_size", "xi", "beta")


def kernels(surrogate: Any, cfg: dict) -> Kernels:
    """The compiled acquisition code of ``surrogate`` under ``cfg`` (built once per surrogate and configuration;
    surrogates are shared by optimisers of one configuration, so the code is too)."""
    per = _KERNELS.setdefault(surrogate, {})
    key = json.dumps({k: cfg[k] for k in _CFG_KEYS}, sort_keys=True)
    if key not in per:
        scorer = log_score if cfg["maximizer"] == "lbfgs" else analytic_score

        def analytic(args, u):
            state, best, w = args
            m, sd = surrogate.moments(state, u)
            return scorer(m, sd, best, w, cfg)

        if surrogate.function_draws:
            ts, finite = search_kernels(surrogate.draw_value, cfg), None
        else:
            def finite_draw(state, key, cands):
                draw = surrogate.draw_on(state, key, cands)
                order = jnp.argsort(-draw)
                return cands[order[0]], draw[order[0]], order

            ts, finite = None, jax.jit(finite_draw)
        per[key] = Kernels(ts, finite, search_kernels(analytic, cfg))
    return per[key]


def maximise(k: SearchKernels, args: Any, cands: jax.Array, lo: jax.Array | None, hi: jax.Array | None, cfg: dict,
             space: Any = None) -> tuple[np.ndarray, float, np.ndarray]:
    """Maximise ``score(args, ·)`` (the kernels ``k``) from the candidates ``cands (N, D)`` within ``[lo, hi]``
    (``None``: the unit cube); ``space``: a search space with discrete parameters (``None``: all coordinates are
    continuous).  Returns ``(x (D,), score, order (N,))``, ``order`` ranking the candidates best first (the fallback
    when a batch needs distinct points)."""
    if space is None or bool(np.all(space.continuous_mask)):
        if cfg["maximizer"] == "ascent":
            x, a, order = k.box_ascent(args, cands, lo, hi)
            return np.asarray(x, np.float64), float(a), np.asarray(order)
        order = np.asarray(k.rank(args, cands)[1])
        starts = np.asarray(cands, np.float64)[order[: cfg["n_starts"]]]
        x, a = search.lbfgs_refine(lambda X: k.value_and_grad(args, jnp.asarray(X, cands.dtype)), starts,
                                   cfg["refine_steps"], lo, hi)
        return x, a, order
    return _maximise_mixed(k, args, cands, lo, hi, cfg, space)


_NEIGHBOR_CACHE: dict = {}
_NEIGHBOR_CACHE_SIZE = 4096


def neighbors_of(space: Any, xs: np.ndarray, max_per_param: int) -> np.ndarray:
    """``space.neighbors(x, max_per_param)`` for every row of ``xs (k, D)``, stacked to ``(k, m, D)``.

    A neighbour is ``snap(x)`` with one discrete parameter changed, so the neighbours' discrete coordinates
    depend only on ``x``'s discrete values: they are computed once per (space, discrete values) and kept (up to
    :data:`_NEIGHBOR_CACHE_SIZE` entries), and each call only writes them into copies of ``snap(x)``.  The rows
    equal ``space.neighbors``' exactly (``tests/bo/test_acquisition_neighbors.py``).
    """
    base = space.snap(np.asarray(xs, np.float64).reshape(-1, space.dim))
    disc = ~np.asarray(space.continuous_mask, bool)
    try:
        hash(space)
    except TypeError:  # a space with unhashable values: no cache
        return np.stack([space.neighbors(b, max_per_param) for b in base])
    out = []
    for b in base:
        key = (space, int(max_per_param), b[disc].tobytes())
        rows = _NEIGHBOR_CACHE.get(key)
        if rows is None:
            if len(_NEIGHBOR_CACHE) >= _NEIGHBOR_CACHE_SIZE:
                _NEIGHBOR_CACHE.clear()
            rows = _NEIGHBOR_CACHE[key] = space.neighbors(b, max_per_param)[:, disc]
        nb = np.repeat(b[None], rows.shape[0], axis=0)
        nb[:, disc] = rows
        out.append(nb)
    return np.stack(out)


def _maximise_mixed(k, args, cands, lo, hi, cfg, space):
    dtype = cands.dtype
    vals, order = (np.asarray(v) for v in k.rank(args, cands))
    idx = order[: cfg["n_starts"]]
    xs, scores = np.asarray(cands, np.float64)[idx], np.asarray(vals, np.float64)[idx]
    mask = np.asarray(space.continuous_mask)
    refine = mask.any() and cfg["refine_steps"] > 0

    def refined(xs, scores):
        if not refine:
            return xs, scores
        if cfg["maximizer"] == "ascent":
            rx, ra = k.refine_each(args, jnp.asarray(xs, dtype), lo, hi, jnp.asarray(mask, dtype))
            rx, ra = np.asarray(rx, np.float64), np.asarray(ra, np.float64)
        else:
            rx, ra = search.lbfgs_refine(lambda X: k.value_and_grad(args, jnp.asarray(X, dtype)), xs,
                                         cfg["refine_steps"], lo, hi, mask=mask, each=True)
        better = np.isfinite(ra) & (ra > scores)
        return np.where(better[:, None], rx, xs), np.where(better, ra, scores)

    xs, scores = refined(xs, scores)
    for _ in range(NEIGHBOR_ROUNDS):
        nbs = neighbors_of(space, xs, NEIGHBORS_PER_PARAM)  # (k, m, D): m fixed by the space
        n_k, m, d = nbs.shape
        v = np.asarray(k.batch(args, jnp.asarray(nbs.reshape(-1, d), dtype)), np.float64).reshape(n_k, m)
        v = np.where(np.isfinite(v), v, -np.inf)
        j = np.argmax(v, axis=1)
        gain = v[np.arange(n_k), j] > scores
        if not gain.any():
            break
        xs[gain], scores[gain] = nbs[gain, j[gain]], v[gain, j[gain]]
        xs, scores = refined(xs, scores)
    i = int(np.argmax(scores))
    return xs[i], float(scores[i]), order
