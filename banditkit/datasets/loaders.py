"""``load(name)``: every catalogue dataset as NumPy arrays / pandas DataFrames.

=================  ================================================================================================
``mnist``,         ``{"X_train" (60000, 28, 28) uint8, "y_train" (60000,) uint8, "X_test" (10000, 28, 28),
``fashion_mnist``  "y_test"}`` from the cache (``banditkit data fetch NAME``)
``movielens``      DataFrame ``user_id, movie_id, rating, timestamp`` (100,000 rows) from the cache
``mushroom``,      DataFrame from the table shipped in the package (``banditkit/datasets/shipped/*.csv.gz``, or
``shuttle``,       ``$BANDITKIT_TABLES``; else from the cache after ``fetch --force``)
``adult``
``kuairec``, ...   the user's copy (``data_dir=``) or ``synthetic=True``: see :mod:`banditkit.datasets.external`
``in_between``     the 1-D toy regression set (:func:`banditkit.datasets.toy.in_between`)
=================  ================================================================================================

A dataset that is not there raises :class:`DatasetNotFoundError` (a ``FileNotFoundError``) whose message names
the command that gets it (``banditkit data fetch NAME``) or, for sets without an offline carrier, both ways in
(``data_dir=`` and ``synthetic=True``).

Every load verifies what it read against the hashes pinned in the catalogue (:mod:`banditkit.datasets.integrity`),
not against the cache's ``SOURCE.json``: a fetched set against its ``content_sha256``, a table against its
``file_sha256`` (else its ``content_sha256``).  A mismatch raises :class:`CorruptFileError` naming the dataset, the
file and the command that replaces it (``banditkit data fetch NAME --force``).  A passed verification is
remembered per process and file version, so the cost is paid once (MNIST: hashing 55 MB of arrays, ~40 ms).
User-supplied files (``data_dir=``) have their SHA-256 recorded at first use and warn when they change
(:mod:`banditkit.datasets.userfiles`).  Loaded arrays are cached in memory and returned read-only.
"""

from __future__ import annotations

import functools
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from banditkit.datasets import external, integrity, tables, toy
from banditkit.datasets._paths import ENV_TABLES, cache_dir, sha256_bytes, tables_dir
from banditkit.datasets.catalog import CATALOG, DatasetInfo
from banditkit.datasets.fetching import canonical_name
from banditkit.datasets.safe import CorruptFileError
from banditkit.datasets.userfiles import check_user_files


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
            f"(set BANDITKIT_DATA to use another cache folder)")


def _refetch(name: str) -> str:
    return f"run `banditkit data fetch {name} --force` to download it again"


@functools.lru_cache(maxsize=8)
def _load_npz(name: str, path: str, identity: tuple, pin: str | None) -> dict[str, np.ndarray]:
    """The arrays of a cached ``.npz``, verified against the pinned content hash (cached per file version)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CorruptFileError(f"dataset {name!r}: {path} is corrupt ({e}); {_refetch(name)}") from e
    missing = [k for k in integrity.IMAGE_KEYS if k not in out]
    if missing:
        raise CorruptFileError(f"dataset {name!r}: {path} lacks the arrays {missing}; {_refetch(name)}")
    integrity.check_content(name, path, out, pin, _refetch(name))
    for v in out.values():
        v.setflags(write=False)
    return out


_verified: set[tuple] = set()  # (name, file identity or bytes hash, pin) of verifications that passed


def _load_parquet(name: str, path: Path, pin: str | None) -> pd.DataFrame:
    key = (name, integrity.file_identity(path), pin)
    try:
        df = pd.read_parquet(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise CorruptFileError(f"dataset {name!r}: {path} is corrupt ({e}); {_refetch(name)}") from e
    if key not in _verified:
        missing = [c for c in ("user_id", "movie_id", "rating", "timestamp") if c not in df.columns]
        if missing:
            raise CorruptFileError(f"dataset {name!r}: {path} lacks the columns {missing}; {_refetch(name)}")
        integrity.check_content(name, str(path), df, pin, _refetch(name))
        _verified.add(key)
    return df


def _table_fix(name: str, shipped: bool) -> str:
    if not shipped:
        return _refetch(name)
    if os.environ.get(ENV_TABLES):
        return (f"${ENV_TABLES} points to {os.environ[ENV_TABLES]!r}, whose copy differs from the pinned table: "
                f"replace it, or unset {ENV_TABLES} to use the copy shipped in the package")
    return ("the copy shipped in the banditkit package is damaged: reinstall banditkit (`pip install "
            "--force-reinstall banditkit`; from a clone, restore banditkit/datasets/shipped/)")


def _load_table(name: str, info: DatasetInfo) -> pd.DataFrame:
    """A committed table from the shipped folder (else the cache), verified against its pinned file or content hash."""
    for shipped, folder in ((True, tables_dir()), (False, cache_dir() / name)):
        location = folder / info.files[0]
        if not location.is_file():
            continue
        raw = location.read_bytes()
        digest = sha256_bytes(raw)
        try:
            df = tables.parse(raw)
        except (OSError, EOFError, ValueError) as e:  # gzip / CSV errors
            fix = _table_fix(name, shipped)
            raise CorruptFileError(f"dataset {name!r}: {location} is corrupt ({e}); {fix}") from e
        key = (name, digest, info.content_sha256)
        if digest not in info.file_sha256 and key not in _verified:
            integrity.check_content(name, str(location), df, info.content_sha256, _table_fix(name, shipped))
            _verified.add(key)
        return df
    raise DatasetNotFoundError(fetch_hint(name))


def is_cached(name: str) -> bool:
    """True when ``load(name)`` will work without a fetch (manual sets: False; builtin: True)."""
    name = canonical_name(name)
    info = CATALOG[name]
    if info.kind == "builtin":
        return True
    if info.kind == "committed" and (tables_dir() / info.files[0]).is_file():
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
        data = external.READERS[name](data_dir)
        check_user_files(name, [p for f in external.OFFICIAL_FILES[name] if (p := Path(data_dir) / f).is_file()])
        return data
    if info.kind == "committed":
        return _load_table(name, info)
    path = cache_dir() / name / info.files[0]
    if not path.exists():
        raise DatasetNotFoundError(fetch_hint(name))
    if path.suffix == ".npz":
        return dict(_load_npz(name, str(path), integrity.file_identity(path), info.content_sha256))
    return _load_parquet(name, path, info.content_sha256)


def cache_path(name: str) -> Path:
    """The cache folder of ``name`` (it may not exist yet)."""
    return cache_dir() / canonical_name(name)
