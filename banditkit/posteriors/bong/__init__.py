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
- ``"dlr"``   ``(μ, υ, W)`` with precision ``diag(υ) + WᵀW``, ``W (R, P)`` (rows).  Its covariance operations are
              the DLR kernels of :mod:`banditkit.posteriors.dlr`, shared with LoFi (applied to ``Wᵀ``).
              BONG/BLR take the full-covariance natural step with the stacked factor ``N`` (``[W; B]`` resp.
              ``[√(1−α)W; √αW_p; √αB]``), compute the mean with the *un-truncated* precision (Woodbury; BONG in
              gain form ``μ + ΣBᵀ(I + BΣBᵀ)⁻¹c``, ``g = Bᵀc``, which stays finite under huge ``B``), then
              keep the best rank-R factor ``W ← P_R(N)`` and put the dropped diagonal into ``υ``:
              ``υ ← υ̃ + diag(NᵀN − WᵀW)`` (278–308).  BONG + linear-hessian is LoFi.
              BOG/BBB are plain gradient steps on ``(μ, υ, W)`` (309–328):
              ``μ ← μ + α a``, ``υ ← υ + (α/2) diag(ΣDΣ)``, ``W ← W + α WΣDΣ`` with
              ``D = Ω_p − Ω − G`` (KL part absent for BOG), all via Woodbury, never P×P.

Each family is a :class:`~banditkit.posteriors.bong._core.Family` (``_full.py``, ``_diag.py``, ``_dlr.py``): its
state, predict, predictive quadratic form, sampler and one function per rule; the estimators (``_estimators.py``) are
shared.  The factory below picks one family, one estimator and one rule and composes them.

The gradient rules (``bog``, ``bbb``) can make a precision indefinite (paper §5, Figs. 12–13 diverge): the diagonal
and DLR precisions are floored at ``min_precision``; the full precision is symmetrised only.

**Stability of the mean step** (:mod:`~banditkit.posteriors.bong._stability`).  A positive precision does not make
the mean step stable.  In the linearised model every rule moves the prediction at the observed input by ``κ`` times
the residual (``y − ŷ′ = (1 − κ)(y − ŷ)``); ``κ > 2`` makes the residual grow, step after step, until the state is
not finite.  ``bong`` / ``blr`` on ``"full"`` and ``"dlr"`` have ``κ < 1`` by construction (mean from the
un-truncated precision).  Two kinds of cell do not: ``bog`` / ``bbb``, where ``κ = α ‖H‖²/R`` (learning rate times
curvature), and the ``"diag"`` family's natural step (eq. 213/215), where ``κ = Σ_j H_j² / (R υ_j + H_j²)`` ignores
the parameter correlations and grows with ``init_cov`` and ``P``.  :func:`check_step` measures the self-fit gain
``κ`` on a few observations from a state and warns (or refuses, ``strict=True``) with the reason when ``|κ| > 2``.

**Predict** (moment form): ``μ ← γμ``, ``Σ ← γ²Σ + qI``; diagonal ``υ ← 1/(γ²/υ + q)``; DLR exactly in DLR form
(LoFi's predict, :func:`dlr.predict`: ``r = 1/(γ² + qυ)``, ``υ⁻ = υr``, ``Wᵀ⁻ = γ diag(r) Wᵀ U⁻¹`` with
``UᵀU = I + q W diag(r) Wᵀ``).  With ``γ = 1`` and ``q = 0`` (numbers) ``predict`` returns the state unchanged.

**Predictive**: linearised, ``(ŷ(μ, x), H Σ Hᵀ + R)``.  **Sample**: exact Gaussian draw for each family (full:
``μ + Lz`` with ``LLᵀ = Σ``, :func:`linalg.sample_factor`; DLR: ``θ = μ + Υ^{-1/2} F ε``, :func:`dlr.sample`,
O(R²P) once per state).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, as_obs, check_common_hyper, flat_obs, linearize
from banditkit.posteriors.bong._core import Est, Family
from banditkit.posteriors.bong._diag import BongDiagState, diag_family
from banditkit.posteriors.bong._dlr import BongDLRState, dlr_family
from banditkit.posteriors.bong._estimators import estimator as _estimator
from banditkit.posteriors.bong._full import BongFullState, full_family
from banditkit.posteriors.bong._stability import check_step, self_fit_gain
from banditkit.posteriors.registry import Backend, register

__all__ = ["ESTIMATORS", "FAMILIES", "RULES", "BongDLRState", "BongDiagState", "BongFullState", "Est", "Family",
           "bong", "check_step", "self_fit_gain"]

Array = jax.Array

RULES = ("bong", "blr", "bog", "bbb")
ESTIMATORS = ("linear-hessian", "linear-ef", "mc-hessian", "mc-ef")
FAMILIES = ("full", "diag", "dlr")


def _check(rule: str, estimator: str, family: str, learning_rate, num_iter, n_samples) -> float:
    """Validate the grid cell and its step settings; returns the step size ``α``."""
    if rule not in RULES:
        raise ValueError(f"bong: rule={rule!r} is not one of {RULES}")
    if estimator not in ESTIMATORS:
        raise ValueError(f"bong: estimator={estimator!r} is not one of {ESTIMATORS}")
    if family not in FAMILIES:
        raise ValueError(f"bong: family={family!r} is not one of {FAMILIES}")
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
    return alpha


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
    rule = str(rule).lower()
    estimator = str(estimator).lower().replace("_", "-")
    family = str(family).lower()
    check_common_hyper("bong", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting,
                       rank=rank if family == "dlr" else None)
    alpha = _check(rule, estimator, family, learning_rate, num_iter, n_samples)
    fam: Family = {
        "full": lambda: full_family(init_cov, alpha),
        "diag": lambda: diag_family(init_cov, alpha, min_precision),
        "dlr": lambda: dlr_family(init_cov, rank, alpha, min_precision),
    }[family]()
    if estimator == "mc-hessian" and fam.hessian is None:
        raise ValueError(
            f"bong: estimator='mc-hessian' is not defined for family={family!r} (the DLR projection needs a low-rank "
            "factor of G; seed 004 §E.5 omits it). Use 'mc-ef' or a linear estimator, or family='full'/'diag'."
        )
    estimate = _estimator(estimator, likelihood, fam, n_samples, n_probes)
    step = {"bong": None, "blr": fam.blr, "bog": fam.bbb, "bbb": fam.bbb}[rule]
    identity = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (forgetting, dynamics_cov)) and (
        forgetting == 1 and dynamics_cov == 0)

    def init(params, example_x=None):
        space = ParamSpace.of(params)
        return fam.init(space.ravel(params), jax.random.PRNGKey(seed), space)

    def predict(state):
        if identity:  # γ = 1, q = 0: the dynamics are the identity (no pass over the state)
            return state
        dt = state.mean.dtype
        return fam.predict(state, jnp.asarray(forgetting, dt), jnp.asarray(dynamics_cov, dt))

    def update(state, x, y):
        y = as_obs(y, state.mean.dtype)
        obs = flat_obs(apply_fn, state.space, x)
        key, sub = jax.random.split(state.key)
        if step is None:
            return fam.bong(state, estimate(sub, state, obs, y))._replace(key=key)
        anchor = fam.anchor(state)

        def body(i, st):
            # one iteration draws with BONG's key, so BLR with α = 1, I = 1 is BONG draw for draw (MC estimators too)
            return step(anchor, st, estimate(sub if num_iter == 1 else jax.random.fold_in(sub, i), st, obs, y))

        new = jax.lax.fori_loop(0, num_iter, body, state) if num_iter > 1 else body(0, state)
        return new._replace(key=key)

    def predictive(state, x):
        yhat, h, r = linearize(flat_obs(apply_fn, state.space, x), state.mean, likelihood)
        return yhat, linalg.symmetrize(fam.quad(state, h) + r)

    def sample(key, state):
        return state.space.unravel(fam.sample(key, state))

    def mean(state):
        return state.space.unravel(state.mean)

    hyper = dict(
        rule=rule, estimator=estimator, family=family, rank=rank, learning_rate=alpha, num_iter=num_iter,
        n_samples=n_samples, n_probes=n_probes, init_cov=init_cov, dynamics_cov=dynamics_cov,
        forgetting=forgetting, min_precision=min_precision, seed=seed,
    )
    return Posterior(init, predict, update, predictive, sample, mean, name="bong", hyper=hyper)


register(Backend(
    name="bong", factory=bong,
    bandit_defaults=dict(family="dlr", rank=10, init_cov=0.1),
))
