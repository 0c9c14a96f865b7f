"""Points of a search space in the user's form and in the unit cube ``[0, 1]^D`` the surrogate sees.

Two user forms (:class:`Points`):

- a *box* (``BayesOpt(bounds=...)``): an ndarray ``x (dim,)`` (a batch ``(n, dim)``), ``x = lo + u (hi − lo)``;
- a typed *space* (``BayesOpt(space=...)``): a dict ``{name: value}`` (a batch: a list of dicts, or a DataFrame when
  told), encoded by :meth:`banditkit.bo.space.Space.encode` / ``decode`` (log warp, equal bins, one-hot).

``snap(u)`` maps a point of the cube to the encoding of the valid point it stands for (a continuous space: only
clipped to the cube).  Nothing here holds state beyond the space: the optimiser's data stay in the unit cube.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from banditkit.bo.space import Categorical, Float, Int, Space
from banditkit.validation import check_in_bounds


def is_typed_space(obj: Any) -> bool:
    """Whether a ``bounds`` argument is really a typed space (a Space, a dict, or (name, param) pairs with a
    ``Float`` / ``Int`` / ``Categorical`` second item — ``[("a", "b")]`` stays a malformed box)."""
    if isinstance(obj, (Space, Mapping)):
        return True
    return (isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)) and len(obj) > 0
            and all(isinstance(it, (tuple, list)) and len(it) == 2 and isinstance(it[0], str)
                    and isinstance(it[1], (Float, Int, Categorical)) for it in obj))


class Points:
    """The user's form of the points of ``space`` (``named``: dicts of a typed space; else arrays of a box)."""

    def __init__(self, space: Space, named: bool):
        self.space, self.named = space, bool(named)
        self.discrete = not bool(np.all(space.continuous_mask))
        self.dim = int(space.dim)

    def snap(self, u: np.ndarray) -> np.ndarray:
        """Valid points of a space with discrete parameters (a continuous space: only clipped to the cube)."""
        u = np.clip(np.asarray(u, np.float64), 0.0, 1.0)
        return self.space.snap(u) if self.discrete else u

    def external(self, u: np.ndarray, batch: bool = False) -> Any:
        """The user's form of unit-cube point(s) ``u``: a dict (``batch``: a list of dicts) or an ndarray."""
        u = np.asarray(u, np.float64)
        if self.named:
            return self.space.decode(u) if u.size or not batch else []
        b = self.space.bounds
        return b[:, 0] + u * (b[:, 1] - b[:, 0])

    def internal(self, x: Any) -> np.ndarray:
        """``(n, dim)`` unit-cube rows of point(s) in the user's form (validated: ``ValueError`` says what is
        wrong)."""
        if self.named:
            if isinstance(x, Mapping):
                return self.space.encode(x)[None]
            if isinstance(x, pd.DataFrame):
                x = x.to_dict("records")
            if isinstance(x, Sequence) and not isinstance(x, (str, bytes)):
                return self.space.encode(list(x)).reshape(-1, self.dim)
            raise ValueError(f"a point of this space is a dict {{name: value}} (a batch: a list of dicts) with the "
                             f"keys {list(self.space.names)}; got {type(x).__name__}")
        b = self.space.bounds
        xa = check_in_bounds(x, b, name="x")
        xa = xa[None] if xa.ndim == 1 else xa
        return np.clip((xa - b[:, 0]) / (b[:, 1] - b[:, 0]), 0.0, 1.0)

    def is_single(self, x: Any) -> bool:
        """Whether ``x`` is one point (a dict, or a 1-d array) rather than a batch."""
        return isinstance(x, Mapping) if self.named else np.ndim(x) == 1
