"""A read-only view of everything a :class:`~banditkit.bo.BayesOpt` holds (:meth:`BayesOpt.snapshot`), and what
:meth:`BayesOpt.restore` puts back.

Persistence (:mod:`banditkit.bo.persist`), resumable runs (:mod:`banditkit.bo.loop`), tests and studies read an
optimiser through it, never through its private attributes.  Points are in the unit cube ``[0, 1]^D`` the
surrogate sees (the user's form: :attr:`BayesOpt.history`, :attr:`BayesOpt.pending`); the arrays are copies that
cannot be written to, so a snapshot stays what the optimiser was when it was taken.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import jax
import numpy as np

from banditkit.bo.surrogate import Fit, Surrogate
from banditkit.bo.trust_region import TrustRegion

__all__ = ["Snapshot", "frozen"]


def frozen(a: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A float64 copy of ``a`` reshaped to ``shape`` (``-1`` allowed) that cannot be written to."""
    out = np.array(a, np.float64).reshape(shape)
    out.flags.writeable = False
    return out


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The state of a :class:`~banditkit.bo.BayesOpt` (``D`` = the unit cube's dimension, ``n`` evaluations told,
    ``m`` pending suggestions, ``f`` failed points).

    Attributes:
      settings: what makes two optimisers the same run besides their data and random state (what
        :meth:`BayesOpt.save` records as settings): ``bounds`` (a box) or ``space`` (a typed space's
        configuration), ``surrogate``, ``acquisition``, ``direction``, ``seed``, ``n_initial``,
        ``surrogate_kwargs``, ``custom_model`` and ``config`` (every other option); a read-only mapping.
      u: ``(n, D)`` the evaluated points.  y: ``(n,)`` their values as told.  source: ``n`` labels (``"initial"``,
        the acquisition's name, ``"user"``).
      pending: ``(m, D)`` suggestions not yet told.  pending_source: their ``m`` labels.
      failed: ``(f, D)`` points whose evaluation failed (:meth:`BayesOpt.fail`).
      key: the optimiser's PRNG key (the next ``ask`` splits it).
      sobol_index: how many points of the initial Sobol sequence were used.
      trust_region: the trust region's state (kept, unchanged, also when the option is off).
      sign: ``+1`` to maximise, ``−1`` to minimise: the surrogate models ``s = sign · y``.
      surrogate: the :class:`~banditkit.bo.surrogate.Surrogate` in use (with ``surrogate="auto"``: its phase's).
      acquisition: the acquisition in use (``"thompson"``, ``"ei"``, ``"pi"``, ``"ucb"``).
      fit: what the surrogate learned (:class:`~banditkit.bo.surrogate.Fit`, immutable).

    :meth:`BayesOpt.snapshot` fills every field; for :meth:`BayesOpt.restore` the last three may be ``None``
    ("whatever the optimiser uses for ``n`` evaluations", see there).
    """

    settings: Mapping[str, Any]
    u: np.ndarray
    y: np.ndarray
    source: tuple[str, ...]
    pending: np.ndarray
    pending_source: tuple[str, ...]
    failed: np.ndarray
    key: jax.Array
    sobol_index: int
    trust_region: TrustRegion
    sign: float
    surrogate: Surrogate | None = None
    acquisition: str | None = None
    fit: Fit | None = None

    def __post_init__(self) -> None:
        d = self.u.shape[1]
        for name, rows in (("y", self.u.shape[0]), ("source", self.u.shape[0]),
                           ("pending_source", self.pending.shape[0])):
            if len(getattr(self, name)) != rows:
                raise ValueError(f"a Snapshot's {name} needs {rows} entries (one per row of "
                                 f"{'u' if name != 'pending_source' else 'pending'}), got {len(getattr(self, name))}")
        for name in ("pending", "failed"):
            if getattr(self, name).shape[1:] != (d,):
                raise ValueError(f"a Snapshot's {name} must be ({'m' if name == 'pending' else 'f'}, {d}) like u, "
                                 f"got {getattr(self, name).shape}")

    @classmethod
    def of(cls, dim: int, *, settings: Mapping[str, Any], u: Any, y: Any, source: Any, pending: Any,
           pending_source: Any, failed: Any, **rest: Any) -> Snapshot:
        """A snapshot of a ``dim``-dimensional cube whose arrays are read-only float64 copies (``u``, ``pending``,
        ``failed`` as ``(-1, dim)``, ``y`` as ``(-1,)``; nested lists are fine) and whose settings are a read-only
        deep copy; ``rest``: the other fields, as they are."""
        d = int(dim)
        return cls(settings=MappingProxyType(copy.deepcopy(dict(settings))), u=frozen(u, (-1, d)),
                   y=frozen(y, (-1,)), source=tuple(source), pending=frozen(pending, (-1, d)),
                   pending_source=tuple(pending_source), failed=frozen(failed, (-1, d)), **rest)

    @property
    def s(self) -> np.ndarray:
        """``(n,)`` the maximised values ``sign · y`` the surrogate is fitted to."""
        return self.sign * self.y

    @property
    def phase(self) -> tuple[str, str] | None:
        """``(surrogate name, acquisition)`` in use — with ``surrogate="auto"``, which phase it is in (``None``
        when :attr:`surrogate` is not given)."""
        return None if self.surrogate is None else (self.surrogate.name, self.acquisition)

    def replace(self, **changes: Any) -> Snapshot:
        """A copy with ``changes`` (field names as keywords)."""
        return dataclasses.replace(self, **changes)
