"""Diagonal-plus-low-rank (DLR) precision kernels, shared by LoFi and BONG's ``"dlr"`` family.

A DLR precision is ``Λ = Υ + W Wᵀ`` with ``Υ = diag(υ)``, ``υ (P,) > 0``, and a tall factor ``W (P, n)`` (columns;
LoFi keeps this layout in its state, BONG keeps the rows ``Wᵀ (n, P)`` and passes their transpose).  No ``P × P``
matrix is ever formed: the square matrices are ``(n, n)`` and ``(C, C)``.

Covariance square root (Woodbury).  With ``B = Υ^{-1/2} W (P, n)`` and its small Gram ``BᵀB = U diag(s²) Uᵀ``::

    Σ = Λ⁻¹ = Υ^{-1/2} (I + BBᵀ)⁻¹ Υ^{-1/2} = Υ^{-1/2} (I − B K₂ Bᵀ) Υ^{-1/2},     K₂ = U diag(1/(1+s²)) Uᵀ
    F = I − B K Bᵀ,   K = U diag(c) Uᵀ,   c_k = 1 / (√(1+s_k²) (1 + √(1+s_k²)))
    F is symmetric and F² = I − B K₂ Bᵀ = (I + BBᵀ)⁻¹,  so  Σ = S Sᵀ  with  S = Υ^{-1/2} F.

(With the thin SVD ``B = Q diag(s) Uᵀ``: ``F = I − Q diag(s²c) Qᵀ``, and ``1 − s²c = 1/√(1+s²)``, so applying ``F``
halves the cancellation of the Woodbury form.)  :class:`Root` holds ``(Υ^{-1/2}, W, K, K₂)``; ``B`` is never
materialised: ``Bᵀz = Wᵀ(Υ^{-1/2} z)`` (:func:`linalg.tall_t_matmul`) and ``BᵀB = WᵀΥ⁻¹W``
(:func:`linalg.inv_weighted_gram`).  Directions with ``s_k = 0`` drop out of ``K`` and ``K₂``.

Kernels (``W (P, n)``, ``z (P,)`` or ``(P, k)``, ``J (C, P)``):

``cov_root(υ, W)``          :class:`Root` of ``Σ = (Υ + WWᵀ)⁻¹``, ``O(P n²)`` once per state.
``apply_f(root, z)``        ``F z``.
``sqrt_t(root, z)``         ``Sᵀ z = F Υ^{-1/2} z`` (with ``z = Jᵀ``: ``J Σ Jᵀ`` is its Gram).
``quad(root, J)``           ``J Σ Jᵀ (C, C)``, PSD by construction.
``cov_matmul(root, z)``     ``Σ z = Υ^{-1/2} (I − B K₂ Bᵀ) Υ^{-1/2} z``;  ``solve(υ, W, z)`` the same from ``(υ, W)``.
``diag_sandwich(root, υ, δ)``  ``diag(Σ diag(δ) Σ) (P,)``.
``sample(root, ε)``         ``S ε = Υ^{-1/2} F ε``: with ``ε ~ N(0, I_P)`` a draw of ``N(0, Σ)``, ``O(P n)`` per draw.
``predict(υ, W, γ, q)``     the exact DLR precision of ``γ² Σ + q I``.
``truncate(υ, pieces, G, L)``  best rank-``L`` factor of ``Ñ Ñᵀ`` (``Ñ = [pieces]``), dropped diagonal into ``υ``.
``update(...)``             one EKF measurement step of a DLR prior, then :func:`truncate` (LoFi's step, BONG's
                            natural step with a low-rank ``G``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit.posteriors import linalg

Array = jax.Array


class Root(NamedTuple):
    """Square root of the DLR covariance: ``Σ = (Υ + WWᵀ)⁻¹ = S Sᵀ`` with ``S = Υ^{-1/2} F``, ``F = I − B K Bᵀ``."""

    isd: Array  # (P,) Υ^{-1/2}
    w: Array  # (P, n) W; B = Υ^{-1/2} W is never materialised (B v = isd ⊙ W v, Bᵀ z = Wᵀ (isd ⊙ z))
    k: Array  # (n, n) K = U diag(c) Uᵀ over the kept eigenvectors of BᵀB
    k2: Array  # (n, n) K₂ = U diag(1/(1+s²)) Uᵀ, so F² = I − B K₂ Bᵀ = (I + BBᵀ)⁻¹ (Woodbury)


def cov_root(prec_diag: Array, w: Array) -> Root:
    """:class:`Root` of ``(diag(υ) + W Wᵀ)⁻¹`` for ``υ (P,)``, ``W (P, n)``, from the Gram ``BᵀB = U diag(s²) Uᵀ``.

    ``O(P n²)`` for the Gram and ``O(n³)`` for its eigendecomposition (:func:`linalg.project_weights`, whose rows
    are the ``u_kᵀ``, zero where ``s_k = 0``); ``K = U diag(c) Uᵀ`` and ``K₂ = U diag(1/(1+s²)) Uᵀ`` ``(n, n)``.
    """
    isd = 1.0 / jnp.sqrt(prec_diag)
    n = w.shape[1]
    if n == 0:
        empty = jnp.zeros((0, 0), w.dtype)
        return Root(isd, w, empty, empty)
    btb = linalg.inv_weighted_gram(w, prec_diag)  # BᵀB = Wᵀ Υ⁻¹ W
    u, s2 = linalg.project_weights(btb, n)  # rows of u: eigenvectors u_kᵀ of BᵀB (zero where s_k = 0)
    root = jnp.sqrt(1.0 + s2)
    c = 1.0 / (root * (1.0 + root))
    return Root(isd, w, u.T @ (c[:, None] * u), u.T @ (u / (1.0 + s2)[:, None]))


def _minus_bkb(root: Root, k: Array, z: Array) -> Array:
    """``z − B k Bᵀ z`` for ``z (P,)`` or ``(P, m)`` and a symmetric ``k (n, n)``: two ``(P, n)`` passes."""
    isd = root.isd if z.ndim == 1 else root.isd[:, None]
    btz = linalg.tall_t_matmul(root.w, isd * z)  # Bᵀ z = Wᵀ (Υ^{-1/2} z)  (n,) or (n, m)
    return z - isd * (root.w @ (k @ btz))


def apply_f(root: Root, z: Array) -> Array:
    """``F z = z − B K Bᵀ z`` for ``z (P,)`` or ``(P, m)``."""
    return _minus_bkb(root, root.k, z)


def sqrt_t(root: Root, z: Array) -> Array:
    """``Sᵀ z = F Υ^{-1/2} z`` for ``z (P, m)``; with ``z = Jᵀ`` the Gram of the result is ``J Σ Jᵀ``."""
    return apply_f(root, root.isd[:, None] * z)


def quad(root: Root, jac: Array) -> Array:
    """``J Σ Jᵀ (C, C)`` for ``J (C, P)``, as the Gram of ``Sᵀ Jᵀ (P, C)`` (PSD by construction)."""
    fz = sqrt_t(root, jac.T)
    return fz.T @ fz


def cov_matmul(root: Root, z: Array) -> Array:
    """``Σ z = Υ^{-1/2} (I − B K₂ Bᵀ) Υ^{-1/2} z`` for ``z (P,)`` or ``(P, m)`` (Woodbury; no ``P × P`` matrix)."""
    isd = root.isd if z.ndim == 1 else root.isd[:, None]
    return isd * _minus_bkb(root, root.k2, isd * z)


def solve(prec_diag: Array, w: Array, z: Array) -> Array:
    """``(diag(υ) + W Wᵀ)⁻¹ z`` for ``W (P, n)``, ``z (P,)`` or ``(P, m)``: :func:`cov_matmul` of :func:`cov_root`."""
    return cov_matmul(cov_root(prec_diag, w), z)


def _rowsum(a: Array, b: Array) -> Array:
    """``Σ_k a_ik b_ik (P,)`` of two ``(P, m)`` arrays as a mat-vec (XLA:CPU reduces a short minor axis slowly)."""
    return (a * b) @ jnp.ones(a.shape[1], a.dtype)


def diag_sandwich(root: Root, prec_diag: Array, delta: Array) -> Array:
    """``diag(Σ diag(δ) Σ) (P,)`` for ``δ (P,)``; ``root`` is :func:`cov_root` of ``(υ, W)``.

    ``Σ = Υ⁻¹ − E`` with ``E = Y K₂ Yᵀ``, ``Y = Υ⁻¹ W (P, n)``, so
    ``diag(Σ diag(δ) Σ) = δ/υ² − 2 (δ/υ) ⊙ diag(E) + diag(E diag(δ) E)``, with ``diag(E) = rowsum((Y K₂) ⊙ Y)`` and
    ``diag(E diag(δ) E) = rowsum((Y K₂ M K₂) ⊙ Y)``, ``M = Yᵀ diag(δ) Y (n, n)``.
    """
    y = root.w / prec_diag[:, None]  # (P, n)
    yk = y @ root.k2
    m = linalg.weighted_gram(y, delta)
    return delta / prec_diag**2 - 2.0 * (delta / prec_diag) * _rowsum(yk, y) + _rowsum(yk @ (m @ root.k2), y)


def sample(root: Root, eps: Array) -> Array:
    """``S ε = Υ^{-1/2} F ε`` ``(P,)``: for ``ε ~ N(0, I_P)`` a draw of ``N(0, Σ)`` (``S Sᵀ = Σ`` exactly)."""
    return root.isd * apply_f(root, eps)


def predict(prec_diag: Array, w: Array, g: Array, q: Array) -> tuple[Array, Array]:
    """Exact DLR precision ``(υ⁻, W⁻)`` of the covariance ``γ² (Υ + WWᵀ)⁻¹ + q I`` (LoFi's Alg. 2), ``W (P, n)``.

    ``r = 1 / (γ² + q υ)`` (elementwise), ``υ⁻ = υ r``, ``M = I_n + q Wᵀ diag(r) W = UᵀU`` (upper Cholesky),
    ``W⁻ = γ diag(r) W U⁻¹ (P, n)``; any ``F`` with ``F Fᵀ = M⁻¹`` in place of ``U⁻¹`` gives the same precision.
    """
    r = 1.0 / (g**2 + q * prec_diag)  # (P,)
    ups = prec_diag * r
    if w.shape[1] == 0:
        return ups, w
    m = jnp.eye(w.shape[1], dtype=w.dtype) + q * linalg.weighted_gram(w, r)
    u = linalg.chol_upper(linalg.symmetrize(m))
    # W U⁻¹ through the small explicit inverse (XLA:CPU's triangular solve with P right-hand sides is slow)
    w_u = w @ linalg.tri_inverse(u)  # (P, n)
    return ups, g * r[:, None] * w_u


def truncate(
    prec_diag: Array, pieces: tuple[Array, ...], gram: Array, rank: int, *, spherical: bool = False
) -> tuple[Array, Array]:
    """Best rank-``L`` DLR form of ``Υ + Ñ Ñᵀ``, ``Ñ = [N_1, …, N_k] (P, m)`` given as its column blocks.

    ``gram = ÑᵀÑ (m, m)`` (the caller may assemble it from cheaper pieces).  With its eigenvectors ``V (m, m)`` as
    rows, in descending order of the eigenvalues (``ÑᵀÑ = Vᵀ diag(λ) V``; ``Ñ Vᵀ`` has orthogonal columns):
    ``W = Ñ V[:L]ᵀ (P, L)``, the top-``L`` directions, and ``W× = Ñ V[L:]ᵀ``, the discarded ones;
    ``υ ← υ + rowsum(W× ⊙ W×)``, so that ``diag(Υ + WWᵀ) = diag(Υ + ÑÑᵀ)`` exactly (LoFi eq. 41).  ``spherical``:
    the discarded directions are dropped and ``υ`` is returned unchanged.  ``Ñ`` itself is never formed: each block
    meets its columns of ``V``, the kept and the discarded directions as two products.  ``W`` has orthogonal columns.
    Returns ``(υ (P,), W (P, L))``.

    Every eigenvector is used, however small its eigenvalue (no cut-off as in :func:`linalg.project_weights`): ``V``
    is orthogonal to working precision, so ``WWᵀ + W×W×ᵀ = ÑÑᵀ`` up to rounding, and in float32 the rank-``L`` part
    is as close to the SVD truncation as a thin SVD of ``Ñ`` gets, although the Gram squares ``Ñ``'s condition
    number (a direction whose ``λ`` is lost in the Gram's rounding carries ``‖Ñv‖² ≈ ε‖ÑᵀÑ‖`` of mass either way).
    """
    _, evecs = linalg.eigh(linalg.symmetrize(gram))  # ascending
    wts = jnp.flip(evecs, axis=1).T  # (m, m): rows v_kᵀ, descending eigenvalues

    def mix(rows: slice) -> Array:
        out, start = None, 0
        for piece in pieces:
            term = piece @ wts[rows, start : start + piece.shape[1]].T
            out = term if out is None else out + term
            start += piece.shape[1]
        return out

    if not spherical:
        prec_diag = prec_diag + jnp.sum(mix(slice(rank, None)) ** 2, axis=1)
    return prec_diag, mix(slice(None, rank))


def update(
    mean: Array, prec_diag: Array, w: Array, root: Root, jac: Array, cols: Array, r: Array, innov: Array,
    rank: int, *, orthogonal: bool = False, spherical: bool = False,
) -> tuple[Array, Array, Array]:
    """One EKF measurement step of the DLR prior ``N(μ, (Υ + WWᵀ)⁻¹)``, then :func:`truncate` to rank ``L``.

    Args:
      mean: ``μ (P,)``; prec_diag: ``υ (P,)``; w: ``W (P, n)``; root: :func:`cov_root` of ``(υ, W)`` (passed in so a
        jitted step that also samples or predicts from this state computes the ``(P, n)`` Gram once).
      jac: ``J (C, P)``, the observation's Jacobian; r: ``R (C, C)``, its noise; innov: ``e = y − ŷ (C,)``.
      cols: ``A (P, K)`` with ``A Aᵀ = Jᵀ R⁻¹ J``, the precision the observation adds (``Jᵀ V⁻¹`` for ``R = VᵀV``;
        BONG passes ``J = A = Bᵀ``, ``R = I``).
      rank: ``L`` columns kept.  orthogonal: static; ``W`` has orthogonal columns, so ``WᵀW`` is read off its column
        norms.  spherical: static; see :func:`truncate`.

    Equations (``a = Υ^{-1/2} Jᵀ``, ``β = Bᵀ a``; one pass over ``W`` gives ``[WᵀA, β] = Wᵀ[A, Υ^{-1/2} a]``):
      ``z = Sᵀ Jᵀ = F a = a − B K β``, so ``J Σ Jᵀ = zᵀz``;   ``Υ^{1/2} Σ Jᵀ = F² a = a − B K₂ β``;
      ``μ ← μ + Σ Jᵀ (J Σ Jᵀ + R)⁻¹ e``  (the exact EKF mean of the un-truncated posterior, in gain form);
      ``(υ, W) ← truncate(υ, [W, A], [[WᵀW, WᵀA], [AᵀW, AᵀA]], L)``  (precision ``Υ + WWᵀ + AAᵀ`` before truncation).
    Returns ``(μ (P,), υ (P,), W (P, L))``.
    """
    nc, no = cols.shape[1], jac.shape[0]
    a = root.isd[:, None] * jac.T  # Υ^{-1/2} Jᵀ (P, C)
    proj = linalg.tall_t_matmul(w, jnp.concatenate([cols, root.isd[:, None] * a], axis=1))
    w_c, beta = proj[:, :nc], proj[:, nc:]
    # one pass over B for z = a − B K β and Υ^{1/2} Σ Jᵀ = a − B K₂ β
    both = root.isd[:, None] * (w @ jnp.concatenate([root.k @ beta, root.k2 @ beta], axis=1))  # (P, 2C)
    z = a - both[:, :no]
    u_y = linalg.chol_upper(linalg.symmetrize(z.T @ z + r))  # J Σ Jᵀ + R = U_yᵀ U_y
    gain = linalg.solve_spd_factor(u_y, innov[:, None])  # (C, 1)
    mean = mean + root.isd * ((a - both[:, no:]) @ gain)[:, 0]
    # the Gram [[WᵀW, WᵀA], [AᵀW, AᵀA]] of the stacked factor; WᵀW from column norms when they are orthogonal
    w_gram = jnp.diag(jnp.sum(w * w, axis=0)) if orthogonal else linalg.weighted_gram(w)
    gram = jnp.block([[w_gram, w_c], [w_c.T, cols.T @ cols]])
    prec_diag, w = truncate(prec_diag, (w, cols), gram, rank, spherical=spherical)
    return mean, prec_diag, w
