"""Where data lives, and content hashes.

* The **user cache** (filled by :func:`banditkit.datasets.fetch`) is ``$BANDITKIT_DATA`` if that variable is set,
  else ``$XDG_CACHE_HOME/banditkit`` (``~/.cache/banditkit``).  Each dataset gets a sub-folder
  ``<cache>/<name>/`` holding compact converted files (``.npz`` / ``.parquet``) plus ``SOURCE.json``
  (where the bytes came from and their SHA-256 values).
* The **committed tables** (Mushroom, Shuttle, Adult) live in the repository's ``data/`` folder;
  ``$BANDITKIT_TABLES`` overrides that location (e.g. for a wheel install without the repository).

Hashes: :func:`sha256_file` of a file; :func:`sha256_arrays` of the raw bytes of arrays (dtype, shape and data,
in order), used to pin the *content* of a converted dataset independently of which carrier delivered it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

ENV_CACHE = "BANDITKIT_DATA"
ENV_TABLES = "BANDITKIT_TABLES"


def cache_dir() -> Path:
    """The user cache root (not created here)."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "banditkit"


def tables_dir() -> Path:
    """The folder with the committed CSV tables (``data/`` at the repository root unless overridden)."""
    env = os.environ.get(ENV_TABLES)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "data"


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def sha256_arrays(*arrays: np.ndarray) -> str:
    """Hex SHA-256 over ``(dtype, shape, C-order bytes)`` of each array in turn."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()
