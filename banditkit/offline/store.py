"""The decision service's store (``banditkit serve --store PATH``, an SQLite file) read as a log for off-policy
evaluation: ``banditkit evaluate --log STORE`` and :func:`~banditkit.offline.log.load` detect it by its content (the
SQLite header), whatever its file name.

The store's tables are :data:`banditkit.serve.schema.SCHEMA` (version 1).  One evaluated row per event that has a
reward, in ``events.seq`` order:

* **arms**, two layouts (the service's own):

  - *a catalogue of ids* (no action features): arm ``k`` is the ``k``-th id of the meta key ``catalogue`` (the
    service's slot order) followed by any other id in the order first seen over all events (``seq`` order; stable:
    new events only append ids); ``K`` is the meta key ``num_actions`` (the service's slots) when larger.  The
    context is the event's ``context`` ``(d,)`` (one constant 1 when the service has no context), for a
    multi-output model over the ``K`` slots.
  - *actions with features* (every action of every evaluated event must then have them, all of one width ``F``):
    arm ``k`` of an event is its ``k``-th action (**positional**, as the service scores them: the ids may differ from
    event to event), ``K`` the largest set (or ``num_actions`` when larger), and the context a ``(K, d + F)`` matrix
    whose row ``k`` is ``[context, features of action k]`` (a per-arm model); the event's ids are kept in the log's
    ``extra["action_ids"]`` (a JSON list per row) so a target file can still name actions by id.

* **action** ``a_i``: the arm of the served id — ``baseline_id`` in apprentice mode (the baseline's action was
  served and rewarded), else ``chosen_id`` (which must be ``actions[chosen_index]``).
* **propensity** ``p_i``: ``probability`` (the served policy's probability of ``chosen_id``) when the served id is
  ``chosen_id``; otherwise the served policy's entry for the served id in ``probabilities`` when that list was
  logged.  If some served action has no known propensity, the whole log loads without propensities (only DM
  applies) and :class:`StoreInfo` says how many.  (The service logs apprentice decisions with ``chosen_id =
  baseline_id`` and probability 1: a deterministic logger, under which only targets that agree with it can be
  evaluated by IPS / DR.)
* **action sets**: when the events offer different sets of ids (or fewer than ``K``), ``available (n, K)`` marks the
  arms of each event's set.  What is supported: a target's probability is 0 for an action absent from an event's
  set (agents are masked; a target file that puts mass there is refused), and absent arms get zero features (never
  scored).
* **left out**: events without a reward yet (:attr:`StoreInfo.unrewarded` counts them); rewards with
  ``source = 'default'`` (the reward deadline passed) are kept and counted.

The log's ``extra`` columns carry ``event_id``, ``seq``, ``ts``, ``spec``, ``model_version`` and ``reward_source``
(so a target policy file can be keyed by ``event_id``).  The file is opened read-only; a live service can keep
writing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from banditkit.offline import checks
from banditkit.offline.log import LoggedFeedback, from_arrays

SQLITE_HEADER = b"SQLite format 3\x00"
SUPPORTED_VERSIONS = ("1",)
_COLUMNS = ("seq, event_id, ts, context, actions, chosen_id, chosen_index, probability, probabilities, baseline_id, "
            "spec, model_version")


class StoreInfo(NamedTuple):
    """What :func:`read_store` read: the ``path``; ``action_ids`` (arm ``k`` is ``action_ids[k]``; empty in the
    positional layout, where the ids are per event: ``positional``); the number of
    ``events`` in the store, of ``rewarded`` ones (the log's rows), of ``unrewarded`` ones (left out) and of
    ``default_rewards`` (rewards the deadline applied); ``fixed_actions`` (every evaluated event offered the same ids in
    the same order); ``specs`` ``{spec: evaluated events it served}``; ``apprentice`` (evaluated events that served a
    baseline's action); ``no_propensity`` (evaluated events whose
    served action has no known propensity)."""

    path: str
    action_ids: tuple[str, ...]
    events: int
    rewarded: int
    unrewarded: int
    default_rewards: int
    fixed_actions: bool
    specs: dict
    no_propensity: int
    positional: bool = False
    apprentice: int = 0

    def summary(self) -> str:
        """One paragraph for a report: what was evaluated and what was left out."""
        served = ", ".join(f"{s} ({n} events)" for s, n in self.specs.items())
        arms = ("actions with features, arm k = an event's k-th action" if self.positional
                else f"{len(self.action_ids)} action ids")
        sets = "one fixed set" if self.fixed_actions else "sets vary by event: a target gives 0 to ids absent"
        text = (f"store {self.path}: {self.events} events, {self.rewarded} with a reward evaluated "
                f"({self.default_rewards} of them the deadline's default reward), {self.unrewarded} without a reward "
                f"left out; {arms} ({sets}); served by {served}")
        if self.apprentice:
            text += (f"; {self.apprentice} events served the baseline's action (apprentice mode): where it was logged "
                     "with probability 1, IPS / DR see only targets that agree with the baseline and the rest rests on "
                     "the reward model")
        if self.no_propensity:
            text += f"; {self.no_propensity} served actions have no known propensity, so only DM applies"
        return text + "."


def is_store(path: str | os.PathLike) -> bool:
    """True when ``path`` is an SQLite database file (read from its first 16 bytes, not its name)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _connect(path: str) -> sqlite3.Connection:
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    return sqlite3.connect(uri, uri=True)


def _rows(path: str) -> tuple[dict, list[tuple]]:
    con = _connect(path)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = {"events", "rewards"} - tables
        if missing:
            raise ValueError(f"{path} is an SQLite file but not a banditkit serve store: it has no "
                             f"{' or '.join(sorted(missing))} table (tables: {sorted(tables)})")
        meta = dict(con.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
        version = meta.get("schema_version")
        if version is not None and str(version) not in SUPPORTED_VERSIONS:
            raise ValueError(f"{path}: store schema version {version}; this banditkit reads version(s) "
                             f"{', '.join(SUPPORTED_VERSIONS)} -- upgrade banditkit")
        cols = ", ".join(f"e.{c.strip()}" for c in _COLUMNS.split(","))
        rows = con.execute(f"SELECT {cols}, r.reward, r.source FROM events e LEFT JOIN rewards r "
                           "ON r.event_id = e.event_id ORDER BY e.seq").fetchall()
    finally:
        con.close()
    return meta, rows


def _floats(text) -> list[float] | None:
    try:
        v = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(v, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return None
    return [float(x) for x in v]


def _problem(problems: dict, text: str, event_id: str) -> None:
    problems.setdefault(text, []).append(event_id)


def read_store(path: str | os.PathLike, num_actions: int | None = None) -> tuple[LoggedFeedback, StoreInfo]:
    """``(log, info)``: the store at ``path`` as a validated log (the module docstring's rules) and what was read.
    ``num_actions``: at least this many arms (slots), e.g. to match an agent built for more.

    Raises ``ValueError`` naming the events (by ``event_id``) whose rows cannot be read, and
    :class:`~banditkit.offline.checks.LogError` from the log's own checks (rows are then positions among the
    evaluated events, in ``seq`` order)."""
    target = os.fspath(path)
    if not os.path.exists(target):
        raise FileNotFoundError(f"store {target!r} does not exist")
    meta, rows = _rows(target)
    ids: dict[str, int] = {}
    try:
        for name in json.loads(meta.get("catalogue", "[]")):
            ids.setdefault(str(name), len(ids))
    except (TypeError, ValueError):
        raise ValueError(f"{target}: meta 'catalogue' is not a JSON list of action ids") from None
    problems: dict[str, list[str]] = {}
    parsed = []
    for seq, event_id, ts, ctx, acts, chosen_id, chosen_index, prob, probs, baseline_id, spec, version, reward, \
            source in rows:
        try:
            actions = json.loads(acts)
            names = [str(a["id"]) for a in actions]
        except (TypeError, ValueError, KeyError):
            _problem(problems, "actions is not a JSON list of {\"id\": ..., \"features\": ...}", event_id)
            continue
        for name in names:
            ids.setdefault(name, len(ids))
        if reward is None:
            continue
        context = _floats(ctx)
        if context is None:
            _problem(problems, "context is not a JSON list of numbers", event_id)
            continue
        features = [a.get("features") for a in actions]
        if not names or len(set(names)) != len(names):
            _problem(problems, "the action set is empty or repeats an id", event_id)
            continue
        if not 0 <= int(chosen_index) < len(names) or names[int(chosen_index)] != str(chosen_id):
            _problem(problems, "chosen_index does not point at chosen_id in actions", event_id)
            continue
        served = str(chosen_id) if baseline_id is None else str(baseline_id)
        if served not in names:
            _problem(problems, "baseline_id is not in the event's actions", event_id)
            continue
        propensity = float(prob) if served == str(chosen_id) else None
        if propensity is None and probs is not None:
            listed = _floats(probs)
            if listed is not None and len(listed) == len(names):
                propensity = listed[names.index(served)]
        parsed.append((seq, event_id, ts, context, names, features, served, propensity, spec, version,
                       float(reward), source, baseline_id is not None))
    if problems:
        text = "; ".join(f"{p}: events {', '.join(map(repr, ev[:checks.SHOW_ROWS]))}"
                         + (f" and {len(ev) - checks.SHOW_ROWS} more" if len(ev) > checks.SHOW_ROWS else "")
                         for p, ev in problems.items())
        raise ValueError(f"{target}: unreadable events in the store ({text}); nothing was dropped: fix or delete "
                         "those rows")
    if not parsed:
        raise ValueError(f"{target}: no event in the store has a reward yet ({len(rows)} events): nothing to evaluate")
    fixed_k = int(meta["num_actions"]) if str(meta.get("num_actions", "")).isdigit() else 0
    if num_actions is not None and int(num_actions) < fixed_k:
        raise ValueError(f"num_actions={num_actions} is below the store's {fixed_k} slots; leave it out for a store")
    log, positional = _to_log(parsed, ids, max(fixed_k, num_actions or 0), target)
    order = [tuple(p[4]) for p in parsed]
    info = StoreInfo(
        path=target, action_ids=() if positional else tuple(ids) + tuple(f"<slot {j}>" for j in range(len(ids),
                                                                                                        log.num_actions)),
        events=len(rows), rewarded=len(parsed), unrewarded=len(rows) - len(parsed),
        default_rewards=sum(p[11] == "default" for p in parsed),
        fixed_actions=len(set(order)) == 1 and len(order[0]) == log.num_actions,
        specs=dict(pd.Series([p[8] for p in parsed]).value_counts(sort=False)),
        no_propensity=sum(p[7] is None for p in parsed), positional=positional,
        apprentice=sum(p[12] for p in parsed),
    )
    return log, info


def _to_log(parsed: list, ids: dict[str, int], min_k: int, target: str) -> tuple[LoggedFeedback, bool]:
    """``(log, positional)`` in the module docstring's two layouts."""
    n = len(parsed)
    widths = {len(p[3]) for p in parsed}
    if len(widths) > 1:
        bad = [p[1] for p in parsed if len(p[3]) != len(parsed[0][3])]
        raise ValueError(f"{target}: contexts of different lengths ({sorted(widths)}): events "
                         f"{', '.join(map(repr, bad[:checks.SHOW_ROWS]))} differ from the first rewarded event's "
                         f"{len(parsed[0][3])}")
    d = widths.pop()
    has_f = [[f is not None for f in p[5]] for p in parsed]
    positional = any(any(h) for h in has_f)
    extra = {"event_id": [str(p[1]) for p in parsed], "seq": [int(p[0]) for p in parsed],
             "ts": [float(p[2]) for p in parsed], "spec": [str(p[8]) for p in parsed],
             "model_version": [int(p[9]) for p in parsed], "reward_source": [str(p[11]) for p in parsed]}
    if positional:
        if not all(all(h) for h in has_f):
            bad = [p[1] for p, h in zip(parsed, has_f, strict=True) if not all(h)]
            raise ValueError(f"{target}: some actions have features and some do not (events "
                             f"{', '.join(map(repr, bad[:checks.SHOW_ROWS]))}): a per-arm model needs every action's "
                             "features")
        f_widths = {len(f) for p in parsed for f in p[5]}
        if len(f_widths) > 1:
            raise ValueError(f"{target}: action features of different widths {sorted(f_widths)}")
        f = f_widths.pop()
        k = max(min_k, max(len(p[4]) for p in parsed))
        contexts = np.zeros((n, k, d + f), np.float64)
        contexts[:, :, :d] = np.asarray([p[3] for p in parsed], np.float64).reshape(n, 1, d)
        available = np.zeros((n, k), bool)
        for i, p in enumerate(parsed):
            contexts[i, :len(p[5]), d:] = p[5]
            available[i, :len(p[4])] = True
        actions = [p[4].index(p[6]) for p in parsed]
        extra["action_ids"] = [json.dumps(p[4]) for p in parsed]
    else:
        k = max(min_k, len(ids))
        # a context-free service (empty contexts): one constant feature, as a context-free log has (x0 = 1)
        contexts = np.asarray([p[3] for p in parsed], np.float64) if d else np.ones((n, 1))
        available = np.zeros((n, k), bool)
        for i, p in enumerate(parsed):
            available[i, [ids[name] for name in p[4]]] = True
        actions = [ids[p[6]] for p in parsed]
    props = None if any(p[7] is None for p in parsed) else np.asarray([p[7] for p in parsed], np.float64)
    log = from_arrays(contexts, actions, [p[10] for p in parsed], props, num_actions=k,
                      available=None if available.all() else available, shared_width=d if positional else 0,
                      extra=pd.DataFrame(extra), warn=False)
    return log, positional
