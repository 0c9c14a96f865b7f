"""HiLoFi and LoLoFi (seed 003, Algorithms 1–3 with the digest's errata): full-rank (or low-rank) last layer,
low-rank hidden layers, block-diagonal covariance.

Parameters are split by path into a hidden block ``h (D_h,)`` and a last-layer block ``ℓ (D_ℓ,)``
(``last_layer="head"``).  State (:class:`HiLoFiState`):

* ``mean_hidden (D_h,)``, ``mean_last (D_ℓ,)``;
* ``cov_hidden = C (d, D_h)``: ``Σ_h = CᵀC + q̄_h I``, rows of ``C`` mutually orthogonal, ``gram_hidden =
  diag(C Cᵀ) (d,)`` (kept in the state so no step recomputes ``C Cᵀ``);
* HiLoFi, ``last_cov="sqrt"``: ``cov_last = U (D_ℓ, D_ℓ)``, a full square root ``Σ_ℓ = UᵀU`` (upper-triangular
  at ``init``; the ``O(D_ℓ² C)`` update keeps it a square root, not a triangle).  HiLoFi, ``last_cov="dense"``:
  ``cov_last = Σ_ℓ (D_ℓ, D_ℓ)`` itself.  LoLoFi (``rank_last=d_ℓ``): ``cov_last = C_ℓ
  (d_ℓ, D_ℓ)`` with ``Σ_ℓ = C_ℓᵀC_ℓ + q̄_ℓ I`` and ``gram_last (d_ℓ,)``, handled exactly like the hidden block;
* ``q_hidden``, ``q_last``: the isotropic variance ``q̄`` not yet folded into a factor (added by ``predict``,
  consumed by ``update``).

Model: ``θ_t = γ θ_{t−1} + u_t`` with ``u ~ N(0, diag(q_h I, q_ℓ I))``; ``y ~ N(m(f(θ, x)), R)``, linearised at
the mean.

predict:  ``μ ← γμ``;  ``C ← γC``, ``q̄_h ← γ² q̄_h + q_h`` (so ``Σ_h ← γ²Σ_h + q_h I`` exactly);
          HiLoFi last layer, sqrt: ``U ← chol(γ²UᵀU + q_ℓ I)`` (= ``Q_R(γU, √q_ℓ I)``, exact, ``O(D_ℓ³)``;
          skipped when ``q_ℓ = 0``); dense: ``Σ_ℓ ← γ²Σ_ℓ + q_ℓ I`` (``O(D_ℓ²)``); LoLoFi like the hidden block.
update:   ``ŷ, H̃ = ∂ŷ/∂h (C, D_h), L̃ = ∂ŷ/∂ℓ (C, D_ℓ)``, ``ε = y − ŷ``;
          ``S = H̃Σ_hH̃ᵀ + L̃Σ_ℓL̃ᵀ + R``;  ``K_hᵀ = S⁻¹H̃Σ_h``, ``K_ℓᵀ = S⁻¹L̃Σ_ℓ``;  ``h += K_hε``, ``ℓ += K_ℓε``;
          hidden: ``C ← P_{d,+q̄_h}(C(I − K_hH̃)ᵀ, R½K_hᵀ)``, ``q̄_h ← 0``  (best rank-``d`` factor of the surrogate
          ``(I−K_hH̃)CᵀC(I−K_hH̃)ᵀ + K_hRK_hᵀ + q̄_h I``; :func:`linalg.lowrank_kalman_update`);
          HiLoFi last layer: ``Σ_ℓ ← (I−K_ℓL̃)Σ_ℓ(I−K_ℓL̃)ᵀ + K_ℓRK_ℓᵀ`` exactly — sqrt: as a square root
          (:func:`linalg.sqrt_factor_update`); dense: expanded with ``G = Σ_ℓL̃ᵀ``, ``K_ℓ = G S⁻¹`` into
          ``Σ_ℓ − K_ℓ(S + S_h)K_ℓᵀ`` (``S_h = H̃Σ_hH̃ᵀ``; :func:`linalg.dense_block_update`), ``O(D_ℓ² C)``;
          LoLoFi last layer like the hidden block.
          The cross-covariance between blocks is dropped (seed 003 §4.3).
predictive: ``(ŷ(x), L̃Σ_ℓL̃ᵀ + H̃Σ_hH̃ᵀ + R)`` at the mean — epistemic (first two terms) + aleatoric ``R``.
sample:   one parameter draw from the block-diagonal Gaussian: ``h = μ_h + Cᵀε_h + √q̄_h z_h``,
          ``ℓ = μ_ℓ + Uᵀε_ℓ`` (dense: ``U = chol(Σ_ℓ)`` per draw, ``O(D_ℓ³/3)``; LoLoFi: ``C_ℓᵀε_ℓ + √q̄_ℓ z_ℓ``),
          all ``ε, z`` standard normal.

Per-arm last layer (``arms=K``, HiLoFi only): for a ``K``-output head observed one arm at a time (a multi-output
bandit agent's selected output ``f(θ, x)·e_a``), ``L̃`` is zero outside arm ``a``'s block of the head, so ``Σ_ℓ``
stays block-diagonal (:mod:`banditkit.posteriors.arms`).  ``cov_last`` then holds the ``K`` blocks ``(K, P_k, P_k)``
(``P_k = D_ℓ / K``), the update and its ``O(P_k²)`` work touch the observed arm's block only, and a dense Thompson
draw factors ``K`` blocks (``K P_k³/3`` flops instead of ``K³ P_k³/3``): the same posterior as ``arms=None``.

Which HiLoFi last-layer form (``last_cov``): ``"sqrt"`` keeps a square root, so the covariance stays positive
semi-definite by construction, but a time update with ``q_ℓ > 0`` refactors it (``O(D_ℓ³)`` per round: ~22 ms at
``D_ℓ = 850`` on a 2-core CPU).  ``"dense"`` keeps ``Σ_ℓ`` (``O(D_ℓ²)`` time update, ``O(D_ℓ² C)`` measurement
update) and pays one Cholesky per Thompson draw (~4 ms at ``D_ℓ = 850``), none for UCB / greedy / predictive;
the subtraction can lose definiteness only by rounding, which ``q_ℓ > 0`` outweighs.  ``"auto"`` (default) picks
``"dense"`` when ``q_ℓ > 0`` and ``"sqrt"`` otherwise.

Dynamics modes (``dynamics_mode``).  ``"carry"`` (default) is Algorithm 1 above: ``q`` joins the covariance in
``predict`` and stays after ``update`` (hidden: ``P_{d,+q̄_h}``; full last layer: ``Σ_ℓ ← γ²Σ_ℓ + q_ℓ I``).
``"gain"`` is what seed 003's reference code computes: ``q̄`` is pending for the coming step only — it is in
``S``, the predictive, a Thompson draw, and the gain ``K = (Σ + q̄I)Jᵀ S⁻¹`` of both blocks — and the Joseph form
is applied to the covariance without it: hidden ``C ← P_d(C(I−K_hH̃)ᵀ, R½K_hᵀ)`` (the reference projection adds
``q`` to the small Gram's eigenvalues and divides it out again), full last layer ``Σ_ℓ ← (I−K_ℓL̃)Σ_ℓ(I−K_ℓL̃)ᵀ +
K_ℓRK_ℓᵀ`` (the reference ``_update_last``; here :func:`linalg.dense_block_update` with the gain's
numerator ``(Σ_ℓ + q̄_ℓI)L̃ᵀ``; ``last_cov="sqrt"`` refactors the result, ``O(D_ℓ³)``).  The ``q`` then never
accumulates: a large ``q`` raises each step's gain but not the covariance the next step starts from.  With
``Categorical`` on online MNIST and ``q_h = q_ℓ = 0.01`` (the authors' notebook 04), ``"carry"`` diverges to chance
and ``"gain"`` reaches 0.93 (LoLoFi with ``rank_last=50``: 0.94 against 0.92 carried;
``benchmarks/results/rank_study.md``).

``init_cov_hidden`` / ``init_cov_last`` are prior *variances*.  ``C_0 = √init_cov_hidden · Q`` with ``Q`` a
random ``(d, D_h)`` matrix with orthonormal dense rows, so ``Σ_h,0`` has eigenvalue ``init_cov_hidden`` on a
random ``d``-dimensional subspace (not the coordinate init ``[I | 0]``, which freezes all but ``d`` parameters
when ``q_h = 0``; digest erratum 14.2.3).  ``U_0 = √init_cov_last · I``.  Ranks above the block size are clipped
to it (``rank ≥ D_h`` gives the exact block-diagonal filter).  ``R`` must be positive definite where ``S``
would otherwise be singular.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit import rng
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.arms import ArmIndex, observed_block, sample_blocks, scatter_blocks
from banditkit.posteriors.base import ApplyFn, Posterior, SpaceCell, as_obs

Array = jax.Array


class HiLoFiState(NamedTuple):
    mean_hidden: Array  # (D_h,)
    mean_last: Array  # (D_ℓ,)
    cov_hidden: Array  # C (d, D_h), orthogonal rows
    gram_hidden: Array  # diag(C Cᵀ) (d,)
    cov_last: Array  # HiLoFi: U (D_ℓ, D_ℓ), or (K, P_k, P_k) blocks with arms=K; LoLoFi: C_ℓ (d_ℓ, D_ℓ)
    gram_last: Array  # LoLoFi: diag(C_ℓ C_ℓᵀ) (d_ℓ,); HiLoFi: (0,)
    q_hidden: Array  # () pending isotropic variance of the hidden block
    q_last: Array  # () pending isotropic variance of the last block (LoLoFi only; 0 for HiLoFi)


def _is_zero(v) -> bool:
    return isinstance(v, (int, float)) and float(v) == 0.0


def _check(name: str, value, *, positive: bool = False) -> None:
    if isinstance(value, (int, float)):
        if positive and not value > 0:
            raise ValueError(f"{name} must be > 0, got {value!r}")
        if not positive and not value >= 0:
            raise ValueError(f"{name} must be >= 0 (it is a variance), got {value!r}")


def check_dynamics_mode(name: str, mode) -> bool:
    """``True`` for ``dynamics_mode="carry"``, ``False`` for ``"gain"``; anything else is an error."""
    if mode not in ("carry", "gain"):
        raise ValueError(f"{name}: dynamics_mode={mode!r} must be 'carry' (the paper's Algorithm 1: q stays in the "
                         "covariance) or 'gain' (the reference code: q enters each step's gain only)")
    return mode == "carry"


def _check_rank(name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def linearize_tree(apply_fn: ApplyFn, params, x, likelihood: Likelihood, space, split: bool):
    """``(ŷ, J, R)`` with the Jacobian taken w.r.t. the parameter *pytree* and flattened afterwards.

    Same result as :func:`banditkit.posteriors.base.linearize` / ``linearize_blocks``, but differentiating the
    pytree (not a flat vector that is sliced inside the model) avoids a chain of ``pad`` + ``add`` over ``P``
    entries per leaf in the backward pass; the leaves are concatenated once.  ``split=True`` returns
    ``(ŷ, H̃ (C, D_h), L̃ (C, D_ℓ), R)`` in :meth:`ParamSpace.split` order, else ``(ŷ, J (C, P), R)`` in ravel order.
    """

    def mean_and_aux(p):
        f = jnp.atleast_1d(apply_fn(p, x))
        return likelihood.mean(f), f

    jac, f = jax.jacrev(mean_and_aux, has_aux=True)(params)
    c = f.shape[0]
    leaves = [jnp.reshape(leaf, (c, -1)) for leaf in jax.tree_util.tree_leaves(jac)]
    yhat, r = likelihood.mean(f), likelihood.cov(f)
    if not split:
        return yhat, jnp.concatenate(leaves, axis=1), r
    hid = [leaf for leaf, last in zip(leaves, space.is_last, strict=True) if not last]
    lst = [leaf for leaf, last in zip(leaves, space.is_last, strict=True) if last]
    return yhat, jnp.concatenate(hid, axis=1), jnp.concatenate(lst, axis=1), r


@partial(jax.jit, static_argnums=(1, 2, 4))
def _lowrank_init(key: Array, rank: int, dim: int, var, dtype) -> tuple[Array, Array]:
    """``C_0 = √var · Q`` with ``Q (d, dim)`` orthonormal dense random rows; ``gram = var · 1``.

    Jitted once per shape for the whole process (cheaper than the eager QR and friends at every ``init``).
    """
    d = min(rank, dim)
    q = linalg.orthonormal_rows(key, d, dim, dtype)
    v = jnp.asarray(var, dtype)
    return jnp.sqrt(v) * q, v * jnp.ones((d,), dtype)


def hilofi(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    rank: int = 20,
    rank_last: int | None = None,
    last_layer: str = "head",
    init_cov_hidden: float = 1.0,
    init_cov_last: float = 1.0,
    dynamics_cov: float | None = None,
    dynamics_cov_hidden: float | None = None,
    dynamics_cov_last: float | None = None,
    forgetting: float = 1.0,
    last_cov: str = "auto",
    arms: int | None = None,
    dynamics_mode: str = "carry",
    key: Array | None = None,
    seed: int = 0,
) -> Posterior:
    """HiLoFi: full-rank last layer + rank-``d`` hidden layers (``rank_last=int``: LoLoFi).  See the module doc.

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input (``x`` any pytree).
      likelihood: ``Gaussian``, ``Bernoulli`` or ``Categorical``.
      rank: ``d_h``, rank of the hidden-block covariance factor.
      rank_last: ``None`` for a full-rank last layer (HiLoFi); an int ``d_ℓ`` for LoLoFi.
      last_layer: name of the submodule holding the last layer (parameter path).
      init_cov_hidden, init_cov_last: prior variances of the two blocks.
      dynamics_cov: ``q`` for both blocks (shorthand); ``dynamics_cov_hidden`` / ``dynamics_cov_last``
        override it per block (default 0).  ``q_ℓ`` is added to the full last layer's covariance every step
        (Algorithm 1), so a large one keeps its gain high for good: with ``Categorical`` on online MNIST,
        ``q_h = q_ℓ = 0.01`` (seed 003's notebook setting) diverges to chance accuracy while ``q_h = 0.01,
        q_ℓ = 0`` reaches 0.93, and so does ``q_h = q_ℓ = 0.01`` with ``dynamics_mode="gain"``
        (``benchmarks/results/rank_study.md``).  ``q_h > 0`` lets the hidden factor leave its initial row space;
        with ``q_h = 0`` it never does.  On the bandits ``make_agent`` builds HiLoFi with ``q = 0`` (best or level
        there: its dense last layer learns freely) and LoLoFi, whose last layer is a factor too, with ``1e-4``
        (``benchmarks/results/diag_dynamics.md``).
      forgetting: ``γ``; ``predict`` does ``θ ← γθ``, ``Σ ← γ²Σ + Q``.
      last_cov: HiLoFi's last-layer form, ``"sqrt"``, ``"dense"`` or ``"auto"`` (see the module docstring;
        ignored by LoLoFi).
      arms: ``K`` for a ``K``-output head observed one output at a time: the last-layer covariance is kept as ``K``
        per-arm blocks (every last-layer leaf must have last axis ``K``; HiLoFi only).  ``None``: one dense block.
      dynamics_mode: ``"carry"`` (default; the paper's Algorithm 1): ``q`` is added to the covariance by
        ``predict`` and stays in it after ``update``.  ``"gain"`` (what seed 003's reference code computes): ``q``
        is pending variance for the coming step only — it is in that step's predictive, Thompson draw and gain
        — and the update's Joseph form is applied to the covariance *without* it, so it never accumulates (see
        "Dynamics modes" in the module docstring).
      key, seed: PRNG key (or integer seed) for the random orthonormal initial factor(s).
    """
    _check_rank("rank", rank)
    _check_rank("rank_last", rank_last, allow_none=True)
    q_h = dynamics_cov_hidden if dynamics_cov_hidden is not None else (dynamics_cov or 0.0)
    q_l = dynamics_cov_last if dynamics_cov_last is not None else (dynamics_cov or 0.0)
    for n, v in [
        ("init_cov_hidden", init_cov_hidden),
        ("init_cov_last", init_cov_last),
        ("dynamics_cov_hidden", q_h),
        ("dynamics_cov_last", q_l),
    ]:
        _check(n, v)
    _check("forgetting", forgetting, positive=True)
    if not isinstance(last_layer, str):
        raise TypeError(f"last_layer must be the name of the last submodule (a str), got {last_layer!r}")
    low_last = rank_last is not None
    use_qh = not _is_zero(q_h)
    use_ql = not _is_zero(q_l)
    if last_cov not in ("auto", "sqrt", "dense"):
        raise ValueError(f"last_cov={last_cov!r} must be 'auto', 'sqrt' or 'dense'")
    carry = check_dynamics_mode("hilofi", dynamics_mode)
    # HiLoFi's full last layer holds q_ℓ pending (as the low-rank blocks do) when it is not carried
    pend_l = low_last or (use_ql and not carry)
    dense = not low_last and (last_cov == "dense" or (last_cov == "auto" and use_ql))
    blocks = None if arms is None else ArmIndex(arms, "hilofi")
    if blocks is not None and low_last:
        raise ValueError("lolofi: arms applies to HiLoFi's full-rank last layer (LoLoFi's low-rank factor couples "
                         "the arms); drop arms or rank_last")
    base_key = jax.random.PRNGKey(seed) if key is None else key
    cell = SpaceCell(last_layer)

    def _eye_last(n: int, dt) -> Array:
        """``I`` of the last-layer covariance's shape: ``(n, n)``, or ``(K, P_k, P_k)`` per-arm blocks."""
        return jnp.eye(n, dtype=dt) if blocks is None else blocks.eye(n, dt)

    def init(params) -> HiLoFiState:
        space = cell.set(params)
        h, ell = space.split(params)
        dt = space.dtype
        k_h, k_l = jax.random.split(base_key)
        c_h, g_h = _lowrank_init(k_h, rank, h.size, init_cov_hidden, dt)
        if low_last:
            c_l, g_l = _lowrank_init(k_l, rank_last, ell.size, init_cov_last, dt)
        else:
            if arms is not None:
                blocks.set(params, keep=space.is_last)
            v0 = jnp.asarray(init_cov_last, dt)
            c_l = (v0 if dense else jnp.sqrt(v0)) * _eye_last(ell.size, dt)
            g_l = jnp.zeros((0,), dt)
        # two buffers, not one: a state whose leaves alias cannot be donated to a jitted step
        return HiLoFiState(h, ell, c_h, g_h, c_l, g_l, jnp.zeros((), dt), jnp.zeros((), dt))

    def predict(state: HiLoFiState) -> HiLoFiState:
        dt = state.mean_hidden.dtype
        g = jnp.asarray(forgetting, dt)
        qh = jnp.asarray(q_h, dt)
        ql = jnp.asarray(q_l, dt)
        if low_last:
            c_l, g_l, qbar_l = g * state.cov_last, g**2 * state.gram_last, g**2 * state.q_last + ql
        elif dense:
            c_l, g_l, qbar_l = g**2 * state.cov_last, state.gram_last, state.q_last
            if pend_l:
                qbar_l = g**2 * state.q_last + ql
            elif use_ql:
                c_l = c_l + ql * _eye_last(state.mean_last.size, dt)
        else:
            c_l, g_l, qbar_l = g * state.cov_last, state.gram_last, state.q_last
            if pend_l:
                qbar_l = g**2 * state.q_last + ql
            elif use_ql:
                c_l = (linalg.add_isotropic_factor(c_l, ql) if arms is None
                       else jax.vmap(linalg.add_isotropic_factor, in_axes=(0, None))(c_l, ql))
        return HiLoFiState(
            g * state.mean_hidden,
            g * state.mean_last,
            g * state.cov_hidden,
            g**2 * state.gram_hidden,
            c_l,
            g_l,
            g**2 * state.q_hidden + qh,
            qbar_l,
        )

    def _blocks(state: HiLoFiState, x):
        """Linearise and return the pieces of ``S``: ``(ŷ, H̃, L̃, R, A_h, S_h, B_ℓ, S_ℓ, arm)``.

        With ``arms``: ``L̃`` is the observed arm's block ``(1, P_k)``, ``B_ℓ`` uses that arm's covariance block, and
        ``arm = (k, index_k)``; else ``arm = None``."""
        space = cell.space
        params = space.merge(state.mean_hidden, state.mean_last)
        yhat, jh, jl, r = linearize_tree(apply_fn, params, x, likelihood, space, split=True)
        a_h = state.cov_hidden @ jh.T  # (d, C)
        s_h = a_h.T @ a_h
        if use_qh:
            s_h = s_h + state.q_hidden * (jh @ jh.T)
        cov_l, arm = state.cov_last, None
        if arms is not None:
            blocks.check_one_output(jl.shape[0])
            k, jl_k, i_k, _ = observed_block(jl[0], blocks.index)
            jl, arm = jl_k[None, :], (k, i_k)
            cov_l = jax.lax.dynamic_index_in_dim(state.cov_last, k, keepdims=False)
        b_l = cov_l @ jl.T  # (D_ℓ or d_ℓ or P_k, C); dense: G = Σ_ℓ L̃ᵀ
        s_l = jl @ b_l if dense else b_l.T @ b_l
        if pend_l and use_ql:
            s_l = s_l + state.q_last * (jl @ jl.T)
        return yhat, jh, jl, r, a_h, s_h, b_l, s_l, arm

    def update(state: HiLoFiState, x, y) -> HiLoFiState:
        dt = state.mean_hidden.dtype
        y = as_obs(y, dt)
        yhat, jh, jl, r, a_h, s_h, b_l, s_l, arm = _blocks(state, x)
        if y.shape != yhat.shape:
            raise ValueError(f"observation y has shape {y.shape} but the model outputs {yhat.shape}")
        innov = y - yhat
        s = linalg.symmetrize(s_h + s_l + r)
        s_chol = linalg.chol_upper(s)
        r_half = linalg.sqrt_psd(r)
        h, c_h, g_h = linalg.lowrank_kalman_update(
            state.mean_hidden,
            state.cov_hidden,
            state.gram_hidden,
            jh,
            a_h,
            s_chol,
            r_half,
            innov,
            state.q_hidden,
            use_qh,
            carry,
        )
        if low_last:
            ell, c_l, g_l = linalg.lowrank_kalman_update(
                state.mean_last,
                state.cov_last,
                state.gram_last,
                jl,
                b_l,
                s_chol,
                r_half,
                innov,
                state.q_last,
                use_ql,
                carry,
            )
        else:
            ell, c_l = state.mean_last, state.cov_last
            if arm is not None:  # the observed arm's block only
                k, i_k = arm
                ell, c_l = ell[i_k], jax.lax.dynamic_index_in_dim(c_l, k, keepdims=False)
            if pend_l:  # "gain": K = (Σ_ℓ + q̄_ℓ I)L̃ᵀS⁻¹, Joseph form on Σ_ℓ alone
                g = b_l if dense else c_l.T @ b_l  # G = Σ_ℓ L̃ᵀ (D_ℓ, C)
                sig = c_l if dense else c_l.T @ c_l
                ell, sig = linalg.dense_block_update(
                    ell, sig, g, s, s_h + state.q_last * (jl @ jl.T), innov, g + state.q_last * jl.T
                )
                c_l = sig if dense else linalg.chol_upper(sig)  # sqrt: refactored, O(D_ℓ³) as the time update
            elif dense:
                ell, c_l = linalg.dense_block_update(ell, c_l, b_l, s, s_h, innov)
            else:
                ell, c_l = linalg.sqrt_factor_update(ell, c_l, b_l, s, s_h, r_half, innov)
            if arm is not None:
                ell = state.mean_last.at[i_k].set(ell)
                c_l = jax.lax.dynamic_update_index_in_dim(state.cov_last, c_l, k, 0)
            g_l = state.gram_last
        zero = jnp.zeros((), dt)
        return HiLoFiState(h, ell, c_h, g_h, c_l, g_l, zero, zero)

    def predictive(state: HiLoFiState, x) -> tuple[Array, Array]:
        yhat, _, _, r, _, s_h, _, s_l, _ = _blocks(state, x)
        return yhat, linalg.symmetrize(s_h + s_l + r)

    def sample(key: Array, state: HiLoFiState):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        dt = state.mean_hidden.dtype
        h = state.mean_hidden + rng.normal(k1, (state.cov_hidden.shape[0],), dt) @ state.cov_hidden
        if use_qh:
            h = h + jnp.sqrt(state.q_hidden) * rng.normal(k2, h.shape, dt)
        if arms is not None:  # K independent blocks: U_kᵀ z_k per arm, a Cholesky per block when dense
            roots = jax.vmap(linalg.chol_upper)(state.cov_last) if dense else state.cov_last
            ell = state.mean_last + scatter_blocks(sample_blocks(k3, roots), blocks.index, state.mean_last.size)
        else:
            root_l = linalg.chol_upper(state.cov_last) if dense else state.cov_last
            ell = state.mean_last + rng.normal(k3, (root_l.shape[0],), dt) @ root_l
        if pend_l and use_ql:
            ell = ell + jnp.sqrt(state.q_last) * rng.normal(k4, ell.shape, dt)
        return cell.space.merge(h, ell)

    def mean(state: HiLoFiState):
        return cell.space.merge(state.mean_hidden, state.mean_last)

    hyper = dict(
        rank=rank,
        rank_last=rank_last,
        last_layer=last_layer,
        init_cov_hidden=init_cov_hidden,
        init_cov_last=init_cov_last,
        dynamics_cov_hidden=q_h,
        dynamics_cov_last=q_l,
        forgetting=forgetting,
        last_cov=None if low_last else ("dense" if dense else "sqrt"),
        dynamics_mode=dynamics_mode,
        seed=seed,
    )
    if arms is not None:
        hyper["arms"] = arms
    return Posterior(
        init, predict, update, predictive, sample, mean, name="lolofi" if low_last else "hilofi", hyper=hyper
    )


def lolofi(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    rank: int = 20,
    rank_last: int = 10,
    **kwargs,
) -> Posterior:
    """LoLoFi: :func:`hilofi` with a rank-``rank_last`` last-layer factor (seed 003, Algorithm 3)."""
    if rank_last is None:
        raise ValueError("lolofi needs an integer rank_last (use hilofi for a full-rank last layer)")
    return hilofi(apply_fn, likelihood, rank=rank, rank_last=rank_last, **kwargs)
