"""LoFi: extended Kalman filter with a diagonal-plus-low-rank PRECISION (seed 000, Chang et al. 2023).

State: mean ``μ (P,)``, precision ``Σ⁻¹ = Υ + W Wᵀ`` with ``Υ = diag(υ)``, ``υ (P,) > 0`` and ``W (P, L)``;
O(P·L) memory, no ``P × P`` matrix is ever formed.  Model: ``θ_t = γ θ_{t-1} + u_t``, ``u_t ~ N(0, q I)``;
``y_t ~ N(m(f(θ_t, x_t)), R_t)`` linearised at the predicted mean (moment-matched for classification).

predict (Alg. 2 of the main text — the printed eq. 25 / Alg. 4 have typos, see the seed-000 digest §2.3):
    ``μ⁻ = γ μ``;  ``υ⁻ = υ / (γ² + q υ)``;  ``r = 1 / (γ² + q υ)``  (elementwise)
    ``M = I_L + q Wᵀ diag(r) W = UᵀU``;  ``W⁻ = γ diag(r) W U⁻¹``       (any ``F`` with ``F Fᵀ = M⁻¹`` works)
    This is exact: ``(Υ⁻ + W⁻W⁻ᵀ)⁻¹ = γ² (Υ + WWᵀ)⁻¹ + q I``.
update (Alg. 3), with ``J = ∂m/∂θ (C, P)`` at ``μ⁻``, ``R = VᵀV`` (upper Cholesky), ``A = V⁻ᵀ`` (``AᵀA = R⁻¹``):
    ``W̃ = [W⁻, Jᵀ Aᵀ]  (P, L + C)``                      precision of the exact update: ``Υ⁻ + W̃ W̃ᵀ``
    ``μ = μ⁻ + (Υ⁻ + W̃W̃ᵀ)⁻¹ Jᵀ R⁻¹ (y − ŷ)``            exact EKF mean given the DLR(L) prior (before truncation),
        computed in gain form ``μ⁻ + Σ⁻ Jᵀ (J Σ⁻ Jᵀ + R)⁻¹ (y − ŷ)`` with ``Σ⁻ = S Sᵀ`` (the root below):
        ``a = Υ^{-1/2} Jᵀ``, ``β = Bᵀa``;  ``z = SᵀJᵀ = a − BKβ``, ``JΣ⁻Jᵀ = zᵀz``;  ``Σ⁻Jᵀ = Υ^{-1/2} (a − BK₂β)``
    ``W̃`` → :func:`linalg.project_weights` of its Gram ``W̃ᵀW̃ = [[WᵀW, Wᵀc], [cᵀW, cᵀc]]``
    (``c = Jᵀ Aᵀ``; ``(L+C)²`` eigendecomposition; ``W̃`` itself is never formed):
    ``W`` = the top-``L`` directions, ``W×`` the ``C`` discarded ones;
    ``υ = υ⁻ + rowsum(W× ⊙ W×)``  so that ``diag(Υ + WWᵀ) = diag(Υ⁻ + W̃W̃ᵀ)`` exactly (eq. 41).
    Invariant: the new ``W = W̃ U`` (``U`` eigenvectors of ``W̃ᵀW̃``) has orthogonal columns, and the identity
    predict (``γ = 1``, ``q = 0``, no inflation) keeps them, so there ``WᵀW = diag(‖w_k‖²)`` is read off the
    column norms; after any other predict (the dynamics mix the columns) the update computes ``WᵀW``.
    ``spherical=True`` (App. F, class SPL(L)): ``Υ = η I`` is changed only by the dynamics; the discarded
    directions are dropped (the general predict above is exact for ``Υ = ηI`` and equals Alg. 6).
covariance inflation (App. E, applied to the posterior at ``t−1`` inside ``predict``, before the dynamics), with
factor ``α`` and the latent prior precision ``η_t`` (``η_t⁻¹ = γ² η_{t-1}⁻¹ + q``, ``η_0 = 1/init_cov``) and
``Γ_t = γ^t``:
    simple:    ``Υ̂ = Υ/(1+α)``,                 ``Ŵ = W/√(1+α)``,  ``μ̂ = μ``
    hybrid:    ``Υ̂ = Υ/(1+α) + αη/(1+α) I``,    ``Ŵ = W/√(1+α)``,  ``μ̂ = μ``
    bayesian:  as hybrid, and ``μ̂ = μ + (αη/(1+α)) (Υ̂ + ŴŴᵀ)⁻¹ (Γ μ_0 − μ)``
predictive: ``(ŷ, J Σ⁻ Jᵀ + R)`` with ``J Σ Jᵀ`` computed as the Gram of ``F Υ^{-1/2} Jᵀ`` (PSD by construction).

The covariance square root (used by ``predictive``, ``sample`` and the mean update).  With
``B = Υ^{-1/2} W = Q diag(s) Vᵀ`` (thin SVD, from the small Gram ``BᵀB``) and
``c_k = 1 / (√(1+s_k²) (1 + √(1+s_k²)))``:
    ``F = I − Q diag(s² c) Qᵀ``  is symmetric and  ``F² = I − Q diag(s²/(1+s²)) Qᵀ = (I + BBᵀ)⁻¹``, so
    ``Σ = (Υ + WWᵀ)⁻¹ = Υ^{-1/2} F F Υ^{-1/2}``.
Sampling (the DLR-precision trick of the digest §2.10): ``θ = μ + Υ^{-1/2} F ε``, ``ε ~ N(0, I_P)``, whose
covariance is exactly ``Σ``; cost O(P L²) once per state, then O(P L) per draw.  Applying ``F`` as
``z − Q (s² c ⊙ Qᵀ z)`` also halves the cancellation of the Woodbury form (``1 − s²c = 1/√(1+s²)``); in code
``Q diag(s²c) Qᵀ = B K Bᵀ`` with ``K = U diag(c) Uᵀ`` (``n × n``), so no ``(P, n)`` matrix besides ``B`` is formed;
likewise ``F² = I − B K₂ Bᵀ`` with ``K₂ = U diag(1/(1+s²)) Uᵀ``.

Cost per step: ``update`` one ``(P, L)`` Gram ``BᵀB = WᵀΥ⁻¹W`` (the root), one ``(P, 2C)ᵀ (P, L)`` product for
``[Wᵀc, Bᵀa]``, one ``(P, L) @ (L, 2C)`` for the mean, and the ``(P, L) @ (L, L)`` and ``(P, L) @ (L, C)`` products
of the truncation — plus the Gram ``WᵀW`` when the predict is not the identity; ``sample`` / ``predictive`` the
same ``BᵀB`` (XLA computes it once when they share a jitted step with ``update``); ``predict`` nothing when
``γ = 1``, ``q = 0`` and there is no inflation, else one Gram and one GEMM.  Against the earlier form, which
concatenated ``W̃`` and took its Gram (2-core benchmark machine, alternating runs): one predict + update on a
1M-parameter MLP at rank 10 83–96 → 56–84 ms; on LeNet5 at rank 50 (a 12 MB factor) 16–22 → 15–17 ms, within the
machine's noise; the MNIST runner's Thompson step for 3 vmapped seeds (LeNet5, rank 50) 73.5 → 56.5 ms.
``B = Υ^{-1/2} W`` is never materialised: the Gram is :func:`linalg.weighted_gram` (blocked over ``P``,
the weights applied per cache-resident block) and ``Bᵀz`` is :func:`linalg.tall_t_matmul` of
``Υ^{-1/2} z``.  Against materialising ``B`` (same machine, BLAS on one thread, three alternating runs of each
checkout): the MNIST runner's Thompson step for 3 vmapped seeds 46.8 → 41.5 ms (medians of 8 compiled scans of 50
rounds); one predict + update with the state donated, LeNet5 rank 50 15.0 → 10.2 ms (one of the three runs 14.0),
rank 10 4.4 → 3.8 ms; MLPs of 100k / 1M parameters at rank 10 unchanged within the machine's noise.

``rank=0`` gives the variational diagonal EKF (VD-EKF, App. A.4).  With ``rank ≥ P`` no mass is ever
discarded and LoFi equals the full-covariance EKF.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from banditkit import rng
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, Posterior, SpaceCell, as_obs, check_common_hyper, linearize

Array = jax.Array

INFLATIONS = ("none", "simple", "hybrid", "bayesian")


class LoFiState(NamedTuple):
    mean: Array  # (P,) μ
    prec_diag: Array  # (P,) υ, diagonal of Υ
    prec_lr: Array  # (P, L) W, precision = diag(υ) + W Wᵀ
    prior_prec: Array  # () η_t, precision of the latent predictive prior (inflation)
    prior_scale: Array  # () Γ_t = Π γ, the latent prior mean is Γ_t μ_0
    prior_mean: Array  # (P,) μ_0


class _Root(NamedTuple):
    """Square root of the DLR covariance: ``Σ = (Υ + WWᵀ)⁻¹ = S Sᵀ`` with ``S = Υ^{-1/2} F``, ``F = I − B K Bᵀ``."""

    isd: Array  # (P,) Υ^{-1/2}
    w: Array  # (P, n) W; B = Υ^{-1/2} W is never materialised (B v = isd ⊙ W v, Bᵀ z = Wᵀ (isd ⊙ z))
    k: Array  # (n, n) K = U diag(c) Uᵀ over the kept eigenvectors of BᵀB (see _cov_root)
    k2: Array  # (n, n) K₂ = U diag(1/(1+s²)) Uᵀ, so F² = I − B K₂ Bᵀ = (I + BBᵀ)⁻¹ (Woodbury)


def _cov_root(prec_diag: Array, prec_lr: Array) -> _Root:
    """:class:`_Root` of ``(diag(υ) + W Wᵀ)⁻¹`` from the small Gram ``BᵀB = U diag(s²) Uᵀ`` (``O(P n²)``).

    ``F = I − Jᵀ diag(c) J`` with ``J = Uᵀ Bᵀ`` (rows ``s_k q_kᵀ``, ``linalg.project_weights``) and ``c`` as in the
    module docstring; ``J`` is never formed: ``F z = z − B (K (Bᵀ z))`` with ``K = U diag(c) Uᵀ`` costs two
    ``(P, n)`` mat-vecs per column of ``z``.  Directions with ``s_k = 0`` drop out of ``K``.
    """
    isd = 1.0 / jnp.sqrt(prec_diag)
    n = prec_lr.shape[1]
    if n == 0:
        empty = jnp.zeros((0, 0), prec_lr.dtype)
        return _Root(isd, prec_lr, empty, empty)
    btb = linalg.weighted_gram(prec_lr, 1.0 / prec_diag)  # BᵀB = Wᵀ Υ⁻¹ W
    w, s2 = linalg.project_weights(btb, n)  # rows of w: eigenvectors u_kᵀ of BᵀB (zero where s_k = 0)
    root = jnp.sqrt(1.0 + s2)
    c = 1.0 / (root * (1.0 + root))
    return _Root(isd, prec_lr, w.T @ (c[:, None] * w), w.T @ (w / (1.0 + s2)[:, None]))


def _apply_f(root: _Root, z: Array) -> Array:
    """``F z = z − B K Bᵀ z`` for ``z (P,)`` or ``(P, k)``, with ``B = Υ^{-1/2} W`` applied factor by factor."""
    isd = root.isd if z.ndim == 1 else root.isd[:, None]
    btz = linalg.tall_t_matmul(root.w, isd * z)  # Bᵀ z = Wᵀ (Υ^{-1/2} z)  (n,) or (n, k)
    return z - isd * (root.w @ (root.k @ btz))


def _root_jac(root: _Root, jac: Array) -> Array:
    """``Sᵀ Jᵀ = F Υ^{-1/2} Jᵀ`` ``(P, C)`` for ``J (C, P)``: ``J Σ Jᵀ`` is its Gram (PSD by construction)."""
    return _apply_f(root, root.isd[:, None] * jac.T)


def _solve_dlr(prec_diag: Array, prec_lr: Array, v: Array) -> Array:
    """``(diag(υ) + W Wᵀ)⁻¹ v`` as ``Υ^{-1/2} F F Υ^{-1/2} v`` (no ``P × P`` matrix)."""
    root = _cov_root(prec_diag, prec_lr)
    return root.isd * _apply_f(root, _apply_f(root, root.isd * v))


def _predict_dlr(prec_diag: Array, prec_lr: Array, g: Array, q: Array) -> tuple[Array, Array]:
    """Exact DLR precision of ``γ² (Υ + WWᵀ)⁻¹ + q I`` (Alg. 2): returns ``(υ⁻, W⁻)``."""
    r = 1.0 / (g**2 + q * prec_diag)  # (P,)
    ups = prec_diag * r
    if prec_lr.shape[1] == 0:
        return ups, prec_lr
    m = jnp.eye(prec_lr.shape[1], dtype=prec_lr.dtype) + q * linalg.weighted_gram(prec_lr, r)
    u = linalg.chol_upper(linalg.symmetrize(m))
    # W U⁻¹ through the small explicit inverse: XLA:CPU's triangular solve with P right-hand sides is 10-100×
    # slower than an (L, L) inverse plus a GEMM
    w_u = prec_lr @ _tri_inv(u)  # (P, L)
    return ups, g * r[:, None] * w_u


def _tri_inv(u: Array) -> Array:
    """``U⁻¹`` of a small upper-triangular matrix."""
    return solve_triangular(u, jnp.eye(u.shape[0], dtype=u.dtype), lower=False)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def lofi(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    rank: int = 10,
    init_cov: float = 1.0,
    dynamics_cov: float = 0.0,
    forgetting: float = 1.0,
    inflation: str = "bayesian",
    inflation_factor: float = 0.0,
    spherical: bool = False,
) -> Posterior:
    """LoFi: EKF with a diagonal-plus-rank-``rank`` precision over all parameters (see module docstring).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input (``x`` any pytree).
      likelihood: observation model (``Gaussian``, ``Bernoulli`` or ``Categorical``).
      rank: ``L ≥ 0``, columns of the low-rank precision factor (``0`` = VD-EKF; ``≥ P`` = full EKF).
      init_cov: prior variance of every parameter: ``Υ_0 = I / init_cov``, ``W_0 = 0``.
      dynamics_cov: ``q ≥ 0``, random-walk variance added per ``predict``.
      forgetting: ``γ ∈ (0, 1]``, the mean shrinks as ``θ ← γθ`` per ``predict``.
      inflation: ``"none" | "simple" | "hybrid" | "bayesian"`` covariance inflation (App. E), applied in
        ``predict`` before the dynamics; inactive when ``inflation_factor = 0`` (the paper found its effect
        negligible).
      inflation_factor: ``α ≥ 0``; past likelihood terms are discounted by ``(1+α)^{-lag}``.
      spherical: keep ``Υ = η I`` (App. F): discarded directions are dropped instead of moved into ``Υ``.
    """
    check_common_hyper("lofi", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise ValueError(f"lofi: rank must be an integer >= 0 (0 gives the diagonal VD-EKF), got {rank!r}")
    if inflation not in INFLATIONS:
        raise ValueError(f"lofi: inflation must be one of {INFLATIONS}, got {inflation!r}")
    if _is_number(inflation_factor) and inflation_factor < 0:
        raise ValueError(f"lofi: inflation_factor must be >= 0, got {inflation_factor}")
    inflate = inflation != "none" and not (_is_number(inflation_factor) and inflation_factor == 0)
    static = (not inflate and _is_number(forgetting) and forgetting == 1.0 and _is_number(dynamics_cov)
              and dynamics_cov == 0.0)
    cell = SpaceCell()

    def init(params) -> LoFiState:
        mu = cell.set(params).ravel(params)
        dt = mu.dtype
        eta = jnp.asarray(1.0 / init_cov, dt)
        return LoFiState(
            mean=mu,
            prec_diag=eta * jnp.ones_like(mu),
            prec_lr=jnp.zeros((mu.size, rank), dt),
            prior_prec=eta,
            prior_scale=jnp.ones((), dt),
            prior_mean=jnp.copy(mu),  # its own buffer: aliased leaves cannot be donated to jit
        )

    def _obs_fn(x):
        s = cell.space
        return lambda t: apply_fn(s.unravel(t), x)

    def _inflate(state: LoFiState) -> LoFiState:
        dt = state.mean.dtype
        a = jnp.asarray(inflation_factor, dt)
        w = state.prec_lr / jnp.sqrt(1.0 + a)
        ups = state.prec_diag / (1.0 + a)
        mu = state.mean
        if inflation in ("hybrid", "bayesian"):
            shrink = a * state.prior_prec / (1.0 + a)
            ups = ups + shrink
            if inflation == "bayesian":
                mu = mu + shrink * _solve_dlr(ups, w, state.prior_scale * state.prior_mean - mu)
        return state._replace(mean=mu, prec_diag=ups, prec_lr=w)

    def predict(state: LoFiState) -> LoFiState:
        if static:
            return state  # γ = 1, q = 0, no inflation: the dynamics are the identity (no (P, L) pass)
        if inflate:
            state = _inflate(state)
        dt = state.mean.dtype
        g = jnp.asarray(forgetting, dt)
        q = jnp.asarray(dynamics_cov, dt)
        ups, w = _predict_dlr(state.prec_diag, state.prec_lr, g, q)
        eta = state.prior_prec / (g**2 + q * state.prior_prec)
        return state._replace(mean=g * state.mean, prec_diag=ups, prec_lr=w, prior_prec=eta,
                              prior_scale=g * state.prior_scale)

    def update(state: LoFiState, x, y) -> LoFiState:
        mu = state.mean
        y = as_obs(y, mu.dtype)
        yhat, jac, r = linearize(_obs_fn(x), mu, likelihood)
        if y.shape != yhat.shape:
            raise ValueError(f"lofi.update: y has shape {y.shape} but the model predicts {yhat.shape}; pass y as (C,)")
        v_r = linalg.chol_upper(linalg.symmetrize(r))  # R = VᵀV
        c = jac.T @ _tri_inv(v_r)  # the new precision columns (A J)ᵀ = Jᵀ V⁻¹ (P, C)
        w = state.prec_lr
        nc = c.shape[1]
        # the root of the prior covariance: the one `sample` and `predictive` take of this state, so a jitted
        # sample-then-update step computes the (P, L) Gram BᵀB once
        root = _cov_root(state.prec_diag, w)
        a = root.isd[:, None] * jac.T  # Υ^{-1/2} Jᵀ (P, C)
        # one pass over W for both small projections of the step: [Wᵀc, Bᵀa] = Wᵀ [c, Υ^{-1/2} a] (L, 2C)
        proj = linalg.tall_t_matmul(w, jnp.concatenate([c, root.isd[:, None] * a], axis=1))
        w_c, beta = proj[:, :nc], proj[:, nc:]
        # mean, the exact EKF step from the DLR(L) prior in gain form: μ += Σ Jᵀ (J Σ Jᵀ + R)⁻¹ e.  One pass over B
        # gives z = Sᵀ Jᵀ = F a = a − B K β (so J Σ Jᵀ = zᵀz, PSD by construction) and Υ^{1/2} Σ Jᵀ = F² a = a − B K₂ β
        both = root.isd[:, None] * (w @ jnp.concatenate([root.k @ beta, root.k2 @ beta], axis=1))  # (P, 2C)
        z = a - both[:, :nc]
        u_y = linalg.chol_upper(linalg.symmetrize(z.T @ z + r))  # J Σ Jᵀ + R = U_yᵀ U_y
        gain = linalg.solve_spd_factor(u_y, (y - yhat)[:, None])  # (C, 1)
        mu = mu + root.isd * ((a - both[:, nc:]) @ gain)[:, 0]
        # truncation of W̃ = [W, c] (never formed): eigen-weights of its Gram [[WᵀW, Wᵀc], [cᵀW, cᵀc]], then the
        # kept and the discarded directions as two products (slicing one (P, n) product costs more on XLA:CPU).
        # An update leaves W with orthogonal columns (W = W̃ U, U eigenvectors of W̃ᵀW̃) and the identity predict
        # keeps them, so then WᵀW = diag(column norms²), one cheap reduction instead of a second (P, L) Gram;
        # after any other predict (the dynamics mix the columns; inflation only rescales them) WᵀW is computed
        w_gram = jnp.diag(jnp.sum(w * w, axis=0)) if static else linalg.weighted_gram(w)
        wts, _ = linalg.project_weights(jnp.block([[w_gram, w_c], [w_c.T, c.T @ c]]), rank + nc)  # descending
        ups = state.prec_diag
        if not spherical:
            disc = w @ wts[rank:, :rank].T + c @ wts[rank:, rank:].T  # W× (P, C), the discarded directions
            ups = ups + jnp.sum(disc**2, axis=1)
        w = w @ wts[:rank, :rank].T + c @ wts[:rank, rank:].T  # (P, L)
        return state._replace(mean=mu, prec_diag=ups, prec_lr=w)

    def predictive(state: LoFiState, x) -> tuple[Array, Array]:
        yhat, jac, r = linearize(_obs_fn(x), state.mean, likelihood)
        fz = _root_jac(_cov_root(state.prec_diag, state.prec_lr), jac)  # F Υ^{-1/2} Jᵀ (P, C)
        return yhat, linalg.symmetrize(fz.T @ fz + r)

    def sample(key: Array, state: LoFiState):
        root = _cov_root(state.prec_diag, state.prec_lr)
        eps = rng.normal(key, state.mean.shape, state.mean.dtype)
        return cell.space.unravel(state.mean + root.isd * _apply_f(root, eps))

    def mean(state: LoFiState):
        return cell.space.unravel(state.mean)

    hyper = dict(rank=rank, init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting,
                 inflation=inflation, inflation_factor=inflation_factor, spherical=spherical)
    return Posterior(init, predict, update, predictive, sample, mean, name="lofi", hyper=hyper)
