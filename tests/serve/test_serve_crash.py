"""``kill -9`` under load: the restarted service loses no acknowledged event, and its agent state equals an
uninterrupted run over the same committed rewards (one ``ServingAgent.record`` per reward, in commit order).

The real server (child process) takes concurrent rank + reward traffic from four client threads and is SIGKILLed while
they run; it is restarted on the same store (last snapshot + replay of the log after it), takes a little more
traffic, and is stopped cleanly (its final snapshot holds the state compared).
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import threading
import time

import jax
import numpy as np
import pytest

pytest.importorskip("uvicorn")

from banditkit.offline.serving import ServingAgent  # noqa: E402
from banditkit.serve.process import ServerProcess  # noqa: E402

D, F, K = 2, 3, 4
ARGS = ["--agent", "linear-thompson", "--context-dim", str(D), "--action-dim", str(F), "--max-actions", str(K),
        "--max-batch", "2", "--learn-batch", "2", "--snapshot-every", "5", "--draws", "16", "--sync", "normal"]


class Client(threading.Thread):
    """Rank then reward, over and over, on one keep-alive connection; remembers what was sent and acknowledged."""

    def __init__(self, port: int, name: str, seed: int, sent: dict, acked_rank: dict, acked_reward: dict):
        super().__init__(daemon=True)
        self.port, self.name_, self.rng = port, name, np.random.default_rng(seed)
        self.sent, self.acked_rank, self.acked_reward = sent, acked_rank, acked_reward

    def _post(self, conn, path, payload):
        conn.request("POST", path, json.dumps(payload), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            for i in range(10_000):
                eid = f"{self.name_}-{i}"
                n = int(self.rng.integers(2, K + 1))
                req = {"event_id": eid, "context": self.rng.normal(size=D).round(3).tolist(),
                       "actions": [{"id": f"a{k}", "features": self.rng.normal(size=F).round(3).tolist()}
                                   for k in range(n)]}
                self.sent[eid] = req
                status, ans = self._post(conn, "/rank", req)
                assert status == 200, ans
                self.acked_rank[eid] = ans
                reward = float(self.rng.normal())
                status, ans = self._post(conn, "/reward", {"event_id": eid, "reward": reward})
                assert status == 200, ans
                self.acked_reward[eid] = reward
        except (OSError, http.client.HTTPException):
            return  # the server was killed


def _encode(req: dict) -> np.ndarray:
    x = np.zeros((K, D + F), np.float32)
    n = len(req["actions"])
    x[:n, :D] = req["context"]
    x[:n, D:] = [a["features"] for a in req["actions"]]
    return x


def test_kill_9_under_load_loses_nothing_and_replays_to_the_same_state(tmp_path):
    store = str(tmp_path / "log.db")
    sent, acked_rank, acked_reward = {}, {}, {}
    srv = ServerProcess(["--store", store, *ARGS], log_path=str(tmp_path / "server.log")).start()
    clients = [Client(srv.port, f"c{j}", j, sent, acked_rank, acked_reward) for j in range(4)]
    for c in clients:
        c.start()
    deadline = time.time() + 60
    while len(acked_reward) < 24 and time.time() < deadline:
        time.sleep(0.02)
    assert all(c.is_alive() for c in clients), "a client stopped before the kill"
    srv.kill()  # SIGKILL while the four clients are mid-request
    for c in clients:
        c.join(30)
    assert len(acked_reward) >= 24

    with sqlite3.connect(store) as db:
        committed = db.execute("SELECT COUNT(*) FROM rewards").fetchone()[0]
        snap = db.execute("SELECT path FROM snapshots ORDER BY seq DESC LIMIT 1").fetchone()
    assert snap is not None, "no snapshot before the kill: the test would not exercise snapshot + replay"
    applied_in_snapshot = ServingAgent.load(snap[0]).saved_meta["applied"]
    srv2 = ServerProcess(["--store", store, *ARGS], port=srv.port, log_path=str(tmp_path / "server2.log")).start()
    status, health = srv2.get("/health")
    assert status == 200 and health["replayed_on_start"] == committed - applied_in_snapshot
    assert health["model_version"] == committed
    for i in range(3):  # the restarted service serves and learns on
        req = {"event_id": f"after-{i}", "context": [0.1 * i, 1.0],
               "actions": [{"id": "x", "features": [1.0, 0.0, 0.0]}, {"id": "y", "features": [0.0, 1.0, 0.0]}]}
        sent[req["event_id"]] = req
        status, ans = srv2.post("/rank", req)
        assert status == 200
        acked_rank[req["event_id"]] = ans
        assert srv2.post("/reward", {"event_id": req["event_id"], "reward": 0.5})[0] == 200
        acked_reward[req["event_id"]] = 0.5
    assert srv2.stop() == 0, srv2.log()

    with sqlite3.connect(store) as db:
        events = {e: (c, k, p) for e, c, k, p in
                  db.execute("SELECT event_id, chosen_id, chosen_index, probability FROM events")}
        rewards = db.execute("SELECT event_id, reward FROM rewards ORDER BY rowid").fetchall()
        snap = db.execute("SELECT path FROM snapshots ORDER BY seq DESC LIMIT 1").fetchone()[0]
    # no acknowledged decision or reward is lost, and the log holds what was answered
    for eid, ans in acked_rank.items():
        assert events[eid][0] == ans["action_id"] and events[eid][2] == ans["probability"]
    logged = dict(rewards)
    for eid, r in acked_reward.items():
        assert logged[eid] == r
    # an uninterrupted run over the committed rewards, in commit order, one record() each
    ref = ServingAgent.from_spec("linear-thompson", num_actions=K, example_context=np.zeros((K, D + F), np.float32),
                                 per_arm=True)
    for eid, r in rewards:
        ref.record(_encode(sent[eid]), events[eid][1], r)
    final = ServingAgent.load(snap)
    assert final.saved_meta["applied"] == len(rewards)
    got, want = jax.tree_util.tree_leaves(final.state), jax.tree_util.tree_leaves(ref.state)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-4, atol=1e-5)
