"""The few linear-algebra kernels every filter composes (seed 003, Appendix C).

All factors follow one convention: an *upper* square-root factor ``B`` of a PSD matrix ``A`` satisfies
``A = Bᵀ B``; a *low-rank factor* ``C`` of shape ``(d, D)`` represents ``A ≈ Cᵀ C``.  Nothing here ever
forms a ``D × D`` matrix when ``D`` is a parameter count; the only square matrices are ``(n, n)`` with
``n`` a rank plus an output dimension.  (``sqrt_factor_update`` works on a full ``D × D`` square root, for
blocks that are small by design, such as HiLoFi's last layer.)

Kernels
-------
``qr_upper(*blocks)``           ``Q_R``: upper-triangular ``U`` with ``UᵀU = Σ_k B_kᵀ B_k`` (QR of the stack).
``chol_upper(S)``               upper Cholesky factor of a small SPD matrix.
``solve_spd_factor(U, J)``      ``S⁻¹ J`` given ``S = UᵀU`` (two triangular solves; the gain kernel).
``project_gram(G, N, d, add)``  ``P_{d,+a}``: best rank-``d`` factor of ``NᵀN (+ a I)`` from the small Gram
                                ``G = N Nᵀ`` (an ``(n, n)`` eigendecomposition, one ``(d, n) @ (n, D)`` GEMM).
``project(N, d, add)``          the same, computing the Gram itself.
``lowrank_update_gram(...)``    Gram of ``[C − A Kᵀ ; B Kᵀ]`` from ``C Cᵀ`` in ``O(d·D_y·D)`` work.
``project_weights(G, d, add)``  the eigen half of ``P_{d,+a}``: weights ``W`` with ``J = W N``.
``sqrt_psd(R)``                 symmetric square root of a small PSD matrix (exists when ``R`` is singular).
``lowrank_kalman_update(...)``  one Kalman step of a ``CᵀC + qI`` block (HiLoFi hidden block, LoLoFi, LRKF),
                                the projection done as one ``(d, d) @ (d, D)`` GEMM (no ``D``-sized Gram or transpose).
``lowrank_kalman_weights(...)`` its small half: the ``(d, d)`` weights on ``C`` (a factor kept as ``C = M B``
                                updates ``M`` only).
``sqrt_factor_update(...)``     full-rank square-root block-Joseph step in ``O(D² c)`` (HiLoFi last layer).
``weighted_gram(W, d)``         ``Wᵀ diag(d) W`` of a tall ``(D, n)`` factor, blocked over ``D`` (``d`` of any sign).
``tall_t_matmul(W, z)``         ``Wᵀ z`` of a tall factor in XLA:CPU's fast operand order (LoFi's ``Bᵀz``).
``inv_weighted_gram(W, v)``     ``Wᵀ diag(v)⁻¹ W`` (``v > 0``), blocked as Grams of ``v^{-1/2} ⊙ W`` (LoFi's ``BᵀB``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from banditkit._xla import flat_random as rng

Array = jax.Array


@jax.custom_batching.custom_vmap
def eigh(a: Array) -> tuple[Array, Array]:
    """``(eigenvalues ascending (n,), eigenvectors (n, n))`` of a small symmetric matrix, vmap-safe on CPU.

    Under ``vmap`` (e.g. over seeds) the batch is mapped with ``lax.map`` — one unbatched LAPACK call per member —
    instead of jaxlib's batched ``syevd``, whose ``ParallelBatchMap`` deadlocked XLA:CPU's thread pool in
    LoFi / LoLoFi runs with vmapped seeds (every pool thread idle, the caller waiting forever; jax 0.10.2).  The
    matrices here are ``(L + C)``-sized, so the loop costs nothing measurable.
    """
    w, v = jnp.linalg.eigh(a)
    return w, v


@eigh.def_vmap
def _eigh_vmap(axis_size: int, in_batched: list, a: Array):
    if not in_batched[0]:
        return eigh(a), (False, False)
    return jax.lax.map(eigh, a), (True, True)


def sample_factor(cov: Array) -> Array:
    """A factor ``L (n, n)`` with ``L Lᵀ = Σ`` for Thompson draws ``μ + L z`` from a dense covariance ``Σ (n, n)``.

    The lower Cholesky factor of ``Σ`` (with :func:`chol_upper`'s relative jitter ``n·ε·max Σ_ii``, below the
    rounding error of ``Σ``); where it fails (a PSD ``Σ`` singular beyond the jitter, or one with round-off
    negative eigenvalues) the eigen square root ``V diag(√max(λ, 0))``, which exists for every symmetric ``Σ``.
    Both give a draw with covariance ``Σ``.  A Cholesky is ``n³/3`` flops; ``eigh`` costs ~15× that on XLA:CPU
    (43 ms against 2.6 ms for three 470×470 matrices), so the fallback runs only when some factor is not finite:
    under ``vmap`` the whole batch is checked once and falls back together (one ``lax.cond``, not a per-member
    ``select`` that would run both branches).
    """
    return _sample_factor(symmetrize(cov))


def _eigen_factor(cov: Array) -> Array:
    w, v = eigh(cov)
    return v * jnp.sqrt(jnp.maximum(w, 0.0))[None, :]


@jax.custom_batching.custom_vmap
def _sample_factor(cov: Array) -> Array:
    chol = chol_upper(cov).T
    return jax.lax.cond(jnp.all(jnp.isfinite(chol)), lambda: chol, lambda: _eigen_factor(cov))


@_sample_factor.def_vmap
def _sample_factor_vmap(axis_size: int, in_batched: list, cov: Array):
    if not in_batched[0]:
        return _sample_factor(cov), False
    chol = jnp.swapaxes(jax.vmap(chol_upper)(cov), -1, -2)
    ok = jnp.all(jnp.isfinite(chol))
    return jax.lax.cond(ok, lambda: chol, lambda: jax.vmap(_eigen_factor)(cov)), True


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
    """Upper Cholesky factor ``U`` of a small SPD matrix ``S (n, n)``: ``S = UᵀU``.

    A relative jitter ``n · ε_mach · max_i S_ii`` is added to the diagonal first: it is below the rounding error
    of ``S`` itself, so well-conditioned matrices are unaffected, but an innovation covariance whose condition
    number exceeds ``1/ε_mach`` (e.g. a saturated softmax: ``JΣJᵀ`` of order 10⁴ next to ``R`` of order 10⁻⁴ along
    the sum-to-one direction) still factors instead of returning NaN.
    """
    n = s.shape[0]
    jitter = n * jnp.finfo(s.dtype).eps * jnp.max(jnp.abs(jnp.diagonal(s)))
    return jnp.linalg.cholesky(s + jitter * jnp.eye(n, dtype=s.dtype)).T


def add_isotropic_factor(u: Array, add: Array | float) -> Array:
    """Upper factor ``V`` with ``VᵀV = UᵀU + a I`` for a square ``U (D, D)`` and ``a > 0`` (a time update).

    Equal to ``qr_upper(U, √a I)`` (same unique factor with ``diag ≥ 0``) but computed as the Cholesky factor of
    the formed sum: one ``D³`` GEMM plus a ``D³/3`` Cholesky, against a Householder QR of the ``2D × D`` stack that
    XLA:CPU runs 10–40× slower (0.6 s at ``D = 850``).  ``a > 0`` bounds the condition number by
    ``1 + ‖U‖²/a``, so forming ``UᵀU`` loses nothing that matters.
    """
    n = u.shape[0]
    return chol_upper(symmetrize(u.T @ u + add * jnp.eye(n, dtype=u.dtype)))


def solve_spd_factor(u: Array, j: Array) -> Array:
    """``S⁻¹ J`` for ``S = UᵀU`` with ``U (n, n)`` upper-triangular and ``J (n, D)``.

    ``Z = U⁻ᵀ J`` (lower solve) then ``U⁻¹ Z`` (upper solve): ``O(n² D)``.  For a wide right-hand side
    (``D > n``, e.g. a Jacobian with ``P`` columns) the small ``U⁻¹ (n, n)`` is formed once and applied by two
    GEMMs instead: XLA:CPU's triangular solve with many right-hand sides is 10–100× slower than a GEMM of the
    same size, and for the small, well-conditioned factors used here the results agree to rounding.
    """
    n = u.shape[0]
    if j.ndim == 2 and j.shape[1] > n:
        u_inv = solve_triangular(u, jnp.eye(n, dtype=u.dtype), lower=False)
        return u_inv @ (u_inv.T @ j)
    z = solve_triangular(u, j, trans="T", lower=False)
    return solve_triangular(u, z, lower=False)


def tri_inverse(u: Array) -> Array:
    """``U⁻¹`` of a small upper-triangular ``U (n, n)``.

    Formed explicitly because XLA:CPU's triangular solve with many right-hand sides is 10–100× slower than an
    ``(n, n)`` inverse followed by a GEMM; for the small, well-conditioned factors here the results agree to rounding.
    """
    return solve_triangular(u, jnp.eye(u.shape[0], dtype=u.dtype), lower=False)


def spd_inverse(a: Array) -> Array:
    """``A⁻¹`` of a small symmetric positive-definite ``A (n, n)``, exactly symmetric.

    ``A = UᵀU`` (:func:`chol_upper`, with its relative jitter), ``A⁻¹ = U⁻¹U⁻ᵀ`` — the one SPD inverse every filter
    uses.
    """
    u_inv = tri_inverse(chol_upper(symmetrize(a)))
    return symmetrize(u_inv @ u_inv.T)


def symmetrize(a: Array) -> Array:
    """``(A + Aᵀ) / 2``."""
    return 0.5 * (a + a.T)


def project_weights(g: Array, rank: int, add: Array | float = 0.0) -> tuple[Array, Array]:
    """The small half of ``P_{d,+a}``: mixing weights ``W (d, n)`` with ``J = W N`` (see :func:`project_gram`).

    Args:
      g: ``(n, n)`` Gram matrix ``N Nᵀ``.
      rank: ``d ≤ n``.
      add: ``a ≥ 0`` added to the kept eigenvalues.

    Returns ``(W, s2)``: ``W = diag(√(σ²+a)/σ) Uᵀ[:d]`` and ``s2 = σ² + a`` (descending).  Callers that know
    ``N`` only as a product ``Φ C + …`` apply ``W`` to its pieces, so the ``(d, D)`` result costs one GEMM.
    Eigenvalues below ``n · eps · σ_max²`` are treated as zero: their row of ``W`` and their ``s2`` are 0.
    """
    g = symmetrize(g)
    evals, evecs = eigh(g)  # ascending
    evals = jnp.flip(evals)[:rank]
    evecs = jnp.flip(evecs, axis=1)[:, :rank]
    evals = jnp.maximum(evals, 0.0)
    tiny = jnp.finfo(g.dtype).eps * jnp.maximum(jnp.max(evals), jnp.finfo(g.dtype).tiny) * g.shape[0]
    keep = evals > tiny
    sigma = jnp.sqrt(jnp.where(keep, evals, 1.0))
    scale = jnp.where(keep, jnp.sqrt(evals + add) / sigma, 0.0)
    w = (evecs * scale[None, :]).T  # (d, n)
    s2 = jnp.where(keep, evals + add, 0.0)
    return w, s2


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
    w, s2 = project_weights(g, rank, add)
    return w @ n, s2


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
    m = rng.normal(key, (dim, rank), dtype)
    q, r = jnp.linalg.qr(m, mode="reduced")
    q = q * jnp.where(jnp.diag(r) < 0, -1.0, 1.0).astype(dtype)[None, :]
    return q.T


def sqrt_psd(r: Array) -> Array:
    """Symmetric square root ``R½`` of a small PSD matrix ``R (c, c)`` (``R½ᵀR½ = R``), via ``eigh``.

    Unlike a Cholesky factor it exists for singular ``R`` (e.g. a noise-free Gaussian or an un-jittered
    multinomial covariance); negative round-off eigenvalues are clipped to 0.
    """
    if r.shape[0] == 1:
        return jnp.sqrt(jnp.maximum(r, 0.0))
    evals, evecs = eigh(symmetrize(r))
    return (evecs * jnp.sqrt(jnp.maximum(evals, 0.0))[None, :]) @ evecs.T


class LowRankStep(NamedTuple):
    """One Kalman step of a ``CᵀC + qI`` block as small weights on ``C`` (:func:`lowrank_kalman_weights`).

    Applied to a factor ``C (d, D)``: ``μ ← μ + Cᵀu (+ Hᵀ q_u)``, ``C ← left · C (+ q_left · S⁻¹H)``; so a factor kept
    as ``C = M B`` takes ``M ← left · M`` and ``μ ← μ + Bᵀ(Mᵀu)`` when ``use_q`` is off, touching nothing ``D``-sized
    but ``B``'s one read.
    """

    u: Array  # (d,) A S⁻¹ε
    left: Array  # (d, d) WΦ
    gram: Array  # (d,) diag of the new C Cᵀ (s2)
    q_left: Array | None  # (d, c_y) q·WΨ with use_q, else None
    q_u: Array | None  # (c_y,) q·S⁻¹ε with use_q, else None


def lowrank_kalman_weights(
    gram: Array,
    jac: Array,
    a: Array,
    s_chol: Array,
    r_half: Array,
    innov: Array,
    q: Array | float = 0.0,
    use_q: bool = False,
    carry_q: bool = True,
) -> LowRankStep:
    """The ``(d + c_y)``-sized half of :func:`lowrank_kalman_update`: everything but the passes over ``D``.

    Args:
      gram: ``(d,)`` ``diag(C Cᵀ)`` — the whole Gram, since it is diagonal (``C`` itself is not needed).
      jac: ``H (c_y, D)`` Jacobian of the observation mean w.r.t. this block.
      a: ``A = C Hᵀ (d, c_y)`` (the caller computes it anyway for ``S``).
      s_chol: upper Cholesky factor of the *total* innovation covariance ``S`` (all blocks plus ``R``).
      r_half: any ``R½ (c_y, c_y)`` with ``R½ᵀR½ = R``.
      innov: ``ε = y − ŷ (c_y,)``.
      q: variance ``q ≥ 0`` of the isotropic part of the prior covariance (pending dynamics noise).
      use_q: static switch; ``False`` drops every ``q`` term (saves one pass when ``q ≡ 0``).
      carry_q: static switch; ``True`` (the paper's ``P_{d,+q}``) adds ``q`` to the kept eigenvalues, so the new
        factor carries it; ``False`` projects with ``P_d`` — ``q`` then acts on this step's gain only (seed 003's
        reference code: its projection adds ``q`` to the small Gram's eigenvalues and divides it out again).

    With ``Z = S⁻¹Aᵀ``, ``Φ = [I − AZ ; R½Z]``, ``Ψ = [−A ; R½]`` and ``(W, s2) = P_{d,+q}`` weights of ``N Nᵀ``
    (``N = Φ C + q Ψ S⁻¹H``): ``u = A S⁻¹ε``, ``left = WΦ``, ``gram = s2``; with ``use_q`` also
    ``q_left = q WΨ`` and ``q_u = q S⁻¹ε``.
    """
    d = a.shape[0]
    dtype = a.dtype
    s_inv_eps = solve_spd_factor(s_chol, innov[:, None])[:, 0]  # (c_y,)
    z = solve_spd_factor(s_chol, a.T)  # S⁻¹Aᵀ (c_y, d)
    phi = jnp.concatenate([jnp.eye(d, dtype=dtype) - a @ z, r_half @ z], axis=0)  # (d+c_y, d)
    g_n = (phi * gram[None, :]) @ phi.T
    if use_q:
        psi = jnp.concatenate([-a, r_half], axis=0)  # (d+c_y, c_y)
        vv = solve_spd_factor(s_chol, solve_spd_factor(s_chol, jac @ jac.T).T)  # S⁻¹HHᵀS⁻¹
        cross = phi @ z.T @ psi.T
        g_n = g_n + q * (cross + cross.T) + q**2 * (psi @ vv @ psi.T)
    w, s2 = project_weights(g_n, d, q if use_q and carry_q else 0.0)
    if not use_q:
        return LowRankStep(a @ s_inv_eps, w @ phi, s2, None, None)
    return LowRankStep(a @ s_inv_eps, w @ phi, s2, q * (w @ psi), q * s_inv_eps)


def lowrank_kalman_update(mean: Array, c: Array, step: LowRankStep, s_chol: Array, jac: Array
                          ) -> tuple[Array, Array, Array]:
    """Kalman update of one block with covariance ``CᵀC + qI`` (rows of ``C`` orthogonal) with one big GEMM.

    This is the hidden-block step of HiLoFi / LoLoFi and the whole LRKF step (seed 003, Algorithm 1 lines
    6–7, 10, 12 and Algorithm 4), rewritten so that no ``D``-sized Gram or transposed copy is formed:

    Args:
      mean: ``μ (D,)`` block mean.
      c: ``C (d, D)`` factor, rows mutually orthogonal (the invariant every projection restores).
      step: :func:`lowrank_kalman_weights` of this step (``C``'s Gram, ``H``, ``A = C Hᵀ``, ``S``, ``R½``, ``ε``,
        ``q``) — the ``(d + c_y)``-sized half.
      s_chol: upper Cholesky factor of the *total* innovation covariance ``S`` (all blocks plus ``R``).
      jac: ``H (c_y, D)`` Jacobian of the observation mean w.r.t. this block.

    Equations (``Z = S⁻¹Aᵀ``, ``V = S⁻¹H``; ``Kᵀ = Z C + q V`` is never formed):
      ``μ ← μ + Kε = μ + Cᵀ(A S⁻¹ε) + q Vᵀε``;
      ``N = [C − A Kᵀ ; R½Kᵀ] = Φ C + q Ψ V`` with ``Φ = [I − AZ ; R½Z]``, ``Ψ = [−A ; R½]``;
      ``N Nᵀ = Φ diag(gram) Φᵀ + q(Φ (A S⁻¹) Ψᵀ + transpose) + q² Ψ S⁻¹HHᵀS⁻¹ Ψᵀ``   (all ``(d+c_y)²``);
      ``(W, s2) = P_{d,+q}`` weights of ``N Nᵀ``;  ``C ← (WΦ) C + q (WΨ) V``, ``gram ← s2``.
      ``C`` is read three times (``A = C Hᵀ`` by the caller, the GEMM ``(WΦ) C``, the GEMV ``(AS⁻¹ε)ᵀC``) and
      written once; the only ``O(d²D)`` work is the GEMM.

    Returns ``(mean, C, gram)``: ``CᵀC`` is the best rank-``d`` factor of the surrogate
    ``(I−KH)(CᵀC)(I−KH)ᵀ + KRKᵀ + qI`` (Corollary C.3; without the ``+ qI`` when ``carry_q=False``), exactly the
    Joseph form when ``q = 0`` and ``d`` covers the stacked rank.
    """
    c_new = step.left @ c  # (d, D): the one O(d²D) pass
    dmean = step.u @ c  # a second read of C; cheaper than slicing a (d+1, D) product (that copies (d, D))
    if step.q_left is not None:
        c_new = c_new + step.q_left @ solve_spd_factor(s_chol, jac)
        dmean = dmean + step.q_u @ jac
    return mean + dmean, c_new, step.gram


_FUSED_RANK_MAX = 16  # dense_block_update: up to this many outputs, the Σ update is one fused elementwise pass


def dense_block_update(
    mean: Array, sigma: Array, g: Array, s: Array, r_other: Array, innov: Array, g_gain: Array | None = None
) -> tuple[Array, Array]:
    """(Block-diagonal) Joseph update of a dense covariance, in ``O(D² c)`` — the EKF's and HiLoFi's kernel.

    Same target as :func:`sqrt_factor_update`: ``Σ⁺ = (I−KL)Σ(I−KL)ᵀ + KRKᵀ`` with ``K = ΣLᵀS⁻¹`` and
    ``S = LΣLᵀ + R_o + R`` (``R_o = 0``: the plain EKF).  Multiplied out with ``G = ΣLᵀ (D, c)`` and
    ``M = LΣLᵀ + R = S − R_o = U_Mᵀ U_M`` (upper Cholesky factor):

    ``Σ⁺ = Σ − KGᵀ − GKᵀ + KMKᵀ = Σ + X₊X₊ᵀ − X₋X₋ᵀ``,  ``X₋ = G U_M⁻¹``,  ``X₊ = K U_Mᵀ − X₋``   (both ``(D, c)``)

    — an identity for any ``K``, so the Joseph form's property holds: an error ``δ`` in the computed gain enters
    ``Σ⁺`` only as ``+δMδᵀ`` (PSD, second order; here it is ``X₊X₊ᵀ``, since ``X₊ = δ U_Mᵀ`` for the EKF), where the
    shorter ``Σ − K(S + R_o)Kᵀ``, equal in exact arithmetic, has a first-order error ``−δSK*ᵀ − …``.

    The ``D × D`` work is one fused elementwise pass over ``Σ`` adding ``Σ_k (x⁺_ik x⁺_jk − x⁻_ik x⁻_jk)``
    (for ``c ≤ 16``; above that, two rank-``c`` GEMMs): entry ``(i, j)`` sums the same floating-point products as entry
    ``(j, i)`` in the same order, so a symmetric ``Σ`` stays exactly symmetric with no ``(A + Aᵀ)/2`` pass.  On
    XLA:CPU that transpose pass, and the two ``D × D`` temporaries of the older ``Σ − KGᵀ − GKᵀ + KMKᵀ``, cost 20×
    the update itself at ``D = 10⁴`` (656 ms against 30 ms for the jitted update alone; the whole EKF step in
    ``benchmarks/results/speed.md`` went from 785 ms to 153 ms, 33 ms with the state updated in place).

    Args:
      mean: ``μ (D,)``; sigma: ``Σ (D, D)``, symmetric; g: ``G = ΣLᵀ (D, c)``; s: total ``S (c, c)``;
      r_other: ``R_o (c, c)``; innov: ``ε (c,)``.
      g_gain: the gain's numerator, ``K = g_gain S⁻¹`` (default ``G``, the optimal gain for ``Σ``).  The Joseph
        identity above holds for any ``K``; HiLoFi's ``dynamics_mode="gain"`` passes ``(Σ + qI)Lᵀ`` with
        ``R_o`` holding ``q LLᵀ`` too, so ``q`` shapes the gain but is not carried into ``Σ⁺``.

    Returns ``(μ + Kε, Σ⁺)``.
    """
    s = symmetrize(s)
    k = solve_spd_factor(chol_upper(s), (g if g_gain is None else g_gain).T).T  # (D, c)
    u_m = chol_upper(symmetrize(s - r_other))  # M = U_Mᵀ U_M (c, c)
    x_minus = g @ solve_triangular(u_m, jnp.eye(u_m.shape[0], dtype=u_m.dtype), lower=False)  # G U_M⁻¹
    x_plus = k @ u_m.T - x_minus
    if x_plus.shape[1] > _FUSED_RANK_MAX:
        return mean + k @ innov, sigma + x_plus @ x_plus.T - x_minus @ x_minus.T
    for i in range(x_plus.shape[1]):  # unrolled: XLA fuses the c outer products into one pass over Σ
        sigma = sigma + x_plus[:, i, None] * x_plus[None, :, i] - x_minus[:, i, None] * x_minus[None, :, i]
    return mean + k @ innov, sigma


def sqrt_factor_update(
    mean: Array, u: Array, b: Array, s: Array, r_other: Array, r_half: Array, innov: Array
) -> tuple[Array, Array]:
    """Full-rank square-root Joseph update of one block in ``O(D² c)`` (Potter-type, no QR of ``D × D``).

    The block has covariance ``Σ = UᵀU`` (``U (D, D)``, any square root) and Jacobian ``L (c, D)``; the other
    blocks contribute ``R_o`` to ``S = LΣLᵀ + R_o + R``.  Block-diagonal Joseph form (seed 003 Alg. 1 line 13):
    ``Σ⁺ = (I−KL)Σ(I−KL)ᵀ + KRKᵀ``, ``K = ΣLᵀS⁻¹``.  With ``B = U Lᵀ`` this is ``Σ⁺ = Uᵀ(I − B Ŝ⁻¹ Bᵀ)U``,
    ``Ŝ = S (S+R_o)⁻¹ S = BᵀB + R̂``, ``R̂ = R + R_o (S+R_o)⁻¹ R_o``.  With upper factors ``Ŝ = FᵀF`` and
    ``R̂ = EᵀE``, ``M = (F+E)⁻¹F⁻ᵀ`` solves ``M + Mᵀ − MᵀBᵀBM = Ŝ⁻¹`` (Potter / Andrews), so

    ``U ← U − B M (Bᵀ U)``   and   ``μ ← μ + (BᵀU)ᵀ S⁻¹ ε``.

    Args:
      mean: ``μ (D,)``; u: ``U (D, D)``; b: ``B = U Lᵀ (D, c)``; s: total ``S (c, c)``;
      r_other: ``R_o (c, c)``; r_half: ``R½`` with ``R½ᵀR½ = R``; innov: ``ε (c,)``.

    Returns ``(mean, U)``.  ``U`` stays a square root of the exact Joseph covariance but is no longer triangular.
    """
    c = s.shape[0]
    w = b.T @ u  # (c, D)
    s_inv_eps = solve_spd_factor(chol_upper(symmetrize(s)), innov[:, None])[:, 0]
    f_tilde = chol_upper(symmetrize(s + r_other))
    t = solve_triangular(f_tilde, r_other, trans="T", lower=False)  # F̃⁻ᵀ R_o
    e = qr_upper(r_half, t)  # EᵀE = R + R_o (S+R_o)⁻¹ R_o
    f = chol_upper(symmetrize(b.T @ b + e.T @ e))
    f_inv_t = solve_triangular(f, jnp.eye(c, dtype=s.dtype), trans="T", lower=False)  # F⁻ᵀ
    m = solve_triangular(f + e, f_inv_t, lower=False)  # (F+E)⁻¹F⁻ᵀ
    return mean + s_inv_eps @ w, u - b @ (m @ w)


GRAM_BLOCK = 8192  # rows per block of weighted_gram (at n = 50 a block is 1.6 MB, cache-resident)
GRAM_MIN_SIZE = 1 << 21  # weighted_gram blocks only above P·n = 2M entries (an 8 MB float32 factor)


def _row_block_sum(part, *xs: Array | None, block_part=None) -> Array:
    """``Σ_b block_part(rows_b of xs)`` over blocks of ``GRAM_BLOCK`` rows of the ``(D, …)`` arrays ``xs`` (``None``
    passes through; ``block_part`` defaults to ``part``) when ``D · n ≥ GRAM_MIN_SIZE`` with at least four blocks,
    else ``part(xs)`` on all rows."""
    p, n = xs[0].shape
    nb = p // GRAM_BLOCK
    if nb < 4 or p * n < GRAM_MIN_SIZE:
        return part(*xs)
    block_part = block_part or part

    def rows(x, start, size):
        return None if x is None else jax.lax.dynamic_slice_in_dim(x, start, size, 0)

    g = jax.lax.fori_loop(0, nb, lambda i, g: g + block_part(*(rows(x, i * GRAM_BLOCK, GRAM_BLOCK) for x in xs)),
                          jnp.zeros((n, n), xs[0].dtype))
    tail = nb * GRAM_BLOCK  # the remaining D mod GRAM_BLOCK rows
    return g + block_part(*(None if x is None else x[tail:] for x in xs))


def weighted_gram(w: Array, d: Array | None = None) -> Array:
    """``G = Wᵀ diag(d) W`` ``(n, n)`` for ``w (P, n)`` and ``d (P,)`` (``WᵀW`` when ``d`` is None).

    The reduction over the long axis ``P`` of a tall factor.  For large ``P·n`` it runs
    as a loop over blocks of ``GRAM_BLOCK`` rows, ``G = Σ_b W_bᵀ (d_b ⊙ W_b)``: the weighted copy ``d ⊙ W`` of
    the whole ``(P, n)`` factor is never written, each block stays in cache, and XLA:CPU's transposed-operand
    product runs faster on blocks than on the whole factor (one ``(P, n)`` pass instead of two; measured by
    ``python -m benchmarks round`` and ``speed``, ``benchmarks/results/speed.md``).  Small factors
    (``P·n < GRAM_MIN_SIZE``), where the loop's per-block overhead dominates, take the single product.  ``d`` may
    have any sign; for ``d > 0`` :func:`inv_weighted_gram` of ``1/d`` is faster on the blocked path.
    """
    def gram(wb, db):  # one product over some rows: Wᵀ diag(d) W
        return wb.T @ (wb if db is None else db[:, None] * wb)

    return _row_block_sum(gram, w, d)


def inv_weighted_gram(w: Array, v: Array) -> Array:
    """``G = Wᵀ diag(v)⁻¹ W`` ``(n, n)`` for ``w (P, n)`` and ``v (P,) > 0`` (LoFi's ``BᵀB = WᵀΥ⁻¹W``).

    :func:`weighted_gram` with ``d = 1/v``, except that on the blocked path each block's product is the Gram of one
    operand, ``G = Σ_b B_bᵀ B_b`` with ``B_b = v_b^{-1/2} ⊙ W_b``, which XLA:CPU runs faster than ``W_bᵀ (d_b ⊙ W_b)``
    of two different operands (on the single product, below ``GRAM_MIN_SIZE``, it is the other way round).
    """
    def one(wb, vb):
        return wb.T @ ((1.0 / vb)[:, None] * wb)

    def block(wb, vb):
        bb = jax.lax.rsqrt(vb)[:, None] * wb
        return bb.T @ bb

    return _row_block_sum(one, w, v, block_part=block)


#: rows of at most this many entries (one AVX-512 register of float32) take ``zᵀW`` in :func:`tall_t_matmul`
SHORT_ROW = 16


def tall_t_matmul(w: Array, z: Array) -> Array:
    """``Wᵀ z`` for a tall ``w (P, n)`` and ``z (P,)`` or ``(P, k)``: ``(n,)`` or ``(n, k)``.

    XLA:CPU runs a product with the transposed tall operand in its slow form whenever the result is laid out
    ``(n, k)``, and it folds an explicit transpose of a ``(k, n)`` result back into that form; the barrier keeps
    the fast ``zᵀW (k, n)`` product (vmapped over 3 seeds at ``P = 61,706``, ``n = 50``, ``k = 2``: 6.7 → 3.4
    ms).  A vector is one fused multiply-reduce pass (1.1 ms there against 4.0 ms for the mat-vec) when the rows
    of ``w`` are longer than :data:`SHORT_ROW`; with rows that do not fill one 16-float vector register XLA:CPU's
    reduction over ``P`` runs at a fraction of the memory rate, and the product ``zᵀW`` is the faster form
    (``benchmarks/studies/lofi_svd``, ``layout`` part: at ``P = 10⁶``, ``n = 10`` 38 ms against 6 ms).
    """
    if z.ndim == 1:
        if w.shape[1] <= SHORT_ROW:
            return z @ w
        return jnp.sum(w * z[:, None], axis=0)
    return jax.lax.optimization_barrier(z.T @ w).T
