"""The decision engine behind the HTTP app: decide micro-batches, log them, learn from committed rewards, snapshot.

Two kinds of action sets (:class:`~banditkit.serve.validate.Shape`):

* **features** (``action_dim = F > 0``): a per-arm agent scores one row ``[context, features_k]`` (``d + F``
  numbers) per action; a request's ``n <= K`` actions fill the first ``n`` rows of a ``(K, d + F)`` matrix
  (``K = max_actions``) and the rest are masked, so every request has the same shape and the catalogue may change
  on every call.
* **catalogue** (``action_dim = 0``): a multi-output agent with ``K`` output slots; an id gets the next free slot the
  first time it is seen (kept in the store's ``meta['catalogue']``, in the same transaction as the event), and the
  request's ids are the available slots.

Decisions (:meth:`Engine.rank`): one :meth:`~banditkit.offline.ServingAgent.decide_batch` call for the batch; the
served action is drawn from ``π(· | x)`` and its exact probability is logged (apprentice mode: the baseline's
action is served and logged with probability 1 — a deterministic logging policy — while the agent's own pick is
reported in the answer).  Rewards (:meth:`Engine.reward`) are committed and the learner thread applies them in the
store's commit order (:meth:`~banditkit.offline.ServingAgent.record_many`, batches of up to ``learn_batch``); every
``snapshot_every`` applied rewards it saves the agent (atomic :meth:`~banditkit.offline.ServingAgent.save`, the
commit position in its ``extra``) and records the file in ``snapshots``.  On start the newest snapshot is loaded and
the rewards committed after it are applied in the same order, so the state after a crash equals the state of an
uninterrupted run over the same committed rewards.  ``model_version`` = the number of rewards applied.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
import warnings
from collections import OrderedDict

import numpy as np

from banditkit.offline.serving import ServingAgent
from banditkit.serve.store import EventRow, RewardRow, SQLiteStore
from banditkit.serve.validate import BadRequest, RankRequest, RewardRequest, Shape

RECENT = 8192  # encoded decisions kept for the learner (an older one is rebuilt from the log when rewarded)
KEEP_SNAPSHOTS = 3  # snapshot files kept on disk (older ones are deleted; their rows stay in the table)


@dataclasses.dataclass(frozen=True)
class ServeConfig:
    """The service's settings (``banditkit serve`` options)."""

    spec: str = "hilofi-thompson"
    context_dim: int = 1
    action_dim: int = 0
    max_actions: int = 20
    draws: int = 32
    seed: int = 0
    apprentice: bool = False
    snapshot_every: int = 1000
    reward_deadline: float | None = None
    default_reward: float = 0.0
    max_batch: int = 64
    learn_batch: int = 64
    sync: str = "full"

    @property
    def shape(self) -> Shape:
        return Shape(self.context_dim, self.action_dim, self.max_actions)

    def fixed(self) -> dict[str, str]:
        """The settings a store is tied to (saved in ``meta``; a restart must agree with them)."""
        return dict(spec=self.spec, context_dim=str(self.context_dim), action_dim=str(self.action_dim),
                    num_actions=str(self.max_actions), seed=str(self.seed), draws=str(self.draws))


def check_config(cfg: ServeConfig) -> None:
    """Refuse settings that cannot work, saying which and why."""
    if cfg.context_dim < 0 or cfg.action_dim < 0:
        raise ValueError("--context-dim and --action-dim must be >= 0")
    if cfg.max_actions < 2:
        raise ValueError(f"--max-actions must be >= 2, got {cfg.max_actions}")
    if cfg.draws < 1 or cfg.max_batch < 1 or cfg.learn_batch < 1 or cfg.snapshot_every < 1:
        raise ValueError("--draws, --max-batch, --learn-batch and --snapshot-every must be >= 1")
    if cfg.reward_deadline is not None and cfg.reward_deadline <= 0:
        raise ValueError(f"--reward-deadline must be > 0 seconds, got {cfg.reward_deadline}")


class _Batch:
    """A decided micro-batch on its way to the log: its answers, and whether its commit succeeded."""

    def __init__(self):
        self.answers: dict[str, str] = {}
        self.ok = False


class Engine:
    """See the module docstring.  ``store_path``: the SQLite file; ``cfg``: the settings."""

    def __init__(self, store_path: str | os.PathLike, cfg: ServeConfig, *, start_learner: bool = True):
        check_config(cfg)
        self.cfg = cfg
        self.store = SQLiteStore(store_path, sync=cfg.sync)  # the rank path's connection
        meta = self.store.meta()
        for k, v in cfg.fixed().items():
            if k in meta and meta[k] != v:
                self.store.close()
                raise ValueError(f"the store {self.store.path!r} was made with {k}={meta[k]!r}, not {v!r}: start with "
                                 f"the store's settings or use a new store")
        self._commit_store = self.store.reopen()  # the rank path's second stage (its own thread)
        self._reward_store = self.store.reopen()
        self._learn_store = self.store.reopen()
        self.status_store = self.store.reopen()  # read by the status page (the event loop's thread)
        self.snapshot_dir = os.fspath(store_path) + ".snapshots"
        os.makedirs(self.snapshot_dir, exist_ok=True)
        self.store.set_meta({**cfg.fixed(), "apprentice": str(int(cfg.apprentice))})
        self.catalogue: list[str] = json.loads(meta.get("catalogue", "[]"))
        self._slots = {a: i for i, a in enumerate(self.catalogue)}
        self._lock = threading.Lock()  # the learner's state swap vs a snapshot
        self._inflight: dict[str, _Batch] = {}  # event ids decided, not committed yet
        self._recent: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()  # the latest decisions, encoded
        self._recent_lock = threading.Lock()
        self.failed: BaseException | None = None  # a commit of decisions failed: no more decisions until a restart
        self.srv = self._load_agent()
        self.pos = int(self.srv.saved_meta.get("pos", 0))  # commit position of the last applied reward
        self.applied = int(self.srv.saved_meta.get("applied", 0))
        self._since_snapshot = 0
        self.srv.decisions = self.store.last_event_seq()  # fresh keys for the decisions after a restart
        self.replayed = self.learn_all()
        self.started = time.time()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.learner_error: BaseException | None = None
        self._thread = threading.Thread(target=self._learn_loop, name="banditkit-learner", daemon=True)
        if start_learner:
            self._thread.start()

    # ------------------------------------------------------------------------------------------------ the agent
    @property
    def per_arm(self) -> bool:
        return self.cfg.action_dim > 0

    def _example(self) -> np.ndarray:
        c = self.cfg
        if self.per_arm:
            return np.zeros((c.max_actions, c.context_dim + c.action_dim), np.float32)
        return np.zeros((max(c.context_dim, 1),), np.float32)

    def _load_agent(self) -> ServingAgent:
        snap = self.store.last_snapshot()
        if snap is not None and os.path.exists(snap[1]):
            try:
                srv = ServingAgent.load(snap[1], keep_history=False)
            except ValueError as e:  # another banditkit version's state layout, or a damaged file: the log has it all
                warnings.warn(f"the store's last snapshot {snap[1]!r} cannot be loaded ({str(e).splitlines()[0]}); "
                              "rebuilding the agent from every reward in the log instead", RuntimeWarning,
                              stacklevel=2)
            else:
                srv.num_draws = self.cfg.draws
                return srv
        elif snap is not None:
            raise ValueError(f"the store's last snapshot {snap[1]!r} is missing: restore the file, or start from a "
                             "copy of the store without its snapshots table rows")
        srv = ServingAgent.from_spec(self.cfg.spec, num_actions=self.cfg.max_actions, example_context=self._example(),
                                     per_arm=self.per_arm, seed=self.cfg.seed, num_draws=self.cfg.draws)
        srv.keep_history = False
        if srv.agent.warmup_rounds > 0:
            raise ValueError(f"{self.cfg.spec!r} needs a warm-up fit (subspace_ekf / neural_linear), which banditkit "
                             "serve does not run yet: serve e.g. hilofi-thompson, lofi-thompson or linear-thompson")
        return srv

    @property
    def model_version(self) -> int:
        return self.applied

    def encode(self, context: list, actions: list[dict] | list[str], features=None):
        """``(x, mask, slots)``: the agent's context, its ``(K,)`` availability and each action's agent index."""
        c = self.cfg
        n = len(actions)
        mask = np.zeros(c.max_actions, bool)
        if self.per_arm:
            x = np.zeros((c.max_actions, c.context_dim + c.action_dim), np.float32)
            x[:n, :c.context_dim] = np.asarray(context, np.float32)
            x[:n, c.context_dim:] = np.asarray(features, np.float32)
            mask[:n] = True
            return x, mask, list(range(n))
        x = np.asarray(context if c.context_dim else [1.0], np.float32)
        slots = [self._slots[a] for a in actions]
        mask[slots] = True
        return x, mask, slots

    def _assign_slots(self, ids: list[str], new: list[str]) -> None:
        for a in ids:
            if a not in self._slots and a not in new:
                if len(self.catalogue) + len(new) >= self.cfg.max_actions:
                    raise BadRequest(409, f"action id {a!r} is new but all {self.cfg.max_actions} catalogue slots are "
                                          "taken (--max-actions); reuse known ids or start a store with more slots")
                new.append(a)

    # ------------------------------------------------------------------------------------------------ decisions
    def rank(self, reqs: list[RankRequest]) -> list[str | BadRequest]:
        """Decide, log (one transaction) and answer a micro-batch (each answer as its JSON text); a repeated
        ``event_id`` gets its first answer.  The same as ``rank_prepare(reqs)()``."""
        return self.rank_prepare(reqs)()

    def rank_prepare(self, reqs: list[RankRequest]):
        """Stage 1 of :meth:`rank` (the decisions): returns stage 2, ``finish() -> answers``, which commits the batch.

        The two stages run in two threads (:class:`~banditkit.serve.batching.MicroBatcher`), so batch ``k + 1`` is
        decided while batch ``k`` is committed; the stages run in the same order, one at a time each, so the log's
        order is the decisions' order.  An ``event_id`` decided in a batch not committed yet gets that batch's answer
        once it is committed.  A failed commit stops the service's decisions (every later ``/rank`` is a 503 until a
        restart, which resumes from the log).
        """
        if self.failed is not None:
            raise RuntimeError(f"an earlier write to the log failed ({self.failed}); restart the service")
        out: list[str | BadRequest | None] = [None] * len(reqs)
        # in flight first, then the log: a batch leaves _inflight only after its commit
        pending = {r.event_id: self._inflight.get(r.event_id) for r in reqs}
        known = self.store.responses(r.event_id for r in reqs)
        todo: list[int] = []
        first: dict[str, int] = {}
        waits: dict[int, _Batch] = {}
        new_ids: list[str] = []
        for i, r in enumerate(reqs):
            if pending[r.event_id] is not None:
                waits[i] = pending[r.event_id]
            elif r.event_id in known:
                out[i] = known[r.event_id]
            elif r.event_id in first:
                continue  # answered below with the first one's answer
            else:
                if not self.per_arm:
                    try:
                        self._assign_slots(r.ids, new_ids)
                    except BadRequest as e:
                        out[i] = e
                        continue
                first[r.event_id] = i
                todo.append(i)
        rows: list[EventRow] = []
        batch = _Batch()
        if todo:
            for a in new_ids:
                self._slots[a] = len(self.catalogue)
                self.catalogue.append(a)
            enc = [self.encode(reqs[i].context, reqs[i].ids, reqs[i].features) for i in todo]
            acts, probs = self.srv.decide_batch(np.stack([e[0] for e in enc]), np.stack([e[1] for e in enc]))
            version = self.model_version
            now = time.time()
            for j, i in enumerate(todo):
                out[i], row = self._answer(reqs[i], enc[j][2], int(acts[j]), probs[j], version, now)
                batch.answers[reqs[i].event_id] = out[i]
                self._remember(reqs[i].event_id, enc[j][0], enc[j][2][row.chosen_index])
                rows.append(row)
        for eid in batch.answers:
            self._inflight[eid] = batch
        meta = {"catalogue": json.dumps(self.catalogue)} if new_ids else None

        def finish() -> list[str | BadRequest]:
            try:
                if rows:
                    self._commit_store.add_events(rows, meta)
                batch.ok = True
            except BaseException as e:
                self.failed = e
                raise
            finally:
                for eid in batch.answers:
                    self._inflight.pop(eid, None)
            for i, b in waits.items():  # decided in an earlier batch, committed (or failed) before this one
                eid = reqs[i].event_id
                out[i] = b.answers[eid] if b.ok else BadRequest(503, f"the decision of {eid!r} could not be logged; "
                                                                     "retry after the service restarts")
            for i, r in enumerate(reqs):
                if out[i] is None:
                    out[i] = out[first[r.event_id]]
            return out  # type: ignore[return-value]

        return finish

    def _answer(self, r: RankRequest, slots: list[int], action: int, probs: np.ndarray, version: int, now: float):
        p = [float(probs[s]) for s in slots]  # the agent's probability of each requested action
        agent_index = slots.index(action)
        if self.cfg.apprentice:
            chosen = r.ids.index(r.baseline_id) if r.baseline_id is not None else 0
            served = [0.0] * len(r.ids)
            served[chosen] = 1.0
        else:
            chosen, served = agent_index, p
        order = sorted(range(len(r.ids)), key=lambda k: (k != chosen, -served[k], -p[k], k))
        resp = {"event_id": r.event_id, "action_id": r.ids[chosen], "probability": served[chosen],
                "ranking": [r.ids[k] for k in order], "model_version": version}
        if self.cfg.apprentice:
            resp["apprentice"] = {"agent_action_id": r.ids[agent_index], "agent_probability": p[agent_index],
                                  "agent_probabilities": p}
        actions = r.actions_json
        if actions is None:
            feats = r.features.tolist() if isinstance(r.features, np.ndarray) else r.features or [None] * len(r.ids)
            actions = json.dumps([{"id": a, "features": f} for a, f in zip(r.ids, feats, strict=True)])
        text = json.dumps(resp)
        row = EventRow(r.event_id, now, json.dumps(r.context), actions, r.ids[chosen], chosen, served[chosen],
                       json.dumps(served), r.ids[chosen] if self.cfg.apprentice else None, self.cfg.spec, version, text)
        return text, row

    # ------------------------------------------------------------------------------------------------ rewards
    def reward(self, reqs: list[RewardRequest]) -> list[dict | BadRequest]:
        """Commit a batch of rewards (one transaction) and wake the learner; per request an answer or a 4xx."""
        now = time.time()
        seen: set[str] = set()
        rows, where = [], []
        out: list[dict | BadRequest | None] = [None] * len(reqs)
        for i, r in enumerate(reqs):
            if r.event_id in seen:
                out[i] = BadRequest(409, f"event {r.event_id!r} already has a reward (sent twice in a row)")
                continue
            seen.add(r.event_id)
            rows.append((r.event_id, r.reward, now, "observed"))
            where.append(i)
        for i, status in zip(where, self._reward_store.add_rewards(rows), strict=True):
            eid = reqs[i].event_id
            if status == "ok":
                out[i] = {"event_id": eid, "status": "recorded"}
            elif status == "unknown":
                out[i] = BadRequest(404, f"no decision with event_id {eid!r}: /rank it first (rewards are matched by "
                                         "event_id)")
            else:
                out[i] = BadRequest(409, f"event {eid!r} already has a reward (observed earlier, or the default "
                                         "reward applied at the reward deadline)")
        self._wake.set()
        return out  # type: ignore[return-value]

    def warm_up(self) -> float:
        """Compile the decision and learning programs for every micro-batch size (powers of two up to
        ``max_batch`` / ``learn_batch``) before traffic comes; returns the seconds it took.  The state and the
        decision counter are left as they were."""
        import jax.numpy as jnp

        from banditkit.offline.serving import bucket

        t0 = time.time()
        x, mask, _ = self.encode([0.0] * self.cfg.context_dim, ["a", "b"] if self.per_arm else [],
                                 np.zeros((2, self.cfg.action_dim)) if self.per_arm else None)
        mask[:2] = True
        srv = self.srv
        b = 1
        while b <= bucket(self.cfg.max_batch):
            srv._decide_many(srv.state, srv._base_key(), jnp.int32(0), np.repeat(x[None], b, 0),
                             np.repeat(mask[None], b, 0))
            b *= 2
        b = 1
        while b <= bucket(self.cfg.learn_batch):
            srv._record_many(srv.state, np.repeat(x[None], b, 0), np.zeros(b, np.int32), np.zeros(b, np.float32),
                             np.zeros(b, bool))
            b *= 2
        self.started = time.time()
        return self.started - t0

    # ------------------------------------------------------------------------------------------------ learning
    def _remember(self, event_id: str, x: np.ndarray, action: int) -> None:
        with self._recent_lock:
            self._recent[event_id] = (x, action)
            if len(self._recent) > RECENT:
                self._recent.popitem(last=False)

    def _rows(self, rows: list[RewardRow]):
        xs, acts = [], []
        for row in rows:
            with self._recent_lock:
                hit = self._recent.pop(row.event_id, None)
            if hit is None:  # decided before this process started, or long ago: rebuilt from the log
                actions = json.loads(row.actions)
                ids = [a["id"] for a in actions]
                feats = [a["features"] for a in actions] if self.per_arm else None
                x, _, slots = self.encode(json.loads(row.context), ids, feats)
                hit = (x, slots[row.chosen_index])
            xs.append(hit[0])
            acts.append(hit[1])
        return np.stack(xs), np.asarray(acts, np.int32), np.asarray([r.reward for r in rows], np.float64)

    def learn_once(self) -> int:
        """Apply up to ``learn_batch`` committed rewards after ``pos``; returns how many."""
        rows = self._learn_store.rewards_after(self.pos, self.cfg.learn_batch)
        if not rows:
            return 0
        xs, acts, rewards = self._rows(rows)
        with self._lock:
            self.srv.record_many(xs, acts, rewards)
            self.pos = rows[-1].pos
            self.applied += len(rows)
            self._since_snapshot += len(rows)
        if self._since_snapshot >= self.cfg.snapshot_every:
            self.snapshot()
        return len(rows)

    def learn_all(self) -> int:
        """Apply every committed reward not applied yet (the replay on start); returns how many."""
        total = 0
        while (n := self.learn_once()) > 0:
            total += n
        return total

    def expire(self) -> int:
        """The default reward for events older than the reward deadline (none without a deadline)."""
        if self.cfg.reward_deadline is None:
            return 0
        now = time.time()
        return self._learn_store.expire(now - self.cfg.reward_deadline, self.cfg.default_reward, now)

    def snapshot(self) -> str:
        """Save the agent with its commit position; record the file in ``snapshots``; keep the newest few."""
        with self._lock:
            upto = self._learn_store.last_event_seq()
            path = os.path.join(self.snapshot_dir, f"state-{self.pos:012d}.npz")
            self.srv.save(path, extra={"pos": self.pos, "applied": self.applied})
            self._since_snapshot = 0
        self._learn_store.add_snapshot(upto, time.time(), path)
        files = sorted(f for f in os.listdir(self.snapshot_dir) if f.startswith("state-") and f.endswith(".npz"))
        for f in files[:-KEEP_SNAPSHOTS]:
            os.remove(os.path.join(self.snapshot_dir, f))
        return path

    def _learn_loop(self) -> None:
        last_expire = 0.0
        try:
            while not self._stop.is_set():
                self._wake.wait(0.2)
                self._wake.clear()
                if self.cfg.reward_deadline is not None and time.time() - last_expire > min(1.0,
                                                                                         self.cfg.reward_deadline / 4):
                    last_expire = time.time()
                    self.expire()
                while self.learn_once() > 0 and not self._stop.is_set():
                    pass
        except BaseException as e:  # reported by /health; the log keeps every reward for the next start
            self.learner_error = e

    def close(self, *, snapshot: bool = True) -> None:
        """Stop the learner, apply what is committed, snapshot (when anything changed) and close the store."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        if self.learner_error is None:
            self.learn_all()
            if snapshot and self._since_snapshot > 0:
                self.snapshot()
        for s in (self.store, self._commit_store, self._reward_store, self._learn_store, self.status_store):
            s.close()
