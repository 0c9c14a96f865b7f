"""``banditkit serve`` end to end: the real server (uvicorn, a child process) on a loopback port, driven over HTTP.

One server for the module (linear Thompson sampling, per-arm features, tiny shapes, a bearer token, a 4 s reward
deadline); every check reads the server's SQLite log directly to see what was (and was not) written.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from banditkit.serve.process import ServerProcess  # noqa: E402

TOKEN = "s3cret-token"
ARGS = ["--agent", "linear-thompson", "--context-dim", "2", "--action-dim", "3", "--max-actions", "4",
        "--max-batch", "2", "--learn-batch", "2", "--snapshot-every", "3", "--reward-deadline", "4",
        "--default-reward", "-1", "--draws", "16", "--max-body", "4096"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    srv = ServerProcess(["--store", str(d / "log.db"), *ARGS], token=TOKEN, log_path=str(d / "server.log"))
    srv.start()
    srv.db_path = str(d / "log.db")
    yield srv
    assert srv.stop() == 0, srv.log()


def _db(srv):
    return sqlite3.connect(srv.db_path)


def _counts(srv) -> tuple[int, int]:
    with _db(srv) as db:
        return (db.execute("SELECT COUNT(*) FROM events").fetchone()[0],
                db.execute("SELECT COUNT(*) FROM rewards").fetchone()[0])


def _actions(n: int, shift: int = 0) -> list[dict]:
    return [{"id": f"item{k + shift}", "features": [float(k == j) for j in range(3)]} for k in range(n)]


def _rank(srv, event_id: str, n: int = 3, shift: int = 0, **extra):
    return srv.post("/rank", {"event_id": event_id, "context": [0.5, -1.0], "actions": _actions(n, shift), **extra})


def test_rank_and_reward_over_http(server):
    answers = {}
    for i, (n, shift) in enumerate([(2, 0), (3, 1), (4, 0), (3, 2), (2, 5)]):  # the action set changes per request
        status, ans = _rank(server, f"flow-{i}", n, shift)
        assert status == 200, ans
        ids = [a["id"] for a in _actions(n, shift)]
        assert ans["event_id"] == f"flow-{i}" and ans["action_id"] in ids
        assert sorted(ans["ranking"]) == sorted(ids) and ans["ranking"][0] == ans["action_id"]
        assert 0.0 < ans["probability"] <= 1.0
        answers[f"flow-{i}"] = ans
    for i, eid in enumerate(answers):
        status, ans = server.post("/reward", {"event_id": eid, "reward": float(i % 2)})
        assert status == 200 and ans["status"] == "recorded", ans
    with _db(server) as db:
        rows = db.execute("SELECT event_id, chosen_id, probability, probabilities, actions, response, spec "
                          "FROM events WHERE event_id LIKE 'flow-%'").fetchall()
        rewards = dict(db.execute("SELECT event_id, reward FROM rewards WHERE source='observed'").fetchall())
    assert len(rows) == 5
    for eid, chosen, p, probs, actions, response, spec in rows:
        ans = answers[eid]
        assert chosen == ans["action_id"] and p == ans["probability"] and json.loads(response) == ans
        probs = json.loads(probs)
        ids = [a["id"] for a in json.loads(actions)]
        assert math.isclose(sum(probs), 1.0, abs_tol=1e-9) and probs[ids.index(chosen)] == p
        assert spec == "linear-thompson"
    assert {e: rewards[e] for e in answers} == {e: float(i % 2) for i, e in enumerate(answers)}
    deadline = time.time() + 30
    while time.time() < deadline:  # the learner applies the committed rewards off the request path
        status, health = server.get("/health")
        if health["model_version"] >= 5:
            break
        time.sleep(0.1)
    assert status == 200 and health["model_version"] >= 5, health


def test_duplicate_event_id_gets_the_first_answer(server):
    status, first = _rank(server, "dup-1", 3)
    assert status == 200
    before = _counts(server)
    for n in (3, 4):  # even with another action set: the same answer, no second decision
        status, again = _rank(server, "dup-1", n)
        assert status == 200 and again == first
    assert _counts(server) == before
    assert server.post("/reward", {"event_id": "dup-1", "reward": 1.0})[0] == 200
    status, ans = server.post("/reward", {"event_id": "dup-1", "reward": 0.0})
    assert status == 409 and "already has a reward" in ans["error"]
    status, ans = server.post("/reward", {"event_id": "never-ranked", "reward": 1.0})
    assert status == 404 and "no decision with event_id" in ans["error"]


BAD_RANKS = [
    (b'{"event_id": "b1", "context": [1, 2], "actions": [', 400, "not valid JSON"),
    (b'[1, 2]', 422, "must be a JSON object"),
    (b'{"event_id": "b1", "context": [1, 2]}', 422, "missing field(s) ['actions']"),
    (b'{"event_id": "b1", "context": [1, 2], "actions": [{"id": "a", "features": [1, 0, 0]}], "colour": 1}', 422,
     "unknown field(s) ['colour']"),
    (b'{"event_id": "b1", "context": [1, 2, 3], "actions": [{"id": "a", "features": [1, 0, 0]}]}', 422,
     "context must have 2 numbers, got 3"),
    (b'{"event_id": "b1", "context": [1, NaN], "actions": [{"id": "a", "features": [1, 0, 0]}]}', 422,
     "context[1] is nan"),
    (b'{"event_id": "b1", "context": [1, 2], "actions": [{"id": "a", "features": [1, Infinity, 0]}]}', 422,
     "actions[0].features[1] is inf"),
    (b'{"event_id": "b1", "context": [1, "x"], "actions": [{"id": "a", "features": [1, 0, 0]}]}', 422,
     "context[1] must be a number"),
    (b'{"event_id": "b1", "context": [1, 2], "actions": []}', 422, "non-empty list"),
    (json.dumps({"event_id": "b1", "context": [1, 2], "actions": _actions(5)}).encode(), 422,
     "at most 4 per request"),
    (b'{"event_id": "b1", "context": [1, 2], "actions": [{"id": "a"}]}', 422, "needs \"features\""),
    (b'{"event_id": "b1", "context": [1, 2], "actions": [{"id": "a", "features": [1, 0]}]}', 422,
     "actions[0].features must have 3 numbers"),
    (b'{"event_id": "", "context": [1, 2], "actions": [{"id": "a", "features": [1, 0, 0]}]}', 422,
     "event_id must be a non-empty string"),
    (b'{"event_id": "b1", "context": [1, 2], "actions": [{"id": "a", "features": [1, 0, 0]}, '
     b'{"id": "a", "features": [0, 1, 0]}]}', 422, "ids must be unique"),
    (b'{"event_id": "b1", "context": [1, 2], "actions": [{"id": "a", "features": [1, 0, 0]}], "baseline_id": "z"}',
     422, "baseline_id 'z' is not one of"),
    (json.dumps({"event_id": "b1", "context": [1, 2], "actions": _actions(1), "pad": "x" * 5000}).encode(), 413,
     "at most 4096"),
]
BAD_REWARDS = [
    (b'{"event_id": "flow-0"}', 422, "missing field(s) ['reward']"),
    (b'{"event_id": "flow-0", "reward": NaN}', 422, "must be finite"),
    (b'{"event_id": "flow-0", "reward": "1"}', 422, "reward must be a number"),
    (b'{"event_id": "flow-0", "reward": 1, "weight": 2}', 422, "unknown field(s) ['weight']"),
]


@pytest.mark.parametrize("path,cases", [("/rank", BAD_RANKS), ("/reward", BAD_REWARDS)])
def test_bad_input_is_a_4xx_that_says_what_and_logs_nothing(server, path, cases):
    before = _counts(server)
    for body, want, text in cases:
        status, ans = server.request("POST", path, body)
        assert status == want and text in ans["error"], (body[:80], status, ans)
    assert _counts(server) == before


def test_bearer_token_guards_every_route(server):
    for method, path in [("POST", "/rank"), ("POST", "/reward"), ("GET", "/health"), ("GET", "/"),
                         ("GET", "/status.json")]:
        for auth in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}):
            status, ans = server.request(method, path, b'{"event_id": "t", "reward": 1}', headers=auth)
            assert status == 401 and "bearer token" in ans["error"], (path, auth)
    status, page = server.get("/")
    assert status == 200 and "<svg" in page and "decisions/s" in page
    status, ans = server.get("/rank")
    assert status == 405 and "does not take GET" in ans["error"]
    status, ans = server.post("/ranks", {})
    assert status == 404 and "no route POST /ranks" in ans["error"]


def test_reward_deadline_applies_the_default_reward(server):
    assert _rank(server, "late-1", 2)[0] == 200
    deadline = time.time() + 20
    row = None
    while time.time() < deadline and row is None:
        time.sleep(0.25)
        with _db(server) as db:
            row = db.execute("SELECT reward, source FROM rewards WHERE event_id='late-1'").fetchone()
    assert row == (-1.0, "default")
    status, ans = server.post("/reward", {"event_id": "late-1", "reward": 1.0})
    assert status == 409 and "reward deadline" in ans["error"]


def test_the_benchmarks_load_generator_against_the_real_server(server):
    """``python -m benchmarks serve``'s load generator: closed and open loop, with rewards; every request answered."""
    from benchmarks.suites.serve_load import make_bodies, run_load

    bodies = make_bodies(5, 2, 3, 3)
    closed = run_load(server.port, bodies, rate=None, connections=2, seconds=0.5, prefix="lg-c", token=TOKEN)
    assert closed.ok > 0 and closed.errors == 0 and closed.latencies_ms.size == closed.ok
    opened = run_load(server.port, bodies, rate=20, connections=2, seconds=0.5, rewards=True, prefix="lg-o",
                      token=TOKEN)
    assert opened.sent == 10 and opened.ok == 10 and opened.rewards_ok == 10 and opened.errors == 0
    with _db(server) as db:
        assert db.execute("SELECT COUNT(*) FROM rewards WHERE event_id LIKE 'lg-o%'").fetchone()[0] == 10
