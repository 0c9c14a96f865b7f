"""A user's own target policy from a file: the actions or action probabilities it would have chosen on each logged
event (``banditkit evaluate --log PATH --policy FILE``).

The file is CSV (``.csv``), Parquet (``.parquet`` / ``.pq``) or JSON lines (``.jsonl`` / ``.ndjson`` / ``.json``,
one object per line), with one row per event in one of two forms:

* **actions** — a column ``action``: the arm index ``0..K-1`` for a plain log, the action id for a decision
  service's store (a deterministic target);
* **probabilities** — columns ``p_<arm>`` (``p_0, p_1, ...`` for a plain log; ``p_<id>`` for a store), or in JSON
  lines an object ``"probabilities": {"<arm or id>": p, ...}``.  A missing column or entry is probability 0; each
  row must sum to 1 over the arms available in that event.

Rows are matched to the log **by ``event_id``** for a store (a column ``event_id``; events of the file that are not
evaluated, e.g. without a reward yet, are ignored; an evaluated event missing from the file is an error) and **by
position** for a plain log (exactly one row per log row, in order).  A target's probability for an action absent from
an event's set must be 0 (:func:`~banditkit.offline.targets.check_probabilities`).  Every problem names the rows or
events it concerns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from banditkit.offline.checks import describe_rows
from banditkit.offline.log import LoggedFeedback
from banditkit.offline.targets import check_probabilities, one_hot

EXTENSIONS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "json", ".ndjson": "json",
              ".json": "json"}
PREFIX = "p_"


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """The file as a DataFrame (format from the extension; JSON ``probabilities`` objects become ``p_*`` columns)."""
    target = os.fspath(path)
    kind = EXTENSIONS.get(os.path.splitext(target)[1].lower())
    if kind is None:
        raise ValueError(f"policy file {target!r}: unknown extension; use one of {', '.join(EXTENSIONS)}")
    if not os.path.exists(target):
        raise FileNotFoundError(f"policy file {target!r} does not exist")
    if kind == "csv":
        df = pd.read_csv(target, dtype={"event_id": str, "action": object})
    elif kind == "parquet":
        df = pd.read_parquet(target)
    else:
        df = pd.read_json(target, lines=True, dtype={"event_id": str, "action": object})
    if "probabilities" in df.columns:
        bad = [i for i, v in enumerate(df["probabilities"]) if not isinstance(v, dict)]
        if bad:
            raise ValueError(f"policy file {target!r}: 'probabilities' must be an object {{arm: p}} in every row: "
                             f"{describe_rows(np.asarray(bad))}")
        wide = pd.DataFrame([{f"{PREFIX}{k}": v for k, v in d.items()} for d in df["probabilities"]])
        df = pd.concat([df.drop(columns="probabilities").reset_index(drop=True), wide], axis=1)
    if len(df) == 0:
        raise ValueError(f"policy file {target!r} has no rows")
    return df


def _align(df: pd.DataFrame, log: LoggedFeedback, where: str) -> pd.DataFrame:
    keyed = log.extra is not None and "event_id" in log.extra.columns
    if not keyed:
        if "event_id" in df.columns:
            raise ValueError(f"{where} is keyed by event_id, but the log is not a decision service's store: give one "
                             f"row per log row, in order ({len(log)} rows)")
        if len(df) != len(log):
            raise ValueError(f"{where} has {len(df)} rows; a plain log's policy needs exactly one per log row "
                             f"({len(log)}), in order")
        return df.reset_index(drop=True)
    if "event_id" not in df.columns:
        raise ValueError(f"{where} needs an event_id column to match the store's events")
    ids = df["event_id"].astype(str)
    dup = ids[ids.duplicated()].unique()
    if len(dup):
        raise ValueError(f"{where}: event ids listed twice: {', '.join(map(repr, dup[:8]))}")
    wanted = log.extra["event_id"].astype(str)
    indexed = df.assign(event_id=ids).set_index("event_id")
    missing = wanted[~wanted.isin(indexed.index)]
    if len(missing):
        raise ValueError(f"{where} has no row for {len(missing)} evaluated events: "
                         f"{', '.join(map(repr, missing.iloc[:8]))}{' ...' if len(missing) > 8 else ''}")
    return indexed.loc[wanted.to_numpy()].reset_index()


def _arm_index(names: Sequence, action_ids: Sequence[str] | None, k: int, what: str) -> np.ndarray:
    """Arm indices of ``names`` (ids of a store, else integer arms); unknown names raise."""
    if action_ids is None:
        out = pd.to_numeric(pd.Series(list(names)), errors="coerce").to_numpy(np.float64)
        bad = ~np.isfinite(out) | (out != np.round(out)) | (out < 0) | (out >= k)
        if bad.any():
            vals = np.asarray(list(names), dtype=object)
            raise ValueError(f"{what} must be arm indices in [0, {k}): {describe_rows(np.flatnonzero(bad), vals[bad])}")
        return out.astype(np.int64)
    lookup = {name: j for j, name in enumerate(action_ids)}
    idx = np.asarray([lookup.get(str(n), -1) for n in names])
    if (idx < 0).any():
        vals = np.asarray([str(n) for n in names], dtype=object)
        raise ValueError(f"{what} name action ids the store never offered: "
                         f"{describe_rows(np.flatnonzero(idx < 0), vals[idx < 0])}")
    return idx


def policy_probabilities(source, log: LoggedFeedback, action_ids: Sequence[str] | None = None) -> np.ndarray:
    """``π (n, K)`` of the target in ``source`` (a path or a DataFrame in the module docstring's layout) on ``log``'s
    rows.  ``action_ids``: the store's ids in arm order (:attr:`~banditkit.offline.store.StoreInfo.action_ids`),
    ``None`` for a plain log."""
    where = f"policy file {os.fspath(source)!r}" if not isinstance(source, pd.DataFrame) else "the policy table"
    df = read_table(source) if not isinstance(source, pd.DataFrame) else source
    df = _align(df, log, where)
    k = log.num_actions
    prob_cols = [c for c in df.columns if str(c).startswith(PREFIX)]
    if ("action" in df.columns) == bool(prob_cols):
        raise ValueError(f"{where}: give either an 'action' column or probability columns "
                         f"{PREFIX}<arm> (found {'both' if prob_cols else 'neither'}; columns {list(df.columns)[:12]})")
    rows = "rows are evaluated events in seq order" if log.extra is not None and "event_id" in log.extra else \
        "rows are log rows"
    try:
        if log.extra is not None and "action_ids" in log.extra.columns:
            probs = _positional(df, prob_cols, [json.loads(t) for t in log.extra["action_ids"]], k)
        elif "action" in df.columns:
            probs = one_hot(_arm_index(df["action"].tolist(), action_ids, k, "actions"), k)
        else:
            arms = _arm_index([str(c)[len(PREFIX):] for c in prob_cols], action_ids, k, "probability columns")
            probs = np.zeros((len(df), k))
            values = df[prob_cols].apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)
            probs[:, arms] = np.nan_to_num(values, nan=0.0)
        return check_probabilities(probs, log)
    except ValueError as e:
        raise ValueError(f"{where}: {e} ({rows})") from None


def _positional(df: pd.DataFrame, prob_cols: list, row_ids: list[list[str]], k: int) -> np.ndarray:
    """``(n, K)`` for a store whose arm ``j`` is an event's ``j``-th action (``row_ids[i]``: event ``i``'s ids)."""
    probs = np.zeros((len(df), k))
    absent: list[int] = []
    if "action" in df.columns:
        for i, (name, ids) in enumerate(zip(df["action"].astype(str), row_ids, strict=True)):
            if name in ids:
                probs[i, ids.index(name)] = 1.0
            else:
                absent.append(i)
    else:
        values = df[prob_cols].apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)
        names = [str(c)[len(PREFIX):] for c in prob_cols]
        for i, ids in enumerate(row_ids):
            for name, v in zip(names, values[i], strict=True):
                if not np.isfinite(v) or v == 0:
                    continue
                if name in ids:
                    probs[i, ids.index(name)] = v
                else:
                    absent.append(i)
    if absent:
        rows = np.unique(absent)
        raise ValueError(f"the target names actions absent from the event's action set: {describe_rows(rows)}")
    return probs
