"""``load(name)``: every catalogue dataset as NumPy arrays / pandas DataFrames.

=================  ================================================================================================
``mnist``,         ``{"X_train" (60000, 28, 28) uint8, "y_train" (60000,) uint8, "X_test" (10000, 28, 28),
``fashion_mnist``  "y_test"}`` from the cache (``banditkit data fetch NAME``)
``movielens``      DataFrame ``user_id, movie_id, rating, timestamp`` (100,000 rows) from the cache
``mushroom``,      DataFrame from the committed ``data/*.csv.gz`` (else from the cache after ``fetch``)
``shuttle``,
``adult``
``kuairec``, ...   the user's copy (``data_dir=``) or ``synthetic=True``: see :mod:`banditkit.datasets.external`
``in_between``     the 1-D toy regression set (:func:`banditkit.datasets.toy.in_between`)
=================  ================================================================================================

A dataset that is not there raises :class:`DatasetNotFoundError` (a ``FileNotFoundError``) whose message names
the command that gets it (``banditkit data fetch NAME``) or, for sets without an offline carrier, both ways in
(``data_dir=`` and ``synthetic=True``).  A fetched file is checked once per process against the SHA-256 recorded
in its ``SOURCE.json``; a mismatch raises :class:`CorruptFileError` with the re-fetch command.  Loaded arrays are
cached in memory and returned read-only.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from banditkit.datasets import external, tables, toy
from banditkit.datasets._paths import cache_dir, sha256_file, tables_dir
from banditkit.datasets.catalog import CATALOG
from banditkit.datasets.fetching import canonical_name
from banditkit.datasets.safe import CorruptFileError


class DatasetNotFoundError(FileNotFoundError):
    """The dataset is not in the cache (or, for manual sets, no ``data_dir``/``synthetic`` was given)."""


def fetch_hint(name: str) -> str:
    """The message telling the user how to get ``name``."""
    info = CATALOG[name]
    if info.kind == "manual":
        return (f"dataset {name!r} has no offline source: download the official file(s) "
                f"{list(info.official_files)} and pass data_dir='folder/with/them', or pass synthetic=True for a "
                f"small look-alike with the same schema")
    return (f"dataset {name!r} is not in the cache {str(cache_dir())!r}: run `banditkit data fetch {name}` "
            f"(or `python -m banditkit.datasets fetch {name}`; set BANDITKIT_DATA to use another cache folder)")


def _refetch(name: str) -> str:
    return f"run `banditkit data fetch {name} --force` to download it again"


@functools.lru_cache(maxsize=16)
def _verify(name: str, path: str, mtime: float) -> None:
    """Check a cached file against the SHA-256 recorded in ``SOURCE.json`` at fetch time (once per process)."""
    record = Path(path).parent / "SOURCE.json"
    try:
        expected = json.loads(record.read_text())["files"][Path(path).name]
    except (OSError, KeyError, ValueError) as e:
        raise CorruptFileError(f"{record} is missing or unreadable ({e}); {_refetch(name)}") from e
    got = sha256_file(path)
    if got != expected:
        raise CorruptFileError(f"checksum mismatch for {path}: expected {expected}, got {got} (the file was changed "
                               f"or truncated); {_refetch(name)}")


@functools.lru_cache(maxsize=8)
def _load_npz(name: str, path: str, mtime: float) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError) as e:
        raise CorruptFileError(f"{path} is corrupt ({e}); {_refetch(name)}") from e
    for v in out.values():
        v.setflags(write=False)
    return out


def is_cached(name: str) -> bool:
    """True when ``load(name)`` will work without a fetch (manual sets: False; builtin: True)."""
    name = canonical_name(name)
    info = CATALOG[name]
    if info.kind == "builtin":
        return True
    if info.kind == "committed" and (tables_dir() / info.files[0]).exists():
        return True
    return bool(info.files) and all((cache_dir() / name / f).exists() for f in info.files)


def load(name: str, *, data_dir: str | os.PathLike | None = None, synthetic: bool = False, seed: int = 0,
         **kwargs: Any) -> Any:
    """Load dataset ``name`` (see the module table; ``available()`` lists them all).

    Args:
      name: catalogue name, e.g. ``"mnist"``, ``"mushroom"``, ``"kuairec"`` (case-insensitive).
      data_dir: folder with the official files, for ``kuairec, covertype, census, jester, financial``.
      synthetic: return the small synthetic look-alike instead (those five only); ``seed`` picks it.
      **kwargs: passed to the generator of ``in_between`` (``n``, ``seed``...).

    Raises:
      ValueError: unknown name (the message lists the available ones), or ``data_dir``/``synthetic`` given for a
        dataset that does not take them.
      DatasetNotFoundError: the data is not there; the message names ``banditkit data fetch NAME``.
    """
    name = canonical_name(name)
    info = CATALOG[name]
    if info.kind != "manual" and (data_dir is not None or synthetic):
        raise ValueError(f"data_dir= and synthetic= are only for {sorted(external.READERS)}; {name!r} is "
                         f"{'committed' if info.kind == 'committed' else 'fetched'} (`banditkit data fetch {name}`)")
    if info.kind == "builtin":
        return toy.in_between(**kwargs)
    if info.kind == "manual":
        if data_dir is not None and synthetic:
            raise ValueError("pass either data_dir= (your copy of the official files) or synthetic=True, not both")
        if synthetic:
            return external.SYNTHETIC[name](seed)
        if data_dir is None:
            raise DatasetNotFoundError(fetch_hint(name))
        return external.READERS[name](data_dir)
    if info.kind == "committed":
        for folder in (tables_dir(), cache_dir() / name):
            if (folder / info.files[0]).exists():
                return tables.read(name, folder)
        raise DatasetNotFoundError(fetch_hint(name))
    path = cache_dir() / name / info.files[0]
    if not path.exists():
        raise DatasetNotFoundError(fetch_hint(name))
    mtime = path.stat().st_mtime
    _verify(name, str(path), mtime)
    if path.suffix == ".npz":
        return dict(_load_npz(name, str(path), mtime))
    try:
        return pd.read_parquet(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise CorruptFileError(f"{path} is corrupt ({e}); {_refetch(name)}") from e


def cache_path(name: str) -> Path:
    """The cache folder of ``name`` (it may not exist yet)."""
    return cache_dir() / canonical_name(name)
