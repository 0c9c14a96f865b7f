"""Variational Bayesian last layer (VBLL) trained on a replay buffer (seed 003 §9.2; Harrison et al., Brunzema et al.).

Regression head only (Gaussian likelihood, noise learned).  The network's last layer ``ℓ`` (the submodule named by
``last_layer``) must be *linear in its parameters* (a ``Dense`` head): then ``f(h, ℓ, x) = Φ(h, x) ℓ`` with the
features ``Φ = ∂f/∂ℓ (C, D_ℓ)`` (kernel and bias, exact), and the variational posterior is
``q(ℓ) = N(ℓ̄, Σ)``, ``Σ = L Lᵀ``, ``L = tril(offdiag, −1) + diag(exp(logdiag))``, ``ℓ̄`` = the head's weights.
The noise is ``R = diag(σ²)``, ``σ = exp(noise_logdiag)`` (C,), initialised from ``likelihood.obs_noise``.

Loss on the FIFO buffer (``n`` filled slots, the rest masked out):

    −[ (1/n) Σ_i ( log N(y_i | f_i, diag σ²) − ½ Σ_c (Φ_i Σ Φ_iᵀ)_cc / σ_c² )
       + λ ( ((dof + C + 1)/2) Σ_c log σ_c⁻² − ½ wishart_scale Σ_c σ_c⁻² − KL(N(ℓ̄, Σ) ‖ N(0, prior_scale I)) ) ]

optimised over ``(θ = [h, ℓ̄], logdiag, offdiag, noise_logdiag)`` with ``n_inner`` optax steps per ``update``
(AdamW by default; ``lax.fori_loop``).  ``λ = regularization_weight``; ``None`` means ``1/n`` (Brunzema et al.:
KL scale over the data size).

update:     push ``(x, y)`` into the buffer, then ``n_inner`` optimiser steps on the whole masked buffer.
predict:    identity (no dynamics: the buffer is the memory).
predictive: ``(f(θ, x), Φ Σ Φᵀ + diag σ²)``.
sample:     hidden layers at their point estimate, ``ℓ = ℓ̄ + L z``.

Factories: ``vbll`` (the replay/full-data version: large buffer, 100 inner steps, regularised — seed 003 App. G.3)
and ``online_vbll`` (OnVBLL: buffer 20, 50 inner steps, *no regulariser*, ``λ = 0``).  Both need the shape of one
input for the buffer: ``example_x=`` to the factory or ``init(params, example_x)``.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import _replay as replay
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, PyTree
from banditkit.posteriors.registry import Backend, register

Array = jax.Array


class VBLLState(NamedTuple):
    params: dict  # {"theta": (P,), "logdiag": (D_ℓ,), "offdiag": (D_ℓ, D_ℓ), "noise_logdiag": (C,)}
    opt_state: Any
    buffer: replay.FifoBuffer
    space: ParamSpace  # layout of θ and its last-layer block (static, no leaves)


def head_features(space: ParamSpace, apply_fn: ApplyFn, theta: Array, x) -> tuple[Array, Array]:
    """``(f (C,), Φ = ∂f/∂ℓ (C, D_ℓ))`` at ``θ`` for one input (``Φ`` = the last-layer features)."""
    return replay.head_jacobian(apply_fn, space, *space.split(space.unravel(theta)), x)


def _chol(p: dict) -> Array:
    return jnp.tril(p["offdiag"], -1) + jnp.diag(jnp.exp(p["logdiag"]))


def _vbll(
    name: str, apply_fn: ApplyFn, likelihood: Likelihood, *, last_layer: str,
    buffer_size: int, n_inner: int, learning_rate: float, regularization_weight: float | None,
    wishart_scale: float, prior_scale: float, dof: float, init_cov_last: float,
    optimizer: optax.GradientTransformation | None, example_x: PyTree | None,
) -> Posterior:
    if not isinstance(likelihood, Gaussian):
        raise ValueError(f"{name}: the VBLL head here is the regression head; pass likelihood=Gaussian(obs_noise) "
                         f"(got {type(likelihood).__name__}).")
    opt = replay.check_fit_args(name, buffer_size, n_inner, learning_rate, optimizer, prior_scale=prior_scale,
                                init_cov_last=init_cov_last)
    if regularization_weight is not None and regularization_weight < 0:
        raise ValueError(f"{name}: regularization_weight must be >= 0 or None (= 1/n), got {regularization_weight!r}")
    default_x = example_x

    def init(params, example_x: PyTree | None = None) -> VBLLState:
        space = ParamSpace.of(params, last_layer)
        theta = space.ravel(params)
        dt = theta.dtype
        buf = replay.buffer_init(name, apply_fn, params, example_x, default_x, buffer_size, dt)
        c, d = buf.y.shape[1], space.size_last
        p = {
            "theta": theta,
            "logdiag": jnp.full((d,), 0.5 * jnp.log(jnp.asarray(init_cov_last, dt)), dt),
            "offdiag": jnp.zeros((d, d), dt),
            "noise_logdiag": jnp.full((c,), 0.5 * jnp.log(jnp.asarray(likelihood.obs_noise, dt)), dt),
        }
        return VBLLState(p, opt.init(p), buf, space)

    def loss(space: ParamSpace, p: dict, xs, ys, w: Array) -> Array:
        """The negative ELBO above; ``w (B,)``: the buffer's fill mask."""
        n = jnp.maximum(jnp.sum(w), 1.0)
        chol = _chol(p)
        prec = jnp.exp(-2.0 * p["noise_logdiag"])  # σ⁻² (C,)

        def one(x, y):
            f, phi = head_features(space, apply_fn, p["theta"], x)
            quad = jnp.sum((phi @ chol) ** 2, axis=1)  # diag(Φ Σ Φᵀ)
            loglik = -0.5 * jnp.sum((y - f) ** 2 * prec - jnp.log(prec) + jnp.log(2 * jnp.pi))
            return loglik - 0.5 * jnp.sum(quad * prec)

        data = jnp.sum(w * jax.vmap(one)(xs, ys)) / n
        lam = 1.0 / n if regularization_weight is None else regularization_weight
        c = prec.shape[0]
        wishart = 0.5 * (dof + c + 1) * jnp.sum(jnp.log(prec)) - 0.5 * wishart_scale * jnp.sum(prec)
        _, ell = space.split(space.unravel(p["theta"]))
        d = ell.shape[0]
        kl = 0.5 * (jnp.sum(chol**2) / prior_scale + jnp.sum(ell**2) / prior_scale - d
                    + d * jnp.log(prior_scale) - 2.0 * jnp.sum(p["logdiag"]))
        return -(data + lam * (wishart - kl))

    def update(state: VBLLState, x, y) -> VBLLState:
        buf = replay.buffer_push(name, state.buffer, x, y, state.params["theta"].dtype)
        p, o = replay.fit(functools.partial(loss, state.space), opt, state.params, state.opt_state, buf, n_inner)
        return VBLLState(p, o, buf, state.space)

    def predict(state: VBLLState) -> VBLLState:
        return state

    def predictive(state: VBLLState, x) -> tuple[Array, Array]:
        p = state.params
        f, phi = head_features(state.space, apply_fn, p["theta"], x)
        a = phi @ _chol(p)
        return f, linalg.symmetrize(a @ a.T) + jnp.diag(jnp.exp(2.0 * p["noise_logdiag"]))

    def sample(key: Array, state: VBLLState):
        return replay.sample_last_layer(key, state.space, state.params["theta"], _chol(state.params))

    def mean(state: VBLLState):
        return state.space.unravel(state.params["theta"])

    hyper = dict(
        last_layer=last_layer, buffer_size=buffer_size, n_inner=n_inner, learning_rate=learning_rate,
        regularization_weight=regularization_weight, wishart_scale=wishart_scale, prior_scale=prior_scale, dof=dof,
        init_cov_last=init_cov_last, needs_example_x=True,
    )
    return Posterior(init, predict, update, predictive, sample, mean, name=name, hyper=hyper)


def vbll(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *, last_layer: str = "head",
    buffer_size: int = 1000, n_inner: int = 100, learning_rate: float = 1e-4,
    regularization_weight: float | None = None, wishart_scale: float = 0.01, prior_scale: float = 1.0, dof: float = 1.0,
    init_cov_last: float = 1.0, optimizer: optax.GradientTransformation | None = None, example_x: PyTree | None = None,
) -> Posterior:
    """VBLL, replay ("full data") version: every update retrains on a large FIFO buffer (see module docstring).

    Defaults follow seed 003 App. G.3 (100 inner AdamW steps, lr 1e-4, last-layer prior variance 1) and
    Brunzema et al. (Wishart scale 0.01, regularisation ``1/n``).  "Full dataset" is a fixed-size buffer here
    (``buffer_size=1000``, seed 003's KuaiRec setting); raise it to keep a longer stream.

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)``; its ``last_layer`` submodule must be linear in its parameters.
      likelihood: ``Gaussian(obs_noise)``; ``obs_noise`` initialises the learned noise variance.
      last_layer: path name of the head (``"head"`` in ``bk.models``).
      buffer_size, n_inner, learning_rate: replay buffer length, AdamW steps per update, AdamW learning rate.
      regularization_weight: λ on the Wishart + KL terms; ``None`` = ``1/n``.
      wishart_scale, dof: the noise-precision Wishart prior.  prior_scale: variance of the N(0, ·I) head prior.
      init_cov_last: initial ``Σ = init_cov_last · I``.
      optimizer: optional optax transformation replacing ``adamw(learning_rate)``.
      example_x: one model input, to shape the buffer (or pass it to ``init``).
    """
    return _vbll("vbll", apply_fn, likelihood, last_layer=last_layer, buffer_size=buffer_size, n_inner=n_inner,
                 learning_rate=learning_rate, regularization_weight=regularization_weight,
                 wishart_scale=wishart_scale, prior_scale=prior_scale, dof=dof, init_cov_last=init_cov_last,
                 optimizer=optimizer, example_x=example_x)


def online_vbll(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *, last_layer: str = "head",
    buffer_size: int = 20, n_inner: int = 50, learning_rate: float = 1e-4,
    wishart_scale: float = 0.01, prior_scale: float = 1.0, dof: float = 1.0, init_cov_last: float = 1.0,
    optimizer: optax.GradientTransformation | None = None, example_x: PyTree | None = None,
) -> Posterior:
    """OnVBLL (seed 003 App. E.4): VBLL on a small FIFO buffer with **no regulariser** (λ = 0).

    Defaults: buffer 20, 50 AdamW steps per update, lr 1e-4 (seed 003 App. G.3).  Without the KL term nothing pulls
    ``Σ`` back, so it only shrinks along features seen in the buffer.  Arguments as in :func:`vbll`.
    """
    return _vbll("online_vbll", apply_fn, likelihood, last_layer=last_layer, buffer_size=buffer_size,
                 n_inner=n_inner, learning_rate=learning_rate, regularization_weight=0.0,
                 wishart_scale=wishart_scale, prior_scale=prior_scale, dof=dof, init_cov_last=init_cov_last,
                 optimizer=optimizer, example_x=example_x)


register(Backend(name="vbll", factory=vbll, learns_own_noise=True))
register(Backend(name="online_vbll", factory=online_vbll, learns_own_noise=True))
