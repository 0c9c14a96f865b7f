"""Small input checks for the public entry points (agents, environments, ``BayesOpt``, CLI, datasets).

Each helper raises a ``ValueError`` or ``TypeError`` whose message says what was wrong, what was expected and,
where there is one, what to do about it; on success it returns the (converted) value so it can be used inline::

    reward = check_finite("reward", reward, hint="drop or impute the row before observe()")
    bounds = check_bounds(bounds)                       # np.ndarray (dim, 2), low < high
    x = check_in_bounds(x, bounds)                      # np.ndarray (dim,) inside the box

These run in the Python shell layer, on concrete values.  Inside ``jax.jit`` the values are tracers and cannot be
inspected; :func:`check_finite` then passes the value through unchecked (the jitted core stays branch-free; use
:mod:`banditkit.debug` to locate non-finite values in compiled runs), while shape checks still work because shapes
are static.  No JAX import is needed by callers; the helpers accept numpy arrays, JAX arrays, Python numbers and
(for :func:`check_finite`) pytrees of them.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "check_finite",
    "check_shape",
    "check_action",
    "check_bounds",
    "check_in_bounds",
    "check_choice",
    "check_dir",
]


def _is_tracer(value: Any) -> bool:
    try:
        import jax

        return isinstance(value, jax.core.Tracer)
    except Exception:  # pragma: no cover - jax is a hard dependency, but validation must never crash on import
        return False


def _leaves(value: Any) -> list[tuple[str, Any]]:
    """``[(path, leaf), ...]`` of a pytree (a plain array/number gives one leaf with path ``""``)."""
    try:
        import jax

        flat = jax.tree_util.tree_flatten_with_path(value)[0]
        return [(jax.tree_util.keystr(p), leaf) for p, leaf in flat]
    except Exception:  # pragma: no cover
        return [("", value)]


def _short(a: np.ndarray) -> str:
    if a.ndim == 0:
        return repr(a.item())
    return np.array2string(a.ravel()[:6], threshold=6, precision=4) + ("..." if a.size > 6 else "")


def check_finite(name: str, value: Any, *, hint: str | None = None) -> Any:
    """Raise ``ValueError`` if ``value`` (a number, array or pytree of arrays) holds a NaN or an infinity.

    Args:
      name: what the value is called in the message (e.g. ``"reward"``).
      value: the value to check; returned unchanged.
      hint: what the user should do, appended to the message (default: drop or impute the offending row).

    Raises:
      TypeError: a leaf is not numeric (e.g. a string or ``None``).
      ValueError: a leaf is not finite — the message gives the first offending index and value.
    """
    hint = hint or "drop or impute it before passing it in"
    for path, leaf in _leaves(value):
        if _is_tracer(leaf):
            continue
        label = f"{name}{path}"
        try:
            arr = np.asarray(leaf)
        except Exception as e:  # pragma: no cover - exotic objects
            raise TypeError(f"{label} must be numeric, got {type(leaf).__name__}") from e
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise TypeError(f"{label} must be numeric, got {type(leaf).__name__} {leaf!r:.60}")
        if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
            continue
        bad = ~np.isfinite(arr)
        if bad.any():
            if arr.ndim == 0:
                raise ValueError(f"{label} must be finite, got {arr.item()}; {hint}")
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{label} must be finite, got {arr[idx]} at index {idx} ({int(bad.sum())} of {arr.size} values "
                f"non-finite); {hint}"
            )
    return value


def check_shape(name: str, value: Any, expected_shape: Sequence[int | None]) -> Any:
    """Raise ``ValueError`` unless ``value``'s shape equals ``expected_shape`` (``None`` matches any size).

    Works on tracers too (shapes are static).  Returns ``value`` unchanged.
    """
    shape = tuple(np.shape(value)) if not hasattr(value, "shape") else tuple(value.shape)
    expected = tuple(expected_shape)
    ok = len(shape) == len(expected) and all(e is None or int(e) == s for s, e in zip(shape, expected, strict=True))
    if not ok:
        dims = ", ".join("any" if e is None else str(e) for e in expected)
        pretty = f"({dims},)" if len(expected) == 1 else f"({dims})"
        raise ValueError(f"{name} must have shape {pretty}, got shape {shape}")
    return value


def check_action(action: Any, num_actions: int) -> int:
    """An integer action in ``[0, num_actions)``; returned as a Python ``int``.

    Raises:
      TypeError: not an integer (a float like ``1.5``, a string, an array of more than one element).
      ValueError: out of range.
    """
    arr = np.asarray(action)
    if arr.size != 1:
        raise TypeError(f"action must be a single integer in [0, {num_actions}), got an array of shape {arr.shape}")
    item = arr.reshape(()).item()
    if isinstance(item, bool) or not isinstance(item, (int, np.integer, float)):
        raise TypeError(f"action must be an integer in [0, {num_actions}), got {type(action).__name__} {action!r}")
    if isinstance(item, float):
        if not float(item).is_integer():
            raise TypeError(f"action must be an integer in [0, {num_actions}), got {item}")
    a = int(item)
    if not 0 <= a < num_actions:
        raise ValueError(f"action {a} is out of range: valid actions are 0..{num_actions - 1} ({num_actions} arms)")
    return a


def check_bounds(bounds: Any) -> np.ndarray:
    """Box bounds as ``np.ndarray (dim, 2)`` of float64 with ``low < high`` everywhere.

    Accepts a sequence of ``(low, high)`` pairs, an array ``(dim, 2)``, or a single pair for ``dim = 1``.

    Raises:
      TypeError: not numeric.
      ValueError: wrong shape, non-finite entries, or ``low >= high`` in some dimension (named in the message).
    """
    try:
        b = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"bounds must be a sequence of (low, high) pairs of numbers, got {bounds!r:.80}") from e
    if b.ndim == 1 and b.shape[0] == 2:
        b = b[None, :]
    if b.ndim != 2 or b.shape[1] != 2 or b.shape[0] == 0:
        raise ValueError(
            f"bounds must be a sequence of (low, high) pairs, one per dimension (an array of shape (dim, 2)), "
            f"got shape {b.shape}"
        )
    if not np.all(np.isfinite(b)):
        d = int(np.argwhere(~np.isfinite(b))[0, 0])
        raise ValueError(f"bounds must be finite, got {tuple(b[d])} in dimension {d}")
    bad = np.flatnonzero(b[:, 0] >= b[:, 1])
    if bad.size:
        d = int(bad[0])
        raise ValueError(
            f"bounds must have low < high in every dimension, got low={b[d, 0]} >= high={b[d, 1]} in dimension {d}"
        )
    return b


def check_in_bounds(x: Any, bounds: Any, *, name: str = "x", atol: float = 1e-9) -> np.ndarray:
    """``x`` as ``np.ndarray (dim,)`` (or ``(n, dim)`` for a batch) inside the box ``bounds``.

    Raises:
      ValueError: ``x`` has the wrong dimension, is not finite, or lies outside the bounds (the message names the
        first offending coordinate and its interval).
    """
    b = check_bounds(bounds)
    dim = b.shape[0]
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be a numeric point of dimension {dim}, got {x!r:.80}") from e
    if arr.ndim == 0 and dim == 1:
        arr = arr.reshape(1)
    if arr.ndim not in (1, 2) or arr.shape[-1] != dim:
        raise ValueError(
            f"{name} must have dimension {dim} to match the bounds (shape ({dim},) or (n, {dim})), got shape "
            f"{arr.shape}"
        )
    check_finite(name, arr, hint="evaluate at a finite point")
    pts = arr.reshape(-1, dim)
    low, high = b[:, 0] - atol, b[:, 1] + atol
    out = (pts < low) | (pts > high)
    if out.any():
        i, d = (int(v) for v in np.argwhere(out)[0])
        where = f" (row {i})" if arr.ndim == 2 else ""
        raise ValueError(
            f"{name} is outside the bounds: coordinate {d}{where} is {pts[i, d]}, expected it in [{b[d, 0]}, {b[d, 1]}]"
        )
    return arr


def check_choice(name: str, value: Any, valid: Iterable[str]) -> str:
    """``value`` if it is one of ``valid``; otherwise ``ValueError`` listing the valid names (and a close match).

    Raises:
      TypeError: ``value`` is not a string.
      ValueError: unknown name.
    """
    options = sorted(str(v) for v in valid)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {options}; got {type(value).__name__} {value!r:.60}")
    if value not in options:
        close = difflib.get_close_matches(value, options, n=1)
        suggestion = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown {name} {value!r}{suggestion}; valid {name}s are: {', '.join(options)}")
    return value


def check_dir(path: Any, required_files: Iterable[str] = ()) -> str:
    """``path`` (as ``str``) if it is an existing directory holding every name in ``required_files``.

    Raises:
      TypeError: ``path`` is not a string / ``os.PathLike``.
      ValueError: the directory does not exist, is a file, or lacks some of the files (all missing ones named).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"data directory must be a path (str or os.PathLike), got {type(path).__name__}")
    p = os.fspath(path)
    if not os.path.exists(p):
        raise ValueError(f"data directory {p!r} does not exist; create it or pass the folder that holds the files")
    if not os.path.isdir(p):
        raise ValueError(f"data directory {p!r} is a file, not a directory; pass the folder that holds the files")
    required = list(required_files)
    missing = [f for f in required if not os.path.exists(os.path.join(p, f))]
    if missing:
        raise ValueError(
            f"data directory {p!r} lacks the expected file(s) {missing}; it must contain {required} "
            f"(download the official files into it, or fetch them with `banditkit data fetch`)"
        )
    return p
