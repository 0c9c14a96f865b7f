"""The exact Gaussian-process surrogate (``surrogate="gp"``; the maths in :mod:`banditkit.bo.gp`).

Matérn-5/2 ARD, constant mean, inferred noise, on the evaluations (all of them, or the last ``buffer_size``), in
float64.  Unlike the online filters it refits from the data after every ``tell``: targets are re-standardised over
the buffer (``z = (s − mean) / sd``, recomputed each time), and the hyper-parameters re-estimated by MAP
(at most ``fit_steps`` L-BFGS iterations from the previous optimum and from the default start, one compiled
program: :func:`banditkit.bo.gp.fit_params`).  EI / PI / UCB use the
latent ``f``'s posterior (no noise term); Thompson sampling is one *joint* draw of ``f`` on a finite set of points
(``O(N³)``), so a draw cannot be refined by gradient steps.  Per-``tell`` cost grows as ``O(n³)``.

``surrogate_kwargs``: ``buffer_size`` (``None`` = all; seed 003's baseline used 20), ``fit_steps`` (default 50),
``use_prior`` (default True).  A checkpoint stores the fitted hyper-parameters; the conditioned state is rebuilt
from them and the data by the same deterministic computation, so the next ``ask`` is identical.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from banditkit.bo import gp as _gp
from banditkit.bo.surrogate import Fit, cached, standardisation

GP_DEFAULTS: dict[str, Any] = dict(buffer_size=None, fit_steps=50, use_prior=True)

_CONDITION = jax.jit(_gp.condition)


class GPSurrogate:
    """Exact GP (see the module docstring).  Build with :meth:`create`."""

    function_draws = False
    name = "gp"
    custom_model = False
    model = None
    posterior = None
    dtype = jnp.float64

    @staticmethod
    def default_options(acquisition: str) -> dict:
        """Measured defaults (``benchmarks/results/bo_notes.md``): L-BFGS-B on the log acquisition, and a trust
        region (GP-EI: Ackley5 1.7 → 0.17, DrawNN50 100 → 29, no task worse beyond a standard error)."""
        return dict(maximizer="lbfgs", trust_region=True)

    @classmethod
    def create(cls, surrogate, *, dim: int, model: Any, surrogate_kwargs: dict | None, obs_noise: float,
               features) -> GPSurrogate:
        if model is not None:
            raise ValueError("surrogate='gp' takes no model (the GP is not a network); drop model=")
        unknown = sorted(set(surrogate_kwargs or {}) - set(GP_DEFAULTS))
        if unknown:
            raise TypeError(f"surrogate 'gp' rejected its arguments {unknown}; it accepts {sorted(GP_DEFAULTS)}")
        kwargs = dict(GP_DEFAULTS, **(surrogate_kwargs or {}))
        b = kwargs["buffer_size"]
        if b is not None and (not isinstance(b, (int, np.integer)) or isinstance(b, bool) or b < 1):
            raise ValueError(f"buffer_size must be a positive int or None, got {b!r}")
        if not isinstance(kwargs["fit_steps"], (int, np.integer)) or kwargs["fit_steps"] < 0:
            raise ValueError(f"fit_steps must be a non-negative int, got {kwargs['fit_steps']!r}")
        key = ("gp", int(dim), tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        return cached(key, lambda: cls(kwargs, dim, key))

    def __init__(self, kwargs: dict, dim: int, cache_key):
        self.kwargs, self.dim, self.cache_key = kwargs, int(dim), cache_key

    def precision(self):
        return jax.enable_x64(True)

    def init(self, key: jax.Array) -> Fit:
        return Fit()

    def _standardise(self, s: np.ndarray) -> tuple[np.ndarray, float, float]:
        """``z = (s − shift) / scale`` over the buffer (the last ``buffer_size`` values, or all)."""
        b = self.kwargs["buffer_size"]
        shift, scale = standardisation(s if b is None else s[-b:])
        return (s - shift) / scale, shift, scale

    def _condition(self, u: np.ndarray, z: np.ndarray, params: Any = None):
        """Refit the hyper-parameters (warm start ``params``; the default start as well) and condition."""
        kw = self.kwargs
        with jax.enable_x64(True):
            xp, zp, mask = _gp.pad(u, z, kw["buffer_size"], dtype=jnp.float64)
            init = _gp.default_params(self.dim) if params is None else params
            params = _gp.fit_params(xp, zp, mask, init, steps=kw["fit_steps"], use_prior=kw["use_prior"])
            return self._conditioned(xp, zp, mask, params)

    @staticmethod
    def _conditioned(xp, zp, mask, params):
        state = _CONDITION(xp, zp, mask, params)
        if not bool(jnp.all(jnp.isfinite(state.alpha))):
            raise FloatingPointError("the GP's Cholesky produced NaN/inf (the optimiser was left unchanged)")
        return state

    def fit(self, fit: Fit, u: np.ndarray, s: np.ndarray, n_initial: int) -> Fit:
        z, shift, scale = self._standardise(s)
        if s.size < n_initial:
            return Fit(None, shift, scale, int(s.size))
        state = self._condition(u, z, None if fit.state is None else fit.state.params)
        return Fit(state, shift, scale, int(s.size))

    def fantasize(self, fit: Fit, u: np.ndarray, s: np.ndarray, u_new: np.ndarray, z_new: np.ndarray):
        """The GP conditioned on the data and ``(u_new, z_new)`` with the fitted hyper-parameters (no refit)."""
        z = (s - fit.shift) / fit.scale
        with jax.enable_x64(True):
            b = self.kwargs["buffer_size"]
            uu, zz = np.concatenate([u, u_new]), np.concatenate([z, z_new])
            xp, zp, mask = _gp.pad(uu, zz, None if b is None else b + len(z_new), dtype=jnp.float64)
            return self._conditioned(xp, zp, mask, fit.state.params)

    def moments(self, state, u):
        m, v = _gp.predict(state, u[None])
        return m[0], jnp.sqrt(v[0])

    def draw(self, state, key):  # pragma: no cover - function_draws is False
        raise NotImplementedError

    def draw_value(self, draw, u):  # pragma: no cover
        raise NotImplementedError

    def draw_on(self, state, key, points):
        return _gp.sample_joint(key, state, points)

    def arrays(self, fit: Fit) -> dict:
        return {}

    def meta(self, fit: Fit) -> dict:
        if fit.state is None:
            return dict(gp_params=None)
        return dict(gp_params={k: np.asarray(v, np.float64).tolist() for k, v in fit.state.params._asdict().items()})

    def restore(self, fit: Fit, arrays: dict, meta: dict, u: np.ndarray, s: np.ndarray) -> Fit:
        shift, scale, n_fed = meta["shift"], meta["scale"], int(meta["n_fed"])
        if meta.get("gp_params") is None:
            return Fit(None, shift, scale, n_fed)
        with jax.enable_x64(True):
            params = _gp.GPParams(**{k: jnp.asarray(v, jnp.float64) for k, v in meta["gp_params"].items()})
            z, _, _ = self._standardise(s)
            xp, zp, mask = _gp.pad(u, z, self.kwargs["buffer_size"], dtype=jnp.float64)
            return Fit(self._conditioned(xp, zp, mask, params), shift, scale, n_fed)
