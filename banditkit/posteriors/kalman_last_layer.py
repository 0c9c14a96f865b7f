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

Time update (``predict``)::   m⁻ = γ m + (1 − γ) w_0,   A⁻ = γ² A + ((1 − γ²) σ_w² + q) I
Measurement (``update``), linearised at ``m⁻`` (Joseph form)::
    ŷ = m(f(h, m⁻, x)), J = ∂ŷ/∂w (C, D_ℓ), S = J A⁻ Jᵀ + R, K = A⁻ Jᵀ S⁻¹, m = m⁻ + K (y − ŷ),
    A = (I − K J) A⁻ (I − K J)ᵀ + K R Kᵀ

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

So that γ can be learned, the state carries the statistics *before* the pending time update: ``predict`` only
marks a step as pending (applying an earlier pending one first), and ``predictive``/``sample``/``mean`` apply
the pending time update on the fly.  An ``update`` with no pending ``predict`` has no transition and leaves γ
alone (seed 001's "Last Step Markov" absorption inside a chunk).  Classification choice: the filter uses the
toolkit's moment-matched ``Bernoulli``/``Categorical`` linearisation (or, with a ``Gaussian`` likelihood on
one-hot labels, seed 001's surrogate exactly); the γ objective always uses the exact link as above.

Cost per step: ``O(C · D_ℓ²)`` plus one network pass; memory ``O(D_ℓ²)``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit import linalg
from banditkit.likelihoods import Bernoulli, Categorical, Gaussian, Likelihood
from banditkit.posteriors.base import ApplyFn, Posterior, SpaceCell, as_obs, check_common_hyper

Array = jax.Array


class KLLState(NamedTuple):
    mean: Array  # (D_ℓ,) last-layer mean before the pending time update
    cov: Array  # (D_ℓ, D_ℓ)
    delta: Array  # () δ = −2 log γ ≥ 0
    pending: Array  # () 1.0 if a time update is pending, else 0.0
    hidden: Array  # (D_h,) fixed hidden weights
    prior_mean: Array  # (D_ℓ,) w_0
    key: Array  # PRNG key for the Monte-Carlo γ objective


def current_forgetting(state: KLLState) -> Array:
    """The forgetting factor ``γ = exp(−δ/2)`` currently held in a ``kalman_last_layer`` state."""
    return jnp.exp(-0.5 * state.delta)


def kalman_last_layer(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    last_layer: str = "head",
    init_cov: float = 1.0,
    dynamics_cov: float = 0.0,
    forgetting: float = 1.0,
    learn_forgetting: bool = True,
    forgetting_lr: float = 1e-2,
    shrink_mean: bool = True,
    link: str | None = None,
    num_samples: int = 50,
    seed: int = 0,
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
      shrink_mean: ``True``: ``m⁻ = γ m + (1−γ) w_0`` (eq. 6 / App. D); ``False``: ``m⁻ = m`` (App. E).
      link: for a ``Gaussian`` surrogate on one-hot / 0-1 labels, ``"softmax"`` or ``"sigmoid"`` makes the γ
        objective the MC log predictive of that link; ``None`` uses the likelihood itself.
      num_samples: Monte-Carlo draws ``S`` of the logits for the classification γ objective (seed 001: 50).
      seed: seed of the PRNG key carried in the state for those draws.
    """
    check_common_hyper("kalman_last_layer", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    if link not in (None, "softmax", "sigmoid"):
        raise ValueError(f"kalman_last_layer: link={link!r} must be None, 'softmax' or 'sigmoid'")
    if not isinstance(forgetting_lr, jax.core.Tracer) and float(forgetting_lr) < 0:
        raise ValueError(f"kalman_last_layer: forgetting_lr must be >= 0, got {forgetting_lr!r}")
    if isinstance(likelihood, Categorical):
        mc_link = "softmax"
    elif isinstance(likelihood, Bernoulli):
        mc_link = "sigmoid"
    else:
        mc_link = link
    cell = SpaceCell(last_layer)

    def init(params) -> KLLState:
        space = cell.set(params)
        h, w = space.split(params)
        dt = w.dtype
        g0 = jnp.asarray(forgetting, dt)
        return KLLState(
            mean=w,
            cov=jnp.asarray(init_cov, dt) * jnp.eye(w.size, dtype=dt),
            delta=-2.0 * jnp.log(g0),
            pending=jnp.zeros((), dt),
            hidden=h,
            prior_mean=w,
            key=jax.random.PRNGKey(seed),
        )

    def _transition(mean, cov, prior_mean, delta):
        dt = mean.dtype
        g = jnp.exp(-0.5 * delta)
        eye = jnp.eye(mean.size, dtype=dt)
        add = (1.0 - g**2) * jnp.asarray(init_cov, dt) + jnp.asarray(dynamics_cov, dt)
        m = g * mean + (1.0 - g) * prior_mean if shrink_mean else mean
        return m, g**2 * cov + add * eye

    def _predicted(state: KLLState) -> tuple[Array, Array]:
        m, a = _transition(state.mean, state.cov, state.prior_mean, state.delta)
        on = state.pending > 0
        return jnp.where(on, m, state.mean), jnp.where(on, a, state.cov)

    def _logits_and_jac(state: KLLState, w, x):
        """Model output ``f (C,)`` and ``∂f/∂w (C, D_ℓ)`` at last-layer weights ``w`` (hidden fixed)."""
        space = cell.space

        def fw(ww):
            f = jnp.atleast_1d(apply_fn(space.merge(state.hidden, ww), x))
            return f, f

        jf, f = jax.jacrev(fw, has_aux=True)(w)
        return f, jf

    def _moments(f, jf):
        """Observation mean ``ŷ``, its Jacobian ``J = (∂m/∂f) J_f`` and ``R`` from the output and its Jacobian."""
        dm = jax.jacfwd(likelihood.mean)(f)
        return likelihood.mean(f), dm @ jf, likelihood.cov(f)

    def predict(state: KLLState) -> KLLState:
        m, a = _predicted(state)
        return state._replace(mean=m, cov=a, pending=jnp.ones_like(state.pending))

    def _log_pred(delta, state: KLLState, f, jf, y, eps):
        """One-step log predictive of ``y`` as a function of δ (previous statistics held constant)."""
        m, a = _transition(state.mean, state.cov, state.prior_mean, delta)
        fm = f + jf @ (m - state.mean)  # output at m⁻(δ) (exact for a linear head)
        if mc_link is None:
            yhat, j, r = _moments(fm, jf)
            s = linalg.symmetrize(j @ a @ j.T + r)
            u = linalg.chol_upper(s)
            z = jax.scipy.linalg.solve_triangular(u, y - yhat, trans="T", lower=False)
            return -0.5 * (z @ z) - jnp.sum(jnp.log(jnp.diag(u))) - 0.5 * y.size * jnp.log(2 * jnp.pi)
        cf = linalg.symmetrize(jf @ a @ jf.T)
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
            eps = jax.random.normal(sub, (num_samples, f.size), dt)
            grad = jax.grad(_log_pred)(delta, state, f, jf, y, eps)
            grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
            step = jnp.asarray(forgetting_lr, dt) * grad * state.pending
            delta = jnp.maximum(delta + step, 0.0)
        state = state._replace(delta=delta)
        m, a = _predicted(state)
        f, jf = _logits_and_jac(state, m, x)
        yhat, j, r = _moments(f, jf)
        aj = a @ j.T  # (D_ℓ, C)
        s = linalg.symmetrize(j @ aj + r)
        gain = linalg.solve_spd_factor(linalg.chol_upper(s), aj.T).T
        m = m + gain @ (y - yhat)
        ikj = jnp.eye(m.size, dtype=dt) - gain @ j
        a = linalg.symmetrize(ikj @ a @ ikj.T + gain @ r @ gain.T)
        return state._replace(mean=m, cov=a, pending=jnp.zeros_like(state.pending), key=key)

    def predictive(state: KLLState, x) -> tuple[Array, Array]:
        m, a = _predicted(state)
        yhat, j, r = _moments(*_logits_and_jac(state, m, x))
        return yhat, linalg.symmetrize(j @ a @ j.T + r)

    def sample(key: Array, state: KLLState):
        m, a = _predicted(state)
        evals, evecs = jnp.linalg.eigh(linalg.symmetrize(a))
        z = jax.random.normal(key, m.shape, m.dtype)
        return cell.space.merge(state.hidden, m + evecs @ (jnp.sqrt(jnp.maximum(evals, 0.0)) * z))

    def mean(state: KLLState):
        return cell.space.merge(state.hidden, _predicted(state)[0])

    hyper = dict(
        last_layer=last_layer, init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting,
        learn_forgetting=learn_forgetting, forgetting_lr=forgetting_lr, shrink_mean=shrink_mean, link=link,
        num_samples=num_samples, seed=seed,
    )
    return Posterior(init, predict, update, predictive, sample, mean, name="kalman_last_layer", hyper=hyper)
