"""Learned observation noise for any Gaussian filter backend: the variational-Bayes adaptive Kalman filter.

``adaptive_noise(backend)`` wraps a backend factory so that the isotropic observation variance ``R = r I`` of its
``Gaussian`` likelihood is learned online instead of fixed (Särkkä & Nummenmaa 2009, "Recursive noise adaptive
Kalman filtering by variational Bayesian approximations", with one variance shared by the ``C`` outputs).

Belief over the variance: ``r ~ InvGamma(α, β)``, point estimate ``r̂ = β / α`` (the VB plug-in ``E[1/r]⁻¹``),
floored at ``r_min``.  Start: ``α_0 = ν_0 / 2``, ``β_0 = α_0 r_0`` with ``r_0`` the likelihood's ``obs_noise`` and
``ν_0`` a pseudo-observation count.

:predict: the backend's time update, and the noise belief forgets: ``α ← ρ α``, ``β ← ρ β`` (``ρ ∈ (0, 1]``;
    ``ρ < 1`` keeps about ``1 / (1 − ρ)`` observations' worth of evidence, so the estimate follows a misfit that
    shrinks as the network learns).
:update with ``y (C,)``: the backend's predictive at ``x`` gives ``ŷ (C,)`` and the epistemic output covariance
    ``s = J Σ⁻ Jᵀ (C, C)``; with ``e = y − ŷ`` and the current ``r̂``, the fixed point (``n`` passes, all ``C × C``)

        ``S = s + r̂ I``,  ``e⁺ = r̂ S⁻¹ e``  (residual of the updated mean),  ``s⁺ = s − s S⁻¹ s``  (its covariance),
        ``α' = α + C/2``,  ``β' = β + ½ (‖e⁺‖² + tr s⁺)``,  ``r̂ = max(β' / α', r_min)``,

    then the backend's own measurement update with variance ``r̂``.

The backend is built once, with ``Gaussian(r_0)``, on the scaled model ``c · f(θ, x)``: observing
``c y = c f(θ, x) + c ε`` with ``c = √(r_0 / r̂)`` is the same observation as ``y = f(θ, x) + ε``, ``ε ~ N(0, r̂ I)``
(the Jacobian scales by ``c``, the noise by ``c²``), so every filter's exact update with variance ``r̂`` is its
update with ``r_0`` on ``((x, c), c y)`` — no per-step rebuild, and the backend's parameter layout is kept.
Cost per ``update``: one extra ``predictive`` of the backend and ``O(n C³)``.  The scaled model's JVP puts ``c`` on
the parameter tangent, ``∂(c f)/∂θ · t = J (c t)``, so reverse mode forms ``Jᵀ v`` before scaling: the same
computation as the predictive's, which XLA does once — the network's forward and backward passes are shared, and
what the extra predictive adds is its covariance product ``J Σ⁻ Jᵀ``.  The backend's hooks pass through: ``refit``
(on the scaled model at ``c = 1``, i.e. the model itself; the noise belief is kept) and ``diagnostics`` (of the
backend's state).

Start at or above the noise you expect.  From above, early residuals are discounted by the wide predictive and
``r̂`` comes down smoothly (``tests/posteriors/test_adaptive_noise.py``: linear model, true variance 0.25, start 6.25:
``r̂`` 0.88 after 50 observations, 0.26 after 3000).  From far below (start 0.0025) the first updates interpolate
the first points, the covariance collapses to the noise's scale, later residuals then look like pure noise and
``r̂`` overshoots (18.7 after 5 observations, 5.0 after 3000): the filter's covariance does not rescale when ``r̂``
changes, the known weak side of the VB adaptive filter.  A bandit agent's default start (``obs_noise=0.1`` on
rewards scaled to about unit size) lies above the misfit of a learning network.

Backends: the Gaussian filters, registered with ``gaussian_filter=True`` (``ekf``, ``diag_ekf``, ``lofi``, ``hilofi``,
``lolofi``, ``lrkf``, ``subspace_ekf``; ``SUPPORTED`` lists them).  Backends that learn a noise variance of their own
(``learns_own_noise``: ``neural_linear``, ``linear`` with ``noise="nig"``, ``vbll``) or are no filter are refused.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from banditkit.likelihoods import Gaussian
from banditkit.posteriors import linalg, registry
from banditkit.posteriors.base import ApplyFn, Posterior, as_obs

Array = jax.Array



def __getattr__(name: str):
    # SUPPORTED: the backends registered with gaussian_filter=True (read when asked: the backends register after
    # this module is imported), kept for compatibility
    if name == "SUPPORTED":
        return registry.names(gaussian_filter=True)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class NoiseState(NamedTuple):
    inner: Any  # the backend's state
    shape: Array  # () α of InvGamma(α, β) over the variance r
    scale: Array  # () β


def _estimate(shape: Array, scale: Array, floor: float) -> Array:
    """``r̂ = max(β / α, floor)``."""
    return jnp.maximum(scale / shape, floor)


def noise_variance(state: NoiseState | Any, floor: float = 0.0) -> Array | None:
    """The current estimate ``r̂ = β / α`` of the observation variance (``()``) of an :func:`adaptive_noise` state;
    ``None`` for any other backend's state (its variance is the likelihood's fixed ``obs_noise``), which
    ``run(record=...)`` records as NaN."""
    if not isinstance(state, NoiseState):
        return None
    return _estimate(state.shape, state.scale, floor)


def vb_noise_step(shape: Array, scale: Array, s: Array, e: Array, floor: float, iterations: int
                  ) -> tuple[Array, Array, Array]:
    """One VB measurement step of the noise belief: ``(α', β', r̂)`` from ``s (C, C)`` epistemic and ``e (C,)``.

    ``n = iterations`` passes of ``S = s + r̂ I``, ``e⁺ = r̂ S⁻¹ e``, ``s⁺ = s − s S⁻¹ s``,
    ``β' = β + ½(‖e⁺‖² + tr s⁺)``, ``r̂ = max(β'/α', floor)`` with ``α' = α + C/2``, starting from ``r̂ = β/α``."""
    c = e.shape[0]
    dt = e.dtype
    eye = jnp.eye(c, dtype=dt)
    s = linalg.symmetrize(s)
    new_shape = shape + jnp.asarray(0.5 * c, dt)
    r = _estimate(shape, scale, floor)
    new_scale = scale
    for _ in range(iterations):
        u = linalg.chol_upper(s + r * eye)
        solved = linalg.solve_spd_factor(u, jnp.concatenate([e[:, None], s], axis=1))  # S⁻¹ [e, s]
        e_post = r * solved[:, 0]
        tr_post = jnp.maximum(jnp.trace(s - s @ solved[:, 1:]), 0.0)
        new_scale = scale + 0.5 * (jnp.sum(e_post**2) + tr_post)
        r = _estimate(new_shape, new_scale, floor)
    return new_shape, new_scale, r


#: the name suffix that asks for a learned variance: ``posteriors.get("hilofi-adaptive_noise")`` is
#: ``adaptive_noise("hilofi")`` (also in agent specs, ``"hilofi-thompson-adaptive_noise"``, and BO surrogates)
SUFFIX = "adaptive_noise"


def split_suffix(name: str) -> tuple[str, bool]:
    """``(name without a trailing -adaptive_noise, whether it had one)``; ``-``, ``_`` and case are interchangeable:
    ``"hilofi-adaptive-noise"`` -> ``("hilofi", True)``, ``"lofi"`` -> ``("lofi", False)``."""
    text = name.strip()
    key = registry.normalise(text)
    if key.endswith("_" + SUFFIX):
        base = text[: len(text) - len(SUFFIX) - 1].rstrip("-_ ")
        if base:
            return base, True
    return text, False


def adaptive_noise(
    backend: str | Callable,
    *,
    prior_count: float = 2.0,
    forgetting: float = 0.999,
    floor: float = 1e-6,
    iterations: int = 3,
) -> Callable[..., Posterior]:
    """A backend factory whose Gaussian observation variance is learned online (see the module docstring).

    Args:
      backend: a filter backend's name or registered factory (one registered with ``gaussian_filter=True``,
        :class:`~banditkit.posteriors.registry.Backend`); a factory this function made already
        is returned as it is when the settings agree (else ``ValueError``).
      prior_count: ``ν_0 > 0``, pseudo-observations behind the starting variance (the likelihood's ``obs_noise``).
      forgetting: ``ρ ∈ (0, 1]``, per-``predict`` decay of the noise belief's evidence (1: a fixed variance).
      floor: ``r_min > 0``, the smallest variance the estimate may take.
      iterations: ``n ≥ 1`` fixed-point passes per update.

    Returns ``factory(apply_fn, likelihood=Gaussian(r_0), **backend_kwargs) -> Posterior`` whose state is
    :class:`NoiseState`; use it wherever a backend factory goes (``BanditAgent(posterior=...)``,
    ``bk.BayesOpt(surrogate=...)``, which applies the wrapped backend's BO defaults), or pass ``adaptive_noise=True``
    to :class:`~banditkit.agents.BanditAgent` / ``make_agent``, or name it ``"BACKEND-adaptive_noise"``.  The same
    backend and settings give the same factory object (so compiled kernels keyed on it are shared).
    """
    from banditkit import posteriors as _posteriors

    factory = _posteriors.get(backend) if isinstance(backend, str) else backend
    settings = dict(prior_count=prior_count, forgetting=forgetting, floor=floor, iterations=iterations)
    if getattr(factory, "noise_settings", None) is not None:  # wrapped already (a "-adaptive_noise" name, say)
        if factory.noise_settings == settings:
            return factory
        raise ValueError(
            f"adaptive_noise: {factory.__name__} learns its noise already with {factory.noise_settings}; wrap the "
            f"plain backend ({getattr(factory.backend, '__name__', 'it')}) to use {settings}"
        )
    name = getattr(factory, "__name__", str(backend))
    found = registry.of(factory) or registry.find(name)  # the factory, or one named like a registered backend
    if found is None or not found.gaussian_filter:
        own = ", ".join(registry.names(learns_own_noise=True))
        raise ValueError(
            f"adaptive_noise: backend {name!r} is not a Gaussian filter with a fixed observation variance; use one "
            f"of {list(registry.names(gaussian_filter=True))} ({own} learn their noise themselves)"
        )
    if not prior_count > 0:
        raise ValueError(
            f"adaptive_noise: prior_count is a pseudo-observation count and must be > 0, got {prior_count!r}"
        )
    if not 0 < forgetting <= 1:
        raise ValueError(f"adaptive_noise: forgetting must lie in (0, 1] (1 = no forgetting), got {forgetting!r}")
    if not floor > 0:
        raise ValueError(f"adaptive_noise: floor is the smallest variance and must be > 0, got {floor!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"adaptive_noise: iterations must be an integer >= 1, got {iterations!r}")
    try:
        hash(factory)
    except TypeError:  # an unhashable factory (a callable object): built afresh, not memoised
        return _wrapped.__wrapped__(factory, float(prior_count), float(forgetting), float(floor), iterations)
    return _wrapped(factory, float(prior_count), float(forgetting), float(floor), iterations)


@functools.cache
def _wrapped(factory: Callable, prior_count: float, forgetting: float, floor: float, iterations: int
             ) -> Callable[..., Posterior]:
    """The wrapping factory for checked settings (memoised: one object per backend and settings)."""
    name = getattr(factory, "__name__", "custom")

    def build(apply_fn: ApplyFn, likelihood: Gaussian = Gaussian(1.0), **kwargs) -> Posterior:
        if not isinstance(likelihood, Gaussian):
            raise ValueError(
                f"adaptive_noise: the learned variance is a Gaussian likelihood's; got {type(likelihood).__name__} "
                "(drop adaptive_noise, or use Gaussian(obs_noise) as the starting variance)"
            )
        r0 = float(likelihood.obs_noise)

        @jax.custom_jvp
        def scaled_apply(params, xc):
            x, c = xc
            return c * apply_fn(params, x)

        @scaled_apply.defjvp
        def _scaled_jvp(primals, tangents):
            # ∂(c f)/∂θ · t = J (c t): the scale goes on the parameter tangent, so reverse mode computes Jᵀ v and
            # scales after it — the same Jᵀ v as the unscaled linearisation in `update`'s predictive, which XLA then
            # computes once for both
            params, (x, c) = primals
            dparams, (_, dc) = tangents
            f, df = jax.jvp(lambda p: apply_fn(p, x), (params,), (jax.tree_util.tree_map(lambda t: c * t, dparams),))
            return c * f, df + f * dc

        inner = factory(scaled_apply, Gaussian(r0), **kwargs)

        def init(params, example_x=None) -> NoiseState:
            one = jnp.ones((), jnp.result_type(jax.tree_util.tree_leaves(params)[0]))
            state = inner.init(params, example_x=None if example_x is None else (example_x, one))
            a0 = jnp.asarray(0.5 * prior_count, one.dtype)
            return NoiseState(state, a0, a0 * jnp.asarray(r0, one.dtype))

        def predict(state: NoiseState) -> NoiseState:
            rho = jnp.asarray(forgetting, state.shape.dtype)
            return NoiseState(inner.predict(state.inner), rho * state.shape, rho * state.scale)

        def update(state: NoiseState, x, y) -> NoiseState:
            one = jnp.ones((), state.shape.dtype)
            y = as_obs(y, one.dtype)
            yhat, cov = inner.predictive(state.inner, (x, one))
            if y.shape != yhat.shape:
                raise ValueError(f"adaptive_noise.update: y has shape {y.shape} but the model predicts {yhat.shape}")
            s = cov - jnp.asarray(r0, one.dtype) * jnp.eye(y.shape[0], dtype=one.dtype)
            shape, scale, r = vb_noise_step(state.shape, state.scale, s, y - yhat, floor, iterations)
            c = jnp.sqrt(jnp.asarray(r0, one.dtype) / r)
            return NoiseState(inner.update(state.inner, (x, c), c * y), shape, scale)

        def predictive(state: NoiseState, x) -> tuple[Array, Array]:
            yhat, cov = inner.predictive(state.inner, (x, jnp.ones((), state.shape.dtype)))
            r = noise_variance(state, floor)
            return yhat, cov + (r - jnp.asarray(r0, cov.dtype)) * jnp.eye(cov.shape[0], dtype=cov.dtype)

        def sample(key: Array, state: NoiseState):
            return inner.sample(key, state.inner)

        def mean(state: NoiseState):
            return inner.mean(state.inner)

        refit = diagnostics = None
        if inner.refit is not None:

            def refit(key: Array, state: NoiseState, xs, ys: Array, weights: Array) -> NoiseState:
                # the backend's refit on its own inputs, (x, c = 1): the scaled model at c = 1 is the model
                ones = jnp.ones(jnp.shape(weights), state.shape.dtype)  # (n, E)
                return state._replace(inner=inner.refit(key, state.inner, (xs, ones), ys, weights))

        if inner.diagnostics is not None:

            def diagnostics(state: NoiseState) -> dict:
                return inner.diagnostics(state.inner)

        hyper = dict(inner.hyper, noise_prior_count=prior_count, noise_forgetting=forgetting, noise_floor=floor,
                     noise_iterations=iterations)
        return Posterior(init, predict, update, predictive, sample, mean, name=f"adaptive_noise({inner.name})",
                         hyper=hyper, refit=refit, diagnostics=diagnostics)

    build.__name__ = f"adaptive_noise({name})"
    build.__signature__ = inspect.signature(factory)  # the backend's keywords, for callers that look them up
    build.backend = factory
    build.noise_settings = dict(prior_count=prior_count, forgetting=forgetting, floor=floor,
                                iterations=iterations)
    return build
