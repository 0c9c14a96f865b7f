"""The service's durable log behind one small interface: :class:`Store`, and its embedded default :class:`SQLiteStore`.

Everything the service acknowledges is committed here before the HTTP answer leaves (the tables:
:mod:`banditkit.serve.schema`).  The service needs only these operations, so a server database (PostgreSQL, ...) fits
behind the same interface (``docs/serving.md``):

* ``meta()`` / ``set_meta(d)``: the service's settings (``schema_version``, ``spec``, shapes, the id catalogue);
* ``responses(ids)``: ``{event_id: response JSON}`` of the ids already decided (a duplicate gets it again);
* ``add_events(rows, meta)``: decisions (:class:`EventRow`) and settings updates, in one transaction;
* ``add_rewards(rows)``: rewards ``(event_id, reward, ts, source)`` in one transaction; per row ``"ok"``,
  ``"unknown"`` (no such event) or ``"rewarded"`` (it has one already);
* ``expire(before, reward, now)``: the default reward for every event decided before ``before`` that has none;
* ``rewards_after(pos, limit)``: the rewards in the order they were committed, after position ``pos``, each joined
  with its event (what the learner applies: :class:`RewardRow`);
* ``add_snapshot(...)`` / ``last_snapshot()``: the agent-state files written every N rewards;
* ``counts()`` (and, for the status page, ``series`` / ``rewarded``): what the status page shows.

:class:`SQLiteStore` runs SQLite (stdlib) in WAL mode; ``sync="full"`` (default) syncs the WAL on every commit (an
acknowledged event survives a power cut), ``"normal"`` only at checkpoints (it survives the process being killed,
not the machine losing power).  A connection belongs to one thread: each thread of the service opens its own
(:meth:`SQLiteStore.reopen`).  Rewards are ordered by SQLite's ``rowid`` of ``rewards`` (insertion order; rows are
never deleted), which is the order the learner applies them — on line and when replaying after a restart.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from banditkit.serve.schema import SCHEMA, SCHEMA_VERSION


class EventRow(NamedTuple):
    """One decision as stored in ``events`` (``context`` / ``actions`` / ``probabilities`` / ``response`` as JSON)."""

    event_id: str
    ts: float
    context: str
    actions: str
    chosen_id: str
    chosen_index: int
    probability: float
    probabilities: str | None
    baseline_id: str | None
    spec: str
    model_version: int
    response: str


class RewardRow(NamedTuple):
    """A committed reward joined with its decision: what the learner applies (``pos``: its commit position;
    ``context`` / ``actions``: the event's JSON text)."""

    pos: int
    event_id: str
    reward: float
    context: str
    actions: str
    chosen_index: int


class Store(Protocol):
    """The operations the service needs from its log (see the module docstring)."""

    def meta(self) -> dict[str, str]: ...
    def set_meta(self, values: dict[str, str]) -> None: ...
    def responses(self, event_ids: Iterable[str]) -> dict[str, str]: ...
    def add_events(self, rows: Sequence[EventRow], meta: dict[str, str] | None = None) -> None: ...
    def add_rewards(self, rows: Sequence[tuple[str, float, float, str]]) -> list[str]: ...
    def expire(self, before: float, reward: float, now: float) -> int: ...
    def rewards_after(self, pos: int, limit: int) -> list[RewardRow]: ...
    def add_snapshot(self, upto_event_seq: int, ts: float, path: str) -> None: ...
    def last_snapshot(self) -> tuple[int, str] | None: ...
    def counts(self) -> dict[str, int]: ...


SYNC_MODES = ("full", "normal")


class SQLiteStore:
    """:class:`Store` on one SQLite file (WAL mode).  ``path``: the database file (created with the schema if new).

    Raises ``ValueError`` when the file holds another schema version or is not a banditkit store.
    """

    def __init__(self, path: str | os.PathLike, *, sync: str = "full", timeout: float = 30.0):
        if sync not in SYNC_MODES:
            raise ValueError(f"sync must be one of {SYNC_MODES}, got {sync!r}")
        self.path = os.fspath(path)
        self.sync = sync
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise ValueError(f"the store's folder {folder!r} does not exist; create it first")
        self.db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        try:
            self._open(sync)
        except sqlite3.DatabaseError as e:
            self.db.close()
            raise ValueError(f"{self.path!r} is not a banditkit serve store ({e}); give a new file or a store that "
                             "banditkit serve made") from None

    def _open(self, sync: str) -> None:
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={sync.upper()}")
        self.db.execute("PRAGMA foreign_keys=ON")
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            self.db.close()
            raise ValueError(f"{self.path!r} is a SQLite database of something else (tables {sorted(tables)[:5]}), "
                             "not a banditkit serve store; give a new file")
        with self._tx():
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    self.db.execute(stmt)
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                self._wrong_version = row[0]
        if getattr(self, "_wrong_version", None) is not None:
            self.db.close()
            raise ValueError(f"{self.path!r} has store schema version {self._wrong_version}; this banditkit reads "
                             f"version {SCHEMA_VERSION}")

    def reopen(self) -> SQLiteStore:
        """Another connection to the same file (one per thread)."""
        return SQLiteStore(self.path, sync=self.sync)

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------------------------------------ transactions
    class _Tx:
        def __init__(self, db: sqlite3.Connection):
            self.db = db

        def __enter__(self):
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, kind, value, tb):
            self.db.execute("COMMIT" if kind is None else "ROLLBACK")
            return False

    def _tx(self) -> SQLiteStore._Tx:
        return SQLiteStore._Tx(self.db)

    # ------------------------------------------------------------------------------------------------ settings
    def meta(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT key, value FROM meta").fetchall())

    def set_meta(self, values: dict[str, str]) -> None:
        with self._tx() as db:
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in values.items()])

    # ------------------------------------------------------------------------------------------------ decisions
    def responses(self, event_ids: Iterable[str]) -> dict[str, str]:
        ids = list(dict.fromkeys(event_ids))
        out: dict[str, str] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            q = f"SELECT event_id, response FROM events WHERE event_id IN ({','.join('?' * len(chunk))})"
            out.update(self.db.execute(q, chunk).fetchall())
        return out

    def add_events(self, rows: Sequence[EventRow], meta: dict[str, str] | None = None) -> None:
        with self._tx() as db:
            db.executemany("INSERT INTO events (event_id, ts, context, actions, chosen_id, chosen_index, probability, "
                           "probabilities, baseline_id, spec, model_version, response) "
                           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            if meta:
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()])

    # ------------------------------------------------------------------------------------------------ rewards
    def add_rewards(self, rows: Sequence[tuple[str, float, float, str]]) -> list[str]:
        out: list[str] = []
        with self._tx() as db:
            for event_id, reward, ts, source in rows:
                if db.execute("SELECT 1 FROM events WHERE event_id=?", (event_id,)).fetchone() is None:
                    out.append("unknown")
                elif db.execute("SELECT 1 FROM rewards WHERE event_id=?", (event_id,)).fetchone() is not None:
                    out.append("rewarded")
                else:
                    db.execute("INSERT INTO rewards (event_id, reward, ts, source) VALUES (?,?,?,?)",
                               (event_id, float(reward), float(ts), source))
                    out.append("ok")
        return out

    def expire(self, before: float, reward: float, now: float) -> int:
        with self._tx() as db:
            cur = db.execute("INSERT INTO rewards (event_id, reward, ts, source) SELECT e.event_id, ?, ?, 'default' "
                             "FROM events e WHERE e.ts < ? AND NOT EXISTS (SELECT 1 FROM rewards r WHERE "
                             "r.event_id = e.event_id) ORDER BY e.seq", (float(reward), float(now), float(before)))
            return int(cur.rowcount)

    def rewards_after(self, pos: int, limit: int) -> list[RewardRow]:
        q = ("SELECT r.rowid, r.event_id, r.reward, e.context, e.actions, e.chosen_index FROM rewards r "
             "JOIN events e ON e.event_id = r.event_id WHERE r.rowid > ? ORDER BY r.rowid LIMIT ?")
        return [RewardRow(*row) for row in self.db.execute(q, (int(pos), int(limit)))]

    # ------------------------------------------------------------------------------------------------ snapshots
    def add_snapshot(self, upto_event_seq: int, ts: float, path: str) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO snapshots (upto_event_seq, ts, path) VALUES (?,?,?)",
                       (int(upto_event_seq), float(ts), path))

    def last_snapshot(self) -> tuple[int, str] | None:
        row = self.db.execute("SELECT upto_event_seq, path FROM snapshots ORDER BY seq DESC LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def last_event_seq(self) -> int:
        return int(self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])

    # ------------------------------------------------------------------------------------------------ status
    def counts(self) -> dict[str, int]:
        events = int(self.db.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        obs, dflt = self.db.execute("SELECT COALESCE(SUM(source='observed'), 0), COALESCE(SUM(source='default'), 0) "
                                    "FROM rewards").fetchone()
        return dict(events=events, rewards=int(obs) + int(dflt), observed=int(obs), defaulted=int(dflt),
                    pending=events - int(obs) - int(dflt))

    def series(self, since: float, width: float) -> dict[str, list]:
        """Per time bucket ``[since + i width, since + (i+1) width)``: decisions, rewards, mean observed reward."""
        dec = self.db.execute("SELECT CAST((ts - ?) / ? AS INTEGER) b, COUNT(*) FROM events WHERE ts >= ? GROUP BY b",
                              (since, width, since)).fetchall()
        rew = self.db.execute("SELECT CAST((ts - ?) / ? AS INTEGER) b, COUNT(*), AVG(reward) FROM rewards "
                              "WHERE ts >= ? AND source = 'observed' GROUP BY b", (since, width, since)).fetchall()
        return dict(decisions=dec, rewards=rew)

    def rewarded(self, limit: int) -> list[tuple]:
        """The latest ``limit`` events with an observed reward: ``(actions, chosen_index, probability,
        probabilities, baseline_id, response, reward)`` (JSON columns as text)."""
        q = ("SELECT e.actions, e.chosen_index, e.probability, e.probabilities, e.baseline_id, e.response, r.reward "
             "FROM events e JOIN rewards r ON r.event_id = e.event_id WHERE r.source = 'observed' "
             "ORDER BY e.seq DESC LIMIT ?")
        return self.db.execute(q, (int(limit),)).fetchall()
