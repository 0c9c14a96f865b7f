"""The Deep Bayesian Bandit Showdown's context preprocessing (Riquelme et al. 2018), per data set, in NumPy.

Each function maps a loaded table to ``(X float32 (N, d), y int (N,))`` (classification sets) or to what the
environment needs; z-scoring uses each column's mean and standard deviation over the whole table (a zero standard
deviation is replaced by 1), as ``classification_to_bandit_problem`` does on its sample.

=============  =====  ======================================================================================
data set       arms   context
=============  =====  ======================================================================================
mushroom       2      one-hot of the 22 attributes (117 columns; not z-scored); label edible/poisonous
shuttle        7      9 numeric attributes, z-scored; label = UCI class - 1
adult          14     rows with ``?`` dropped; label = occupation; one-hot of workclass, education, marital-status,
                      relationship, race, gender, native-country, income + 6 numeric, all z-scored (92 columns;
                      the showdown has 94 because its test-file income labels end in ``.``)
covertype      7      54 attributes z-scored; label = Cover_Type - 1
census         9      ``caseid`` dropped, every other column one-hot, z-scored; label = ``dOccup`` category code;
                      at most ``max_rows`` (150,000) rows drawn without replacement with a fixed seed
=============  =====  ======================================================================================
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def zscore(x: np.ndarray) -> np.ndarray:
    """Column-wise ``(x - mean) / std`` with zero std replaced by 1, float32."""
    x = np.asarray(x, dtype=np.float64)
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return ((x - mu) / sd).astype(np.float32)


def _one_hot(df: pd.DataFrame, columns: list[str]) -> np.ndarray:
    return pd.get_dummies(df[columns].astype(str), columns=columns).to_numpy(dtype=np.float32)


def mushroom(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(X (N, 117) one-hot, poisonous (N,) bool)``."""
    attrs = [c for c in df.columns if c != "class"]
    return _one_hot(df, attrs), (df["class"].to_numpy() == "poisonous")


def shuttle(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(X (N, 9) z-scored, y (N,) in 0..6)``."""
    return zscore(df[[f"V{i}" for i in range(1, 10)]].to_numpy()), df["class"].to_numpy().astype(np.int64) - 1


ADULT_CATEGORICAL = ["workclass", "education", "marital-status", "relationship", "race", "gender", "native-country",
                     "income"]
ADULT_NUMERIC = ["age", "fnlwgt", "educational-num", "capital-gain", "capital-loss", "hours-per-week"]


def adult(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(X (N, 92) z-scored, y (N,) occupation code, occupation names)`` after dropping rows with ``?``."""
    keep = ~(df.astype(str) == "?").any(axis=1)
    d = df[keep].reset_index(drop=True)
    occ = pd.Categorical(d["occupation"])
    x = np.hstack([d[ADULT_NUMERIC].to_numpy(np.float32), _one_hot(d, ADULT_CATEGORICAL)])
    return zscore(x), occ.codes.astype(np.int64), list(occ.categories)


def covertype(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(X (N, 54) z-scored, y (N,) in 0..6)``."""
    x = df.iloc[:, :54].to_numpy()
    return zscore(x), df.iloc[:, 54].to_numpy().astype(np.int64) - 1


def census(df: pd.DataFrame, max_rows: int = 150_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(X one-hot z-scored, y dOccup code)`` on at most ``max_rows`` rows (fixed-seed subsample)."""
    if len(df) > max_rows:
        df = df.iloc[np.sort(np.random.default_rng(seed).choice(len(df), max_rows, replace=False))]
    y = pd.Categorical(df["dOccup"]).codes.astype(np.int64)
    cols = [c for c in df.columns if c not in ("caseid", "dOccup")]
    return zscore(_one_hot(df, cols)), y
