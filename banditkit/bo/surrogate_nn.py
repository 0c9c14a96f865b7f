"""A network surrogate: a reward model ``f(θ, u) ∈ R`` with an online posterior over ``θ`` (any backend of
:mod:`banditkit.posteriors` with a ``Gaussian(obs_noise)`` likelihood).

Default model: a 3×180 ELU :class:`~banditkit.models.MLP` with a ``head``, fed ``2u − 1 ∈ [−1, 1]^D``.  Targets are
standardised with a **fixed** affine map ``z = (s − m₀) / s₀``, ``m₀, s₀`` the mean and standard deviation of the
first ``n_initial`` observations (``s₀ = 1`` if they are all equal): an online filter cannot revisit past targets,
so the map is frozen once chosen, and observations are buffered until then.  After that every observation is one
``predict`` + ``update`` of the filter.

Thompson sampling draws ``θ̃ ~ q(θ)`` (a function of ``u``, differentiable); EI / PI / UCB use the predictive
moments of ``z`` (epistemic + observation noise).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from banditkit import posteriors as _posteriors
from banditkit.agents.bandit import reset_posterior
from banditkit.bo.surrogate import Fit, cached, standardisation
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP
from banditkit.posteriors.registry import accepts_keyword

#: each backend's BO defaults by name: a read-only view of the registrations' ``bo_defaults``
#: (:mod:`banditkit.posteriors.registry`; why these values: beside each backend), kept for compatibility.  Applied to
#: a surrogate factory when it accepts the keyword and the user did not set it.
SURROGATE_DEFAULTS = _posteriors.registry.table("bo_defaults", declared=True)


@jax.jit
def _all_finite(tree) -> jax.Array:
    """Whether every floating-point entry of ``tree`` is finite: one compiled program for the whole state (checking
    leaf by leaf dispatched, and in a fresh process compiled or loaded, one program per leaf shape)."""
    checks = [jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree_util.tree_leaves(tree)
              if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating)]
    return jnp.all(jnp.stack(checks)) if checks else jnp.asarray(True)


class NetworkSurrogate:
    """A Flax model + posterior backend (see the module docstring).  Build with :meth:`create`."""

    function_draws = True

    @staticmethod
    def default_options(acquisition: str) -> dict:
        """Measured defaults (``benchmarks/results/bo_notes.md``): the short projected ascent and a trust region for
        Thompson sampling; L-BFGS-B on the log acquisition over the whole cube for EI / PI / UCB (a trust region
        collapsed around a poor incumbent on Branin)."""
        ts = acquisition == "thompson"
        return dict(maximizer="ascent" if ts else "lbfgs", trust_region=ts)

    @classmethod
    def create(cls, surrogate: str | Callable, *, dim: int, model: Any, surrogate_kwargs: dict | None,
               obs_noise: float, features: list[int]) -> NetworkSurrogate:
        if isinstance(surrogate, str):
            base, learns = _posteriors.split_suffix(surrogate)
            if learns and base.lower() == "gp":
                raise ValueError("surrogate 'gp-adaptive_noise': the GP fits its noise variance by marginal likelihood "
                                 "already; -adaptive_noise is for the network surrogates (hilofi, lofi, lrkf, ...)")
            factory = _posteriors.get(surrogate)
        elif callable(surrogate):
            factory = surrogate
        else:
            raise TypeError(f"surrogate must be a backend name or a posterior factory, got {type(surrogate).__name__}")
        # a registered name (a saved optimiser then loads without the factory), else the factory's own name
        name = _posteriors.name_of(factory) or getattr(factory, "__name__", "custom")
        custom_model = model is not None
        if model is None:
            model = MLP(features=tuple(features), out=1)
        if not (hasattr(model, "init") and hasattr(model, "apply")):
            raise TypeError("model must be a Flax module (with .init and .apply) mapping a point (dim,) to (1,)")
        kwargs: dict[str, Any] = {}
        wrapped = getattr(factory, "backend", None)  # e.g. posteriors.adaptive_noise(backend): the backend's defaults
        backend = _posteriors.registry.find(getattr(wrapped, "__name__", name))
        for k, v in (backend.bo_defaults if backend is not None else {}).items():
            if accepts_keyword(factory, k):
                kwargs[k] = v
        if "last_layer" not in (surrogate_kwargs or {}) and accepts_keyword(factory, "last_layer"):
            kwargs["last_layer"] = "head"
        kwargs.update(surrogate_kwargs or {})
        try:
            key = (factory, json.dumps(kwargs, sort_keys=True), model if not custom_model else id(model), int(dim),
                   float(obs_noise))
            hash(key)
        except TypeError:  # unhashable / non-JSON configuration: no sharing
            key = None
        return cached(key, lambda: cls(factory, name, model, custom_model, kwargs, dim, obs_noise, key))

    def __init__(self, factory, name, model, custom_model, kwargs, dim, obs_noise, cache_key):
        self.name, self.model, self.custom_model, self.kwargs = name, model, custom_model, kwargs
        self.dim, self.cache_key = int(dim), cache_key

        def apply_fn(params, u):
            return jnp.ravel(model.apply(params, 2.0 * u - 1.0))  # the model sees [-1, 1]^d

        # shapes only (traced, not compiled or run): the model's check and dtype cost no compilation here
        u0 = jax.ShapeDtypeStruct((self.dim,), jnp.float32)
        params = jax.eval_shape(model.init, jax.random.PRNGKey(0), u0)
        out = jax.eval_shape(apply_fn, params, u0)
        if out.shape != (1,):
            raise ValueError(f"the surrogate model must output one value per point, got output shape {out.shape}")
        try:
            post = factory(apply_fn, Gaussian(obs_noise), **kwargs)
        except TypeError as e:
            raise TypeError(f"surrogate {name!r} rejected its arguments {sorted(kwargs)}: {e}") from e
        self.posterior, self.apply_fn = post, apply_fn
        self.dtype = jax.tree_util.tree_leaves(params)[0].dtype

        def step(state, u, z):
            return post.update(post.predict(state), u, z)

        self._step = jax.jit(step)
        self._draw = jax.jit(post.sample)

    def precision(self):
        return contextlib.nullcontext()

    def init(self, key: jax.Array) -> Fit:
        params = self.model.init(key, jnp.zeros((self.dim,), jnp.float32))
        u0, y0 = jnp.zeros((self.dim,), jnp.float32), jnp.zeros((1,), jnp.float32)  # one surrogate input / value
        state = self.posterior.init(params, example_x=u0)
        # a backend with refit (a learned subspace) starts from its data-free reset: no warm-up data here
        return Fit(reset_posterior(self.posterior, jax.random.fold_in(key, 1), state, u0, y0))

    def _feed(self, state, u: np.ndarray, z: np.ndarray):
        for i in range(u.shape[0]):
            state = self._step(state, jnp.asarray(u[i], self.dtype), jnp.asarray(z[i : i + 1], self.dtype))
        return state

    def fit(self, fit: Fit, u: np.ndarray, s: np.ndarray, n_initial: int) -> Fit:
        shift, scale = fit.shift, fit.scale
        if shift is None and s.size >= n_initial:
            shift, scale = standardisation(s)
        if shift is None:
            return fit
        state = self._feed(fit.state, u[fit.n_fed :], (s[fit.n_fed :] - shift) / scale)
        if not bool(_all_finite(state)):
            raise FloatingPointError(
                "the surrogate's filter update produced NaN/inf (the optimiser was left unchanged); try a "
                "larger obs_noise or a smaller prior covariance in surrogate_kwargs"
            )
        return Fit(state, shift, scale, int(s.size))

    def fantasize(self, fit: Fit, u: np.ndarray, s: np.ndarray, u_new: np.ndarray, z_new: np.ndarray):
        return self._feed(fit.state, np.asarray(u_new), np.asarray(z_new))

    def moments(self, state, u):
        m, c = self.posterior.predictive(state, u)
        return m[0], jnp.sqrt(jnp.maximum(c[0, 0], 1e-12))

    def draw(self, state, key):
        return self._draw(key, state)

    def draw_value(self, draw, u):
        return self.apply_fn(draw, u)[0]

    def draw_on(self, state, key, points):  # pragma: no cover - function_draws is True
        raise NotImplementedError

    def arrays(self, fit: Fit) -> dict:
        return dict(state=fit.state)

    def meta(self, fit: Fit) -> dict:
        return {}

    def restore(self, fit: Fit, arrays: dict, meta: dict, u: np.ndarray, s: np.ndarray) -> Fit:
        return Fit(arrays["state"], meta["shift"], meta["scale"], int(meta["n_fed"]))
