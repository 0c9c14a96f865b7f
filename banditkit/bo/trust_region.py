"""A TuRBO-style trust region for :class:`~banditkit.bo.BayesOpt` (``trust_region=True``).

Local BO after Eriksson et al. (NeurIPS 2019, "Scalable global optimization via local Bayesian optimization"):
the acquisition is maximised only inside a hyper-cube of side ``L`` centred on the best point so far, and ``L``
adapts to how often the suggestions improve.  In the unit cube ``[0, 1]^d``:

* box:        ``lo = clip(c − L/2, 0, 1)``, ``hi = clip(c + L/2, 0, 1)``, ``c`` the incumbent (best evaluation);
* candidates: ``x_i = c`` except on a random subset of coordinates, where ``x_ij = lo_j + b_ij (hi_j − lo_j)``
  with ``b (N, d)`` the optimiser's fixed Sobol set; each coordinate is in the subset with probability
  ``p = min(1, 20/d)`` and every candidate changes at least one coordinate (in high dimension a candidate
  that moves all ``d`` coordinates at once is almost never better than the incumbent);
* the refinement (projected ascent or L-BFGS-B) is bounded by the same box;
* after each evaluation told past the initial design: a *success* if it beats the best value before it by more
  than ``10⁻³ · |best|``, else a *failure*.  ``n_success`` consecutive successes double ``L`` (at most
  ``length_max``), ``n_failure = max(4, d)`` consecutive failures halve it; when ``L`` falls below
  ``length_min`` the region restarts at ``length_init`` (the data and the surrogate are kept: an online filter
  cannot forget, and the restarted box is centred on the same incumbent, so the restart only widens the search).

Constants as in the paper: ``length_init = 0.8``, ``length_min = 0.5⁷``, ``length_max = 1.6``, ``n_success = 3``.
Everything here is a pure function of small arrays; the optimiser keeps :class:`TrustRegion` in its state and
saves it with the checkpoint.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from banditkit._xla import flat_random as rng

LENGTH_INIT = 0.8
LENGTH_MIN = 0.5**7
LENGTH_MAX = 1.6
SUCCESS_TOL = 3
PERTURB_COORDS = 20.0  # expected number of coordinates a candidate changes (capped at d)


class TrustRegion(NamedTuple):
    """Side length ``length`` of the box (unit-cube units), the current run of successes / failures, and the
    number of restarts so far."""

    length: float = LENGTH_INIT
    n_success: int = 0
    n_failure: int = 0
    n_restarts: int = 0


def failure_tolerance(dim: int) -> int:
    """Consecutive failures that halve the box: ``max(4, d)``."""
    return max(4, int(dim))


def update(tr: TrustRegion, improved: bool, dim: int) -> TrustRegion:
    """The region after one evaluation that did (``improved``) or did not beat the incumbent."""
    length, succ, fail, restarts = tr.length, tr.n_success, tr.n_failure, tr.n_restarts
    if improved:
        succ, fail = succ + 1, 0
    else:
        succ, fail = 0, fail + 1
    if succ >= SUCCESS_TOL:
        length, succ = min(2.0 * length, LENGTH_MAX), 0
    elif fail >= failure_tolerance(dim):
        length, fail = length / 2.0, 0
    if length < LENGTH_MIN:
        length, succ, fail, restarts = LENGTH_INIT, 0, 0, restarts + 1
    return TrustRegion(float(length), int(succ), int(fail), int(restarts))


def improves(value: float, best: float) -> bool:
    """TuRBO's success test for a maximised value: ``value > best + 10⁻³ · |best|``."""
    return bool(value > best + 1e-3 * abs(best))


def box(center: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``, each ``(d,)``: the side-``length`` cube around ``center``, cut to ``[0, 1]^d``."""
    c = np.asarray(center, np.float64)
    return np.clip(c - length / 2.0, 0.0, 1.0), np.clip(c + length / 2.0, 0.0, 1.0)


@jax.jit
def candidates(key: jax.Array, base: jax.Array, center: jax.Array, lo: jax.Array, hi: jax.Array) -> jax.Array:
    """``(N, d)`` candidates in the box: ``base (N, d)`` (points of ``[0, 1)^d``) mapped into ``[lo, hi]`` on a
    random subset of coordinates (each kept with probability ``min(1, 20/d)``, at least one per row), the
    incumbent ``center (d,)`` elsewhere."""
    n, d = base.shape
    k_mask, k_one = jax.random.split(key)
    p = min(1.0, PERTURB_COORDS / d)
    mask = rng.uniform(k_mask, (n, d)) < p
    one = jax.nn.one_hot(jax.random.randint(k_one, (n,), 0, d), d, dtype=bool)
    mask = mask | one
    moved = lo + base * (hi - lo)
    return jnp.where(mask, moved, center).astype(base.dtype)
