"""Kalman filter on the last-layer weights with a learned forgetting factor γ (seed 001, Titsias et al.).

The hidden weights ``h`` stay fixed at the values given to ``init``; the last-layer block ``w`` (the leaves under
the submodule named ``last_layer``, e.g. ``"head"``) gets a Gaussian posterior ``N(m, A)`` with full ``(D_ℓ, D_ℓ)``
covariance.  The design rows are the Jacobian of the model output w.r.t. ``w`` — exact for a linear head, so for
a Dense head and a Gaussian likelihood every step is the exact Kalman step of seed 001 eqs. 3–5 (one covariance
per weight; seed 001's shared-across-classes covariance is the special case of a one-hot-observed Dense head).

Drift (seed 001 eq. 2 with the general prior of App. D, plus an optional extra random walk ``q``)::

    w_n = γ w_{n-1} + (1 − γ) w_0 + ε_n,   ε_n ~ N(0, (1 − γ²) σ_w² I + q I),    σ_w² = init_cov

``w_0`` is the last layer's value at ``init`` (the prior mean; seed 001 uses 0).  The drift keeps the prior
``N(w_0, σ_w² I)`` invariant: γ = 1 is static Bayesian regression, γ = 0 a reset to the prior.
``shrink_mean=False`` is App. E's variant (``m⁻ = m``: no shrinkage of the mean, for targets with a level).

Square-root form: the state holds an upper factor ``U`` with ``A = UᵀU`` (``state.cov`` forms ``A``).

Time update (``predict``)::

    m⁻ = γ m + (1 − γ) w_0,   A⁻ = γ² A + a I,   a = (1 − γ²) σ_w² + q
    U⁻ = γ U  if a = 0,   else  U⁻ = chol(γ² UᵀU + a I)   (a > 0 keeps it well conditioned; XLA's CPU QR of
    the stack [γU; √a I] was 14× slower than this Cholesky at D_ℓ = 330: 0.19 s vs 0.014 s)

Measurement (``update``), linearised at ``m⁻`` (square-root Joseph form, Potter type)::

    ŷ = m(f(h, m⁻, x)), J = ∂ŷ/∂w (C, D_ℓ), S = J A⁻ Jᵀ + R, K = A⁻ Jᵀ S⁻¹, m = m⁻ + K (y − ŷ),
    A = (I − K J) A⁻ (I − K J)ᵀ + K R Kᵀ      (as U ← U − B M (Bᵀ U), B = U Jᵀ: ``linalg.sqrt_factor_update``)

The covariance form of seed 001 (``A = A⁻ − s sᵀ / v``, ``O(m²)``) is not used: in float32 with a small
observation noise (``Gaussian(1e-6)``, γ = 1) its rounding makes ``A`` indefinite within ~20 steps and the
state NaN (found by ``tests/benchmarks/test_soak.py``); the factor form cannot lose positive semi-definiteness.

Learning γ online (seed 001 §5, eqs. 8/12, errata applied: noise std ``√(1−γ²) σ_w``, corrected eq. 7):
``γ = exp(−δ/2)`` with ``δ ≥ 0`` kept in the state.  At each ``update`` *after a* ``predict``, before the
Kalman step, one gradient-ascent step on the one-step log predictive of the new observation, as a function of δ
through the time update only (the previous statistics ``(m, A)`` are constants — no back-propagation through
time)::

    δ ← max(0, δ + forgetting_lr · ∂/∂δ log p̂(y | m⁻(δ), A⁻(δ), x))

and the time update is then applied with the new γ.  ``log p̂`` is

* Gaussian likelihood, ``link=None``: exact ``log N(y | ŷ(δ), S(δ))`` (seed 001 eq. 12);
* ``Bernoulli`` / ``Categorical`` likelihood (or a Gaussian surrogate on one-hot labels with
  ``link="softmax"`` / ``"sigmoid"`` — seed 001 §3's surrogate filter): the Monte-Carlo log predictive of the
  exact link, ``log (1/S) Σ_s p(y | f_s)``, ``f_s = f̂ + L ε_s``, ``L Lᵀ = J_f A⁻(δ) J_fᵀ`` (logit covariance),
  reparametrised, ``num_samples`` fresh draws per step from a key carried in the state (seed 001 eq. 10).

Step-size safeguard (not in seed 001, which takes a plain SGD step and only clips ``δ ≥ 0``): the gradient is
clipped to ``[−c, c]``, ``c = forgetting_grad_clip`` (default 10), before the step, so one step moves δ by at
most ``forgetting_lr · c``.  Why: for a Gaussian the gradient is ``½ (z² − 1) ∂ log S/∂δ`` plus a mean term,
with ``z`` the standardised innovation, so it is unbounded (a single ``z² ≈ 40`` moved δ from 0 to 13.2 with
``forgetting_lr = 1e-2`` on the soak stream of ``benchmarks/bench_soak.py``), and since ``∂γ/∂δ = −γ/2``
vanishes for large δ such a jump is absorbing: γ stayed at 0.0014 for 20,000 steps and the filter reset to its
prior every step, although the best *fixed* γ on that stream has a far higher mean log predictive (γ = 0.9:
−1.34 vs −1.71 at γ = 0.0014, γ = 1: −24.5), i.e. the collapse was an optimiser failure, not the objective's
optimum.  With ``|∂ log S/∂δ| ≲ 1``, ``c = 10`` only bites for surprises beyond ``|z| ≈ 4.6``; a smaller ``c``
(1) also avoids the collapse but makes γ too slow to drop after a real switch (a sign-flipped target: δ ≤ 0.04
after 30 steps, vs 0.3 with ``c = 10`` and an immediate 3.0 unclipped).  Seed 001's settings (lr ∈ {0.5, 0.1,
0.01, 0.001}; lr = 1.0 with σ² = 0.05, σ_w² = 0.01 in its time-series example) keep their meaning whenever
``|∂ log p̂/∂δ| ≤ c``; ``forgetting_grad_clip=None`` restores the plain step.

So that γ can be learned, the state carries the statistics *before* the pending time update: ``predict`` only
marks a step as pending (applying an earlier pending one first), and ``predictive``/``sample``/``mean`` apply
the pending time update on the fly.  An ``update`` with no pending ``predict`` has no transition and leaves γ
alone (seed 001's "Last Step Markov" absorption inside a chunk).  Classification choice: the filter uses the
toolkit's moment-matched ``Bernoulli``/``Categorical`` linearisation (or, with a ``Gaussian`` likelihood on
one-hot labels, seed 001's surrogate exactly); the γ objective always uses the exact link as above.

Cost per step: ``O(C · D_ℓ²)`` for the measurement update, ``O(D_ℓ³)`` for the Cholesky of a time update with a > 0,
plus one network pass; memory ``O(D_ℓ²)``.

Per-arm blocks (``arms=K``): for a ``K``-output head observed one arm at a time (a multi-output bandit agent's
``f(x)·e_a``), ``J`` is zero outside arm ``a``'s block of ``w`` (:mod:`banditkit.posteriors.arms`).  The prior
``σ_w² I`` is block-diagonal, the drift scales every block by the same γ and adds ``a I``, and a measurement touches
one block, so ``A`` stays block-diagonal: the state keeps the ``K`` factors ``U_k (K, P_k, P_k)``, an update
changes one of them, and a time update factors ``K`` blocks (``K P_k³/3`` flops instead of ``K³ P_k³/3``).  The same
posterior (and the same γ gradient: ``J A⁻ Jᵀ`` only reads the observed block) as ``arms=None``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.likelihoods import Bernoulli, Categorical, Gaussian, Likelihood
from banditkit.posteriors import arms as per_arm
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, as_obs, check_common_hyper
from banditkit.posteriors.registry import Backend, register

Array = jax.Array


class KLLState(NamedTuple):
    mean: Array  # (D_ℓ,) last-layer mean before the pending time update
    chol: Array  # (D_ℓ, D_ℓ) square root U of A = UᵀU (before the pending time update); (K, P_k, P_k) with arms=K
    delta: Array  # () δ = −2 log γ ≥ 0
    pending: Array  # () 1.0 if a time update is pending, else 0.0
    hidden: Array  # (D_h,) fixed hidden weights
    prior_mean: Array  # (D_ℓ,) w_0
    key: Array  # PRNG key for the Monte-Carlo γ objective
    space: ParamSpace  # the parameter layout (static: no leaves)

    @property
    def cov(self) -> Array:
        """``A = UᵀU (D_ℓ, D_ℓ)``, or its ``K`` blocks ``(K, P_k, P_k)`` (formed on demand; before the pending time
        update)."""
        return jnp.swapaxes(self.chol, -1, -2) @ self.chol


def current_forgetting(state: KLLState) -> Array:
    """The forgetting factor ``γ = exp(−δ/2)`` currently held in a ``kalman_last_layer`` state."""
    return jnp.exp(-0.5 * state.delta)


def kalman_last_layer(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *, last_layer: str = "head",
    init_cov: float = 1.0, dynamics_cov: float = 0.0, forgetting: float = 1.0,
    learn_forgetting: bool = True, forgetting_lr: float = 1e-2, forgetting_grad_clip: float | None = 10.0,
    shrink_mean: bool = True, link: str | None = None, num_samples: int = 50, seed: int = 0, arms: int | None = None,
) -> Posterior:
    """Kalman last layer with drift ``w ← γ w + noise`` and γ learned online (see the module docstring).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input.
      likelihood: ``Gaussian`` (regression, or seed 001's surrogate on one-hot labels), ``Bernoulli`` or
        ``Categorical`` (moment-matched filter).
      last_layer: name of the last submodule; its leaves are filtered, all other leaves stay fixed.
      init_cov: ``σ_w²``, prior (and stationary) variance of each last-layer weight.
      dynamics_cov: ``q``, extra random-walk variance per ``predict`` (on top of the variance-preserving drift).
      forgetting: the initial ``γ ∈ (0, 1]``.
      learn_forgetting: take one gradient step on δ per ``update`` (after a ``predict``).
      forgetting_lr: step size ``ρ`` of that gradient step on δ.
      forgetting_grad_clip: ``c``: the δ-gradient is clipped to ``[−c, c]`` first (``None``: seed 001's plain
        step; see the module docstring for why the default is 10).
      shrink_mean: ``True``: ``m⁻ = γ m + (1−γ) w_0`` (eq. 6 / App. D); ``False``: ``m⁻ = m`` (App. E).
      link: for a ``Gaussian`` surrogate on one-hot / 0-1 labels, ``"softmax"`` or ``"sigmoid"`` makes the γ
        objective the MC log predictive of that link; ``None`` uses the likelihood itself.
      num_samples: Monte-Carlo draws ``S`` of the logits for the classification γ objective (seed 001: 50).
      seed: seed of the PRNG key carried in the state for those draws.
      arms: ``K`` for a ``K``-output head observed one output at a time: ``A`` is kept as ``K`` per-arm blocks (every
        last-layer leaf must have last axis ``K``; each observation has one output).  The same posterior as
        ``None`` (one dense block), at ``K``-fold less memory and ``K²``-fold less work per time update.
    """
    check_common_hyper("kalman_last_layer", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    if link not in (None, "softmax", "sigmoid"):
        raise ValueError(f"kalman_last_layer: link={link!r} must be None, 'softmax' or 'sigmoid'")
    if not isinstance(forgetting_lr, jax.core.Tracer) and float(forgetting_lr) < 0:
        raise ValueError(f"kalman_last_layer: forgetting_lr must be >= 0, got {forgetting_lr!r}")
    if forgetting_grad_clip is not None and not isinstance(forgetting_grad_clip, jax.core.Tracer):
        if not float(forgetting_grad_clip) > 0:
            raise ValueError(
                f"kalman_last_layer: forgetting_grad_clip must be > 0 or None, got {forgetting_grad_clip!r}"
            )
    if isinstance(likelihood, Categorical):
        mc_link = "softmax"
    elif isinstance(likelihood, Bernoulli):
        mc_link = "sigmoid"
    else:
        mc_link = link
    who = "kalman_last_layer"
    if arms is not None:
        per_arm.check_arms(arms, who)

    def init(params, example_x=None) -> KLLState:
        space = ParamSpace.of(params, last_layer)
        h, w = space.split(params)
        dt = w.dtype
        g0 = jnp.asarray(forgetting, dt)
        if arms is not None:
            per_arm.arm_index(space, arms, who, last=True)  # a last-layer leaf without last axis K: error now
        eye = jnp.eye(w.size, dtype=dt) if arms is None else per_arm.eye_blocks(arms, w.size, dt)
        return KLLState(
            mean=w,
            chol=jnp.sqrt(jnp.asarray(init_cov, dt)) * eye,
            delta=-2.0 * jnp.log(g0),
            pending=jnp.zeros((), dt),
            hidden=h,
            prior_mean=jnp.copy(w),  # its own buffer: aliased leaves cannot be donated to jit
            key=jax.random.PRNGKey(seed),
            space=space,
        )

    def _drift(delta, dt):
        """``(γ, a)``: the forgetting factor and the isotropic variance ``a = (1 − γ²) σ_w² + q`` it adds."""
        g = jnp.exp(-0.5 * delta)
        add = (1.0 - g**2) * jnp.asarray(init_cov, dt) + jnp.asarray(dynamics_cov, dt)
        return g, jnp.maximum(add, 0.0)

    def _mean_after(mean, prior_mean, g):
        return g * mean + (1.0 - g) * prior_mean if shrink_mean else mean

    def _transition(state: KLLState) -> tuple[Array, Array]:
        """``(m⁻, U⁻)`` after the time update with the state's δ: ``U⁻ = γU`` if ``a = 0``, else the Cholesky
        factor of ``γ²UᵀU + aI`` (``a > 0`` bounds its condition number by ``1 + γ²‖U‖²/a``)."""
        dt = state.mean.dtype
        g, add = _drift(state.delta, dt)
        gu = g * state.chol
        iso = linalg.add_isotropic_factor if arms is None else jax.vmap(linalg.add_isotropic_factor, (0, None))
        u = jnp.where(add > 0, iso(gu, add), gu)
        return _mean_after(state.mean, state.prior_mean, g), u

    def _settled(state: KLLState) -> tuple[Array, Array]:
        """``(m, U)`` with a pending time update applied (as is otherwise)."""
        return jax.lax.cond(state.pending > 0, _transition, lambda s: (s.mean, s.chol), state)

    def _observed(space: ParamSpace, chol: Array, jac: Array):
        """``(k, i_k, U_k, J_k)``: the factor and Jacobian columns of the block ``J (C, D_ℓ)`` touches — all of them
        (``k = i_k = None``) without ``arms``; with ``arms`` the observed arm's ``U_k (P_k, P_k)`` and ``J_k (1, P_k)``
        (``J`` is zero elsewhere, so ``J A Jᵀ = J_k A_k J_kᵀ``)."""
        if arms is None:
            return None, None, chol, jac
        per_arm.check_one_output(jac.shape[0], arms, who)
        k, row, i_k, _ = per_arm.observed_block(jac[0], per_arm.arm_index(space, arms, who, last=True))
        return k, i_k, jax.lax.dynamic_index_in_dim(chol, k, keepdims=False), row[None, :]

    def _proj_cov(state: KLLState, jac: Array) -> Array:
        """``J A⁻ Jᵀ (C, C)`` for the pending time update (or ``J A Jᵀ``), without forming ``A⁻``."""
        dt = state.mean.dtype
        g, add = _drift(state.delta, dt)
        on = state.pending > 0
        g, add = jnp.where(on, g, 1.0), jnp.where(on, add, 0.0)
        _, _, chol, jac = _observed(state.space, state.chol, jac)
        b = chol @ jac.T
        return linalg.symmetrize(g**2 * (b.T @ b) + add * (jac @ jac.T))

    def _predicted_mean(state: KLLState) -> Array:
        g, _ = _drift(state.delta, state.mean.dtype)
        return jnp.where(state.pending > 0, _mean_after(state.mean, state.prior_mean, g), state.mean)

    def _logits_and_jac(state: KLLState, w, x):
        """Model output ``f (C,)`` and ``∂f/∂w (C, D_ℓ)`` at last-layer weights ``w`` (hidden fixed)."""
        def fw(ww):
            f = jnp.atleast_1d(apply_fn(state.space.merge(state.hidden, ww), x))
            return f, f

        jf, f = jax.jacrev(fw, has_aux=True)(w)
        return f, jf

    def _moments(f, jf):
        """Observation mean ``ŷ``, its Jacobian ``J = (∂m/∂f) J_f`` and ``R`` from the output and its Jacobian."""
        dm = jax.jacfwd(likelihood.mean)(f)
        return likelihood.mean(f), dm @ jf, likelihood.cov(f)

    def predict(state: KLLState) -> KLLState:
        m, u = _settled(state)
        return state._replace(mean=m, chol=u, pending=jnp.ones_like(state.pending))

    def _log_pred(delta, state: KLLState, f, jf, y, eps):
        """One-step log predictive of ``y`` as a function of δ (previous statistics held constant)."""
        dt = state.mean.dtype
        g, add = _drift(delta, dt)
        fm = f + jf @ (_mean_after(state.mean, state.prior_mean, g) - state.mean)  # exact for a linear head
        _, _, chol, jf = _observed(state.space, state.chol, jf)  # the covariance terms read the observed block only
        b = chol @ jf.T  # (D_ℓ, C)
        if mc_link is None:
            yhat, j, r = _moments(fm, jf)
            bj = chol @ j.T
            s = linalg.symmetrize(g**2 * (bj.T @ bj) + add * (j @ j.T) + r)
            u = linalg.chol_upper(s)
            z = jax.scipy.linalg.solve_triangular(u, y - yhat, trans="T", lower=False)
            return -0.5 * (z @ z) - jnp.sum(jnp.log(jnp.diag(u))) - 0.5 * y.size * jnp.log(2 * jnp.pi)
        cf = linalg.symmetrize(g**2 * (b.T @ b) + add * (jf @ jf.T))
        tiny = jnp.finfo(f.dtype).eps * (jnp.trace(cf) / f.size + 1.0)
        lower = jnp.linalg.cholesky(cf + tiny * jnp.eye(f.size, dtype=f.dtype))
        fs = fm[None, :] + eps @ lower.T  # (S, C)
        if mc_link == "softmax":
            lp = jnp.sum(y[None, :] * jax.nn.log_softmax(fs, axis=-1), axis=-1)
        else:
            lp = jnp.sum(y * jax.nn.log_sigmoid(fs) + (1 - y) * jax.nn.log_sigmoid(-fs), axis=-1)
        return jax.scipy.special.logsumexp(lp) - jnp.log(jnp.asarray(eps.shape[0], f.dtype))

    def update(state: KLLState, x, y) -> KLLState:
        dt = state.mean.dtype
        y = as_obs(y, dt)
        key, sub = jax.random.split(state.key)
        delta = state.delta
        if learn_forgetting:
            f, jf = _logits_and_jac(state, state.mean, x)
            eps = rng.normal(sub, (num_samples, f.size), dt)
            grad = jax.grad(_log_pred)(delta, state, f, jf, y, eps)
            grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
            if forgetting_grad_clip is not None:
                clip = jnp.asarray(forgetting_grad_clip, dt)
                grad = jnp.clip(grad, -clip, clip)
            step = jnp.asarray(forgetting_lr, dt) * grad * state.pending
            delta = jnp.maximum(delta + step, 0.0)
        state = state._replace(delta=delta)
        m, u = _settled(state)
        f, jf = _logits_and_jac(state, m, x)
        k, i_k, u_k, jf_k = _observed(state.space, u, jf)
        yhat, j, r = _moments(f, jf_k)
        bu = u_k @ j.T  # B = U Jᵀ (D_ℓ or P_k, C)
        s = linalg.symmetrize(bu.T @ bu + r)
        m_k = m if arms is None else m[i_k]
        m_k, u_k = linalg.sqrt_factor_update(m_k, u_k, bu, s, jnp.zeros_like(r), linalg.sqrt_psd(r), y - yhat)
        if arms is None:
            m, u = m_k, u_k
        else:  # only the observed arm's block moves
            m, u = m.at[i_k].set(m_k), jax.lax.dynamic_update_index_in_dim(u, u_k, k, 0)
        return state._replace(mean=m, chol=u, pending=jnp.zeros_like(state.pending), key=key)

    def predictive(state: KLLState, x) -> tuple[Array, Array]:
        yhat, j, r = _moments(*_logits_and_jac(state, _predicted_mean(state), x))
        return yhat, linalg.symmetrize(_proj_cov(state, j) + r)

    def sample(key: Array, state: KLLState):
        """``w = m⁻ + γ Uᵀ z₁ + √a z₂`` (exact draw from ``N(m⁻, γ²UᵀU + aI)``, no factorisation; per block with
        ``arms``)."""
        dt = state.mean.dtype
        g, add = _drift(state.delta, dt)
        on = state.pending > 0
        g, add = jnp.where(on, g, 1.0), jnp.where(on, add, 0.0)
        k1, k2 = jax.random.split(key)
        if arms is None:
            spread = state.chol.T @ rng.normal(k1, state.mean.shape, dt)
        else:
            index = per_arm.arm_index(state.space, arms, who, last=True)
            spread = per_arm.scatter_blocks(per_arm.sample_blocks(k1, state.chol), index, state.mean.size)
        z2 = rng.normal(k2, state.mean.shape, dt)
        w = _predicted_mean(state) + g * spread + jnp.sqrt(add) * z2
        return state.space.merge(state.hidden, w)

    def mean(state: KLLState):
        return state.space.merge(state.hidden, _predicted_mean(state))

    hyper = dict(
        last_layer=last_layer, init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting,
        learn_forgetting=learn_forgetting, forgetting_lr=forgetting_lr, forgetting_grad_clip=forgetting_grad_clip,
        shrink_mean=shrink_mean, link=link, num_samples=num_samples, seed=seed,
    )
    if arms is not None:  # recorded only when set, so checkpoints from before the option still load
        hyper["arms"] = arms
    return Posterior(init, predict, update, predictive, sample, mean, name="kalman_last_layer", hyper=hyper)


register(Backend(
    name="kalman_last_layer", factory=kalman_last_layer,
    bandit_defaults=dict(init_cov=1.0),
    arm_blocks=True,
))
