"""The decision service's store schema (SQLite dialect), version :data:`SCHEMA_VERSION`.

One row per served decision in ``events`` and one per reward in ``rewards``, both written and committed before the
HTTP answer is sent, so the store is the service's log: ``banditkit evaluate --log STORE`` reads it directly.

* ``meta(key, value)``: ``'schema_version'`` (``str(SCHEMA_VERSION)``), ``'spec'`` (the agent spec served),
  ``'num_actions'`` (when the catalogue is fixed) and other service settings, all as text.
* ``events``: ``seq`` orders the decisions; ``context`` is a JSON list of floats; ``actions`` a JSON list of
  ``{"id": str, "features": [float, ...] | null}``; ``chosen_index`` indexes ``actions``; ``probability`` is the
  served (logging) policy's propensity of ``chosen_id``; ``probabilities`` the served policy's probability of every
  action when known (JSON list, else NULL); ``baseline_id`` the baseline's action in apprentice mode (what was
  served; NULL otherwise); ``spec`` / ``model_version`` the agent that decided; ``response`` the JSON answer sent
  (a duplicate ``event_id`` gets it again).
* ``rewards``: at most one per event; ``source`` is ``'observed'`` (posted to ``/reward``) or ``'default'`` (the
  reward deadline passed).
* ``snapshots``: agent-state files written every N events; ``upto_event_seq`` is the last event whose decision and
  (when present) reward the snapshot includes.  On start the service loads the newest one and replays the log after
  it.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS events(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT UNIQUE NOT NULL,
    ts REAL NOT NULL,
    context TEXT NOT NULL,
    actions TEXT NOT NULL,
    chosen_id TEXT NOT NULL,
    chosen_index INTEGER NOT NULL,
    probability REAL NOT NULL,
    probabilities TEXT,
    baseline_id TEXT,
    spec TEXT NOT NULL,
    model_version INTEGER NOT NULL,
    response TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rewards(
    event_id TEXT PRIMARY KEY REFERENCES events(event_id),
    reward REAL NOT NULL,
    ts REAL NOT NULL,
    source TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots(
    seq INTEGER PRIMARY KEY,
    upto_event_seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    path TEXT NOT NULL);
"""

__all__ = ["SCHEMA", "SCHEMA_VERSION"]
