"""Where data lives, and content hashes.

* The **user cache** (filled by :func:`banditkit.datasets.fetch`) is ``$BANDITKIT_DATA`` if that variable is set,
  else ``$XDG_CACHE_HOME/banditkit`` (``~/.cache/banditkit``).  Each dataset gets a sub-folder
  ``<cache>/<name>/`` holding compact converted files (``.npz`` / ``.parquet``) plus ``SOURCE.json``
  (where the bytes came from and their SHA-256 values).
* The **shipped tables** (Mushroom, Shuttle, Adult) are package data in ``banditkit/datasets/shipped/``, found
  with :mod:`importlib.resources` (so a wheel install carries them); ``$BANDITKIT_TABLES`` names another folder
  holding the same files instead.

Hashes: :func:`sha256_file` of a file, :func:`sha256_bytes` of bytes in memory; :func:`sha256_arrays` of the raw
bytes of arrays (dtype, shape and data, in order), used to pin the *content* of a converted dataset independently
of which carrier delivered it.
"""

from __future__ import annotations

import hashlib
import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

ENV_CACHE = "BANDITKIT_DATA"
ENV_TABLES = "BANDITKIT_TABLES"
SHIPPED_FOLDER = "shipped"  # sub-folder of the banditkit.datasets package holding the shipped tables


def cache_dir() -> Path:
    """The user cache root (not created here)."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "banditkit"


def tables_dir() -> Traversable:
    """The folder with the shipped CSV tables: ``$BANDITKIT_TABLES`` when set (a :class:`~pathlib.Path`), else the
    package resource ``banditkit/datasets/shipped`` (``importlib.resources.files``; a ``Path`` for an unpacked
    install).  Both support ``/ name``, ``.is_file()`` and ``.read_bytes()``."""
    env = os.environ.get(ENV_TABLES)
    if env:
        return Path(env).expanduser()
    return resources.files("banditkit.datasets") / SHIPPED_FOLDER


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


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_arrays(*arrays: np.ndarray) -> str:
    """Hex SHA-256 over ``(dtype, shape, C-order bytes)`` of each array in turn (the buffer is hashed in place)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.reshape(-1).view(np.uint8) if a.size else b"")
    return h.hexdigest()
