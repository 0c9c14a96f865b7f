"""The surrogate contract of :class:`~banditkit.bo.BayesOpt`: what the optimiser asks of a model of the objective.

Two implementations: :class:`~banditkit.bo.surrogate_nn.NetworkSurrogate` (a Flax network with an online
posterior backend of :mod:`banditkit.posteriors`: one filter step per observation) and
:class:`~banditkit.bo.surrogate_gp.GPSurrogate` (an exact GP, refitted from all the data at every ``tell``).
The optimiser never tests which one it holds: each declares what it can do (:attr:`Surrogate.function_draws`,
:meth:`Surrogate.precision`, :meth:`Surrogate.default_options`).

A surrogate object holds configuration and compiled code only; everything learned from data lives in a :class:`Fit`
(the model's state and the standardisation of the targets), which the optimiser keeps, saves and restores.
Inputs are points ``u`` of the unit cube ``[0, 1]^D`` (a search space's encoding, :mod:`banditkit.bo.space`);
targets are the *maximised* values ``s = sign · y`` and are standardised to ``z = (s − shift) / scale`` inside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import numpy as np

Array = jax.Array


class Fit(NamedTuple):
    """What a surrogate learned from the data: its ``state`` (``None`` before it has enough data), the
    standardisation ``z = (s − shift) / scale`` (``None`` until fixed), and ``n_fed``, the evaluations consumed."""

    state: Any = None
    shift: float | None = None
    scale: float | None = None
    n_fed: int = 0


@runtime_checkable
class Surrogate(Protocol):
    """A model of the objective on the unit cube.

    Attributes:
      name: what :meth:`BayesOpt.save` records (a registered backend name, ``"gp"``, or a factory's name).
      kwargs: the resolved keyword arguments (``surrogate_kwargs`` with the BO defaults).
      custom_model: whether a user model was given (code a checkpoint cannot hold).
      model: the Flax module, or ``None``.
      posterior: the :class:`~banditkit.posteriors.Posterior`, or ``None``.
      dtype: the dtype of inputs to the compiled functions.
      function_draws: ``True`` if a posterior draw is a function that can be evaluated and differentiated anywhere
        (:meth:`draw` / :meth:`draw_value`); ``False`` if Thompson sampling draws jointly on a finite set
        (:meth:`draw_on`).
      cache_key: a hashable key of everything that shapes the compiled code (``None``: do not share).
    """

    name: str
    kwargs: dict
    custom_model: bool
    model: Any
    posterior: Any
    dtype: Any
    function_draws: bool
    cache_key: Any

    def precision(self) -> Any:
        """Context manager every call into the surrogate runs in (``jax.enable_x64`` for a float64 model)."""

    def init(self, key: Array) -> Fit:
        """The data-free :class:`Fit` (``key``: the model's initialisation)."""

    def fit(self, fit: Fit, u: np.ndarray, s: np.ndarray, n_initial: int) -> Fit:
        """The fit after all evaluations ``u (n, D)``, ``s (n,)`` (rows ``fit.n_fed:`` are new).  Raises
        ``FloatingPointError`` (nothing changed) if the update is not finite."""

    def fantasize(self, fit: Fit, u: np.ndarray, s: np.ndarray, u_new: np.ndarray, z_new: np.ndarray) -> Any:
        """The model state after also observing standardised values ``z_new`` at ``u_new (m, D)`` (constant liar),
        without changing ``fit``."""

    def moments(self, state: Any, u: Array) -> tuple[Array, Array]:
        """Predictive ``(mean, sd)`` of the standardised target at one point ``u (D,)`` (jittable)."""

    def draw(self, state: Any, key: Array) -> Any:
        """One posterior draw (``function_draws``)."""

    def draw_value(self, draw: Any, u: Array) -> Array:
        """The draw's value at ``u (D,)`` (jittable, differentiable; ``function_draws``)."""

    def draw_on(self, state: Any, key: Array, points: Array) -> Array:
        """One joint posterior draw of the values at ``points (N, D)`` (``not function_draws``)."""

    def arrays(self, fit: Fit) -> dict:
        """The arrays a checkpoint stores for ``fit``."""

    def meta(self, fit: Fit) -> dict:
        """JSON values a checkpoint stores for ``fit``."""

    def restore(self, fit: Fit, arrays: dict, meta: dict, u: np.ndarray, s: np.ndarray) -> Fit:
        """The fit a checkpoint holds (``fit``: a fresh one, the template of the arrays)."""


def kind(surrogate: str | Callable) -> type:
    """The surrogate class for a ``BayesOpt(surrogate=...)`` argument: ``"gp"`` → the GP, anything else (a backend
    name or factory) → the network."""
    from banditkit.bo.surrogate_gp import GPSurrogate
    from banditkit.bo.surrogate_nn import NetworkSurrogate

    if isinstance(surrogate, str) and surrogate.strip().lower() == "gp":
        return GPSurrogate
    return NetworkSurrogate


def make(surrogate: str | Callable, *, dim: int, model: Any, surrogate_kwargs: dict | None, obs_noise: float,
         features: list[int]) -> Surrogate:
    """Build the surrogate (shared with earlier optimisers of the same configuration, whose compiled code it
    reuses)."""
    return kind(surrogate).create(surrogate, dim=dim, model=model, surrogate_kwargs=surrogate_kwargs,
                                  obs_noise=obs_noise, features=features)


def standardisation(s: np.ndarray) -> tuple[float, float]:
    """``(shift, scale)``: mean and standard deviation of ``s`` (scale 1 when they are all equal)."""
    shift, sd = float(np.mean(s)), float(np.std(s))
    return shift, (sd if sd > 1e-12 * max(1.0, abs(shift)) else 1.0)


_CACHE: dict = {}  # surrogates (with their compiled code) shared by optimisers of the same configuration
_CACHE_SIZE = 16


def cached(key: Any, build: Callable[[], Any]) -> Any:
    """``build()``, remembered under ``key`` (``None``: not remembered); at most 16 entries, oldest dropped."""
    if key is None:
        return build()
    try:
        hit = _CACHE.get(key)
    except TypeError:  # unhashable
        return build()
    if hit is None:
        hit = build()
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = hit
    return hit
