"""Typed search spaces for :class:`~banditkit.bo.BayesOpt`: named ``Float``, ``Int`` and ``Categorical`` parameters,
and the one encoding that maps them into the surrogate's unit cube and back.

.. code-block:: python

   from banditkit.bo import space
   sp = space.Space({"lr": space.Float(1e-4, 1.0, log=True), "depth": space.Int(2, 12),
                     "loss": space.Categorical(["log_loss", "exponential"])})
   u = sp.encode({"lr": 0.01, "depth": 7, "loss": "exponential"})   # (sp.dim,) = (1 + 1 + 2,) floats in [0, 1]
   sp.decode(u)                       # {"lr": 0.01, "depth": 7, "loss": "exponential"}: Python float, int, str
   sp.snap(u_anywhere)                # encode(decode(u)): the encoding of the valid point u stands for
   sp.sample(np.random.default_rng(0), 8)   # (8, sp.dim) encodings of valid points, uniform per parameter
   sp.neighbors(u)                    # (m, sp.dim): u with one discrete parameter moved to another value

The encoding (``u ∈ [0, 1]^D``, one block of coordinates per parameter, in the space's order):

- ``Float(lo, hi)``: one coordinate ``u = (x − lo) / (hi − lo)``.  With ``log=True`` the same on ``log x`` (a
  log-uniform prior becomes uniform in ``u``, and a length-scale in ``u`` means a ratio in ``x``: what a learning
  rate or a regularisation weight needs).
- ``Float(lo, hi, step=s)`` and ``Int(lo, hi, step=s)``: one coordinate cut into ``n`` equal bins, one per value
  ``lo + k s`` (``k = 0 .. n−1``); value ``k`` is encoded at its bin's centre ``(k + ½) / n``, and any ``u`` in
  the bin decodes to it (``snap``).  Equal bins make a uniform point of the cube (a Sobol design, a random
  sample) uniform over the values, ends included, and keep the order of the values, which is information an
  ordinal parameter has.  ``Int(lo, hi, log=True)`` warps the bins' edges ``[lo − ½, hi + ½]`` by ``log``, so
  small values get wider bins (as in Optuna's own transform).
- ``Categorical(choices)``: one-hot, ``C`` coordinates for ``C`` choices; decoding takes the largest coordinate
  (the first on ties).  Chosen over an ordinal code or a learned embedding because categories are unordered:
  one-hot puts every pair of choices at the same distance (√2), so neither the kernel nor the network sees an
  order that is not there, and it needs nothing learned from the few evaluations BO has.  Its cost — one
  coordinate per choice — is small for the choice lists of tuning (a handful of values).  The acquisition search
  only ever scores vertices of the block (snapped points and :meth:`Space.neighbors` moves, which reach every
  choice), never the relaxed interior.

``snap(u) = encode(decode(u))`` maps any point of the cube to the encoding of the valid point it stands for;
it never leaves ``[0, 1]`` and is idempotent.  ``decode`` returns Python ``float`` / ``int`` / the choice object
itself, so values can go straight to a model's constructor.

A plain box ``[(lo, hi), ...]`` is the short form of a space of ``Float``s named ``x0 .. x{d-1}``
(:func:`as_space`); its encoding is the affine map the box optimiser has always used.

Spaces are written to and read from plain JSON-able configurations (:meth:`Space.to_config`,
:meth:`Space.from_config`), e.g. a CLI space file::

    {"lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": true},
     "depth": {"type": "int", "low": 2, "high": 12},
     "loss": {"type": "categorical", "choices": ["log_loss", "exponential"]}}
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

__all__ = ["Float", "Int", "Categorical", "Param", "Space", "as_space"]

_GRID_TOL = 1e-8  # a value is on a step grid when (x − lo) / step is within this of an integer (Optuna's tolerance)


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _finite_number(v: Any, what: str) -> float:
    if not _is_number(v) or not math.isfinite(float(v)):
        raise ValueError(f"{what} must be a finite number, got {v!r}")
    return float(v)


def _integral(v: Any, what: str) -> int:
    if _is_number(v) and math.isfinite(float(v)) and float(v) == int(v):
        return int(v)
    raise ValueError(f"{what} must be an integer, got {v!r}")


def _clean(x: np.ndarray, lo: float, hi: float, log: bool) -> np.ndarray:
    """Drop the float noise of the round trip through the encoding (``0.30000000000000004`` → ``0.3``): round to
    a grid 10⁻¹² of the range wide (log scale: to 12 significant digits).  It moves a value by at most that much,
    far below anything an optimiser resolves, and the grid is coarse enough that decoding an encoded value gives
    the value back (so :meth:`Space.snap` is idempotent)."""
    x = np.asarray(x, np.float64)
    if log:
        digits = min(15, 12 + max(0, -int(math.floor(math.log10(math.log(hi / lo))))))
        return np.array([float(f"{v:.{digits}g}") for v in x.ravel()]).reshape(x.shape)
    return np.round(x, 12 - int(math.floor(math.log10(hi - lo))))


def _round_to_step(x: np.ndarray, step: float) -> np.ndarray:
    """``lo + k·step`` without the float noise of the product (``0.30000000000000004`` → ``0.3``): rounded to 12
    significant digits of the step."""
    nd = 12 - int(math.floor(math.log10(step)))
    return np.round(x, nd)


@dataclass(frozen=True)
class Float:
    """A real parameter in ``[lo, hi]``; ``log=True``: log-uniform scale (needs ``lo > 0``); ``step=s``: only the
    values ``lo, lo + s, ..., hi`` (``hi − lo`` a multiple of ``s``; not with ``log``).  ``lo == hi`` is a fixed
    value."""

    lo: float
    hi: float
    log: bool = False
    step: float | None = None

    def __post_init__(self):
        lo = _finite_number(self.lo, "Float: lo")
        hi = _finite_number(self.hi, "Float: hi")
        if lo > hi:
            raise ValueError(f"Float({self.lo!r}, {self.hi!r}): empty range (lo > hi); give lo <= hi")
        if not isinstance(self.log, (bool, np.bool_)):
            raise ValueError(f"Float: log must be True or False, got {self.log!r}")
        if self.log and lo <= 0:
            raise ValueError(f"Float({self.lo!r}, {self.hi!r}, log=True): a log scale needs lo > 0; give a positive "
                             "lower bound or drop log=True")
        step = self.step
        if step is not None:
            step = _finite_number(step, "Float: step")
            if step <= 0:
                raise ValueError(f"Float: step must be > 0, got {self.step!r}")
            if self.log:
                raise ValueError(f"Float({self.lo!r}, {self.hi!r}, log=True, step={self.step!r}): log and step "
                                 "cannot be combined; use one of them (or Int(..., log=True) for integers)")
            k = (hi - lo) / step
            if abs(k - round(k)) > _GRID_TOL * max(1.0, abs(k)):
                top = lo + math.floor(k + _GRID_TOL) * step
                raise ValueError(f"Float({self.lo!r}, {self.hi!r}, step={self.step!r}): hi - lo is not a multiple of "
                                 f"step; use hi={float(_round_to_step(np.asarray(top), step))!r} or another step")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "log", bool(self.log))
        object.__setattr__(self, "step", step)

    # the encoding ------------------------------------------------------------------------------------------------
    size = 1

    @property
    def continuous(self) -> bool:
        """Whether the acquisition search may move it continuously (no step)."""
        return self.step is None

    @property
    def n_values(self) -> int | None:
        """Number of values with a step, else ``None`` (a continuum)."""
        return None if self.step is None else int(round((self.hi - self.lo) / self.step)) + 1

    def _index_to_value(self, k: np.ndarray) -> np.ndarray:
        return np.clip(_round_to_step(self.lo + np.asarray(k, np.float64) * self.step, self.step), self.lo, self.hi)

    def _value_to_index(self, x: np.ndarray) -> np.ndarray:
        return np.clip(np.round((np.asarray(x, np.float64) - self.lo) / self.step), 0, self.n_values - 1)

    def _decode(self, cols: np.ndarray) -> np.ndarray:
        """``(n, 1)`` coordinates → ``(n,)`` float64 values."""
        u = np.clip(cols[:, 0], 0.0, 1.0)
        if self.step is not None:
            n = self.n_values
            return self._index_to_value(np.minimum(np.floor(u * n), n - 1))
        if self.lo == self.hi:
            return np.full(u.shape, self.lo)
        if self.log:
            a, b = math.log(self.lo), math.log(self.hi)
            return np.clip(_clean(np.exp(a + u * (b - a)), self.lo, self.hi, True), self.lo, self.hi)
        return np.clip(_clean(self.lo + u * (self.hi - self.lo), self.lo, self.hi, False), self.lo, self.hi)

    def _encode(self, x: np.ndarray) -> np.ndarray:
        """``(n,)`` valid values → ``(n, 1)`` coordinates."""
        x = np.asarray(x, np.float64)
        if self.step is not None:
            return ((self._value_to_index(x) + 0.5) / self.n_values)[:, None]
        if self.lo == self.hi:
            return np.full((x.shape[0], 1), 0.5)
        if self.log:
            a, b = math.log(self.lo), math.log(self.hi)
            u = (np.log(x) - a) / (b - a)
        else:
            u = (x - self.lo) / (self.hi - self.lo)
        return np.clip(u, 0.0, 1.0)[:, None]

    def _python(self, v) -> float:
        return float(v)

    def validate(self, value: Any, name: str = "value") -> float:
        """``value`` as a Python float if it is a valid value of this parameter, else ``ValueError``."""
        if not _is_number(value) or not math.isfinite(float(value)):
            raise ValueError(f"{name}: expected a finite number in [{self.lo!r}, {self.hi!r}], got {value!r}")
        x = float(value)
        tol = 1e-9 * max(abs(self.lo), abs(self.hi), 1e-300)
        if not self.lo - tol <= x <= self.hi + tol:
            raise ValueError(f"{name}: {value!r} is outside its range [{self.lo!r}, {self.hi!r}]")
        x = min(max(x, self.lo), self.hi)
        if self.step is not None:
            k = (x - self.lo) / self.step
            if abs(k - round(k)) > _GRID_TOL * max(1.0, abs(k)):
                raise ValueError(f"{name}: {value!r} is not on the grid {self.lo!r} + k * {self.step!r}; give a "
                                 "value of the grid")
            x = float(self._index_to_value(np.asarray(round(k))))
        return x

    def to_config(self) -> dict:
        c: dict[str, Any] = {"type": "float", "low": self.lo, "high": self.hi}
        if self.log:
            c["log"] = True
        if self.step is not None:
            c["step"] = self.step
        return c


@dataclass(frozen=True)
class Int:
    """An integer parameter in ``[lo, hi]`` (both included) on the grid ``lo + k·step``; ``log=True``: log scale
    (needs ``lo >= 1`` and ``step == 1``)."""

    lo: int
    hi: int
    log: bool = False
    step: int = 1

    def __post_init__(self):
        lo = _integral(self.lo, "Int: lo")
        hi = _integral(self.hi, "Int: hi")
        if lo > hi:
            raise ValueError(f"Int({self.lo!r}, {self.hi!r}): empty range (lo > hi); give lo <= hi")
        if not isinstance(self.log, (bool, np.bool_)):
            raise ValueError(f"Int: log must be True or False, got {self.log!r}")
        step = _integral(self.step, "Int: step")
        if step < 1:
            raise ValueError(f"Int: step must be a positive integer, got {self.step!r}")
        if self.log and lo <= 0:
            raise ValueError(f"Int({self.lo!r}, {self.hi!r}, log=True): a log scale needs lo > 0 (lo >= 1); give a "
                             "positive lower bound or drop log=True")
        if self.log and step != 1:
            raise ValueError(f"Int({self.lo!r}, {self.hi!r}, log=True, step={self.step!r}): log and step cannot be "
                             "combined; use step=1 with log=True, or drop log=True")
        if (hi - lo) % step:
            raise ValueError(f"Int({self.lo!r}, {self.hi!r}, step={step}): hi - lo is not a multiple of step; use "
                             f"hi={lo + (hi - lo) // step * step} or another step")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "log", bool(self.log))
        object.__setattr__(self, "step", step)

    size = 1
    continuous = False

    @property
    def n_values(self) -> int:
        return (self.hi - self.lo) // self.step + 1

    def _index_to_value(self, k: np.ndarray) -> np.ndarray:
        return self.lo + np.asarray(k, np.int64) * self.step

    def _value_to_index(self, x: np.ndarray) -> np.ndarray:
        return np.clip(np.round((np.asarray(x, np.float64) - self.lo) / self.step), 0, self.n_values - 1).astype(
            np.int64)

    def _log_edges(self) -> tuple[float, float]:
        return math.log(self.lo - 0.5), math.log(self.hi + 0.5)

    def _decode(self, cols: np.ndarray) -> np.ndarray:
        u = np.clip(cols[:, 0], 0.0, 1.0)
        if self.log:
            a, b = self._log_edges()
            return np.clip(np.round(np.exp(a + u * (b - a))), self.lo, self.hi).astype(np.int64)
        n = self.n_values
        return self._index_to_value(np.minimum(np.floor(u * n), n - 1).astype(np.int64))

    def _encode(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if self.log:
            a, b = self._log_edges()
            return np.clip((np.log(x.astype(np.float64)) - a) / (b - a), 0.0, 1.0)[:, None]
        return ((self._value_to_index(x) + 0.5) / self.n_values)[:, None]

    def _python(self, v) -> int:
        return int(v)

    def validate(self, value: Any, name: str = "value") -> int:
        """``value`` as a Python int if it is a valid value of this parameter, else ``ValueError``."""
        if not (_is_number(value) and math.isfinite(float(value)) and float(value) == int(value)):
            raise ValueError(f"{name}: expected an integer in [{self.lo}, {self.hi}], got {value!r}")
        x = int(value)
        if not self.lo <= x <= self.hi:
            raise ValueError(f"{name}: {value!r} is outside its range [{self.lo}, {self.hi}]")
        if (x - self.lo) % self.step:
            raise ValueError(f"{name}: {value!r} is not on the grid {self.lo} + k * {self.step}; give a value of the "
                             "grid")
        return x

    def to_config(self) -> dict:
        c: dict[str, Any] = {"type": "int", "low": self.lo, "high": self.hi}
        if self.log:
            c["log"] = True
        if self.step != 1:
            c["step"] = self.step
        return c


def _kind(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if _is_number(v):
        return "number"
    if isinstance(v, str):
        return "str"
    return type(v).__name__


def _same_choice(a: Any, b: Any) -> bool:
    """Equal as choices: the same kind of value (``1`` and ``True`` differ, ``1`` and ``1.0`` do not) and equal."""
    if a is b:
        return True
    if _kind(a) != _kind(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # an object whose == does not give a truth value (an array)
        return False


@dataclass(frozen=True)
class Categorical:
    """An unordered choice among ``choices`` (``None``, bools, numbers or strings — values that a configuration
    file and a checkpoint can store), encoded one-hot."""

    choices: tuple

    def __post_init__(self):
        if isinstance(self.choices, (str, bytes)) or not isinstance(self.choices, Iterable):
            raise ValueError(f"Categorical: choices must be a list of values, got {self.choices!r}")
        choices = tuple(self.choices)
        if not choices:
            raise ValueError("Categorical: choices is empty; give at least one value")
        for c in choices:
            if not (c is None or isinstance(c, (bool, str, np.bool_)) or _is_number(c)):
                raise ValueError(f"Categorical: choice {c!r} ({type(c).__name__}) is not None, a bool, a number or "
                                 "a string; map richer objects to names and look them up in the objective")
            if _is_number(c) and isinstance(c, float) and math.isnan(c):
                raise ValueError("Categorical: NaN is not a valid choice")
        for i, c in enumerate(choices):
            for d in choices[:i]:
                if _same_choice(c, d):
                    raise ValueError(f"Categorical: choice {c!r} appears twice in {list(choices)}; give each choice "
                                     "once")
        object.__setattr__(self, "choices", tuple(c.item() if isinstance(c, np.generic) else c for c in choices))

    continuous = False

    @property
    def size(self) -> int:
        return len(self.choices)

    @property
    def n_values(self) -> int:
        return len(self.choices)

    def index(self, value: Any, name: str = "value") -> int:
        """Position of ``value`` among the choices (same type, or numbers that compare equal); ``ValueError`` if
        it is not one of them."""
        for i, c in enumerate(self.choices):
            if _same_choice(value, c):
                return i
        raise ValueError(f"{name}: {value!r} is not one of its choices {list(self.choices)}")

    def _index_to_value(self, k):
        return np.asarray(k, np.int64)

    def _value_to_index(self, k):
        return np.asarray(k, np.int64)

    def _decode(self, cols: np.ndarray) -> np.ndarray:
        """``(n, C)`` coordinates → ``(n,)`` choice indices (argmax; the first on ties)."""
        return np.argmax(cols, axis=1).astype(np.int64)

    def _encode(self, k: np.ndarray) -> np.ndarray:
        return np.eye(self.size)[np.asarray(k, np.int64)]

    def _python(self, k) -> Any:
        return self.choices[int(k)]

    def validate(self, value: Any, name: str = "value") -> Any:
        return self.choices[self.index(value, name)]

    def to_config(self) -> dict:
        return {"type": "categorical", "choices": list(self.choices)}


Param = Union[Float, Int, Categorical]  # noqa: UP007 (a runtime alias; X | Y needs 3.10 classes)
_TYPES = {"float": Float, "int": Int, "categorical": Categorical}


def param_from_config(cfg: Mapping, name: str = "parameter") -> Param:
    """One parameter from its configuration: ``{"type": "float"|"int"|"categorical", ...}`` with ``low``/``high``
    (or ``lo``/``hi``), ``log``, ``step``, or ``choices``."""
    if not isinstance(cfg, Mapping):
        raise ValueError(f"{name}: expected a mapping like {{'type': 'float', 'low': 0, 'high': 1}}, got {cfg!r}")
    cfg = dict(cfg)
    kind = str(cfg.pop("type", "")).strip().lower()
    if kind not in _TYPES:
        raise ValueError(f"{name}: 'type' must be one of {list(_TYPES)}, got {kind or None!r}")
    try:
        if kind == "categorical":
            allowed = {"choices"}
            if set(cfg) - allowed or "choices" not in cfg:
                raise ValueError(f"a categorical takes exactly the key 'choices', got {sorted(cfg)}")
            return Categorical(cfg["choices"])
        for short, long in (("lo", "low"), ("hi", "high")):
            if short in cfg:
                if long in cfg:
                    raise ValueError(f"give {long!r} or {short!r}, not both")
                cfg[long] = cfg.pop(short)
        allowed = {"low", "high", "log", "step"}
        unknown = sorted(set(cfg) - allowed)
        if unknown:
            raise ValueError(f"unknown keys {unknown}; a {kind} takes {sorted(allowed)}")
        missing = [k for k in ("low", "high") if k not in cfg]
        if missing:
            raise ValueError(f"missing {missing}; a {kind} needs 'low' and 'high'")
        kw = {k: cfg[k] for k in ("log", "step") if k in cfg}
        return _TYPES[kind](cfg["low"], cfg["high"], **kw)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


class Space:
    """A named, ordered search space (see the module docstring).

    Args:
      params: a mapping ``{name: Float | Int | Categorical}`` (its order is kept) or a sequence of
        ``(name, param)`` pairs.

    Attributes: ``names`` (tuple), ``params`` (tuple), ``dim`` (coordinates of the encoding), ``slices`` (each
    parameter's coordinates), ``continuous_mask`` (``(dim,)`` bool: coordinates of step-less ``Float`` parameters,
    which the acquisition search moves by gradient steps; the others change only by :meth:`neighbors` moves).
    """

    def __init__(self, params: Mapping[str, Param] | Sequence[tuple[str, Param]]):
        if isinstance(params, Space):
            items = list(params.items())
        elif isinstance(params, Mapping):
            items = list(params.items())
        elif isinstance(params, Iterable) and not isinstance(params, (str, bytes)):
            items = []
            for item in params:
                if not (isinstance(item, (tuple, list)) and len(item) == 2):
                    raise ValueError(f"Space: expected (name, parameter) pairs, got {item!r}")
                items.append(tuple(item))
        else:
            raise ValueError(f"Space: expected a dict {{name: parameter}} or (name, parameter) pairs, got {params!r}")
        if not items:
            raise ValueError("Space: no parameters; give at least one")
        seen: set[str] = set()
        for name, p in items:
            if not isinstance(name, str) or not name:
                raise ValueError(f"Space: parameter names must be non-empty strings, got {name!r}")
            if name in seen:
                raise ValueError(f"Space: duplicate parameter name {name!r}; give each parameter a distinct name")
            seen.add(name)
            if not isinstance(p, (Float, Int, Categorical)):
                raise ValueError(f"Space: parameter {name!r} must be Float(...), Int(...) or Categorical(...), got "
                                 f"{p!r}")
        self.names: tuple[str, ...] = tuple(n for n, _ in items)
        self.params: tuple[Param, ...] = tuple(p for _, p in items)
        starts = np.cumsum([0] + [p.size for p in self.params])
        self.slices: tuple[slice, ...] = tuple(slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:],
                                                                                        strict=True))
        self.dim = int(starts[-1])
        mask = np.zeros(self.dim, bool)
        for p, s in zip(self.params, self.slices, strict=True):
            mask[s] = p.continuous
        self.continuous_mask = mask
        self.continuous_mask.setflags(write=False)

    # construction ---------------------------------------------------------------------------------------------------
    @classmethod
    def from_bounds(cls, bounds) -> Space:
        """The box ``[(lo, hi), ...]`` as ``Float``s named ``x0 .. x{d-1}``."""
        from banditkit.validation import check_bounds

        b = check_bounds(bounds)
        return cls([(f"x{j}", Float(float(lo), float(hi))) for j, (lo, hi) in enumerate(b)])

    @classmethod
    def from_config(cls, cfg: Mapping | Sequence) -> Space:
        """A space from a configuration: ``{name: {"type": ..., ...}}`` or ``[{"name": ..., "type": ..., ...}]``
        (what :meth:`to_config` writes; a CLI ``--space`` file holds one)."""
        if isinstance(cfg, Mapping):
            items = [(name, param_from_config(c, repr(name))) for name, c in cfg.items()]
        elif isinstance(cfg, Sequence) and not isinstance(cfg, (str, bytes)):
            items = []
            for i, c in enumerate(cfg):
                if not isinstance(c, Mapping) or "name" not in c:
                    raise ValueError(f"space entry {i}: expected a mapping with a 'name', got {c!r}")
                c = dict(c)
                name = c.pop("name")
                items.append((name, param_from_config(c, repr(name))))
        else:
            raise ValueError(f"a space configuration is a mapping {{name: {{'type': ...}}}} or a list of mappings "
                             f"with 'name'; got {cfg!r}")
        return cls(items)

    def to_config(self) -> dict:
        """``{name: {"type": ..., ...}}`` (plain JSON values, in order)."""
        return {n: p.to_config() for n, p in self.items()}

    # mapping-like ---------------------------------------------------------------------------------------------------
    def items(self) -> Iterator[tuple[str, Param]]:
        return iter(zip(self.names, self.params, strict=True))

    def __len__(self) -> int:
        return len(self.params)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __getitem__(self, name: str) -> Param:
        try:
            return self.params[self.names.index(name)]
        except ValueError:
            raise KeyError(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and self.names == other.names and self.params == other.params

    def __hash__(self) -> int:
        return hash((self.names, self.params))

    def __repr__(self) -> str:
        return "Space({" + ", ".join(f"{n!r}: {p!r}" for n, p in self.items()) + "})"

    @property
    def is_box(self) -> bool:
        """Whether every parameter is a plain ``Float`` (no log, no step): the encoding is then the affine map of
        :attr:`bounds`."""
        return all(isinstance(p, Float) and not p.log and p.step is None for p in self.params)

    @property
    def bounds(self) -> np.ndarray:
        """``(len, 2)`` ``(lo, hi)`` of a box space (:attr:`is_box`)."""
        if not self.is_box:
            raise ValueError("bounds: this space has integer, log-scale, stepped or categorical parameters; only a "
                             "space of plain Floats is a box")
        return np.array([[p.lo, p.hi] for p in self.params], np.float64)

    # the encoding ---------------------------------------------------------------------------------------------------
    def validate(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` checked and typed (Python float / int / the choice), in the space's order.

        Raises ``ValueError`` for a key that is not a parameter, a missing parameter, or an invalid value."""
        if not isinstance(values, Mapping):
            raise ValueError(f"expected a dict {{name: value}} with the keys {list(self.names)}, got "
                             f"{type(values).__name__} {values!r:.80}")
        unknown = [k for k in values if k not in self.names]
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; this space has {list(self.names)}")
        missing = [n for n in self.names if n not in values]
        if missing:
            raise ValueError(f"missing parameter(s) {missing}; give a value for every one of {list(self.names)}")
        return {n: p.validate(values[n], repr(n)) for n, p in self.items()}

    def _values(self, u: np.ndarray) -> list[np.ndarray]:
        """Per parameter, the ``(n,)`` decoded values (choice indices for a categorical) of ``u (n, dim)``."""
        return [p._decode(u[:, s]) for p, s in zip(self.params, self.slices, strict=True)]

    def _from_values(self, vals: Sequence[np.ndarray]) -> np.ndarray:
        n = len(vals[0]) if vals else 0
        out = np.empty((n, self.dim))
        for p, s, v in zip(self.params, self.slices, vals, strict=True):
            out[:, s] = p._encode(np.asarray(v))
        return out

    def _as_points(self, u) -> tuple[np.ndarray, bool]:
        a = np.asarray(u, np.float64)
        single = a.ndim == 1
        a = a[None] if single else a
        if a.ndim != 2 or a.shape[1] != self.dim:
            raise ValueError(f"expected encoded point(s) of shape ({self.dim},) or (n, {self.dim}), got shape "
                             f"{np.shape(u)}")
        if not np.all(np.isfinite(a)):
            raise ValueError("encoded point(s) must be finite")
        return a, single

    def decode(self, u) -> dict[str, Any] | list[dict[str, Any]]:
        """The typed values ``{name: value}`` that ``u (dim,)`` stands for (a list of dicts for ``u (n, dim)``);
        coordinates outside ``[0, 1]`` are clipped."""
        a, single = self._as_points(u)
        vals = self._values(a)
        out = [{n: p._python(v[i]) for n, p, v in zip(self.names, self.params, vals, strict=True)}
               for i in range(a.shape[0])]
        return out[0] if single else out

    def encode(self, values: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> np.ndarray:
        """``(dim,)`` encoding of one dict of values (``(n, dim)`` for a list of dicts), after :meth:`validate`."""
        single = isinstance(values, Mapping)
        rows = [values] if single else list(values)
        typed = [self.validate(r) for r in rows]
        vals = []
        for n, p in self.items():
            col = [t[n] for t in typed]
            vals.append(np.asarray([p.index(c) for c in col], np.int64) if isinstance(p, Categorical)
                        else np.asarray(col, np.int64 if isinstance(p, Int) else np.float64))
        if not rows:
            return np.zeros((0, self.dim))
        out = self._from_values(vals)
        return out[0] if single else out

    def snap(self, u) -> np.ndarray:
        """``encode(decode(u))`` for ``u (dim,)`` or ``(n, dim)``: the encoding of the valid point ``u`` stands for
        (in ``[0, 1]``; idempotent)."""
        a, single = self._as_points(u)
        out = self._from_values(self._values(a))
        return out[0] if single else out

    def sample(self, rng: np.random.Generator | int | None, n: int) -> np.ndarray:
        """``(n, dim)`` encodings of random valid points: uniform on each parameter's scale (log-uniform with
        ``log``), uniform over the values of a stepped / integer / categorical parameter."""
        rng = np.random.default_rng(rng)
        return self.snap(rng.random((int(n), self.dim)))

    def index_of(self, u) -> list[np.ndarray]:
        """Per parameter, the ``(n,)`` value index of ``u (n, dim)`` for discrete parameters (``None`` for
        continuous ones)."""
        a, _ = self._as_points(u)
        out: list[Any] = []
        for p, s in zip(self.params, self.slices, strict=True):
            out.append(None if p.continuous else p._value_to_index(p._decode(a[:, s])))
        return out

    def neighbors(self, u, max_per_param: int = 16, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Discrete moves from ``u (dim,)``: ``(m, dim)`` encodings equal to ``snap(u)`` except for one discrete
        parameter, which takes another of its values.

        A categorical (and any discrete parameter with at most ``max_per_param + 1`` values) moves to every other
        value, so every choice is one move away.  A longer ordinal grid moves to the two adjacent values and to
        ``max_per_param − 2`` others — drawn uniformly without replacement by ``rng`` if given, else evenly spaced
        over the grid — so every value can be reached.  Returns ``(0, dim)`` when no parameter is discrete.
        """
        a, single = self._as_points(u)
        if not single:
            raise ValueError(f"neighbors takes one encoded point (dim,), got shape {np.shape(u)}")
        if max_per_param < 2:
            raise ValueError(f"max_per_param must be >= 2, got {max_per_param!r}")
        gen = None if rng is None else np.random.default_rng(rng)
        vals = self._values(a)
        base = self._from_values(vals)[0]
        rows = []
        for j, (p, s) in enumerate(zip(self.params, self.slices, strict=True)):
            if p.continuous:
                continue
            n = p.n_values
            k = int(p._value_to_index(vals[j])[0])
            if n <= max_per_param + 1:
                targets = [t for t in range(n) if t != k]
            else:
                near = [t for t in (k - 1, k + 1) if 0 <= t < n]
                rest = np.setdiff1d(np.arange(n), [k, *near])
                m = max_per_param - len(near)
                if gen is not None:
                    far = gen.choice(rest, size=min(m, rest.size), replace=False)
                else:
                    far = rest[np.unique(np.round(np.linspace(0, rest.size - 1, m)).astype(np.int64))]
                targets = near + [int(t) for t in np.sort(far)]
            for t in targets:
                row = base.copy()
                row[s] = p._encode(p._index_to_value(np.asarray([t])))[0]
                rows.append(row)
        return np.asarray(rows, np.float64).reshape(-1, self.dim)


def as_space(obj: Any) -> Space:
    """A :class:`Space` from a ``Space``, a dict ``{name: param}`` (or ``{name: config}``), a list of
    ``(name, param)`` pairs, or a plain box ``[(lo, hi), ...]`` (Floats named ``x0 .. x{d-1}``)."""
    if isinstance(obj, Space):
        return obj
    if isinstance(obj, Mapping):
        if obj and all(isinstance(v, Mapping) for v in obj.values()):
            return Space.from_config(obj)
        return Space(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)) and obj and all(
            isinstance(it, (tuple, list)) and len(it) == 2 and isinstance(it[0], str) for it in obj):
        return Space(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)) and obj and all(
            isinstance(it, Mapping) for it in obj):
        return Space.from_config(obj)
    return Space.from_bounds(obj)
