"""Neural-linear (Riquelme et al. 2018, as used in seed 002 §3): Normal-Inverse-Gamma Bayesian linear
regression on the last layer, the body a point estimate retrained periodically on a bounded FIFO buffer.

Parameters split by path into the body ``h (D_h,)`` and the last layer ``ℓ (D_ℓ,)`` (``last_layer="head"``).
Design rows: ``Φ(x) = ∂f(h, ℓ; x)/∂ℓ (C, D_ℓ)`` and offset ``o(x) = f(h, 0; x) (C,)``, so that
``f = o + Φ ℓ`` exactly whenever the output is affine in ``ℓ`` — true for a ``Dense`` head, where ``Φ`` places
the features ``φ(x)`` in the block of each output (plus a 1 for its bias), and for a multi-output head observed
through a one-hot selection ``f(x)·e_a`` (then ``Φ`` touches only arm ``a``'s block: Riquelme's per-arm
regressions, here with one noise variance ``σ²`` shared by all arms).  A non-affine head is linearised at ``ℓ=0``.

Model: ``y | ℓ, σ² ~ N(o + Φ ℓ, σ² I_C)``, ``ℓ | σ² ~ N(0, σ² Σ_0)``, ``σ² ~ IG(a_0, b_0)``, ``Σ_0 = init_cov·I``
(``init_cov = 1/λ``).  The posterior ``NIG(μ, Σ, a, b)`` is kept as ``(μ, S, a, b)`` with a square root
``Σ = S Sᵀ`` (``S (D_ℓ, D_ℓ)``), so no step factorises a ``D_ℓ × D_ℓ`` matrix.

:update(x, y): push ``(x, y)`` into the FIFO buffer (``buffer_size`` slots); ``step ← step + 1``; then

  * if ``step % train_every ≠ 0``: the exact conjugate update, one scalar row ``φ = Φ_c`` at a time (the C
    outputs have independent noise), in the inversion-free square-root form (seed 002 eqs. 31–37, Potter):

        ``v = Sᵀφ``, ``s* = vᵀv + 1``, ``e = r − φᵀμ``  (``r = y_c − o_c``),
        ``μ ← μ + S v e / s*``,  ``S ← S − β (S v) vᵀ`` with ``β = 1/(√s* (√s* + 1))``,
        ``a ← a + ½``,  ``b ← b + ½ e² / s*``                                            O(D_ℓ² C) per update;

  * else RETRAIN: ``n_train_steps`` optax steps on the least-squares buffer loss ``½·mean_i ‖y_i − f(h, ℓ_sgd; x_i)‖²``
    over the body and an SGD copy of the head ``ℓ_sgd`` (warm-started, optimiser state kept), then RECOMPUTE the
    posterior from scratch from the buffer with the new features (Riquelme's Alg. 3, with limited memory:
    observations that have left the buffer are forgotten at this point; ``buffer_size ≥ T`` gives the
    unlimited-memory version): the prior updated with each buffered observation in turn by the step above
    (exactly the batch posterior of seed 002 eqs. 17–20 with ``μ_0 = 0``; O(B·C·D_ℓ²), no factorisation).

  A retraining that diverged is discarded: the body, the SGD head and the optimiser state keep their previous
  values, the posterior is recomputed with the previous features, and ``state.rejected`` counts such retrainings.
  Diverged means non-finite weights, or a fit to the buffer at least ``divergence_ratio`` (default 2) times worse
  than before the retraining: the loss above, before and after, on one batch (the whole buffer, or one minibatch
  of ``batch_size``) — plain SGD on an outlier context can run away in a few steps, to NaN or to finite weights of
  order 1e15 whose features overflow the regression a few updates later (Shuttle, ``|x| ≈ 60``, sgd(0.05, 0.9)).
  The branch is chosen with dynamic trip counts (``lax.fori_loop(0, n, …)`` with ``n = n_train_steps`` or 0 for
  the optimiser, ``n = #buffer`` or 0 for the recomputation) instead of ``lax.cond``: under ``vmap`` over seeds a
  ``cond`` becomes a ``select`` that would pay for the retraining at every step.
:predict: identity (no dynamics).
:predictive: ``mean = o + Φ μ``; ``cov = E[σ²] (Φ Σ Φᵀ + I_C)`` with ``E[σ²] = b/(a−1)`` (the covariance of the
  Student-t predictive; ``b/a`` while ``a ≤ 1``) — epistemic + aleatoric.
:sample: ``σ̃² ~ IG(a, b)``, then ``ℓ̃ ~ N(μ, σ̃² Σ)`` (``ℓ̃ = μ + σ̃ S z``); the body at its point estimate.
:mean: body point estimate with ``ℓ = μ``.

Per-arm head (``arms=K``): for a ``K``-output head observed one arm at a time (a multi-output bandit agent's
``f(x)·e_a``), ``Φ`` is zero outside arm ``a``'s block of ``ℓ`` (:mod:`banditkit.posteriors.arms`), so ``Σ`` stays
block-diagonal: ``cov_sqrt`` holds ``K`` blocks ``(K, P_k, P_k)`` and each row update (incremental or in a refit)
touches the observed arm's block only — ``O(P_k²)`` instead of ``O(K² P_k²)``.  With ``shared_noise=True`` (default)
the posterior is the one above exactly; ``shared_noise=False`` gives each arm its own ``σ_k² ~ IG(a_k, b_k)``
(Riquelme et al.'s per-arm model, seed 002 eq. 38).  A row that is zero in every block (no features, no bias) changes
nothing.

The buffer's shapes come from one example input: pass ``example_x=`` to the factory or to ``init``.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from banditkit._xla import flat_random as rng
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import _replay as replay
from banditkit.posteriors import arms as per_arm
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, PyTree, as_obs, check_common_hyper
from banditkit.posteriors.registry import Backend, register

Array = jax.Array


class NeuralLinearState(NamedTuple):
    hidden: Array  # (D_h,) body point estimate h
    head_sgd: Array  # (D_ℓ,) SGD copy of the head (trained with the body)
    opt_state: Any  # optax state over (h, ℓ_sgd)
    mean_last: Array  # (D_ℓ,) μ
    cov_sqrt: Array  # (D_ℓ, D_ℓ) S with Σ = S Sᵀ (the weights' covariance is σ² Σ); (K, P_k, P_k) with arms=K
    a: Array  # () IG shape; (K,) per arm with arms=K, shared_noise=False
    b: Array  # () IG scale; likewise
    buffer: replay.FifoBuffer
    step: Array  # () int32, updates so far
    key: Array
    rejected: Array  # () int32, retrainings discarded because the optimiser diverged (non-finite or worse fit)
    space: ParamSpace  # layout of (h, ℓ) (static, no leaves)


DIVERGENCE_RATIO = 2.0  # default: discard a retraining whose buffer loss ends more than twice where it started
MIN_RETRAININGS_TO_WARN = 4  # diagnostics: fewer retrainings say too little to warn about


def neural_linear(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *, last_layer: str = "head",
    buffer_size: int = 1024, train_every: int = 100, n_train_steps: int = 100,
    optimizer: optax.GradientTransformation = optax.adam(1e-3), batch_size: int | None = None,
    a0: float = 6.0, b0: float = 6.0, init_cov: float = 4.0, key: Array | int = 0, example_x: PyTree | None = None,
    arms: int | None = None, shared_noise: bool = True, divergence_ratio: float = DIVERGENCE_RATIO,
) -> Posterior:
    """Neural-linear: NIG Bayesian linear regression on the last layer, body retrained on a FIFO buffer.

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input (``x`` any pytree).
      likelihood: must be ``Gaussian``.  Its ``obs_noise`` is not used: the NIG model learns the noise variance,
        and the body is retrained by least squares (``½·mean‖y − f‖²``, as in Riquelme et al.'s and seed 002's
        code), so a plain-SGD learning rate means the same whatever ``obs_noise`` the agent was given.
      last_layer: path name of the last-layer submodule (the Bayesian block).
      buffer_size: FIFO capacity (seed 002 reference code: 20/50 "limited", ~5000 "unlimited").
      train_every: retrain the body every this many updates (``T_u = 100`` in the reference code).
      n_train_steps: optimiser steps per retraining (100 in the reference code).
      optimizer: optax transformation for the body + SGD head.
      batch_size: ``None`` = full (masked) buffer per step, else minibatches of that size.
      a0, b0: Inverse-Gamma prior of ``σ²`` (6, 6 in the reference code).
      init_cov: ``Σ_0 = init_cov·I``, i.e. ``1/λ`` (``λ = 0.25`` in the reference code).
      key: PRNG key or int seed for minibatches.
      example_x: one model input, to shape the buffer (or pass it to ``init``).
      arms: ``K`` to keep the head's covariance as ``K`` per-arm blocks (every head leaf must have last axis ``K``;
        one output observed at a time); ``None``: one ``D_ℓ × D_ℓ`` block.
      shared_noise: with ``arms``: one ``σ²`` for all arms (the same posterior as ``arms=None``) or one per arm.
      divergence_ratio: discard a retraining whose buffer loss ends more than this many times its starting value
        (``> 1``; ``inf`` keeps every finite retraining).
    """
    check_common_hyper("neural_linear", init_cov=init_cov)
    if not isinstance(likelihood, Gaussian):
        raise TypeError(
            f"neural_linear is a Normal-Inverse-Gamma regression and needs a Gaussian likelihood, got "
            f"{type(likelihood).__name__}; use e.g. lofi/hilofi for Bernoulli or Categorical observations."
        )
    name = "neural_linear"
    replay.check_buffer_args(name, buffer_size, batch_size)
    replay.check_int(name, "train_every", train_every, 1)
    replay.check_int(name, "n_train_steps", n_train_steps, 1)
    for what, v in (("a0", a0), ("b0", b0)):
        if isinstance(v, (int, float)) and not v > 0:
            raise ValueError(f"{name}: {what} must be > 0, got {v}")
    if not isinstance(divergence_ratio, (int, float)) or isinstance(divergence_ratio, bool) or not divergence_ratio > 1:
        raise ValueError(f"{name}: divergence_ratio must be a number > 1 (float('inf') to accept every finite "
                         f"retraining), got {divergence_ratio!r}")
    if arms is not None:
        per_arm.check_arms(arms, name)
    per_arm_noise = arms is not None and not shared_noise
    default_x = example_x

    # ---- the last-layer regression ------------------------------------------------------------------------
    def design(space: ParamSpace, h: Array, x) -> tuple[Array, Array]:
        """``(Φ (C, D_ℓ), o (C,))`` at ``ℓ = 0``."""
        off, phi = replay.head_jacobian(apply_fn, space, h, jnp.zeros((space.size_last,), h.dtype), x)
        return phi, off

    def _row(mu, sq, phi, r):
        """One square-root conjugate row update of ``(μ, S)``: ``(μ', S', e²/s*)``."""
        v = sq.T @ phi
        s_star = v @ v + 1.0
        e = r - phi @ mu
        sv = sq @ v
        root = jnp.sqrt(s_star)
        return mu + sv * (e / s_star), sq - jnp.outer(sv, v) / (root * (root + 1.0)), e**2 / s_star

    def add_row(space: ParamSpace, post, phi: Array, r: Array):
        """Exact conjugate update with one scalar observation ``r = φᵀℓ + ε`` (square-root form)."""
        mu, sq, a, b = post
        if arms is None:
            mu, sq, e2 = _row(mu, sq, phi, r)
            return mu, sq, a + 0.5, b + 0.5 * e2
        k, phi_k, i_k, seen = per_arm.observed_block(phi, per_arm.arm_index(space, arms, name, last=True))
        mu_k, sq_k, e2 = _row(mu[i_k], jax.lax.dynamic_index_in_dim(sq, k, keepdims=False), phi_k, r)
        mu = mu.at[i_k].set(mu_k)
        sq = jax.lax.dynamic_update_index_in_dim(sq, sq_k, k, 0)
        w = seen.astype(mu.dtype)
        da, db = 0.5 * w, 0.5 * w * e2
        return (mu, sq, *((a.at[k].add(da), b.at[k].add(db)) if per_arm_noise else (a + da, b + db)))

    def add_rows(space: ParamSpace, post, phi: Array, r: Array):
        """:func:`add_row` with each output ``c`` of one observation in turn (``φ = Φ_c``, ``r_c``)."""
        for c in range(phi.shape[0]):
            post = add_row(space, post, phi[c], r[c])
        return post

    def prior_posterior(space: ParamSpace, dtype):
        d = space.size_last
        v = jnp.sqrt(jnp.asarray(init_cov, dtype))
        if arms is None:
            return jnp.zeros((d,), dtype), v * jnp.eye(d, dtype=dtype), jnp.asarray(a0, dtype), jnp.asarray(b0, dtype)
        ones = jnp.ones((arms,) if per_arm_noise else (), dtype)
        return jnp.zeros((d,), dtype), v * per_arm.eye_blocks(arms, d, dtype), a0 * ones, b0 * ones

    def posterior_from_buffer(space: ParamSpace, h: Array, buf: replay.FifoBuffer, n: Array):
        """NIG posterior of the first ``n`` buffer slots with the features of body ``h``: the prior updated
        with each buffered observation in turn (exactly the batch posterior; O(n·C·D_ℓ²)).  The loop body
        indexes the buffer with the loop counter, so XLA cannot hoist it out of a zero-trip loop."""

        def body(i, post):
            phi, off = design(space, h, jax.tree_util.tree_map(lambda v: v[i], buf.x))
            return add_rows(space, post, phi, buf.y[i] - off)

        return jax.lax.fori_loop(0, n, body, prior_posterior(space, h.dtype))

    # ---- the body ---------------------------------------------------------------------------------------------
    def loss(space: ParamSpace, hl, x, y, w):
        """Weighted least squares ``½·Σ_i w_i ‖y_i − f(h, ℓ; x_i)‖² / max(Σ w, 1)``.  The NIG model learns ``σ²``
        itself, so the body's fit must not depend on the likelihood's fixed obs_noise (its NLL would scale plain-SGD
        steps by 1/obs_noise²: ×100 at 0.1)."""
        params = space.merge(*hl)
        f = jax.vmap(lambda xi: jnp.atleast_1d(apply_fn(params, xi)))(x)
        return 0.5 * jnp.sum(w * jnp.sum((y - f) ** 2, axis=-1)) / jnp.maximum(jnp.sum(w), 1.0)

    def diverged(space: ParamSpace, start, end, buf, key, n_checks):
        """Whether the retraining ``start → end`` (``(h, ℓ_sgd)`` pairs) diverged: non-finite weights, or the loss
        on one batch (``key``'s) more than ``divergence_ratio`` times its value at ``start``.  The two losses run
        in a loop of ``n_checks`` (1 on a retraining step, else 0) trips, so other steps do not pay for them.  The
        batch is gathered through the loop counter (rows rotated by ``i = 0``: the batch itself): a whole-buffer
        batch would otherwise be loop-invariant, and XLA would hoist both losses out of the zero-trip loop into
        every update, a cost that grows with the buffer (``jnp.roll`` instead of the gather still left part of it)."""
        def body(i, losses):
            batch = replay.fifo_batch(buf, jax.random.fold_in(key, i), batch_size)
            xb, yb, wb = jax.tree_util.tree_map(lambda v: v[(jnp.arange(v.shape[0]) + i) % v.shape[0]], batch)
            return loss(space, start, xb, yb, wb), loss(space, end, xb, yb, wb)

        finite = jnp.all(jnp.isfinite(end[0])) & jnp.all(jnp.isfinite(end[1]))
        if divergence_ratio == float("inf"):
            return ~finite
        zero = jnp.zeros((), start[0].dtype)
        before, after = jax.lax.fori_loop(0, n_checks, body, (zero, zero))
        return ~finite | ~(after <= divergence_ratio * before)

    # ---- the contract -----------------------------------------------------------------------------------------
    def init(params, example_x: PyTree | None = None) -> NeuralLinearState:
        space = ParamSpace.of(params, last_layer)
        h, ell = space.split(params)
        if arms is not None:
            per_arm.arm_index(space, arms, name, last=True)  # the head must fit the per-arm layout: a clear error now
        buf = replay.buffer_init(name, apply_fn, params, example_x, default_x, buffer_size, h.dtype)
        mu, sq, a, b = prior_posterior(space, h.dtype)  # μ = 0, S = √init_cov I, a = a0, b = b0
        return NeuralLinearState(h, ell, optimizer.init((h, ell)), mu, sq, a, b, buf, jnp.zeros((), jnp.int32),
                                 replay.as_key(key), jnp.zeros((), jnp.int32), space)

    def predict(state: NeuralLinearState) -> NeuralLinearState:
        return state

    def update(state: NeuralLinearState, x, y) -> NeuralLinearState:
        space = state.space
        y = as_obs(y, state.hidden.dtype)
        buf = replay.buffer_push(name, state.buffer, x, y, y.dtype)
        if arms is not None:
            per_arm.check_one_output(y.shape[0], arms, name)
        step = state.step + 1
        retrain = step % train_every == 0
        key, sub = jax.random.split(state.key)
        check_key = jax.random.fold_in(sub, n_train_steps)  # replay.fit folds in 0 … n_train_steps − 1
        n_sgd = jnp.where(retrain, n_train_steps, 0)
        (h, ell), opt_state = replay.fit(functools.partial(loss, space), optimizer, (state.hidden, state.head_sgd),
                                         state.opt_state, buf, n_sgd, key=sub, batch_size=batch_size)
        trained = (h, ell, opt_state)
        # a retraining that diverged (non-finite, or a much worse fit) is discarded: body, head, optimiser state kept
        bad = retrain & diverged(space, (state.hidden, state.head_sgd), (h, ell), buf, check_key,
                                 retrain.astype(jnp.int32))
        h, ell, opt_state = jax.tree_util.tree_map(lambda n, o: jnp.where(bad, o, n), trained,
                                                   (state.hidden, state.head_sgd, state.opt_state))
        rejected = state.rejected + bad.astype(jnp.int32)
        # retraining step: posterior recomputed from the buffer (a zero-trip loop on the other steps)
        current = (state.mean_last, state.cov_sqrt, state.a, state.b)
        size = buf.y.shape[0]
        refit = posterior_from_buffer(space, h, buf, jnp.where(retrain, jnp.minimum(buf.count, size), 0))
        phi, off = design(space, h, x)
        incremental = add_rows(space, current, phi, y - off)
        mu, sq, a, b = jax.tree_util.tree_map(lambda r, i: jnp.where(retrain, r, i), refit, incremental)
        return NeuralLinearState(h, ell, opt_state, mu, sq, a, b, buf, step, key, rejected, space)

    def predictive(state: NeuralLinearState, x) -> tuple[Array, Array]:
        phi, off = design(state.space, state.hidden, x)
        sq, a, b, rows = state.cov_sqrt, state.a, state.b, phi
        if arms is not None:  # Φ is zero outside the observed arm's block
            per_arm.check_one_output(phi.shape[0], arms, name)
            k, phi_k, _, _ = per_arm.observed_block(phi[0], per_arm.arm_index(state.space, arms, name, last=True))
            sq, rows = jax.lax.dynamic_index_in_dim(sq, k, keepdims=False), phi_k[None, :]
            if per_arm_noise:
                a, b = a[k], b[k]
        z = sq.T @ rows.T  # Sᵀ Φᵀ (D_ℓ or P_k, C)
        var = jnp.where(a > 1, b / (a - 1), b / a)
        eye = jnp.eye(phi.shape[0], dtype=phi.dtype)
        return off + phi @ state.mean_last, linalg.symmetrize(var * (z.T @ z + eye))

    def sample(key: Array, state: NeuralLinearState):
        k1, k2 = jax.random.split(key)
        dt = state.mean_last.dtype
        sigma2 = state.b / jax.random.gamma(k1, state.a, dtype=dt)  # () or (K,) per arm
        if arms is None:
            z = rng.normal(k2, state.mean_last.shape, dt)
            ell = state.mean_last + jnp.sqrt(sigma2) * (state.cov_sqrt @ z)
        else:  # S_k z_k per arm (Σ_k = S_k S_kᵀ)
            draw = per_arm.sample_blocks(k2, jnp.swapaxes(state.cov_sqrt, 1, 2)) * jnp.sqrt(sigma2)[..., None]
            index = per_arm.arm_index(state.space, arms, name, last=True)
            ell = state.mean_last + per_arm.scatter_blocks(draw, index, state.mean_last.size)
        return state.space.merge(state.hidden, ell)

    def mean(state: NeuralLinearState):
        return state.space.merge(state.hidden, state.mean_last)

    def diagnostics(state: NeuralLinearState) -> dict:
        """``{"discarded_retrainings": [rejected, retrainings]}`` of one (unbatched) state, and a ``"warning"`` when
        there were ``≥ MIN_RETRAININGS_TO_WARN`` retrainings and the divergence guard discarded more than half."""
        rejected, total = (int(c) for c in _retraining_counts(state, train_every))
        out: dict = {"discarded_retrainings": [rejected, total]}
        if total >= MIN_RETRAININGS_TO_WARN and 2 * rejected > total:
            out["warning"] = (
                f"the neural-linear body's retraining diverged and was discarded in most retrainings ({rejected} of "
                f"{total}), so its features barely learned.  Lower the optimizer's learning rate, use an adaptive one "
                "(e.g. optax.adam), or raise batch_size; divergence_ratio= sets how much worse a retraining's fit may "
                "get before it is discarded."
            )
        return out

    hyper = dict(last_layer=last_layer, buffer_size=buffer_size, train_every=train_every,
                 n_train_steps=n_train_steps, batch_size=batch_size, a0=a0, b0=b0, init_cov=init_cov,
                 needs_example_x=True)
    if arms is not None:
        hyper.update(arms=arms, shared_noise=bool(shared_noise))
    if divergence_ratio != DIVERGENCE_RATIO:  # recorded only when set, so checkpoints from before the option still load
        hyper["divergence_ratio"] = float(divergence_ratio)
    return Posterior(init, predict, update, predictive, sample, mean, name=name, hyper=hyper, diagnostics=diagnostics)


def _retraining_counts(state: NeuralLinearState, train_every: int) -> tuple[Array, Array]:
    """``(rejected, retrainings)``, each shaped like ``state.step``: the body is retrained on every
    ``train_every``-th update and ``rejected`` counts the retrainings the divergence guard discarded."""
    return state.rejected, state.step // train_every


def discarded_retrainings(posterior: Posterior, state: Any) -> tuple[Array, Array] | None:
    """``(rejected, retrainings)`` so far, each shaped like ``state.step`` (``()``, or ``(S,)`` for a vmapped run), or
    ``None`` when ``posterior`` is not a neural-linear one.  ``retrainings = step // train_every`` (the body is
    retrained on every ``train_every``-th update); ``rejected`` counts those the divergence guard discarded.  The
    experiment runner warns when most of a seed's retrainings were discarded."""
    if posterior.name != "neural_linear" or not isinstance(state, NeuralLinearState):
        return None
    return _retraining_counts(state, int(posterior.hyper["train_every"]))


register(Backend(
    name="neural_linear", factory=neural_linear,
    learns_own_noise=True, arm_blocks=True,
))
