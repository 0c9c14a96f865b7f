"""Backend registrations: each backend declares, once and beside its own code, what the rest of banditkit needs to know.

A backend module ends with one :func:`register` call per factory::

    register(Backend(
        name="hilofi", factory=hilofi,
        bandit_defaults=dict(rank=10, init_cov_hidden=0.01, init_cov_last=1.0),
        bo_defaults=dict(rank=50, init_cov_hidden=0.1, init_cov_last=1.0),
        gaussian_filter=True, arm_blocks=True, noise_mixture=True, head_prior="unit",
    ))

and ``banditkit.posteriors`` imports the module.  From then on the backend resolves by name
(``bk.posteriors.get("hilofi")``, agent specs, ``--surrogate``), ``make_agent`` and ``BayesOpt`` apply its defaults,
and the agents ask its capabilities (:class:`Backend`'s fields) — never its name.  The tables that once listed
backends by name (``DEFAULT_HYPER``, ``SURROGATE_DEFAULTS``, ``noise.SUPPORTED``, ...) are read-only views built
from the registrations (:func:`table`, :func:`names`).  ``docs/adding_a_backend.md`` walks through a new backend.

This module imports no backend (the backends import it), so it can be imported from anywhere below the agents.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any

#: the registered factories by name, in registration order (``bk.posteriors.REGISTRY`` is this dict)
FACTORIES: dict[str, Callable] = {}
_BACKENDS: dict[str, Backend] = {}


def normalise(name: str) -> str:
    """The registry key of a backend name as a user writes it: case, ``-``, ``_`` and spaces are interchangeable
    (``"HiLoFi"``, ``"diag-ekf"``, ``"diag ekf"`` -> ``"hilofi"``, ``"diag_ekf"``)."""
    if not isinstance(name, str):
        raise TypeError(f"a posterior backend name is a string like 'hilofi', got {name!r}")
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def _read_only(value: Mapping[str, Any] | None, what: str) -> Mapping[str, Any]:
    if value is None:
        return types.MappingProxyType({})
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a dict of the factory's keyword arguments, got {type(value).__name__}")
    return types.MappingProxyType(dict(value))


@dataclasses.dataclass(frozen=True)
class Backend:
    """What banditkit knows about one backend factory: its name, its defaults and its capabilities.

    Defaults are three, and each lives once: the factory's own signature (the library default of the function,
    what ``hilofi(apply_fn, lik)`` gives), :attr:`bandit_defaults` (what ``make_agent`` passes) and
    :attr:`bo_defaults` (what a ``BayesOpt`` network surrogate passes).  A user's ``posterior_kwargs`` /
    ``surrogate_kwargs`` override the last two.
    """

    name: str
    """The registry name (lower case, ``_`` inside): what :func:`banditkit.posteriors.get`, agent specs and the CLI
    resolve, and the ``name`` of the ``Posterior`` the factory builds."""
    factory: Callable
    """``factory(apply_fn, likelihood, **hyper) -> Posterior`` (:class:`banditkit.posteriors.base.Posterior`)."""
    bandit_defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments ``make_agent`` passes to the factory (small ranks that run on a laptop); every key must be
    one the factory accepts."""
    bo_defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments a ``BayesOpt`` network surrogate passes to the factory (empty: the factory's own)."""
    gaussian_filter: bool = False
    """Its update is a Gaussian filter step with the likelihood's fixed variance ``R``, so
    :func:`banditkit.posteriors.adaptive_noise` can learn ``R`` online (the ``-adaptive_noise`` suffix)."""
    learns_own_noise: bool = False
    """It learns an observation variance of its own (a Normal-inverse-gamma or Wishart belief), so
    ``adaptive_noise`` refuses it and says so (``linear``: with ``noise="nig"``, its bandit default)."""
    arm_blocks: bool = False
    """It accepts ``arms=K``: the covariance of a ``K``-output head kept as ``K`` per-arm blocks (the same posterior
    as one dense block, ``O(P_k²)`` per update instead of ``O(K² P_k²)``; :mod:`banditkit.posteriors.arms`).
    ``make_agent`` passes ``arms=K`` on the default multi-output model unless ``arms`` or ``rank_last`` is given."""
    noise_cap: float | None = None
    """The largest Gaussian observation variance ``make_agent`` gives it by default (``min(OBS_NOISE, cap)``);
    ``None``: no cap."""
    noise_mixture: bool = False
    """``make_agent``, given no observation model, runs one member per variance of ``NOISE_GRID`` weighted by each
    member's one-step predictive evidence (:func:`banditkit.posteriors.mixture.noise_mixture`: the data pick the
    variance) instead of one filter at ``OBS_NOISE``."""
    head_prior: str | None = None
    """``"unit"``: on the default multi-output model ``make_agent`` leaves the head's prior variance
    (``init_cov_last``) to the agent, which sets it at ``init`` from the first context it sees
    (``BanditAgent(head_prior="unit")``, :mod:`banditkit.agents.priors`) unless ``init_cov_last`` is given;
    ``None``: the backend's own."""
    linear_model: bool = False
    """Its default reward model is linear in the context (``MLP(features=(), out=K)``: LinTS / LinUCB) instead of
    the environment's network."""
    refit: bool | Callable[[Mapping[str, Any]], bool] = False
    """Whether the built posterior declares a ``refit`` hook (a fit to warm-up data: ``make_agent`` then gives it
    ``WARMUP_PER_ARM · K`` round-robin warm-up rounds): ``True`` / ``False``, or a function of the keyword arguments
    it is built with (``subspace_ekf``: only when no basis is given).  Read it with :meth:`refits`."""

    def __post_init__(self):
        if not isinstance(self.name, str) or normalise(self.name) != self.name or not self.name:
            raise ValueError(f"a backend's name is lower case with '_' inside (e.g. 'my_filter'), got {self.name!r}")
        if not callable(self.factory):
            raise TypeError(f"backend {self.name!r}: factory must be callable, got {self.factory!r}")
        for what in ("bandit_defaults", "bo_defaults"):
            defaults = _read_only(getattr(self, what), f"backend {self.name!r}: {what}")
            refused = [k for k in defaults if not accepts_keyword(self.factory, k, unreadable=True)]
            if refused:
                raise ValueError(f"backend {self.name!r}: {what} names {refused}, which its factory does not accept; "
                                 f"fix the name or add the keyword to {getattr(self.factory, '__name__', 'it')}")
            object.__setattr__(self, what, defaults)
        if self.head_prior not in (None, "unit"):
            raise ValueError(f"backend {self.name!r}: head_prior must be None or 'unit', got {self.head_prior!r}")
        if self.noise_cap is not None and not self.noise_cap > 0:
            raise ValueError(f"backend {self.name!r}: noise_cap must be a variance > 0 or None, got {self.noise_cap!r}")
        if self.gaussian_filter and self.learns_own_noise:
            raise ValueError(f"backend {self.name!r}: a backend that learns its own noise is not wrapped by "
                             "adaptive_noise; set gaussian_filter or learns_own_noise, not both")

    def refits(self, hyper: Mapping[str, Any]) -> bool:
        """Whether the posterior built with the keyword arguments ``hyper`` declares ``refit`` (:attr:`refit`)."""
        return bool(self.refit(hyper) if callable(self.refit) else self.refit)


#: the fields of :class:`Backend` that :func:`names` and :func:`table` query
CAPABILITIES = tuple(f.name for f in dataclasses.fields(Backend) if f.name not in ("name", "factory"))


def accepts_keyword(factory: Callable, name: str, *, unreadable: bool = False) -> bool:
    """Whether a backend factory takes the keyword argument ``name`` (read from its own signature; ``**kwargs``
    takes any); ``unreadable``: the answer when the signature cannot be read."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return unreadable
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _origin(factory: Callable) -> tuple:
    return getattr(factory, "__module__", None), getattr(factory, "__qualname__", id(factory))


def register(backend: Backend) -> Backend:
    """Add ``backend`` to the registry (module docstring) and return it.  A second registration of the same name
    with another factory is an error (re-registering the same factory, as a module reload does, replaces it)."""
    if not isinstance(backend, Backend):
        raise TypeError(f"register takes a Backend(name=..., factory=..., ...), got {type(backend).__name__}")
    old = _BACKENDS.get(backend.name)
    if old is not None and _origin(old.factory) != _origin(backend.factory):
        raise ValueError(f"a backend named {backend.name!r} is registered already ({old.factory!r}); pick another name")
    _BACKENDS[backend.name] = backend
    FACTORIES[backend.name] = backend.factory
    return backend


def unregister(name: str) -> Backend:
    """Remove the backend called ``name`` (normalised) and return its registration: for tests, and for a package
    that replaces its own backend.  An unknown name is an error."""
    removed = backend(name)
    del _BACKENDS[removed.name], FACTORIES[removed.name]
    return removed


def find(name: str) -> Backend | None:
    """The registration of ``name`` (normalised), or ``None`` when no backend has that name."""
    return _BACKENDS.get(normalise(name))


def backend(name: str) -> Backend:
    """The registration of ``name`` (normalised); an unknown name lists the registered ones."""
    found = find(name)
    if found is None:
        raise ValueError(f"unknown posterior backend {name!r}; choose one of {sorted(_BACKENDS)}")
    return found


def of(factory: Callable) -> Backend | None:
    """The registration whose factory is ``factory`` (the object itself), or ``None``."""
    return next((b for b in _BACKENDS.values() if b.factory is factory), None)


def _check_capability(field: str) -> None:
    if field not in CAPABILITIES:
        raise ValueError(f"unknown backend capability {field!r}; a Backend declares {list(CAPABILITIES)}")


def names(**capabilities: Any) -> tuple[str, ...]:
    """The registered names, in registration order, whose fields equal ``capabilities``
    (``names(gaussian_filter=True)``); no arguments: every name.  An unknown field is an error."""
    for field in capabilities:
        _check_capability(field)
    return tuple(n for n, b in _BACKENDS.items() if all(getattr(b, f) == v for f, v in capabilities.items()))


def table(field: str, *, declared: bool = False) -> Mapping[str, Any]:
    """A read-only ``{name: value of field}`` over the registered backends; ``declared=True`` keeps only those whose
    value is not the field's default (``table("noise_cap", declared=True)`` -> ``{"lofi": 0.001}``)."""
    _check_capability(field)
    spec = next(f for f in dataclasses.fields(Backend) if f.name == field)
    default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default
    return types.MappingProxyType({n: getattr(b, field) for n, b in _BACKENDS.items()
                                   if not declared or getattr(b, field) != default})
