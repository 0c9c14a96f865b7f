"""Maximising an acquisition over the unit cube: a Sobol candidate set refined by projected gradient ascent.

Given a differentiable score ``a(x)`` on ``[0, 1]^d`` (a Thompson-sampled function, or EI / PI / UCB of the
surrogate's predictive moments):

1. score every candidate ``x_c`` of a fixed scrambled-Sobol set ``X_c (N, d)`` (in chunks, so memory stays
   ``O(chunk · P)`` even when the score needs a Jacobian per point);
2. take the ``k`` best candidates as starts and run ``T`` steps of projected, normalised gradient ascent
   ``x ← clip(x + η_t ∇a(x) / (‖∇a(x)‖ + ε), 0, 1)`` with a linearly decaying step ``η_t``;
3. return the best point seen over all starts and steps (never worse than the best candidate).

Second refiner, :func:`lbfgs_refine` (``BayesOpt(maximizer="lbfgs")``): the same starts, then box-bounded
L-BFGS-B (SciPy) on all ``k`` starts at once — it minimises ``−Σ_i a(x_i)`` over ``X (k, d) ∈ [0, 1]^{k×d}``,
whose gradient separates by start — for at most ``maxiter`` iterations, and returns the best point it evaluated.
Unlike the fixed-step ascent its steps are not capped, so in high dimension it can travel the cube's whole
diagonal (``√d``); it is meant for smooth scores (``log EI``, a network draw).  It is the one host-side loop
here: the score's value and gradient are one jitted call per iteration.

Everything else is a pure function; the optimiser compiles them once per configuration so that repeated asks
reuse the compiled code.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


def sobol_points(n: int, dim: int, seed: int, skip: int = 0):
    """``n`` scrambled Sobol points in ``[0, 1)^dim`` (numpy float64, shape ``(n, dim)``), after skipping ``skip``.

    The same ``(seed, skip)`` always gives the same points, which is what lets a saved optimiser resume its
    initial design exactly.
    """
    import warnings

    from scipy.stats import qmc

    sampler = qmc.Sobol(dim, scramble=True, seed=seed)
    if skip:
        sampler.fast_forward(skip)
    with warnings.catch_warnings():  # "balance properties" warning for n not a power of two: harmless here
        warnings.simplefilter("ignore", UserWarning)
        return sampler.random(n)


def refine_each(
    score: Callable[[Array], Array], starts: Array, steps: int, step_size: float, lo: Array | None = None,
    hi: Array | None = None, mask: Array | None = None,
) -> tuple[Array, Array]:
    """Projected normalised gradient ascent of ``score`` from each row of ``starts (k, d)``, kept in the box
    ``[lo, hi]`` (``(d,)`` each; ``None``: the unit cube); ``mask (d,)`` (1 = may move, 0 = held fixed; ``None``:
    all move) restricts the steps to some coordinates (the continuous ones of a mixed space).

    Returns ``(xs (k, d), scores (k,))``: per start, the best point visited (the start included).
    """
    grad = jax.grad(score)
    lo = 0.0 if lo is None else lo
    hi = 1.0 if hi is None else hi

    def one_start(x0):
        def body(t, carry):
            x, best_x, best_a = carry
            g = grad(x)
            g = jnp.where(jnp.isfinite(g), g, 0.0)
            if mask is not None:
                g = g * mask
            eta = step_size * (1.0 - t / steps)
            x_new = jnp.clip(x + eta * g / (jnp.linalg.norm(g) + 1e-12), lo, hi)
            x = x_new if mask is None else jnp.where(mask > 0, x_new, x0)
            a = score(x)
            better = jnp.isfinite(a) & (a > best_a)
            return x, jnp.where(better, x, best_x), jnp.where(better, a, best_a)

        a0 = score(x0)
        _, bx, ba = jax.lax.fori_loop(0, steps, body, (x0, x0, a0))
        return bx, ba

    return jax.vmap(one_start)(starts)


def refine(
    score: Callable[[Array], Array], starts: Array, steps: int, step_size: float, lo: Array | None = None,
    hi: Array | None = None, mask: Array | None = None,
) -> tuple[Array, Array]:
    """:func:`refine_each`, then the best over the starts: ``(x_best (d,), a_best ())``, the best point visited
    over all starts and steps (starts included)."""
    xs, scores = refine_each(score, starts, steps, step_size, lo, hi, mask)
    i = jnp.argmax(scores)
    return xs[i], scores[i]


def rank_candidates(score: Callable[[Array], Array], candidates: Array, chunk: int = 256) -> tuple[Array, Array]:
    """``(vals (N,), order (N,))``: ``score`` of every row of ``candidates (N, d)`` (in chunks of ``chunk`` rows,
    so memory stays ``O(chunk · P)`` when the score needs a Jacobian per point; non-finite scores count as
    ``−inf``) and the row indices from best to worst."""
    vals = jax.lax.map(score, candidates, batch_size=min(chunk, candidates.shape[0]))
    vals = jnp.where(jnp.isfinite(vals), vals, -jnp.inf)
    return vals, jnp.argsort(-vals)


def maximize(
    score: Callable[[Array], Array],
    candidates: Array,
    *,
    n_starts: int = 4,
    steps: int = 10,
    step_size: float = 0.05,
    chunk: int = 256,
    lo: Array | None = None,
    hi: Array | None = None,
    mask: Array | None = None,
) -> tuple[Array, Array, Array]:
    """Maximise ``score`` over the box ``[lo, hi]`` (``None``: ``[0, 1]^d``; the candidates must lie in it): best
    of ``candidates (N, d)``, refined by :func:`refine`.

    Returns ``(x (d,), a (), order (N,))`` where ``order`` ranks the candidates by score (best first), used as
    a fallback when a batch needs distinct points.
    """
    vals, order = rank_candidates(score, candidates, chunk)
    starts = candidates[order[:n_starts]]
    if steps > 0:
        x, a = refine(score, starts, steps, step_size, lo, hi, mask)
    else:
        x, a = starts[0], vals[order[0]]
    return x, a, order


def lbfgs_refine(
    value_and_grad: Callable[[np.ndarray], tuple[Array, Array]],
    starts: np.ndarray,
    maxiter: int,
    lo: np.ndarray | None = None,
    hi: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    each: bool = False,
) -> tuple[np.ndarray, float] | tuple[np.ndarray, np.ndarray]:
    """Box-bounded L-BFGS-B ascent from every row of ``starts (k, d)`` at once, in ``[lo, hi]`` (``(d,)`` each;
    ``None``: the unit cube; the starts must lie in the box).

    ``value_and_grad(X (k, d)) -> (a (k,), ∇a (k, d))`` gives the score of each row and its gradient (one jitted
    call; ``X`` arrives as float64 NumPy, the callable casts it to its own dtype).  SciPy's L-BFGS-B minimises
    ``−Σ_i a(x_i)`` on ``[lo, hi]^k`` for at most ``maxiter`` iterations; rows whose score is not finite count
    as 0 with a zero gradient (they stay where they are).  ``mask (d,)`` (bool; ``None``: all) names the
    coordinates that move; the others keep the starts' values (the discrete coordinates of a mixed space).

    Returns ``(x_best (d,), a_best)``: the best row of every evaluated ``X`` (the starts included), so the result
    is never worse than the best start; with ``each=True`` instead ``(xs (k, d), scores (k,))``, the best point
    each row reached.
    """
    from scipy.optimize import Bounds, minimize

    starts = np.asarray(starts, np.float64)
    k, d = starts.shape
    free = np.ones(d, bool) if mask is None else np.asarray(mask, bool).reshape(d)
    m = int(free.sum())
    best_x, best_a = starts.copy(), np.full(k, -np.inf)
    lo_k = np.tile((np.zeros(d) if lo is None else np.asarray(lo, np.float64).reshape(d))[free], k)
    hi_k = np.tile((np.ones(d) if hi is None else np.asarray(hi, np.float64).reshape(d))[free], k)

    def fun(v):
        X = starts.copy()
        X[:, free] = np.clip(v, lo_k, hi_k).reshape(k, m)
        a, g = value_and_grad(X)
        a = np.asarray(a, np.float64)
        g = np.asarray(g, np.float64)[:, free]
        ok = np.isfinite(a) & np.all(np.isfinite(g), axis=1)
        better = ok & (a > best_a)
        best_x[better], best_a[better] = X[better], a[better]
        return -float(np.sum(a[ok])), -np.where(ok[:, None], g, 0.0).ravel()

    v0 = starts[:, free].ravel()
    if maxiter > 0 and m > 0:  # L-BFGS-B's first evaluation is at the starts, so they are among the points compared
        minimize(fun, v0, jac=True, method="L-BFGS-B", bounds=Bounds(lo_k, hi_k), options=dict(maxiter=int(maxiter)))
    else:
        fun(v0)
    if each:
        return best_x, best_a
    i = int(np.argmax(best_a))
    return best_x[i].copy(), float(best_a[i])
