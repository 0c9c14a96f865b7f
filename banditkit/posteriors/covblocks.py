"""Covariance blocks: the per-block strategies HiLoFi, LoLoFi and LRKF compose (seed 003, Algorithms 1–4).

A filter over a parameter vector split into blocks ``θ = (θ_1, …)`` with a block-diagonal Gaussian linearises the
model once, asks every block for its share of the innovation covariance, and lets every block update itself from
the shared innovation.  A block strategy (:class:`CovBlock`) is a NamedTuple of pure functions over a block's
:class:`BlockState` ``(mean μ (D,), cov, gram, q̄)``; the filter chooses one per block in its factory and never
branches on the form again.  One step with blocks ``b`` and Jacobians ``J_b = ∂ŷ/∂θ_b (C, D_b)``::

    project:  S_b = J_b Σ_b J_bᵀ   (with the pending isotropic ``q̄_b J_b J_bᵀ`` where the form keeps ``q̄`` apart)
    filter:   S = Σ_b S_b + R,  ε = y − ŷ                         (:func:`innovation`)
    update:   μ_b ← μ_b + K_b ε,  K_b = Σ_b J_bᵀ S⁻¹,  Σ_b ← (I − K_b J_b) Σ_b (I − K_b J_b)ᵀ + K_b R K_bᵀ
              (the cross-covariance between blocks is dropped; ``S_o = S − S_b − R`` is the other blocks' share)

``outputs(block, J, space) = J Σ_b Jᵀ (C, C)`` is the same share for any ``J (C, D)`` — ``C`` outputs at once, also
for the per-arm blocks, whose ``project`` takes one observed output: the covariance of ``C`` outputs that are affine
in the block (a Thompson draw of a head given the other blocks, :func:`banditkit.posteriors.hilofi.hilofi`).

Forms (``q``: the drift variance per ``predict``, ``γ``: forgetting; ``carry``: ``dynamics_mode="carry"``):

* :func:`lowrank`: ``Σ = CᵀC + q̄I``, ``C (d, D)`` with orthogonal rows kept as :class:`LowRankFactor` ``C = M B``
  (``M (d, d)``, ``B (d, D)``), ``gram = diag(CCᵀ) (d,)``.  predict ``M ← γM``, ``q̄ ← γ²q̄ + q``; update
  :func:`linalg.lowrank_kalman_weights` (best rank-``d`` factor, ``P_{d,+q̄}`` when carried, ``P_d`` otherwise),
  ``C ← (WΦ) C + q (WΨ) S⁻¹H``; draw ``μ + Cᵀε + √q̄ z``.  The hidden block of HiLoFi, LoLoFi's last layer, and
  all of LRKF.  With ``q ≡ 0`` every update maps ``C`` to ``(WΦ) C``, so ``C_t = M_t C_0`` never leaves the row
  space of ``C_0``: the block keeps ``B`` fixed (the random orthonormal rows drawn at ``init``) and updates
  ``M ← (WΦ) M`` only — no ``(d, d) @ (d, D)`` GEMM and no ``(d, D)`` write per step, the same posterior.  With
  ``q > 0`` the new rows ``S⁻¹H`` leave that space: ``B ← C_new``, ``M ← I`` every update.
* :func:`full` of a :class:`FullForm`, one ``(D, D)`` matrix: :func:`sqrt_form` keeps ``U`` with ``Σ = UᵀU``
  (predict ``U ← Q_R(γU, √q I)`` as :func:`linalg.add_isotropic_factor`; update :func:`linalg.sqrt_factor_update`),
  :func:`dense_form` keeps ``Σ`` (predict ``Σ ← γ²Σ + qI``; update :func:`linalg.dense_block_update`; a draw
  factors ``Σ``).  With ``dynamics_mode="gain"`` and ``q ≠ 0`` both keep ``q̄`` pending instead: it enters ``S_b``,
  the draw and the gain ``K_b = (Σ_b + q̄I)J_bᵀS⁻¹``, and the Joseph form is applied to ``Σ_b`` without it.
* :func:`per_arm` of a :class:`FullForm`: the same covariance kept as ``K`` diagonal blocks ``(K, P_k, P_k)`` for a
  ``K``-output head observed one arm at a time (:mod:`banditkit.posteriors.arms`); project / update touch the
  observed arm's block only, predict and draws map over the blocks.  The same posterior as :func:`full`.

Shapes: ``C`` observations; ``D`` the block's size; ``d`` a low-rank block's rank (clipped to ``D``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.posteriors import arms as arm_layout
from banditkit.posteriors import linalg

Array = jax.Array


class LowRankFactor(NamedTuple):
    """A low-rank block's factor ``C = M B`` (``Σ = CᵀC + q̄I``): ``mix = M (d, d)``, ``basis = B (d, D)``.

    With no dynamics noise ``B`` is the initial random orthonormal rows and stays fixed while ``M`` moves; with
    ``q > 0`` each update writes ``B = C`` and ``M = I``.  :meth:`dense` forms ``C`` (one ``(d, d) @ (d, D)``
    product).
    """

    mix: Array  # M (d, d)
    basis: Array  # B (d, D)

    def dense(self) -> Array:
        """``C = M B (d, D)``."""
        return self.mix @ self.basis


class BlockState(NamedTuple):
    """One block's part of a filter state (a view the filter builds from its own fields)."""

    mean: Array  # μ (D,)
    cov: Any  # low-rank: LowRankFactor C = M B; sqrt: U (D, D); dense: Σ (D, D); per-arm: (K, P_k, P_k)
    gram: Array  # low-rank: diag(C Cᵀ) (d,); full forms: (0,)
    q: Array  # () pending isotropic variance q̄


class Projection(NamedTuple):
    """A block's view of one linearisation."""

    jac: Array  # J_b (C, D), or the observed arm's J_k (1, P_k)
    cross: Array  # low-rank: A = M(B Jᵀ) (d, C); sqrt: B = U Jᵀ (D, C); dense: G = Σ Jᵀ (D, C)
    s: Array  # S_b (C, C): this block's share of the innovation covariance
    arm: Any = None  # per-arm: (k, index_k (P_k,)), the observed arm and its entries of μ


class Innovation(NamedTuple):
    """What every block's update shares: ``ε (C,)``, ``S (C, C)``, its upper factor and ``R½``."""

    innov: Array
    s: Array
    s_chol: Array
    r_half: Array


def innovation(innov: Array, s_blocks: Array, r: Array) -> Innovation:
    """:class:`Innovation` for the blocks' summed ``Σ_b S_b`` and the observation covariance ``R``."""
    s = linalg.symmetrize(s_blocks + r)
    return Innovation(innov, s, linalg.chol_upper(s), linalg.sqrt_psd(r))


class CovBlock(NamedTuple):
    """A block strategy: pure functions over :class:`BlockState`; ``space`` is the filter state's ``ParamSpace``
    (read by the per-arm blocks for their index, ignored by the others)."""

    init: Callable[[Array, Array, Any], BlockState]  # (key, μ_0 (D,), space): the prior
    predict: Callable[[BlockState], BlockState]  # time update
    project: Callable[[BlockState, Array, Any], Projection]  # (block, J_b (C, D), space)
    update: Callable[[BlockState, Projection, Innovation, Array, Any], BlockState]  # (…, S_o, space)
    sample: Callable[[Array, Array, BlockState, Any], Array]  # (key, key, block, space): a draw (D,)
    outputs: Callable[[BlockState, Array, Any], Array]  # (block, J (C, D), space) -> J Σ_b Jᵀ (C, C), q̄ included


class FullForm(NamedTuple):
    """A full-rank block's covariance, one matrix at a time (lifted by :func:`full` and :func:`per_arm`)."""

    pending: bool  # q̄ is kept apart (dynamics_mode="gain" with q ≠ 0) rather than folded into the matrix
    forgetting: Any  # γ
    dynamics_cov: Any  # q
    init: Callable[[Array], Array]  # I (D, D) -> the prior's matrix
    predict: Callable[[Array], Array]  # matrix -> matrix after the time update (q̄ handled by the caller)
    project: Callable[[Array, Array, Array], tuple[Array, Array]]  # (matrix, q̄, J) -> (cross, S_b)
    update: Callable[..., tuple[Array, Array]]  # (μ, matrix, q̄, J, cross, Innovation, S_o) -> (μ, matrix)
    root: Callable[[Array], Array]  # matrix -> upper root U (Σ = UᵀU) for a draw


def is_zero(v) -> bool:
    """Statically zero (a Python number equal to 0): the terms it scales are left out of the trace."""
    return isinstance(v, (int, float)) and float(v) == 0.0


def check_dynamics_mode(name: str, mode) -> bool:
    """``True`` for ``dynamics_mode="carry"``, ``False`` for ``"gain"``; anything else is an error."""
    if mode not in ("carry", "gain"):
        raise ValueError(f"{name}: dynamics_mode={mode!r} must be 'carry' (the paper's Algorithm 1: q stays in the "
                         "covariance) or 'gain' (the reference code: q enters each step's gain only)")
    return mode == "carry"


@partial(jax.jit, static_argnums=(1, 2, 4))
def _lowrank_init(key: Array, rank: int, dim: int, var, dtype) -> tuple[LowRankFactor, Array]:
    """``C_0 = (√var · I) Q`` with ``Q (d, dim)`` orthonormal dense random rows; ``gram = var · 1``.

    Jitted once per shape for the whole process (cheaper than the eager QR and friends at every ``init``).
    """
    d = min(rank, dim)
    q = linalg.orthonormal_rows(key, d, dim, dtype)
    v = jnp.asarray(var, dtype)
    return LowRankFactor(jnp.sqrt(v) * jnp.eye(d, dtype=dtype), q), v * jnp.ones((d,), dtype)


def _pending_outer(s: Array, q: Array, jac: Array, on: bool) -> Array:
    """``S_b + q̄ J Jᵀ`` when the block keeps ``q̄`` pending (``on``, static), else ``S_b``."""
    return s + q * (jac @ jac.T) if on else s


def lowrank(rank: int, init_cov, dynamics_cov, forgetting, carry: bool) -> CovBlock:
    """Low-rank block ``Σ = CᵀC + q̄I`` (see the module docstring); ``C_0 = √init_cov · Q`` with ``Q`` random
    orthonormal dense rows (digest erratum 14.2.3), ``rank`` clipped to the block size; ``C`` kept as
    :class:`LowRankFactor` ``M B``, ``B`` fixed while ``q ≡ 0``."""
    use_q = not is_zero(dynamics_cov)

    def init(key, mean, space) -> BlockState:
        dt = mean.dtype
        c, g = _lowrank_init(key, rank, mean.size, init_cov, dt)
        return BlockState(mean, c, g, jnp.zeros((), dt))

    def predict(b: BlockState) -> BlockState:
        dt = b.mean.dtype
        g = jnp.asarray(forgetting, dt)
        c = b.cov
        return BlockState(g * b.mean, c._replace(mix=g * c.mix), g**2 * b.gram,
                          g**2 * b.q + jnp.asarray(dynamics_cov, dt))

    def project(b: BlockState, jac, space) -> Projection:
        c = b.cov
        a = c.mix @ (c.basis @ jac.T)  # (d, C): one read of B
        return Projection(jac, a, _pending_outer(a.T @ a, b.q, jac, use_q))

    def update(b: BlockState, p: Projection, inn: Innovation, s_other, space) -> BlockState:
        c = b.cov
        st = linalg.lowrank_kalman_weights(b.gram, p.jac, p.cross, inn.s_chol, inn.r_half, inn.innov, b.q, use_q,
                                           carry)
        st = st._replace(left=st.left @ c.mix, u=st.u @ c.mix)  # the weights on B, as C = M B
        if use_q:  # the new rows S⁻¹H leave B's span: B ← C_new, M ← I
            mean, basis, _ = linalg.lowrank_kalman_update(b.mean, c.basis, st, inn.s_chol, p.jac)
            c = LowRankFactor(jnp.eye(c.mix.shape[0], dtype=c.mix.dtype), basis)
        else:  # M ← (WΦ) M; μ + Cᵀu is the second read of B
            mean, c = b.mean + st.u @ c.basis, c._replace(mix=st.left)
        return BlockState(mean, c, st.gram, jnp.zeros((), mean.dtype))

    def sample(k1, k2, b: BlockState, space) -> Array:
        dt = b.mean.dtype
        c = b.cov
        draw = b.mean + (rng.normal(k1, (c.mix.shape[0],), dt) @ c.mix) @ c.basis
        return draw + jnp.sqrt(b.q) * rng.normal(k2, draw.shape, dt) if use_q else draw

    def outputs(b: BlockState, jac, space) -> Array:
        return project(b, jac, space).s

    return CovBlock(init, predict, project, update, sample, outputs)


def _full_form(init_cov, dynamics_cov, forgetting, carry: bool, dense: bool) -> FullForm:
    use_q = not is_zero(dynamics_cov)
    pending = use_q and not carry

    def init(eye):
        v = jnp.asarray(init_cov, eye.dtype)
        return (v if dense else jnp.sqrt(v)) * eye

    def predict(m):
        g = jnp.asarray(forgetting, m.dtype)
        q = jnp.asarray(dynamics_cov, m.dtype)
        if dense:  # Σ ← γ²Σ (+ qI)
            m = g**2 * m
            return m + q * jnp.eye(m.shape[-1], dtype=m.dtype) if use_q and carry else m
        m = g * m  # U ← γU, then the factor of UᵀU + qI
        return linalg.add_isotropic_factor(m, q) if use_q and carry else m

    def project(m, q, jac):
        cross = m @ jac.T  # dense: G = Σ Jᵀ; sqrt: B = U Jᵀ
        return cross, _pending_outer(jac @ cross if dense else cross.T @ cross, q, jac, pending)

    def update(mean, m, q, jac, cross, inn: Innovation, s_other):
        if pending:  # K = (Σ + q̄I)JᵀS⁻¹, Joseph form on Σ alone
            g = cross if dense else m.T @ cross  # G = Σ Jᵀ
            sig = m if dense else m.T @ m
            mean, sig = linalg.dense_block_update(mean, sig, g, inn.s, s_other + q * (jac @ jac.T), inn.innov,
                                                  g + q * jac.T)
            return mean, sig if dense else linalg.chol_upper(sig)  # sqrt: refactored, O(D³) as the time update
        if dense:
            return linalg.dense_block_update(mean, m, cross, inn.s, s_other, inn.innov)
        return linalg.sqrt_factor_update(mean, m, cross, inn.s, s_other, inn.r_half, inn.innov)

    def root(m):
        return linalg.chol_upper(m) if dense else m

    return FullForm(pending, forgetting, dynamics_cov, init, predict, project, update, root)


def sqrt_form(init_cov, dynamics_cov, forgetting, carry: bool) -> FullForm:
    """Full-rank square root ``Σ = UᵀU``, ``U_0 = √init_cov · I`` (PSD by construction; a time update with
    ``q > 0`` refactors, ``O(D³)``)."""
    return _full_form(init_cov, dynamics_cov, forgetting, carry, dense=False)


def dense_form(init_cov, dynamics_cov, forgetting, carry: bool) -> FullForm:
    """Full-rank ``Σ`` itself, ``Σ_0 = init_cov · I`` (``O(D²)`` time update; a draw factors ``Σ``, ``O(D³/3)``)."""
    return _full_form(init_cov, dynamics_cov, forgetting, carry, dense=True)


def _predict_full(form: FullForm, b: BlockState, cov: Array) -> BlockState:
    dt = b.mean.dtype
    g = jnp.asarray(form.forgetting, dt)
    q = g**2 * b.q + jnp.asarray(form.dynamics_cov, dt) if form.pending else b.q
    return BlockState(g * b.mean, cov, b.gram, q)


def _sample_full(form: FullForm, k2, b: BlockState, draw: Array) -> Array:
    return draw + jnp.sqrt(b.q) * rng.normal(k2, draw.shape, draw.dtype) if form.pending else draw


def full(form: FullForm) -> CovBlock:
    """One full-rank ``(D, D)`` block of the given form."""

    def init(key, mean, space) -> BlockState:
        dt = mean.dtype
        return BlockState(mean, form.init(jnp.eye(mean.size, dtype=dt)), jnp.zeros((0,), dt), jnp.zeros((), dt))

    def predict(b: BlockState) -> BlockState:
        return _predict_full(form, b, form.predict(b.cov))

    def project(b: BlockState, jac, space) -> Projection:
        return Projection(jac, *form.project(b.cov, b.q, jac))

    def update(b: BlockState, p: Projection, inn: Innovation, s_other, space) -> BlockState:
        mean, cov = form.update(b.mean, b.cov, b.q, p.jac, p.cross, inn, s_other)
        return BlockState(mean, cov, b.gram, jnp.zeros((), mean.dtype))

    def sample(k1, k2, b: BlockState, space) -> Array:
        root = form.root(b.cov)
        return _sample_full(form, k2, b, b.mean + rng.normal(k1, (root.shape[0],), b.mean.dtype) @ root)

    def outputs(b: BlockState, jac, space) -> Array:  # J Σ Jᵀ with no factorisation of Σ
        return form.project(b.cov, b.q, jac)[1]

    return CovBlock(init, predict, project, update, sample, outputs)


def per_arm(form: FullForm, arms: int, who: str, last: bool = True) -> CovBlock:
    """``K = arms`` full-rank blocks ``(K, P_k, P_k)`` of the given form over a ``K``-output head observed one arm
    at a time; the index of each arm's entries is :func:`arms.arm_index` of the state's ``space`` (``last``: of its
    last-layer vector)."""
    arm_layout.check_arms(arms, who)

    def index(space):
        return arm_layout.arm_index(space, arms, who, last)

    def init(key, mean, space) -> BlockState:
        index(space)  # a leaf without last axis K is refused here
        dt = mean.dtype
        cov = form.init(arm_layout.eye_blocks(arms, mean.size, dt))
        return BlockState(mean, cov, jnp.zeros((0,), dt), jnp.zeros((), dt))

    def predict(b: BlockState) -> BlockState:
        return _predict_full(form, b, jax.vmap(form.predict)(b.cov))

    def project(b: BlockState, jac, space) -> Projection:
        arm_layout.check_one_output(jac.shape[0], arms, who)
        k, row, i_k, _ = arm_layout.observed_block(jac[0], index(space))
        jac = row[None, :]
        return Projection(jac, *form.project(jax.lax.dynamic_index_in_dim(b.cov, k, keepdims=False), b.q, jac),
                          arm=(k, i_k))

    def update(b: BlockState, p: Projection, inn: Innovation, s_other, space) -> BlockState:
        k, i_k = p.arm  # only the observed arm's block moves
        m_k, c_k = form.update(b.mean[i_k], jax.lax.dynamic_index_in_dim(b.cov, k, keepdims=False), b.q, p.jac,
                               p.cross, inn, s_other)
        mean = b.mean.at[i_k].set(m_k)
        return BlockState(mean, jax.lax.dynamic_update_index_in_dim(b.cov, c_k, k, 0), b.gram,
                          jnp.zeros((), mean.dtype))

    def sample(k1, k2, b: BlockState, space) -> Array:  # K independent blocks: U_kᵀ z_k per arm
        draws = arm_layout.sample_blocks(k1, jax.vmap(form.root)(b.cov))
        return _sample_full(form, k2, b, b.mean + arm_layout.scatter_blocks(draws, index(space), b.mean.size))

    def outputs(b: BlockState, jac, space) -> Array:  # Σ_k J_k Σ_k J_kᵀ over the arms' columns J_k (C, P_k)
        jac_k = jnp.moveaxis(jac[:, jnp.asarray(index(space))], 1, 0)  # (K, C, P_k)
        return jnp.sum(jax.vmap(lambda m, j: form.project(m, b.q, j)[1])(b.cov, jac_k), axis=0)

    return CovBlock(init, predict, project, update, sample, outputs)
