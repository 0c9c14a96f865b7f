"""Datasets with no offline carrier: loaders for the user's own copy of the official files, and small synthetic
look-alikes with the same schema (generated deterministically in code, never committed).

====================  ===========================================  ==============================================
name                  official file(s) in ``data_dir``             returned by ``read_*`` / ``synthetic_*``
====================  ===========================================  ==============================================
``kuairec``           ``small_matrix.csv``, ``item_daily_features``  ``{"interactions": DataFrame, "daily": DataFrame}``
                      ``.csv`` (KuaiRec 2.0 ``data/`` folder)
``covertype``         ``covtype.data.gz`` or ``covtype.data``      DataFrame, 54 attributes + ``Cover_Type`` (1..7)
``census``            ``USCensus1990.data.txt``                    DataFrame (``caseid``, 67 coded attributes,
                                                                   ``dOccup`` among them)
``jester``            ``jester_data_40jokes_19181users.npy``       ndarray (users, 40) ratings in [-10, 10]
``financial``         ``raw_stock_contexts``                       ndarray (days, 21) (text, one header row)
====================  ===========================================  ==============================================

:func:`write_synthetic` writes the synthetic look-alike *as the official files* to a folder, so the file readers
can be tested end to end (``read_*(folder)`` then equals ``synthetic_*()``).
"""

from __future__ import annotations

import gzip
import inspect
import os
from pathlib import Path

import numpy as np
import pandas as pd

from banditkit.validation import check_dir

KUAIREC_COUNTS = ("like_cnt", "share_cnt", "play_cnt", "comment_cnt", "complete_play_cnt", "follow_cnt",
                  "reply_comment_cnt", "download_cnt")
KUAIREC_INTERACTION_COLUMNS = ("user_id", "video_id", "play_duration", "video_duration", "time", "date",
                               "timestamp", "watch_ratio")
KUAIREC_DAILY_COLUMNS = ("video_id", "date", "author_id", "video_type", "upload_dt", "upload_type",
                         "visible_status", "video_duration", "show_cnt", "show_user_num", "play_cnt",
                         "play_user_num", "play_duration", "complete_play_cnt", "complete_play_user_num",
                         "valid_play_cnt", "valid_play_user_num", "like_cnt", "like_user_num", "comment_cnt",
                         "comment_user_num", "reply_comment_cnt", "follow_cnt", "follow_user_num", "share_cnt",
                         "share_user_num", "download_cnt", "download_user_num")
COVERTYPE_COLUMNS = (
    ["Elevation", "Aspect", "Slope", "Horizontal_Distance_To_Hydrology", "Vertical_Distance_To_Hydrology",
     "Horizontal_Distance_To_Roadways", "Hillshade_9am", "Hillshade_Noon", "Hillshade_3pm",
     "Horizontal_Distance_To_Fire_Points"]
    + [f"Wilderness_Area{i}" for i in range(1, 5)] + [f"Soil_Type{i}" for i in range(1, 41)] + ["Cover_Type"]
)
CENSUS_COLUMNS = (
    "caseid dAge dAncstry1 dAncstry2 iAvail iCitizen iClass dDepart iDisabl1 iDisabl2 iEnglish iFeb55 iFertil "
    "dHispanic dHour89 dHours iImmigr dIncome1 dIncome2 dIncome3 dIncome4 dIncome5 dIncome6 dIncome7 dIncome8 "
    "dIndustry iKorean iLang1 iLooking iMarital iMay75880 iMeans iMilitary iMobility iMobillim dOccup iOthrserv "
    "iPerscare dPOB dPoverty dPwgt1 iRagechld dRearning iRelat1 iRelat2 iRemplpar iRiders iRlabor iRownchld "
    "dRpincome iRPOB iRrelchld iRspouse iRvetserv iSchool iSept80 iSex iSubfam1 iSubfam2 iTmpabsnt dTravtime "
    "iVietnam dWeek89 iWork89 iWorklwk iWWII iYearsch iYearwrk dYrsserv"
).split()
OFFICIAL_FILES = {
    "kuairec": ("small_matrix.csv", "item_daily_features.csv"),
    "covertype": ("covtype.data.gz", "covtype.data"),
    "census": ("USCensus1990.data.txt",),
    "jester": ("jester_data_40jokes_19181users.npy",),
    "financial": ("raw_stock_contexts",),
}


# ----------------------------------------------------------------------------------------------------- readers
def read_kuairec(data_dir: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """KuaiRec 2.0 ``small_matrix.csv`` (interactions) and ``item_daily_features.csv`` (daily counters)."""
    folder = check_dir(data_dir, OFFICIAL_FILES["kuairec"])
    inter = pd.read_csv(os.path.join(folder, "small_matrix.csv"),
                        usecols=["user_id", "video_id", "timestamp", "date", "watch_ratio"])
    daily = pd.read_csv(os.path.join(folder, "item_daily_features.csv"),
                        usecols=["video_id", "date", *KUAIREC_COUNTS])
    return {"interactions": inter, "daily": daily}


def read_covertype(data_dir: str | os.PathLike) -> pd.DataFrame:
    """UCI ``covtype.data(.gz)``: 55 integer columns, no header -> DataFrame with the UCI column names."""
    folder = Path(check_dir(data_dir))
    for name in OFFICIAL_FILES["covertype"]:
        if (folder / name).exists():
            return pd.read_csv(folder / name, header=None, names=COVERTYPE_COLUMNS)
    raise ValueError(f"data directory {str(folder)!r} has neither covtype.data.gz nor covtype.data (UCI Covertype)")


def read_census(data_dir: str | os.PathLike) -> pd.DataFrame:
    """UCI ``USCensus1990.data.txt`` (CSV with a header row; needs ``caseid`` and ``dOccup``)."""
    folder = check_dir(data_dir, OFFICIAL_FILES["census"])
    df = pd.read_csv(os.path.join(folder, "USCensus1990.data.txt"))
    missing = {"caseid", "dOccup"} - set(df.columns)
    if missing:
        raise ValueError(f"USCensus1990.data.txt lacks the column(s) {sorted(missing)}; is it the UCI file?")
    return df


def read_jester(data_dir: str | os.PathLike) -> np.ndarray:
    """The showdown's ``jester_data_40jokes_19181users.npy`` (dense ratings, users x 40)."""
    folder = check_dir(data_dir, OFFICIAL_FILES["jester"])
    arr = np.load(os.path.join(folder, OFFICIAL_FILES["jester"][0]), allow_pickle=False)
    if arr.ndim != 2 or arr.shape[1] != 40:
        raise ValueError(f"expected a (users, 40) Jester ratings matrix, got shape {arr.shape}")
    return arr.astype(np.float64)


def read_financial(data_dir: str | os.PathLike) -> np.ndarray:
    """The showdown's ``raw_stock_contexts`` (whitespace text, one header row) -> (days, stocks)."""
    folder = check_dir(data_dir, OFFICIAL_FILES["financial"])
    return np.loadtxt(os.path.join(folder, "raw_stock_contexts"), skiprows=1, ndmin=2)


READERS = {"kuairec": read_kuairec, "covertype": read_covertype, "census": read_census, "jester": read_jester,
           "financial": read_financial}


# ----------------------------------------------------------------------------------------- synthetic look-alikes
def synthetic_kuairec(seed: int = 0, n_users: int = 24, n_videos: int = 40, n_days: int = 8,
                      per_day: int = 12) -> dict[str, pd.DataFrame]:
    """A small fully observed KuaiRec look-alike: ``watch_ratio`` depends on a user x video affinity and on the
    previous day's counters, so a model can learn something.  Same columns as :func:`read_kuairec` returns."""
    rng = np.random.default_rng(seed)
    dates = pd.date_range("2020-07-05", periods=n_days + 1, freq="D")
    date_int = dates.strftime("%Y%m%d").astype(int).to_numpy()
    vid = np.sort(rng.choice(np.arange(100, 100 + 5 * n_videos), n_videos, replace=False))
    popularity = rng.gamma(2.0, 1.0, n_videos)
    daily = []
    for d in date_int:
        base = rng.poisson(50 * popularity[:, None] * np.ones((1, len(KUAIREC_COUNTS))))
        scale = np.array([0.3, 0.05, 1.0, 0.02, 0.4, 0.01, 0.005, 0.01])
        daily.append(pd.DataFrame({"video_id": vid, "date": d,
                                   **{c: np.round(base[:, i] * scale[i]).astype(np.int64)
                                      for i, c in enumerate(KUAIREC_COUNTS)}}))
    daily_df = pd.concat(daily, ignore_index=True)
    u_f, v_f = rng.normal(size=(n_users, 3)), rng.normal(size=(n_videos, 3))
    rows = []
    t0 = dates[0].value // 10**9
    for u in range(n_users):
        for k, d in enumerate(date_int[1:], start=1):
            pick = rng.choice(n_videos, per_day, replace=False)
            ts = t0 + k * 86400 + np.sort(rng.uniform(0, 86400, per_day))
            mean = 0.3 * (u_f[u] @ v_f[pick].T) + 0.2 * np.log1p(popularity[pick])
            wr = np.exp(mean + 0.3 * rng.normal(size=per_day)).round(6)
            rows.append(pd.DataFrame({"user_id": u, "video_id": vid[pick], "timestamp": ts.round(3), "date": d,
                                      "watch_ratio": wr}))
    inter = pd.concat(rows, ignore_index=True)
    return {"interactions": inter, "daily": daily_df}


def synthetic_covertype(seed: int = 0, n: int = 2000) -> pd.DataFrame:
    """Covertype look-alike: 10 integer measurements, one-hot wilderness (4) and soil (40), classes 1..7."""
    rng = np.random.default_rng(seed)
    num = np.column_stack([rng.integers(1850, 3860, n), rng.integers(0, 361, n), rng.integers(0, 67, n),
                           rng.integers(0, 1400, n), rng.integers(-170, 600, n), rng.integers(0, 7120, n),
                           rng.integers(0, 255, n), rng.integers(0, 255, n), rng.integers(0, 255, n),
                           rng.integers(0, 7175, n)])
    wild, soil = rng.integers(0, 4, n), rng.integers(0, 40, n)
    label = 1 + np.clip(((num[:, 0] - 1850) / 2010 * 5).astype(int) + (wild == 3) + (soil > 30), 0, 6)
    df = pd.DataFrame(num, columns=COVERTYPE_COLUMNS[:10])
    for i in range(4):
        df[f"Wilderness_Area{i + 1}"] = (wild == i).astype(np.int64)
    for i in range(40):
        df[f"Soil_Type{i + 1}"] = (soil == i).astype(np.int64)
    df["Cover_Type"] = label.astype(np.int64)
    return df


def synthetic_census(seed: int = 0, n: int = 1500) -> pd.DataFrame:
    """US Census 1990 look-alike: the 69 official columns of small integer codes; ``dOccup`` in 0..8."""
    rng = np.random.default_rng(seed)
    data = {"caseid": np.arange(10000, 10000 + n)}
    occ = rng.integers(0, 9, n)
    for c in CENSUS_COLUMNS[1:]:
        levels = int(rng.integers(2, 6))
        shift = (occ % levels) * c.startswith("dI")
        data[c] = occ if c == "dOccup" else (rng.integers(0, levels, n) + shift) % levels
    return pd.DataFrame(data)


def synthetic_jester(seed: int = 0, n_users: int = 400) -> np.ndarray:
    """Jester look-alike: low-rank (3) user x joke ratings plus noise, clipped to [-10, 10], shape (n_users, 40)."""
    rng = np.random.default_rng(seed)
    r = 3.0 * rng.normal(size=(n_users, 3)) @ rng.normal(size=(3, 40)) / np.sqrt(3) + rng.normal(size=(n_users, 40))
    return np.clip(np.round(r, 2), -10.0, 10.0)


def synthetic_financial(seed: int = 0, n_days: int = 400) -> np.ndarray:
    """raw_stock_contexts look-alike: (n_days, 21) correlated daily open-close differences."""
    rng = np.random.default_rng(seed)
    market = rng.normal(scale=0.8, size=(n_days, 1))
    return np.round(market * rng.uniform(0.5, 1.5, (1, 21)) + rng.normal(scale=0.6, size=(n_days, 21)), 4)


SYNTHETIC = {"kuairec": synthetic_kuairec, "covertype": synthetic_covertype, "census": synthetic_census,
             "jester": synthetic_jester, "financial": synthetic_financial}


def write_synthetic(name: str, folder: str | os.PathLike, seed: int = 0, **size) -> list[Path]:
    """Write the synthetic look-alike of ``name`` to ``folder`` in the official file format(s).

    ``size``: keyword arguments of the generator (e.g. ``n_users=500, n_days=14`` for :func:`synthetic_kuairec`),
    for a larger look-alike than the default test-sized one."""
    if name not in SYNTHETIC:
        raise ValueError(f"no synthetic look-alike for {name!r}; choose one of {sorted(SYNTHETIC)}")
    gen = SYNTHETIC[name]
    allowed = [p for p in inspect.signature(gen).parameters if p != "seed"]
    bad = sorted(set(size) - set(allowed))
    if bad:
        raise ValueError(f"write_synthetic({name!r}): unknown size argument(s) {bad}; {gen.__name__} takes {allowed}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = gen(seed, **size)
    if name == "kuairec":
        inter = data["interactions"].copy()
        ts = pd.to_datetime(inter["timestamp"], unit="s")
        inter["time"] = ts.dt.strftime("%Y-%m-%d %H:%M:%S.%f").str[:-3]
        inter["video_duration"] = 10000
        inter["play_duration"] = (inter["watch_ratio"] * 10000).round().astype(np.int64)
        inter[list(KUAIREC_INTERACTION_COLUMNS)].to_csv(folder / "small_matrix.csv", index=False)
        daily = data["daily"].copy()
        for c in KUAIREC_DAILY_COLUMNS:
            if c not in daily:
                daily[c] = 0
        daily[list(KUAIREC_DAILY_COLUMNS)].to_csv(folder / "item_daily_features.csv", index=False)
        return [folder / "small_matrix.csv", folder / "item_daily_features.csv"]
    if name == "covertype":
        path = folder / "covtype.data.gz"
        with gzip.open(path, "wt") as f:
            data.to_csv(f, header=False, index=False)
        return [path]
    if name == "census":
        data.to_csv(folder / "USCensus1990.data.txt", index=False)
        return [folder / "USCensus1990.data.txt"]
    if name == "jester":
        np.save(folder / OFFICIAL_FILES["jester"][0], data)
        return [folder / OFFICIAL_FILES["jester"][0]]
    if name == "financial":
        np.savetxt(folder / "raw_stock_contexts", data, header=" ".join(f"s{i}" for i in range(21)), comments="")
        return [folder / "raw_stock_contexts"]
    raise ValueError(f"no synthetic look-alike for {name!r}; choose one of {sorted(SYNTHETIC)}")


# ------------------------------------------------------------------------------------------------- KuaiRec rounds
def kuairec_rounds(interactions: pd.DataFrame, daily: pd.DataFrame, block: int = 10) -> dict[str, np.ndarray]:
    """Seed 003's KuaiRec rounds: per user, consecutive blocks of ``block`` videos; one block = one round.

    1. ``daily`` counters of date ``D`` are attached to interactions of date ``D + 1`` (yesterday's counters,
       so no same-day leakage; the authors' notebook shifted the other way);
    2. inner-merge on ``(video_id, date)``; re-index ``video_id`` to ``0..n_videos-1``;
    3. per user, in timestamp order, ``block`` consecutive rows form a round; incomplete blocks are dropped;
    4. rounds are ordered by the timestamp of their first video (stream in time order).

    Returns ``features (N, block, 9) float32 = [video_idx, log1p(8 counts)]``, ``rewards (N, block) float32
    = log1p(watch_ratio)``, ``watch_ratio (N, block)``, ``time0 (N,)`` (unix seconds), ``user (N,)``,
    ``num_videos`` and ``video_ids`` (the original id of each index).
    """
    inter = interactions.dropna(subset=["user_id", "video_id", "date", "watch_ratio", "timestamp"])
    d = daily[["video_id", "date", *KUAIREC_COUNTS]].dropna().copy()
    d["date"] = (pd.to_datetime(d["date"].astype(np.int64).astype(str), format="%Y%m%d")
                 + pd.Timedelta(days=1)).dt.strftime("%Y%m%d").astype(np.int64)
    d = d.drop_duplicates(["video_id", "date"])
    inter = inter.astype({"date": np.int64})
    m = inter.merge(d, on=["video_id", "date"], how="inner")
    m = m.sort_values(["user_id", "timestamp"], kind="stable").reset_index(drop=True)
    video_ids, m["video_idx"] = np.unique(m["video_id"].to_numpy(), return_inverse=True)
    pos = m.groupby("user_id").cumcount().to_numpy()
    m["blk"] = pos // block
    size = m.groupby(["user_id", "blk"])["video_id"].transform("size").to_numpy()
    m = m[size == block]
    n = len(m) // block
    feats = np.column_stack([m["video_idx"].to_numpy(np.float64),
                             np.log1p(np.clip(m[list(KUAIREC_COUNTS)].to_numpy(np.float64), 0, None))])
    feats = feats.reshape(n, block, 1 + len(KUAIREC_COUNTS))
    wr = m["watch_ratio"].to_numpy(np.float64).reshape(n, block)
    t0 = m["timestamp"].to_numpy(np.float64).reshape(n, block)[:, 0]
    user = m["user_id"].to_numpy().reshape(n, block)[:, 0]
    order = np.argsort(t0, kind="stable")
    return {"features": feats[order].astype(np.float32), "rewards": np.log1p(wr[order]).astype(np.float32),
            "watch_ratio": wr[order], "time0": t0[order], "user": user[order], "num_videos": len(video_ids),
            "video_ids": video_ids}
