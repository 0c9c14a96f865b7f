"""LoFi: extended Kalman filter with a diagonal-plus-low-rank PRECISION (seed 000, Chang et al. 2023).

State: mean ``μ (P,)``, precision ``Σ⁻¹ = Υ + W Wᵀ`` with ``Υ = diag(υ)``, ``υ (P,) > 0`` and ``W (P, L)``;
O(P·L) memory, no ``P × P`` matrix is ever formed.  Model: ``θ_t = γ θ_{t-1} + u_t``, ``u_t ~ N(0, q I)``;
``y_t ~ N(m(f(θ_t, x_t)), R_t)`` linearised at the predicted mean (moment-matched for classification).

:predict (Alg. 2 of the main text — the printed eq. 25 / Alg. 4 have typos, see the seed-000 digest §2.3):
    ``μ⁻ = γ μ``;  ``υ⁻ = υ / (γ² + q υ)``;  ``r = 1 / (γ² + q υ)``  (elementwise)
    ``M = I_L + q Wᵀ diag(r) W = UᵀU``;  ``W⁻ = γ diag(r) W U⁻¹``       (any ``F`` with ``F Fᵀ = M⁻¹`` works)
    This is exact: ``(Υ⁻ + W⁻W⁻ᵀ)⁻¹ = γ² (Υ + WWᵀ)⁻¹ + q I``.
:update (Alg. 3), with ``J = ∂m/∂θ (C, P)`` at ``μ⁻``, ``R = VᵀV`` (upper Cholesky), ``A = V⁻ᵀ`` (``AᵀA = R⁻¹``):
    ``W̃ = [W⁻, Jᵀ Aᵀ]  (P, L + C)``                      precision of the exact update: ``Υ⁻ + W̃ W̃ᵀ``
    ``μ = μ⁻ + (Υ⁻ + W̃W̃ᵀ)⁻¹ Jᵀ R⁻¹ (y − ŷ)``            exact EKF mean given the DLR(L) prior (before truncation),

        computed in gain form ``μ⁻ + Σ⁻ Jᵀ (J Σ⁻ Jᵀ + R)⁻¹ (y − ŷ)`` with ``Σ⁻ = S Sᵀ`` (the root below):
        ``a = Υ^{-1/2} Jᵀ``, ``β = Bᵀa``;  ``z = SᵀJᵀ = a − BKβ``, ``JΣ⁻Jᵀ = zᵀz``;  ``Σ⁻Jᵀ = Υ^{-1/2} (a − BK₂β)``

    ``W̃`` → the eigenvectors of its Gram ``W̃ᵀW̃ = [[WᵀW, Wᵀc], [cᵀW, cᵀc]]`` (:func:`dlr.truncate`;
    ``c = Jᵀ Aᵀ``; ``(L+C)²`` eigendecomposition, every eigenvector used; ``W̃`` itself is never formed):
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

    :simple:    ``Υ̂ = Υ/(1+α)``,                 ``Ŵ = W/√(1+α)``,  ``μ̂ = μ``
    :hybrid:    ``Υ̂ = Υ/(1+α) + αη/(1+α) I``,    ``Ŵ = W/√(1+α)``,  ``μ̂ = μ``
    :bayesian:  as hybrid, and ``μ̂ = μ + (αη/(1+α)) (Υ̂ + ŴŴᵀ)⁻¹ (Γ μ_0 − μ)``

:predictive: ``(ŷ, J Σ⁻ Jᵀ + R)`` with ``J Σ Jᵀ`` computed as the Gram of ``F Υ^{-1/2} Jᵀ`` (PSD by construction).

The covariance square root, the sampler, the predict and the update with its truncation are the DLR kernels of
:mod:`banditkit.posteriors.dlr` (shared with BONG's ``"dlr"`` family): ``Σ = S Sᵀ``, ``S = Υ^{-1/2} F`` with
``F = I − B K Bᵀ``, ``B = Υ^{-1/2} W`` (``F² = I − B K₂ Bᵀ = (I + BBᵀ)⁻¹``, Woodbury); sampling
(the DLR-precision trick of the digest §2.10) ``θ = μ + Υ^{-1/2} F ε``, ``ε ~ N(0, I_P)``, whose covariance is exactly
``Σ``: O(P L²) once per state, then O(P L) per draw.

Cost per step: ``update`` one ``(P, L)`` Gram ``BᵀB = WᵀΥ⁻¹W`` (the root), one ``(P, 2C)ᵀ (P, L)`` product for
``[Wᵀc, Bᵀa]``, one ``(P, L) @ (L, 2C)`` for the mean, and the ``(P, L) @ (L, L)`` and ``(P, L) @ (L, C)`` products
of the truncation — plus the Gram ``WᵀW`` when the predict is not the identity; ``sample`` / ``predictive`` the
same ``BᵀB`` (XLA computes it once when they share a jitted step with ``update``); ``predict`` nothing when
``γ = 1``, ``q = 0`` and there is no inflation, else one Gram and one GEMM.  ``B`` is never materialised (the Gram is
:func:`linalg.inv_weighted_gram`, ``Bᵀz`` is :func:`linalg.tall_t_matmul` of ``Υ^{-1/2} z``).  ``J`` is taken
leaf by leaf on the parameter pytree (:func:`~banditkit.posteriors.base.linearize`).

``rank=0`` gives the variational diagonal EKF (VD-EKF, App. A.4).  With ``rank ≥ P`` no mass is ever
discarded and LoFi equals the full-covariance EKF.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import dlr, linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, as_obs, check_common_hyper, linearize
from banditkit.posteriors.registry import Backend, register

Array = jax.Array

INFLATIONS = ("none", "simple", "hybrid", "bayesian")


class LoFiState(NamedTuple):
    mean: Array  # (P,) μ
    prec_diag: Array  # (P,) υ, diagonal of Υ
    prec_lr: Array  # (P, L) W, precision = diag(υ) + W Wᵀ
    prior_prec: Array  # () η_t, precision of the latent predictive prior (inflation)
    prior_scale: Array  # () Γ_t = Π γ, the latent prior mean is Γ_t μ_0
    prior_mean: Array  # (P,) μ_0
    space: ParamSpace  # the parameter layout (static: no leaves)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _per_param_variances(params, init_cov):
    """``init_cov`` (a pytree like ``params``, leaves scalars or of the leaf's shape) broadcast to every parameter;
    raises ``ValueError`` for a different structure or a variance that is not ``> 0``."""
    try:
        var = jax.tree_util.tree_map(lambda p, v: jnp.broadcast_to(jnp.asarray(v, p.dtype), p.shape), params, init_cov)
    except (ValueError, TypeError) as e:
        raise ValueError("lofi: a per-layer init_cov must be a pytree with the parameters' structure whose leaves are "
                         f"prior variances (scalars or the leaf's shape): {e}") from e
    for path, v in jax.tree_util.tree_flatten_with_path(var)[0]:
        if not isinstance(v, jax.core.Tracer) and not bool(jnp.all(v > 0)):
            raise ValueError(f"lofi: init_cov at {jax.tree_util.keystr(path)} is a prior variance and must be > 0 "
                             "(this backend keeps its inverse)")
    return var


def lofi(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *,
    rank: int = 10, init_cov=1.0, dynamics_cov: float = 0.0, forgetting: float = 1.0,
    inflation: str = "bayesian", inflation_factor: float = 0.0, spherical: bool = False,
) -> Posterior:
    """LoFi: EKF with a diagonal-plus-rank-``rank`` precision over all parameters (see module docstring).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input (``x`` any pytree).
      likelihood: observation model (``Gaussian``, ``Bernoulli`` or ``Categorical``).
      rank: ``L ≥ 0``, columns of the low-rank precision factor (``0`` = VD-EKF; ``≥ P`` = full EKF).
      init_cov: prior variance of every parameter: ``Υ_0 = I / init_cov``, ``W_0 = 0``; or a pytree with the
        parameters' structure whose leaves (scalars or the leaf's shape) give each layer its own variance,
        ``Υ_0 = diag(1 / init_cov)`` (then without inflation, whose latent prior is ``η I``).
      dynamics_cov: ``q ≥ 0``, random-walk variance added per ``predict``.
      forgetting: ``γ ∈ (0, 1]``, the mean shrinks as ``θ ← γθ`` per ``predict``.
      inflation: ``"none" | "simple" | "hybrid" | "bayesian"`` covariance inflation (App. E), applied in
        ``predict`` before the dynamics; inactive when ``inflation_factor = 0`` (the paper found its effect
        negligible).
      inflation_factor: ``α ≥ 0``; past likelihood terms are discounted by ``(1+α)^{-lag}``.
      spherical: keep ``Υ = η I`` (App. F): discarded directions are dropped instead of moved into ``Υ``.
    """
    tree = jax.tree_util.tree_structure(init_cov)
    per_param = tree.num_nodes > 1 or jnp.ndim(init_cov) > 0  # a pytree of per-layer prior variances
    check_common_hyper("lofi", init_cov=None if per_param else init_cov, dynamics_cov=dynamics_cov,
                       forgetting=forgetting, rank=rank, min_rank=0)
    if inflation not in INFLATIONS:
        raise ValueError(f"lofi: inflation must be one of {INFLATIONS}, got {inflation!r}")
    if _is_number(inflation_factor) and inflation_factor < 0:
        raise ValueError(f"lofi: inflation_factor must be >= 0, got {inflation_factor}")
    inflate = inflation != "none" and not (_is_number(inflation_factor) and inflation_factor == 0)
    if per_param and inflate:
        raise ValueError("lofi: a per-layer init_cov (a pytree) needs inflation='none' or inflation_factor=0: "
                         "inflation pulls towards an isotropic latent prior η I; pass one float to use inflation")
    static = (not inflate and _is_number(forgetting) and forgetting == 1.0 and _is_number(dynamics_cov)
              and dynamics_cov == 0.0)

    def init(params, example_x=None) -> LoFiState:
        space = ParamSpace.of(params)
        mu = space.ravel(params)
        dt = mu.dtype
        if per_param:
            var = space.ravel(_per_param_variances(params, init_cov))
            eta = jnp.asarray(1.0 / jnp.mean(var), dt)  # unused: inflation is off with a per-layer prior
            prec = (1.0 / var).astype(dt)
        else:
            eta = jnp.asarray(1.0 / init_cov, dt)
            prec = eta * jnp.ones_like(mu)
        return LoFiState(
            mean=mu,
            prec_diag=prec,
            prec_lr=jnp.zeros((mu.size, rank), dt),
            prior_prec=eta,
            prior_scale=jnp.ones((), dt),
            prior_mean=jnp.copy(mu),  # its own buffer: aliased leaves cannot be donated to jit
            space=space,
        )

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
                mu = mu + shrink * dlr.solve(ups, w, state.prior_scale * state.prior_mean - mu)
        return state._replace(mean=mu, prec_diag=ups, prec_lr=w)

    def predict(state: LoFiState) -> LoFiState:
        if static:
            return state  # γ = 1, q = 0, no inflation: the dynamics are the identity (no (P, L) pass)
        if inflate:
            state = _inflate(state)
        dt = state.mean.dtype
        g = jnp.asarray(forgetting, dt)
        q = jnp.asarray(dynamics_cov, dt)
        ups, w = dlr.predict(state.prec_diag, state.prec_lr, g, q)
        eta = state.prior_prec / (g**2 + q * state.prior_prec)
        return state._replace(mean=g * state.mean, prec_diag=ups, prec_lr=w, prior_prec=eta,
                              prior_scale=g * state.prior_scale)

    def update(state: LoFiState, x, y) -> LoFiState:
        y = as_obs(y, state.mean.dtype)
        yhat, jac, r = linearize(lambda p: apply_fn(p, x), state.space.unravel(state.mean), likelihood)
        if y.shape != yhat.shape:
            raise ValueError(f"lofi.update: y has shape {y.shape} but the model predicts {yhat.shape}; pass y as (C,)")
        v_r = linalg.chol_upper(linalg.symmetrize(r))  # R = VᵀV
        c = jac.T @ linalg.tri_inverse(v_r)  # the new precision columns (A J)ᵀ = Jᵀ V⁻¹ (P, C)
        # the root of the prior covariance: the one `sample` and `predictive` take of this state, so a jitted
        # sample-then-update step computes the (P, L) Gram BᵀB once
        root = dlr.cov_root(state.prec_diag, state.prec_lr)
        # An update leaves W with orthogonal columns (W = W̃ U, U eigenvectors of W̃ᵀW̃) and the identity predict
        # keeps them, so then WᵀW = diag(column norms²), one cheap reduction instead of a second (P, L) Gram;
        # after any other predict (the dynamics mix the columns; inflation only rescales them) WᵀW is computed
        mu, ups, w = dlr.update(state.mean, state.prec_diag, state.prec_lr, root, jac, c, r, y - yhat, rank,
                                orthogonal=static, spherical=spherical)
        return state._replace(mean=mu, prec_diag=ups, prec_lr=w)

    def predictive(state: LoFiState, x) -> tuple[Array, Array]:
        yhat, jac, r = linearize(lambda p: apply_fn(p, x), state.space.unravel(state.mean), likelihood)
        return yhat, linalg.symmetrize(dlr.quad(dlr.cov_root(state.prec_diag, state.prec_lr), jac) + r)

    def sample(key: Array, state: LoFiState):
        root = dlr.cov_root(state.prec_diag, state.prec_lr)
        eps = rng.normal(key, state.mean.shape, state.mean.dtype)
        return state.space.unravel(state.mean + dlr.sample(root, eps))

    def mean(state: LoFiState):
        return state.space.unravel(state.mean)

    hyper = dict(rank=rank, init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting,
                 inflation=inflation, inflation_factor=inflation_factor, spherical=spherical)
    return Posterior(init, predict, update, predictive, sample, mean, name="lofi", hyper=hyper)


# noise_cap 10⁻³: a tempering of LoFi's predictive spread, not a noise estimate — LoFi keeps an observation's
# information that does not fit its rank-L factor only through the diagonal of its precision, so its Thompson draws
# stay wide where the data have pinned the function down (benchmarks/studies/lofi_prior, lofi_noise).
register(Backend(
    name="lofi", factory=lofi,
    bandit_defaults=dict(rank=10, init_cov=0.01),
    bo_defaults=dict(rank=50, init_cov=1e-2),
    gaussian_filter=True, noise_cap=1e-3,
))
