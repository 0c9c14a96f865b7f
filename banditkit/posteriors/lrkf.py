"""LRKF: one low-rank square-root covariance over all parameters (seed 003, Appendix E.3, Algorithm 4 with the
digest's errata: ``ŷ`` and ``H`` at the *previous* mean, ``Q_R(C Hᵀ, √q Hᵀ, R½)``, and ``P_{d,+q}`` not ``P_d``).

State (:class:`LRKFState`): ``mean μ (P,)``; ``cov = C (d, P)`` with orthogonal rows, kept as
:class:`~banditkit.posteriors.covblocks.LowRankFactor` ``C = M B`` (``.dense()`` forms it), and ``gram = diag(C Cᵀ)
(d,)``; ``q`` the isotropic variance not yet folded into ``C``; ``space`` the parameter layout.  Covariance
``Σ = CᵀC + q̄ I``: one :func:`banditkit.posteriors.covblocks.lowrank` block over all parameters (HiLoFi's hidden
block), linearised by :func:`banditkit.posteriors.base.linearize` on the parameter pytree.

Model: ``θ_t = γθ_{t−1} + u_t``, ``u ~ N(0, q I)``; ``y ~ N(m(f(θ, x)), R)`` linearised at the mean.

:predict:  ``μ ← γμ``, ``C ← γC``, ``q̄ ← γ²q̄ + q``   (``Σ ← γ²Σ + qI`` exactly)
:update:   ``ŷ = m(f(μ, x))``, ``H = ∂ŷ/∂θ (C, P)``, ``ε = y − ŷ``, ``S = H(CᵀC + q̄I)Hᵀ + R``,
          ``Kᵀ = S⁻¹H(CᵀC + q̄I)``;  ``μ ← μ + Kε``;
          ``C ← P_{d,+q̄}(C(I − KH)ᵀ, R½Kᵀ)``, ``q̄ ← 0`` — the best rank-``d`` factor of the surrogate
          ``(I−KH)CᵀC(I−KH)ᵀ + KRKᵀ + q̄I`` (:func:`linalg.lowrank_kalman_weights`; never a ``P × P`` matrix:
          with ``q > 0`` one ``(d, d) @ (d, P)`` GEMM per step; with ``q = 0`` ``C = M B`` keeps ``B`` fixed and the
          step moves ``M (d, d)`` only, two reads of ``B`` and no write).  With ``q = 0`` and ``rank ≥ P`` this is
          the exact Kalman filter.
          ``dynamics_mode="gain"``: ``P_d`` instead of ``P_{d,+q̄}`` — the factor of ``(I−KH)CᵀC(I−KH)ᵀ + KRKᵀ``,
          ``q̄`` in the gain only (seed 003's reference code); with ``rank ≥ P`` the exact Joseph form with the
          gain of ``CᵀC + q̄I`` applied to ``CᵀC``.
:predictive: ``(ŷ(x), H(CᵀC + q̄I)Hᵀ + R)`` at the mean (epistemic + aleatoric).
:sample:   ``θ = μ + Cᵀε + √q̄ z``, ``ε ~ N(0, I_d)``, ``z ~ N(0, I_P)``.

``init_cov`` is the prior *variance*: ``C_0 = √init_cov · Q`` with ``Q (d, P)`` random orthonormal dense rows (so
``Σ_0`` has eigenvalue ``init_cov`` on a random ``d``-dimensional subspace; erratum 14.2.3 of the digest), ``rank``
clipped to ``P``.

Where the network learns.  The mean step is ``Kε = Cᵀ(A S⁻¹ε) + q̄ Hᵀ S⁻¹ε``: a step inside the row space of ``C``
plus, with ``q̄ > 0``, a gradient step on all ``P`` parameters of size ``q̄ / S`` (one output: ``S = ‖CHᵀ‖² +
q̄‖H‖² + R``); when ``q̄‖H‖²`` dominates ``S`` it moves the prediction most of the way to ``y``, as normalised LMS
does.  With ``q = 0`` nothing outside the initial row space ever moves.  Measured on the MNIST bandit (LeNet5, rank
50, ``q = 10⁻⁶``, Thompson sampling; ``benchmarks/results/diag_lowrank_mnist.md``): mean reward over 5000 rounds
0.38 with ``R = 0.1``, 0.64 with ``R = 10⁻⁴`` (0.62–0.63 with ``init_cov`` 10⁻² or 10⁻³); run as seed 003's code runs
it (``C_0`` on the first 50 coordinates only and a sigmoid mean with a fixed ``R = 10⁻⁴``) 0.62 over 5000 rounds and
0.90 over 40,000 (the paper's notebook: 0.71), and at chance with ``q = 0`` — there the ``q̄`` step does the learning.

What a Thompson draw explores.  An output's spread over draws is ``√(‖C h‖² + q̄‖h‖²)`` for its gradient ``h``; when
the factor's rows hold little of ``h`` the isotropic ``√q̄ ‖h‖`` is nearly all of it.  Measured on the same bandit
in the authors' configuration at round 20,000 (``benchmarks/results/diag_starvation_q.md``): 0.1 % of a logit's
gradient lies in the factor's row space, the factor gives about 1 % of the draw variance (6–30 of its 50 rows are
still the initial coordinate rows, variance ``1 + q·t``, never informed), so the spread follows ``√q`` (median
0.05 / 0.12 / 0.34 at ``q`` = 10⁻⁶ / 10⁻⁵ / 10⁻⁴) and not ``R`` or the rank.  ``q = 10⁻⁴`` also ends the seed
sensitivity there (no arm left unplayed; reward 0.934 ± 0.002 against 0.852 ± 0.023 at 10⁻⁶) through the mean step,
not the wider draws: the filter at 10⁻⁴ with draws at 10⁻⁶ does as well, the draws at 10⁻⁴ with the filter at 10⁻⁶
do not.
"""


from __future__ import annotations

from typing import NamedTuple

import jax

from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import covblocks, linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, as_obs, check_common_hyper, linearize
from banditkit.posteriors.covblocks import BlockState, LowRankFactor
from banditkit.posteriors.registry import Backend, register

Array = jax.Array


class LRKFState(NamedTuple):
    mean: Array  # (P,)
    cov: LowRankFactor  # C = M B (d, P), orthogonal rows
    gram: Array  # diag(C Cᵀ) (d,)
    q: Array  # () pending isotropic variance
    space: ParamSpace  # the parameter layout (static: no leaves)


def _block(s: LRKFState) -> BlockState:
    return BlockState(s.mean, s.cov, s.gram, s.q)


def _state(b: BlockState, space: ParamSpace) -> LRKFState:
    return LRKFState(b.mean, b.cov, b.gram, b.q, space)


def lrkf(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *,
    rank: int = 20, init_cov: float = 1.0, dynamics_cov: float = 0.0, forgetting: float = 1.0,
    dynamics_mode: str = "carry", key: Array | None = None, seed: int = 0,
) -> Posterior:
    """Low-rank Kalman filter over all parameters (see the module docstring for the equations).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input.
      likelihood: ``Gaussian``, ``Bernoulli`` or ``Categorical``.
      rank: ``d``, rank of the covariance factor.
      init_cov: prior variance (on a random rank-``d`` subspace).
      dynamics_cov: ``q``, random-walk variance added per ``predict``.  0 (the default here: with ``rank ≥ P`` the
        exact filter) keeps the weights inside the initial factor's row space; ``make_agent`` uses ``1e-4``, which
        beat 0 on every bandit seed measured (``benchmarks/results/diag_dynamics.md``).
      forgetting: ``γ``; ``predict`` does ``θ ← γθ``, ``Σ ← γ²Σ + qI``.
      dynamics_mode: ``"carry"`` (default, the paper's ``P_{d,+q}``: the new factor keeps ``q``) or ``"gain"``
        (seed 003's reference code: ``P_d``, so ``q`` shapes each step's predictive, draw and gain but is not
        carried into the factor).
      key, seed: PRNG key (or integer seed) for the random orthonormal initial factor.
    """
    check_common_hyper("lrkf", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting, rank=rank,
                       zero_prior=True)
    carry = covblocks.check_dynamics_mode("lrkf", dynamics_mode)
    block = covblocks.lowrank(rank, init_cov, dynamics_cov, forgetting, carry)
    base_key = jax.random.PRNGKey(seed) if key is None else key

    def init(params, example_x=None) -> LRKFState:
        space = ParamSpace.of(params)
        return _state(block.init(base_key, space.ravel(params), space), space)

    def predict(state: LRKFState) -> LRKFState:
        return _state(block.predict(_block(state)), state.space)

    def _project(state: LRKFState, x):
        yhat, jac, r = linearize(lambda p: apply_fn(p, x), state.space.unravel(state.mean), likelihood)
        return yhat, r, block.project(_block(state), jac, state.space)

    def update(state: LRKFState, x, y) -> LRKFState:
        y = as_obs(y, state.mean.dtype)
        yhat, r, proj = _project(state, x)
        if y.shape != yhat.shape:
            raise ValueError(f"observation y has shape {y.shape} but the model outputs {yhat.shape}")
        inn = covblocks.innovation(y - yhat, proj.s, r)
        return _state(block.update(_block(state), proj, inn, None, state.space), state.space)

    def predictive(state: LRKFState, x) -> tuple[Array, Array]:
        yhat, r, proj = _project(state, x)
        return yhat, linalg.symmetrize(proj.s + r)

    def sample(key: Array, state: LRKFState):
        k1, k2 = jax.random.split(key)
        return state.space.unravel(block.sample(k1, k2, _block(state), state.space))

    def mean(state: LRKFState):
        return state.space.unravel(state.mean)

    hyper = dict(rank=rank, init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting,
                 dynamics_mode=dynamics_mode, seed=seed)
    return Posterior(init, predict, update, predictive, sample, mean, name="lrkf", hyper=hyper)


# bandit dynamics_cov = 1e-4: see lolofi's registration (banditkit/posteriors/hilofi.py).
register(Backend(
    name="lrkf", factory=lrkf,
    bandit_defaults=dict(rank=10, init_cov=0.1, dynamics_cov=1e-4),
    bo_defaults=dict(rank=50, init_cov=1e-2),
    gaussian_filter=True, noise_mixture=True,
))
