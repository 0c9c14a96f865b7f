"""The BONG grid (seed 004): update rule × expected-log-likelihood estimator × variational family.

A Gaussian variational posterior ``q_ψ(θ) = N(μ, Σ)`` over all ``P`` parameters is updated with one observation
``(x, y)`` at a time.  Three independent choices make one method:

**Rule** (Table 2; α = ``learning_rate``, I = ``num_iter``; ``ψ_p`` the predicted prior):

- ``"bong"``  natural gradient, unit step, expected NLL only:  ``ψ_t = ψ_p + ∇_ρ E_{q_p}[log p(y|θ)]``  (eq. 3/5).
              Gaussian form (9–10): ``Ω_t = Ω_p − G``, ``μ_t = μ_p + Σ_t g``.  No learning rate.
- ``"blr"``   natural gradient on the online VI loss (E[NLL] + KL(q‖q_p)), I steps of size α (32–33):
              ``Ω_i = (1−α)Ω_{i−1} + αΩ_p − αG_i``, ``μ_i = μ_{i−1} + αΣ_i(Ω_p(μ_p − μ_{i−1}) + g_i)``.
              BLR with α = 1, I = 1 is BONG.
- ``"bog"``   one plain gradient step of size α on the natural parameters ``(Ωμ, −½Ω)``, expected NLL only (31).
- ``"bbb"``   I plain gradient steps of size α on the natural parameters of the online VI loss (34).  BOG = BBB with
              I = 1 (the KL gradient vanishes at ``ψ_p``); that is how BOG is computed here.

  For a loss ``L(μ, Σ)`` with ``a = ∇_μ L`` and ``B = ∇_Σ L`` the natural-parameter gradient is
  ``∇_{ψ1} = Σa``, ``∇_{ψ2} = 2 sym(Σ a μᵀ) + 2ΣBΣ`` (symmetrised; the paper's eqs. 142/148 print the
  non-symmetric ``2Σaμᵀ``).  For E[log p]: ``a = g``, ``B = ½G``; the KL adds ``a += Ω_p(μ_p − μ)``,
  ``B += ½(Ω − Ω_p)``.

**Estimator** of ``g = E_q[∇_θ log p]`` (P,) and ``G = E_q[∇²_θ log p]`` (P×P, NSD except MC-Hessian) (Table 1):

- ``"linear-hessian"``  linearise ``ŷ = m(f(θ))`` at μ: ``g = Hᵀ R⁻¹ (y − ŷ)``, ``G = −Hᵀ R⁻¹ H`` (21–22), kept as the
                        factor ``B = L⁻¹ H`` (C, P) with ``R = L Lᵀ`` so ``G = −BᵀB``.  Deterministic.
- ``"linear-ef"``       same ``g``; ``G = −g gᵀ`` (factor ``gᵀ``, 28–29).
- ``"mc-ef"``           ``θ_m ~ q`` (M = ``n_samples``), ``ĝ_m = ∇ log p(y | f(θ_m))``: ``g = mean ĝ_m``,
                        ``G = −(1/M) Σ ĝ_m ĝ_mᵀ`` (factor ``Ĝ/√M``, 26).
- ``"mc-hessian"``      ``g = mean ĝ_m``, ``G = mean ∇² log p(θ_m)`` (11–12): dense for ``"full"``, Hutchinson
                        ``diag(G) ≈ mean z ⊙ (G z)`` with ``n_probes`` Rademacher probes for ``"diag"``; not defined
                        for ``"dlr"`` (the paper omits it: the projection needs a factor).  The sampled Hessian
                        of a non-linear model can be indefinite; its positive curvature is clipped
                        (``G ← V min(Λ, 0) Vᵀ``, ``d ← min(d, 0)``) so precisions stay positive — a
                        deviation from the paper, which reports this estimator as "very poor" anyway.

  MC estimators take their randomness from ``state.key``, which every update splits and advances, so
  ``update`` stays a pure function of ``(state, x, y)``.  ``log p`` is ``likelihood.log_prob`` (the exact
  likelihood, e.g. softmax cross-entropy), while the linear estimators use the moment-matched ``(ŷ, R)``.

**Family** (Appendix E):

- ``"full"``  ``(μ, Σ)`` dense, O(P²) memory.  BONG with a factor uses Woodbury:
              ``Σ_t = Σ − ΣBᵀ(I + BΣBᵀ)⁻¹BΣ`` — with linear-hessian this is the EKF (CM-EKF).
- ``"diag"``  ``(μ, υ)`` with precision ``diag(υ)``; every rule acts on ``d = diag(G)`` elementwise
              (BONG + linear-hessian is the variational diagonal EKF, VD-EKF).
- ``"dlr"``   ``(μ, υ, W)`` with precision ``diag(υ) + WᵀW``, ``W (R, P)`` (rows, the ``linalg`` convention).
              BONG/BLR take the full-covariance natural step with the stacked factor ``N`` (``[W; B]`` resp.
              ``[√(1−α)W; √αW_p; √αB]``), compute the mean with the *un-truncated* precision (Woodbury; BONG in
              gain form ``μ + ΣBᵀ(I + BΣBᵀ)⁻¹c``, ``g = Bᵀc``, which stays finite under huge ``B``), then
              keep the best rank-R factor ``W ← P_R(N)`` and put the dropped diagonal into ``υ``:
              ``υ ← υ̃ + diag(NᵀN − WᵀW)`` (278–308).  BONG + linear-hessian is LoFi.
              BOG/BBB are plain gradient steps on ``(μ, υ, W)`` (309–328):
              ``μ ← μ + α a``, ``υ ← υ + (α/2) diag(ΣDΣ)``, ``W ← W + α WΣDΣ`` with
              ``D = Ω_p − Ω − G`` (KL part absent for BOG), all via Woodbury, never P×P.

The gradient rules (``bog``, ``bbb``) can make a precision indefinite (paper §5, Figs. 12–13 diverge): the diagonal
and DLR precisions are floored at ``min_precision``; the full precision is symmetrised only.

**Predict** (moment form): ``μ ← γμ``, ``Σ ← γ²Σ + qI``; diagonal ``υ ← 1/(γ²/υ + q)``; DLR exactly in DLR form
(LoFi's predict: ``υ⁻ = 1/(γ²/υ + q)``, ``r = υ⁻/υ``, ``W⁻ = γ Lᵀ (W · r)`` with ``L Lᵀ = (I + q W diag(r) Wᵀ)⁻¹``).

**Predictive**: linearised, ``(ŷ(μ, x), H Σ Hᵀ + R)``.  **Sample**: exact Gaussian draw for each family (DLR via the
thin-SVD sampler ``θ = μ + υ^{-½}(ε + Q(((1+s²)^{-½} − 1) ⊙ Qᵀε))``, O(R²P)).
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

RULES = ("bong", "blr", "bog", "bbb")
ESTIMATORS = ("linear-hessian", "linear-ef", "mc-hessian", "mc-ef")
FAMILIES = ("full", "diag", "dlr")


class BongFullState(NamedTuple):
    mean: Array  # (P,)
    cov: Array  # (P, P)
    key: Array  # PRNG key for MC estimators


class BongDiagState(NamedTuple):
    mean: Array  # (P,)
    prec: Array  # (P,) diagonal precision υ
    key: Array


class BongDLRState(NamedTuple):
    mean: Array  # (P,)
    prec_diag: Array  # (P,) υ
    low_rank: Array  # (R, P) W: precision = diag(υ) + WᵀW
    key: Array


class _Est(NamedTuple):
    """Estimator output: ``g (P,)`` and one of: factor ``B (K, P)`` with ``G = −BᵀB``, dense ``G (P, P)``, or
    ``diag(G) (P,)``.  With a factor, ``coef (K,)`` has ``g = Bᵀ coef`` exactly (every factor estimator's ``g`` lies
    in the row space of its ``B``), which lets BONG take its mean step in gain form."""

    g: Array
    factor: Array | None = None
    dense: Array | None = None
    diag: Array | None = None
    coef: Array | None = None


def _sym(a: Array) -> Array:
    return linalg.symmetrize(a)


def _spd_inv(a: Array) -> Array:
    """Inverse of a small SPD matrix via its Cholesky factor."""
    u = linalg.chol_upper(_sym(a))
    return _sym(linalg.solve_spd_factor(u, jnp.eye(a.shape[0], dtype=a.dtype)))


# --------------------------------------------------------------------------------------------------------------
# DLR helpers: precision Λ = diag(υ) + WᵀW, W (R, P).  Σ = υ⁻¹ − VᵀV with V = U⁻ᵀ W υ⁻¹, core = I + W υ⁻¹ Wᵀ = UᵀU.
# --------------------------------------------------------------------------------------------------------------
def _dlr_v(prec_diag: Array, w: Array) -> Array:
    """``V (R, P)`` with ``Σ = diag(1/υ) − VᵀV`` (Woodbury).

    ``core = I + W υ⁻¹ Wᵀ = U diag(1 + λ) Uᵀ`` by ``eigh`` (λ clipped at 0), ``V = diag((1+λ)^{-½}) Uᵀ W υ⁻¹``.
    An eigendecomposition rather than a Cholesky: the stacked factors of BLR (``√(1−α)W`` next to ``√α W_p``) are
    nearly parallel, and with large MC-EF factors the float32 Cholesky of ``core`` can fail.
    """
    wu = w / prec_diag[None, :]
    lam, u = jnp.linalg.eigh(_sym(wu @ w.T))
    return (u / jnp.sqrt(1.0 + jnp.maximum(lam, 0.0))[None, :]).T @ wu


def _dlr_cov_rows(prec_diag: Array, v: Array, x: Array) -> Array:
    """``X Σ`` for rows ``X (K, P)`` (Σ symmetric)."""
    return x / prec_diag[None, :] - (x @ v.T) @ v


# --------------------------------------------------------------------------------------------------------------
# the factory
# --------------------------------------------------------------------------------------------------------------
def bong(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    rule: str = "bong",
    estimator: str = "linear-hessian",
    family: str = "dlr",
    rank: int = 10,
    learning_rate: float | None = None,
    num_iter: int = 1,
    n_samples: int = 100,
    n_probes: int = 10,
    init_cov: float = 1.0,
    dynamics_cov: float = 0.0,
    forgetting: float = 1.0,
    min_precision: float = 1e-8,
    seed: int = 0,
) -> Posterior:
    """One cell of the BONG grid (rule × estimator × family) behind the :class:`Posterior` contract.

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input (``x`` any pytree).
      likelihood: ``Gaussian``, ``Bernoulli`` or ``Categorical``.
      rule: ``"bong"`` (default, no learning rate), ``"blr"``, ``"bog"`` or ``"bbb"``.
      estimator: ``"linear-hessian"`` (default), ``"linear-ef"``, ``"mc-hessian"`` or ``"mc-ef"``.
      family: ``"dlr"`` (default; diagonal-plus-rank-``rank`` precision, LoFi-like, O(RP)), ``"full"`` (dense
        covariance, O(P²): small models only) or ``"diag"``.
      rank: ``R`` of the DLR family.
      learning_rate: α for ``blr`` / ``bog`` / ``bbb`` (defaults 0.5 / 0.05 / 0.05, the SARCOS choices of seed 004,
        Fig. 9); must be unset or 1 for ``bong``.
      num_iter: inner iterations I for ``blr`` / ``bbb`` (1 for ``bong`` / ``bog``).
      n_samples: M, Monte-Carlo samples for the ``mc-*`` estimators (paper: 100).
      n_probes: Hutchinson probes per sample for ``mc-hessian`` with ``family="diag"``.
      init_cov: prior variance of every parameter (``Σ_0 = init_cov · I``, prior mean = the params given to init).
      dynamics_cov: q, variance added per ``predict``.  forgetting: γ, ``μ ← γμ`` per ``predict``.
      min_precision: floor for diagonal / DLR precisions under the gradient rules ``bog`` / ``bbb``.
      seed: seeds the PRNG key kept in the state (used only by the ``mc-*`` estimators).
    """
    check_common_hyper("bong", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    rule = str(rule).lower()
    estimator = str(estimator).lower().replace("_", "-")
    family = str(family).lower()
    if rule not in RULES:
        raise ValueError(f"bong: rule={rule!r} is not one of {RULES}")
    if estimator not in ESTIMATORS:
        raise ValueError(f"bong: estimator={estimator!r} is not one of {ESTIMATORS}")
    if family not in FAMILIES:
        raise ValueError(f"bong: family={family!r} is not one of {FAMILIES}")
    if family == "dlr" and estimator == "mc-hessian":
        raise ValueError(
            "bong: estimator='mc-hessian' is not defined for family='dlr' (the DLR projection needs a low-rank "
            "factor of G; seed 004 §E.5 omits it). Use 'mc-ef' or a linear estimator, or family='full'/'diag'."
        )
    if family == "dlr" and (not isinstance(rank, int) or rank < 1):
        raise ValueError(f"bong: rank must be a positive int for family='dlr', got {rank!r}")
    if rule == "bong":
        if learning_rate not in (None, 1, 1.0):
            raise ValueError("bong: rule='bong' uses a unit step by construction; leave learning_rate unset "
                             "(use rule='blr' for a tunable natural-gradient step).")
        if num_iter != 1:
            raise ValueError("bong: rule='bong' takes exactly one step (num_iter=1); use rule='blr' to iterate.")
        alpha = 1.0
    else:
        alpha = float({"blr": 0.5, "bog": 0.05, "bbb": 0.05}[rule] if learning_rate is None else learning_rate)
        if not alpha > 0:
            raise ValueError(f"bong: learning_rate must be > 0, got {learning_rate!r}")
    if rule == "bog" and num_iter != 1:
        raise ValueError("bong: rule='bog' takes one step (num_iter=1); use rule='bbb' to iterate.")
    if not isinstance(num_iter, int) or num_iter < 1:
        raise ValueError(f"bong: num_iter must be a positive int, got {num_iter!r}")
    if estimator.startswith("mc") and (not isinstance(n_samples, int) or n_samples < 1):
        raise ValueError(f"bong: n_samples must be a positive int for MC estimators, got {n_samples!r}")

    cell = SpaceCell()
    n_iter = num_iter

    def _obs_fn(x):
        s = cell.space
        return lambda t: apply_fn(s.unravel(t), x)

    # ------------------------------------------------------------------ family primitives
    def _sample_flat(key: Array, st) -> Array:
        mu = st.mean
        z = rng.normal(key, mu.shape, mu.dtype)
        if family == "full":
            evals, evecs = jnp.linalg.eigh(_sym(st.cov))
            return mu + evecs @ (jnp.sqrt(jnp.maximum(evals, 0.0)) * z)
        if family == "diag":
            return mu + z / jnp.sqrt(st.prec)
        ups, w = st.prec_diag, st.low_rank
        v = w / jnp.sqrt(ups)[None, :]  # (R, P)
        s2, u = jnp.linalg.eigh(_sym(v @ v.T))
        s2 = jnp.maximum(s2, 0.0)
        keep = s2 > jnp.finfo(mu.dtype).eps * jnp.maximum(jnp.max(s2), 1.0)
        q = (u.T @ v) / jnp.where(keep, jnp.sqrt(jnp.where(keep, s2, 1.0)), 1.0)[:, None]  # (R, P) orthonormal rows
        coef = jnp.where(keep, 1.0 / jnp.sqrt(1.0 + s2) - 1.0, 0.0)
        return mu + (z + (coef * (q @ z)) @ q) / jnp.sqrt(ups)

    def _cov_quad(st, h: Array) -> Array:
        """``H Σ Hᵀ`` for ``H (C, P)``."""
        if family == "full":
            return h @ st.cov @ h.T
        if family == "diag":
            return (h / st.prec[None, :]) @ h.T
        v = _dlr_v(st.prec_diag, st.low_rank)
        hv = h @ v.T
        return (h / st.prec_diag[None, :]) @ h.T - hv @ hv.T

    # ------------------------------------------------------------------ estimators
    def _estimate(key: Array, st, x, y) -> _Est:
        obs = _obs_fn(x)
        if estimator.startswith("linear"):
            yhat, h, r = linearize(obs, st.mean, likelihood)
            lr = jnp.linalg.cholesky(_sym(r))  # R = L Lᵀ
            b = solve_triangular(lr, h, lower=True)  # (C, P):  BᵀB = Hᵀ R⁻¹ H
            e = solve_triangular(lr, y - yhat, lower=True)
            g = b.T @ e
            if estimator == "linear-hessian":
                return _Est(g, factor=b, coef=e)
            return _Est(g, factor=g[None, :], coef=jnp.ones((1,), g.dtype))

        def logp(t):
            return likelihood.log_prob(y, jnp.atleast_1d(obs(t)))

        keys = jax.random.split(key, n_samples)
        thetas = jax.vmap(lambda k: _sample_flat(k, st))(keys)  # (M, P)
        grads = jax.vmap(jax.grad(logp))(thetas)  # (M, P)
        g = jnp.mean(grads, axis=0)
        if estimator == "mc-ef":
            root_m = jnp.sqrt(jnp.asarray(n_samples, g.dtype))
            return _Est(g, factor=grads / root_m, coef=jnp.full((n_samples,), 1.0 / root_m, g.dtype))
        if family == "full":
            hess = _sym(jnp.mean(jax.vmap(jax.hessian(logp))(thetas), axis=0))
            evals, evecs = jnp.linalg.eigh(hess)  # clip positive curvature: keep G ⪯ 0 so Ω_p − G ≻ 0
            return _Est(g, dense=_sym((evecs * jnp.minimum(evals, 0.0)[None, :]) @ evecs.T))
        # Hutchinson: diag(∇²) ≈ mean_k z_k ⊙ (∇² z_k), z Rademacher
        pkeys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)

        def diag_one(theta, pk):
            zs = rng.rademacher(pk, (n_probes, theta.size), theta.dtype)
            hvp = jax.vmap(lambda z: jax.jvp(jax.grad(logp), (theta,), (z,))[1])(zs)
            return jnp.mean(zs * hvp, axis=0)

        return _Est(g, diag=jnp.minimum(jnp.mean(jax.vmap(diag_one)(thetas, pkeys), axis=0), 0.0))

    # ------------------------------------------------------------------ full family
    def _full_dense_g(est: _Est) -> Array:
        if est.dense is not None:
            return est.dense
        return -est.factor.T @ est.factor

    def _full_bong(st: BongFullState, est: _Est) -> BongFullState:
        mu, sigma = st.mean, st.cov
        if est.factor is not None:  # Woodbury with G = −BᵀB: Σ_t = Σ − ΣBᵀ(I + BΣBᵀ)⁻¹BΣ
            b = est.factor
            bs = b @ sigma  # (K, P)
            core = jnp.eye(b.shape[0], dtype=mu.dtype) + bs @ b.T
            u = linalg.chol_upper(_sym(core))
            sigma_t = _sym(sigma - bs.T @ linalg.solve_spd_factor(u, bs))
        else:
            sigma_t = _spd_inv(_spd_inv(sigma) - est.dense)
        return BongFullState(mu + sigma_t @ est.g, sigma_t, st.key)

    def _full_blr(prior: BongFullState, prec_p: Array, st: BongFullState, est: _Est) -> BongFullState:
        gm = _full_dense_g(est)
        prec = _spd_inv(st.cov)
        prec_i = _sym((1 - alpha) * prec + alpha * prec_p - alpha * gm)
        sigma_i = _spd_inv(prec_i)
        mu_i = st.mean + alpha * sigma_i @ (prec_p @ (prior.mean - st.mean) + est.g)
        return BongFullState(mu_i, sigma_i, st.key)

    def _full_bbb(prior: BongFullState, prec_p: Array, st: BongFullState, est: _Est) -> BongFullState:
        gm = _full_dense_g(est)
        mu, sigma = st.mean, st.cov
        prec = _spd_inv(sigma)
        a = est.g + prec_p @ (prior.mean - mu)  # ∇_μ (E log p − KL)
        bmat = 0.5 * (gm - prec_p + prec)  # ∇_Σ (E log p − KL)
        sa = sigma @ a
        grad_psi2 = _sym(2.0 * jnp.outer(sa, mu)) + 2.0 * sigma @ bmat @ sigma
        prec_i = _sym(prec - 2.0 * alpha * grad_psi2)
        sigma_i = _spd_inv(prec_i)
        mu_i = sigma_i @ (prec @ mu + alpha * sa)
        return BongFullState(mu_i, sigma_i, st.key)

    # ------------------------------------------------------------------ diagonal family
    def _diag_d(est: _Est) -> Array:
        if est.diag is not None:
            return est.diag
        if est.dense is not None:
            return jnp.diag(est.dense)
        return -jnp.sum(est.factor**2, axis=0)

    def _diag_blr(prior: BongDiagState, st: BongDiagState, est: _Est, a: float) -> BongDiagState:
        d = _diag_d(est)
        prec_i = (1 - a) * st.prec + a * prior.prec - a * d
        if rule != "bong":
            prec_i = jnp.maximum(prec_i, min_precision)
        mu_i = st.mean + a * (prior.prec * (prior.mean - st.mean) + est.g) / prec_i
        return BongDiagState(mu_i, prec_i, st.key)

    def _diag_bbb(prior: BongDiagState, st: BongDiagState, est: _Est) -> BongDiagState:
        d = _diag_d(est)
        var = 1.0 / st.prec
        a = est.g + prior.prec * (prior.mean - st.mean)
        grad_psi2 = 2.0 * var * a * st.mean + var**2 * (d - prior.prec + st.prec)
        prec_i = jnp.maximum(st.prec - 2.0 * alpha * grad_psi2, min_precision)
        mu_i = (st.prec * st.mean + alpha * var * a) / prec_i
        return BongDiagState(mu_i, prec_i, st.key)

    # ------------------------------------------------------------------ DLR family
    def _dlr_project(ups_tilde: Array, n: Array, mu_new: Array, key: Array) -> BongDLRState:
        w_new, _ = linalg.project(n, rank)
        ups = ups_tilde + jnp.maximum(jnp.sum(n**2, axis=0) - jnp.sum(w_new**2, axis=0), 0.0)
        return BongDLRState(mu_new, ups, w_new, key)

    def _dlr_solve(ups: Array, n: Array, r: Array) -> Array:
        """``(diag(υ) + NᵀN)⁻¹ r`` (Woodbury; N (K, P))."""
        v = _dlr_v(ups, n)
        return r / ups - v.T @ (v @ r)

    def _dlr_bong(st: BongDLRState, est: _Est) -> BongDLRState:
        n = jnp.concatenate([st.low_rank, est.factor], axis=0)  # (R+K, P)
        # mean in gain form: with g = Bᵀc, (Λ + BᵀB)⁻¹ Bᵀ c = Σ Bᵀ (I + B Σ Bᵀ)⁻¹ c (Σ = Λ⁻¹ of the prior), equal to
        # the Woodbury solve with the stacked N but bounded when B is huge (inputs ×1e3: the solve lost the mean)
        bs = _dlr_cov_rows(st.prec_diag, _dlr_v(st.prec_diag, st.low_rank), est.factor)  # B Σ (K, P)
        core = jnp.eye(bs.shape[0], dtype=bs.dtype) + bs @ est.factor.T
        mu = st.mean + bs.T @ linalg.solve_spd_factor(linalg.chol_upper(_sym(core)), est.coef[:, None])[:, 0]
        return _dlr_project(st.prec_diag, n, mu, st.key)

    def _dlr_blr(prior: BongDLRState, st: BongDLRState, est: _Est) -> BongDLRState:
        ups_t = (1 - alpha) * st.prec_diag + alpha * prior.prec_diag
        n = jnp.concatenate(
            [jnp.sqrt(1 - alpha) * st.low_rank if alpha < 1 else jnp.zeros((0, st.mean.size), st.mean.dtype),
             jnp.sqrt(alpha) * prior.low_rank, jnp.sqrt(alpha) * est.factor],
            axis=0,
        )
        dmu = prior.mean - st.mean
        rhs = prior.prec_diag * dmu + prior.low_rank.T @ (prior.low_rank @ dmu) + est.g
        mu = st.mean + alpha * _dlr_solve(ups_t, n, rhs)
        return _dlr_project(ups_t, n, mu, st.key)

    def _dlr_bbb(prior: BongDLRState, st: BongDLRState, est: _Est) -> BongDLRState:
        """Gradient step on (μ, υ, W): ∇_Λ(E log p − KL) = ½ΣDΣ with D = Ω_p − Ω − G (BOG: D = −G at ψ_p)."""
        mu, ups, w = st.mean, st.prec_diag, st.low_rank
        wp = prior.low_rank
        dmu = prior.mean - mu
        a = est.g + prior.prec_diag * dmu + wp.T @ (wp @ dmu)
        v = _dlr_v(ups, w)
        delta = prior.prec_diag - ups  # diagonal part of D
        blocks = [(wp, 1.0), (w, -1.0), (est.factor, 1.0)]  # D = diag(δ) + Σ_k s_k Z_kᵀ Z_k
        # diag(Σ diag(δ) Σ) with Σ = υ⁻¹ − VᵀV
        m_small = (v * delta[None, :]) @ v.T
        diag_m = delta / ups**2 - 2.0 * (delta / ups) * jnp.sum(v**2, axis=0) + jnp.sum(v * (m_small @ v), axis=0)
        ws = _dlr_cov_rows(ups, v, w)  # WΣ (R, P)
        wm = _dlr_cov_rows(ups, v, ws * delta[None, :])  # WΣdiag(δ)Σ
        for z, s in blocks:
            zs = _dlr_cov_rows(ups, v, z)  # ZΣ (K, P)
            diag_m = diag_m + s * jnp.sum(zs**2, axis=0)
            wm = wm + s * (ws @ z.T) @ zs
        ups_i = jnp.maximum(ups + 0.5 * alpha * diag_m, min_precision)
        w_i = w + alpha * wm
        return BongDLRState(mu + alpha * a, ups_i, w_i, st.key)

    # ------------------------------------------------------------------ contract
    def init(params):
        mu = cell.set(params).ravel(params)
        key = jax.random.PRNGKey(seed)
        c0 = jnp.asarray(init_cov, mu.dtype)
        if family == "full":
            return BongFullState(mu, c0 * jnp.eye(mu.size, dtype=mu.dtype), key)
        if family == "diag":
            return BongDiagState(mu, jnp.full(mu.shape, 1.0 / c0, mu.dtype), key)
        return BongDLRState(mu, jnp.full(mu.shape, 1.0 / c0, mu.dtype), jnp.zeros((rank, mu.size), mu.dtype), key)

    def predict(state):
        dt = state.mean.dtype
        g = jnp.asarray(forgetting, dt)
        q = jnp.asarray(dynamics_cov, dt)
        mu = g * state.mean
        if family == "full":
            return BongFullState(mu, g**2 * state.cov + q * jnp.eye(mu.size, dtype=dt), state.key)
        if family == "diag":
            return BongDiagState(mu, 1.0 / (g**2 / state.prec + q), state.key)
        ups, w = state.prec_diag, state.low_rank
        ups_new = 1.0 / (g**2 / ups + q)
        r = ups_new / ups
        wr = w * r[None, :]
        cm = _spd_inv(jnp.eye(w.shape[0], dtype=dt) + q * wr @ w.T)
        lc = jnp.linalg.cholesky(cm)
        return BongDLRState(mu, ups_new, g * lc.T @ wr, state.key)

    def update(state, x, y):
        y = as_obs(y, state.mean.dtype)
        key, sub = jax.random.split(state.key)
        prior = state
        if rule == "bong":
            est = _estimate(sub, prior, x, y)
            if family == "full":
                new = _full_bong(prior, est)
            elif family == "diag":
                new = _diag_blr(prior, prior, est, 1.0)
            else:
                new = _dlr_bong(prior, est)
            return new._replace(key=key)

        prec_p = _spd_inv(prior.cov) if family == "full" else None

        def step(i, st):
            # one iteration draws with BONG's key, so BLR with α = 1, I = 1 is BONG draw for draw (MC estimators too)
            est = _estimate(sub if n_iter == 1 else jax.random.fold_in(sub, i), st, x, y)
            if family == "full":
                return (_full_blr if rule == "blr" else _full_bbb)(prior, prec_p, st, est)
            if family == "diag":
                return _diag_blr(prior, st, est, alpha) if rule == "blr" else _diag_bbb(prior, st, est)
            return (_dlr_blr if rule == "blr" else _dlr_bbb)(prior, st, est)

        new = jax.lax.fori_loop(0, n_iter, step, prior) if n_iter > 1 else step(0, prior)
        return new._replace(key=key)

    def predictive(state, x):
        yhat, h, r = linearize(_obs_fn(x), state.mean, likelihood)
        return yhat, _sym(_cov_quad(state, h) + r)

    def sample(key, state):
        return cell.space.unravel(_sample_flat(key, state))

    def mean(state):
        return cell.space.unravel(state.mean)

    hyper = dict(
        rule=rule, estimator=estimator, family=family, rank=rank, learning_rate=alpha, num_iter=num_iter,
        n_samples=n_samples, n_probes=n_probes, init_cov=init_cov, dynamics_cov=dynamics_cov,
        forgetting=forgetting, min_precision=min_precision, seed=seed,
    )
    return Posterior(init, predict, update, predictive, sample, mean, name="bong", hyper=hyper)
