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
    ``μ = μ⁻ + (Υ⁻ + W̃W̃ᵀ)⁻¹ Jᵀ R⁻¹ (y − ŷ)``            exact EKF mean given the DLR(L) prior (before truncation)
    ``W̃ᵀ`` rows → :func:`banditkit.linalg.project` (Gram eigendecomposition, ``(L+C)²`` small matrix):
    ``W`` = the top-``L`` directions, ``W×`` the ``C`` discarded ones;
    ``υ = υ⁻ + rowsum(W× ⊙ W×)``  so that ``diag(Υ + WWᵀ) = diag(Υ⁻ + W̃W̃ᵀ)`` exactly (eq. 41).
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
``z − Q (s² c ⊙ Qᵀ z)`` also halves the cancellation of the Woodbury form (``1 − s²c = 1/√(1+s²)``).

``rank=0`` gives the variational diagonal EKF (VD-EKF, App. A.4).  With ``rank ≥ P`` no mass is ever
discarded and LoFi equals the full-covariance EKF.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from banditkit import linalg
from banditkit.likelihoods import Gaussian, Likelihood
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


def _whitened_svd(prec_diag: Array, prec_lr: Array) -> tuple[Array, Array]:
    """``(J, c)`` for the symmetric factor ``F = I − Jᵀ diag(c) J`` of ``(I + BBᵀ)⁻¹``, ``B = Υ^{-1/2} W``.

    ``J (L, P)`` has orthogonal rows ``s_k q_kᵀ`` (``linalg.project`` of ``Bᵀ``), ``c (L,)`` as in the module
    docstring.  Rows with ``s_k = 0`` are zero.
    """
    rows = (prec_lr / jnp.sqrt(prec_diag)[:, None]).T  # Bᵀ (L, P)
    if rows.shape[0] == 0:
        return rows, jnp.zeros((0,), rows.dtype)
    j, s2 = linalg.project(rows, rows.shape[0])
    root = jnp.sqrt(1.0 + s2)
    return j, 1.0 / (root * (1.0 + root))


def _apply_f(j: Array, c: Array, z: Array) -> Array:
    """``F z = z − Jᵀ (c ⊙ J z)`` for ``z (P,)`` or ``(P, k)``."""
    jz = j @ z
    return z - j.T @ (c.reshape(c.shape + (1,) * (z.ndim - 1)) * jz)


def _solve_dlr(prec_diag: Array, prec_lr: Array, v: Array) -> Array:
    """``(diag(υ) + W Wᵀ)⁻¹ v`` as ``Υ^{-1/2} F F Υ^{-1/2} v`` (no ``P × P`` matrix)."""
    j, c = _whitened_svd(prec_diag, prec_lr)
    isd = 1.0 / jnp.sqrt(prec_diag)
    return isd * _apply_f(j, c, _apply_f(j, c, isd * v))


def _predict_dlr(prec_diag: Array, prec_lr: Array, g: Array, q: Array) -> tuple[Array, Array]:
    """Exact DLR precision of ``γ² (Υ + WWᵀ)⁻¹ + q I`` (Alg. 2): returns ``(υ⁻, W⁻)``."""
    r = 1.0 / (g**2 + q * prec_diag)  # (P,)
    ups = prec_diag * r
    if prec_lr.shape[1] == 0:
        return ups, prec_lr
    m = jnp.eye(prec_lr.shape[1], dtype=prec_lr.dtype) + q * (prec_lr.T @ (r[:, None] * prec_lr))
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
        new_rows = _tri_inv(v_r).T @ jac  # A J = V⁻ᵀ J (C, P)
        rows = jnp.concatenate([state.prec_lr.T, new_rows], axis=0)  # W̃ᵀ (L + C, P)
        innov = jac.T @ linalg.solve_spd_factor(v_r, (y - yhat)[:, None])[:, 0]  # Jᵀ R⁻¹ e (P,)
        mu = mu + _solve_dlr(state.prec_diag, rows.T, innov)
        j_all, _ = linalg.project(rows, rows.shape[0])  # all L + C directions, descending
        w = j_all[:rank].T
        ups = state.prec_diag
        if not spherical:
            ups = ups + jnp.sum(j_all[rank:] ** 2, axis=0)
        return state._replace(mean=mu, prec_diag=ups, prec_lr=w)

    def predictive(state: LoFiState, x) -> tuple[Array, Array]:
        yhat, jac, r = linearize(_obs_fn(x), state.mean, likelihood)
        j, c = _whitened_svd(state.prec_diag, state.prec_lr)
        fz = _apply_f(j, c, jac.T / jnp.sqrt(state.prec_diag)[:, None])  # F Υ^{-1/2} Jᵀ (P, C)
        return yhat, linalg.symmetrize(fz.T @ fz + r)

    def sample(key: Array, state: LoFiState):
        j, c = _whitened_svd(state.prec_diag, state.prec_lr)
        eps = jax.random.normal(key, state.mean.shape, state.mean.dtype)
        return cell.space.unravel(state.mean + _apply_f(j, c, eps) / jnp.sqrt(state.prec_diag))

    def mean(state: LoFiState):
        return cell.space.unravel(state.mean)

    hyper = dict(rank=rank, init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting,
                 inflation=inflation, inflation_factor=inflation_factor, spherical=spherical)
    return Posterior(init, predict, update, predictive, sample, mean, name="lofi", hyper=hyper)
