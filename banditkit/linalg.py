"""The few linear-algebra kernels every filter composes (seed 003, Appendix C).

All factors follow one convention: an *upper* square-root factor ``B`` of a PSD matrix ``A`` satisfies
``A = Bᵀ B``; a *low-rank factor* ``C`` of shape ``(d, D)`` represents ``A ≈ Cᵀ C``.  Nothing here ever
forms a ``D × D`` matrix when ``D`` is a parameter count; the only square matrices are ``(n, n)`` with
``n`` a rank plus an output dimension.

Kernels
-------
``qr_upper(*blocks)``           ``Q_R``: upper-triangular ``U`` with ``UᵀU = Σ_k B_kᵀ B_k`` (QR of the stack).
``chol_upper(S)``               upper Cholesky factor of a small SPD matrix.
``solve_spd_factor(U, J)``      ``S⁻¹ J`` given ``S = UᵀU`` (two triangular solves; the gain kernel).
``project_gram(G, N, d, add)``  ``P_{d,+a}``: best rank-``d`` factor of ``NᵀN (+ a I)`` from the small Gram
                                ``G = N Nᵀ`` (an ``(n, n)`` eigendecomposition, one ``(d, n) @ (n, D)`` GEMM).
``project(N, d, add)``          the same, computing the Gram itself.
``lowrank_update_gram(...)``    Gram of ``[C − A Kᵀ ; B Kᵀ]`` from ``C Cᵀ`` in ``O(d·D_y·D)`` work.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

Array = jax.Array


def qr_upper(*blocks: Array) -> Array:
    """``Q_R(B_1, …, B_K)``: upper-triangular ``U (D, D)`` with ``UᵀU = Σ_k B_kᵀ B_k``.

    Each block ``B_k`` has shape ``(r_k, D)``.  Rows are sign-fixed so that ``diag(U) ≥ 0`` (unique factor).
    The stack must have at least ``D`` rows (pad with zeros otherwise).
    """
    m = jnp.concatenate(blocks, axis=0)
    d = m.shape[1]
    if m.shape[0] < d:
        m = jnp.concatenate([m, jnp.zeros((d - m.shape[0], d), m.dtype)], axis=0)
    r = jnp.linalg.qr(m, mode="r")
    sign = jnp.where(jnp.diag(r) < 0, -1.0, 1.0).astype(r.dtype)
    return r * sign[:, None]


def chol_upper(s: Array) -> Array:
    """Upper Cholesky factor ``U`` of a small SPD matrix ``S (n, n)``: ``S = UᵀU``."""
    return jnp.linalg.cholesky(s).T


def solve_spd_factor(u: Array, j: Array) -> Array:
    """``S⁻¹ J`` for ``S = UᵀU`` with ``U (n, n)`` upper-triangular and ``J (n, D)``.

    ``Z = U⁻ᵀ J`` (lower solve) then ``U⁻¹ Z`` (upper solve): ``O(n² D)``, no inverse formed.
    """
    z = solve_triangular(u, j, trans="T", lower=False)
    return solve_triangular(u, z, lower=False)


def symmetrize(a: Array) -> Array:
    """``(A + Aᵀ) / 2``."""
    return 0.5 * (a + a.T)


def project_gram(g: Array, n: Array, rank: int, add: Array | float = 0.0) -> tuple[Array, Array]:
    """``P_{d,+a}`` from the Gram matrix: best rank-``d`` factor of ``NᵀN + a I`` (Eckart–Young).

    Args:
      g: ``(n, n)`` Gram matrix ``N Nᵀ`` (may be computed cheaply by the caller).
      n: ``(n, D)`` stacked factor ``N``.
      rank: ``d ≤ n``.
      add: ``a ≥ 0`` added to the kept eigenvalues (Corollary C.3 — *not* cancelled as in the reference code).

    Returns:
      ``(J, s2)``: ``J (d, D)`` with orthogonal rows, ``JᵀJ`` the best rank-``d`` approximation of
      ``NᵀN + aI`` restricted to the top-``d`` right singular space of ``N``; and ``s2 (d,)`` the kept
      eigenvalues ``σ_k² + a`` (so ``J Jᵀ = diag(s2)``).

    Equations: ``G = U diag(σ²) Uᵀ``; ``Vᵀ = diag(1/σ) Uᵀ N``; ``J = diag(√(σ²+a)) Vᵀ[:d]``.  Directions with
    ``σ = 0`` are returned as zero rows (their singular vector is undefined).
    """
    g = symmetrize(g)
    evals, evecs = jnp.linalg.eigh(g)  # ascending
    evals = jnp.flip(evals)[:rank]
    evecs = jnp.flip(evecs, axis=1)[:, :rank]
    evals = jnp.maximum(evals, 0.0)
    tiny = jnp.finfo(g.dtype).eps * jnp.maximum(jnp.max(evals), jnp.finfo(g.dtype).tiny) * g.shape[0]
    keep = evals > tiny
    sigma = jnp.sqrt(jnp.where(keep, evals, 1.0))
    scale = jnp.where(keep, jnp.sqrt(evals + add) / sigma, 0.0)
    w = (evecs * scale[None, :]).T  # (d, n)
    j = w @ n
    s2 = jnp.where(keep, evals + add, 0.0)
    return j, s2


def project(n: Array, rank: int, add: Array | float = 0.0) -> tuple[Array, Array]:
    """``P_{d,+a}(N)`` computing the Gram ``N Nᵀ`` itself (see :func:`project_gram`)."""
    return project_gram(n @ n.T, n, rank, add)


def lowrank_update_gram(cc: Array, a: Array, ck: Array, kk: Array, b: Array) -> Array:
    """Gram of the stacked factor ``N = [C − A Kᵀ ; B Kᵀ]`` without touching a ``D``-sized array.

    Args:
      cc: ``C Cᵀ`` ``(d, d)``.
      a: ``A = C Hᵀ`` ``(d, m)``.
      ck: ``C K`` ``(d, m)`` where ``Kᵀ`` is ``(m, D)``.
      kk: ``Kᵀ K`` ``(m, m)``.
      b: ``(r, m)`` factor multiplying ``Kᵀ`` in the bottom block (e.g. ``R½``).

    Returns ``N Nᵀ`` of shape ``(d + r, d + r)``:
      top-left ``CCᵀ − A(CK)ᵀ − (CK)Aᵀ + A KᵀK Aᵀ``, off-diagonal ``(CK − A KᵀK) Bᵀ``, bottom-right
      ``B KᵀK Bᵀ``.
    """
    tl = cc - a @ ck.T - ck @ a.T + a @ kk @ a.T
    tr = (ck - a @ kk) @ b.T
    br = b @ kk @ b.T
    top = jnp.concatenate([tl, tr], axis=1)
    bot = jnp.concatenate([tr.T, br], axis=1)
    return symmetrize(jnp.concatenate([top, bot], axis=0))


def orthonormal_rows(key: Array, rank: int, dim: int, dtype=jnp.float32) -> Array:
    """``(rank, dim)`` matrix with orthonormal rows (random), ``rank ≤ dim``; QR of a Gaussian draw.

    Used to initialise low-rank factors with dense rows (seed 003 erratum 14.2.3: a coordinate
    initialisation ``[I | 0]`` freezes all but ``d`` parameters when ``q = 0``).
    """
    m = jax.random.normal(key, (dim, rank), dtype)
    q, r = jnp.linalg.qr(m, mode="reduced")
    q = q * jnp.where(jnp.diag(r) < 0, -1.0, 1.0).astype(dtype)[None, :]
    return q.T
