"""Verification of loaded data against the hashes pinned in the catalogue (never against the cache's own records).

A cache folder's ``SOURCE.json`` is written by the same hands that could damage the data next to it, so the loader
checks what it read against values fixed in the code (:mod:`banditkit.datasets.catalog`):

* ``content_sha256`` — :func:`content_hash` of the converted data, independent of file format and timestamps:
  ``sha256_arrays(X_train, y_train, X_test, y_test)`` for the image sets, ``sha256_arrays`` of the columns
  ``user_id, movie_id, rating, timestamp`` for MovieLens, and ``sha256_arrays`` of the UTF-8 CSV text
  (``to_csv(index=False)``, ``\\n`` line ends) for a table;
* ``file_sha256`` — the SHA-256 of a file's bytes where the bytes are reproducible (the shipped tables, written
  with a fixed gzip header); it is the cheap first check (under 1 ms for the largest table), with the content hash
  as the fallback for a rebuilt copy whose gzip bytes differ.

A verification that passed is remembered for the rest of the process under the file's identity
:func:`file_identity` ``(path, inode, size, mtime_ns, ctime_ns)``: writing or replacing the file changes its
``ctime`` (which ``os.utime`` cannot set back) or its inode, so a changed file is verified again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from banditkit.datasets._paths import sha256_arrays
from banditkit.datasets.formats import RATING_COLUMNS
from banditkit.datasets.safe import CorruptFileError

IMAGE_KEYS = ("X_train", "y_train", "X_test", "y_test")


def content_hash(name: str, data: Any) -> str:
    """The carrier-independent content hash of converted data (arrays dict, ratings frame or table)."""
    if isinstance(data, dict):
        return sha256_arrays(*(data[k] for k in IMAGE_KEYS))
    if name == "movielens":
        return sha256_arrays(*(data[c].to_numpy() for c in RATING_COLUMNS))
    return sha256_arrays(np.frombuffer(data.to_csv(index=False, lineterminator="\n").encode(), dtype=np.uint8))


def file_identity(path: str | os.PathLike) -> tuple[str, int, int, int, int]:
    """``(absolute path, inode, size, mtime_ns, ctime_ns)``: changes whenever the file is written or replaced."""
    st = os.stat(path)
    return str(Path(path).resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def require_pin(name: str, expected: str | None) -> str:
    """``expected`` itself; a ValueError when the catalogue entry of ``name`` pins no content hash."""
    if not expected:
        raise ValueError(f"the catalogue entry of dataset {name!r} has no pinned content_sha256, so its data cannot be "
                         f"verified; add the hash of the converted content (banditkit.datasets.integrity."
                         f"content_hash) to banditkit/datasets/catalog.py")
    return expected


def check_content(name: str, where: str, data: Any, expected: str | None, fix: str) -> None:
    """Raise :class:`CorruptFileError` unless ``content_hash(name, data) == expected``.

    The message names the dataset, the file ``where`` it was read from, both hashes and ``fix`` (what to run)."""
    expected = require_pin(name, expected)
    got = content_hash(name, data)
    if got != expected:
        raise CorruptFileError(
            f"checksum mismatch for dataset {name!r}: the content of {where} does not match the hash pinned in "
            f"banditkit (expected {expected}, got {got}); the file was changed, truncated or replaced after it was "
            f"fetched — its SOURCE.json is not trusted for this check. {fix}")
