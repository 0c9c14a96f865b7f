"""The decision engine in process: a fixed catalogue of ids (no features), apprentice mode, slots, duplicates, and
what the learner applies (against one ``ServingAgent.record`` per reward)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from banditkit.offline.serving import ServingAgent
from banditkit.serve.engine import Engine, ServeConfig
from banditkit.serve.status import render, summarize
from banditkit.serve.validate import BadRequest, RankRequest, RewardRequest

CFG = ServeConfig(spec="linear-thompson", context_dim=2, action_dim=0, max_actions=3, apprentice=True, draws=16,
                  max_batch=2, learn_batch=2)


def _req(eid, ids, baseline=None, ctx=(0.5, -1.0)):
    return RankRequest(eid, list(ctx), list(ids), None, baseline)


def test_catalogue_apprentice_mode(tmp_path):
    eng = Engine(tmp_path / "log.db", CFG, start_learner=False)
    a, b = (json.loads(t) for t in eng.rank([_req("e1", ["x", "y"], baseline="y"), _req("e2", ["y", "z"])]))
    # apprentice: the baseline is served (the request's baseline_id, else its first action), logged with p = 1
    assert a["action_id"] == "y" and a["probability"] == 1.0 and a["ranking"][0] == "y"
    assert b["action_id"] == "y" and b["probability"] == 1.0
    assert a["apprentice"]["agent_action_id"] in ("x", "y")
    assert abs(sum(a["apprentice"]["agent_probabilities"]) - 1) < 1e-9
    assert eng.catalogue == ["x", "y", "z"] and json.loads(eng.store.meta()["catalogue"]) == ["x", "y", "z"]
    # a duplicate in the same batch and in a later one: the first answer, one row
    again = eng.rank([_req("e3", ["z", "x"], ctx=(1.0, 2.0)), _req("e3", ["x"]), _req("e1", ["x", "y"])])
    assert again[0] == again[1] and json.loads(again[2]) == a
    assert eng.store.counts()["events"] == 3
    # a fourth id does not fit the 3 slots: refused, nothing logged
    (full,) = eng.rank([_req("e4", ["w", "x"])])
    assert isinstance(full, BadRequest) and full.status == 409 and "catalogue slots" in full.message
    assert eng.store.counts()["events"] == 3 and eng.catalogue == ["x", "y", "z"]
    rows = eng.store.db.execute("SELECT chosen_id, chosen_index, probability, probabilities, baseline_id "
                                "FROM events ORDER BY seq").fetchall()
    assert rows[0] == ("y", 1, 1.0, "[0.0, 1.0]", "y") and rows[1][4] == "y"

    res = eng.reward([RewardRequest("e2", 1.0), RewardRequest("e1", 0.25), RewardRequest("e1", 0.5),
                      RewardRequest("nope", 1.0)])
    assert [r["status"] if isinstance(r, dict) else r.status for r in res] == ["recorded", "recorded", 409, 404]
    e3 = json.loads(again[0])
    assert eng.reward([RewardRequest("e3", -1.0)])[0]["status"] == "recorded"
    assert eng.learn_all() == 3 and eng.model_version == 3
    # the agent learnt from the served (baseline) actions, in commit order, at their catalogue slots
    ref = ServingAgent.from_spec("linear-thompson", num_actions=3, example_context=np.zeros(2, np.float32))
    ref.record([0.5, -1.0], 1, 1.0)  # e2 served y (slot 1)
    ref.record([0.5, -1.0], 1, 0.25)  # e1 served y
    ref.record([1.0, 2.0], {"z": 2, "x": 0}[e3["action_id"]], -1.0)
    for got, want in zip(jax.tree_util.tree_leaves(eng.srv.state), jax.tree_util.tree_leaves(ref.state), strict=True):
        np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), rtol=1e-5, atol=1e-6)
    # the status numbers: values by IPS on the observed rewards (apprentice: logged p = 1), the agent's agreement
    s = summarize(eng)
    assert s["counts"] == dict(events=3, rewards=3, observed=3, defaulted=0, pending=0)
    v = s["values"]
    assert v["rows"] == 3 and "baseline" not in v  # apprentice: the baseline is the served policy
    assert v["served"]["value"] == pytest.approx((1.0 + 0.25 - 1.0) / 3)
    assert v["uniform"]["value"] == pytest.approx(0.5 * (1.0 + 0.25 - 1.0) / 3)  # 1/2 of each 2-action request
    agree = [b["apprentice"]["agent_probabilities"][0], a["apprentice"]["agent_probabilities"][1],
             e3["apprentice"]["agent_probabilities"][0]]  # the agent's probability of each served baseline
    assert v["agent_agreement"] == pytest.approx(np.mean(agree))
    assert "Agent ↔ baseline agreement" in render(s)
    eng.close()
    # a restart on the same store must not contradict its settings
    with pytest.raises(ValueError, match="was made with num_actions='3'"):
        Engine(tmp_path / "log.db", ServeConfig(**{**CFG.__dict__, "max_actions": 4}), start_learner=False)
    eng2 = Engine(tmp_path / "log.db", CFG, start_learner=False)
    assert eng2.model_version == 3 and eng2.replayed == 0 and eng2.catalogue == ["x", "y", "z"]
    eng2.close()


def test_a_snapshot_this_version_cannot_load_is_rebuilt_from_the_log(tmp_path):
    """A snapshot this version cannot load (damaged, or saved by a version with another state layout): the engine
    warns and replays every committed reward from the start, reaching the same state as an uninterrupted run."""
    cfg = ServeConfig(**{**CFG.__dict__, "apprentice": False})
    eng = Engine(tmp_path / "log.db", cfg, start_learner=False)
    answers = [json.loads(t) for t in eng.rank([_req("e1", ["x", "y"]), _req("e2", ["y", "z"], ctx=(1.0, 2.0))])]
    eng.reward([RewardRequest("e1", 1.0), RewardRequest("e2", -0.5)])
    assert eng.learn_all() == 2
    want = [np.asarray(x, float) for x in jax.tree_util.tree_leaves(eng.srv.state)]
    eng.close()
    from banditkit.serve.store import SQLiteStore

    store = SQLiteStore(tmp_path / "log.db")
    snap = store.last_snapshot()
    store.close()
    assert snap is not None and snap[0] == 2
    with open(snap[1], "r+b") as f:  # a damaged file (cut short), as one a reader cannot use
        f.truncate(100)
    with pytest.warns(RuntimeWarning, match="rebuilding the agent from every reward in the log"):
        eng2 = Engine(tmp_path / "log.db", cfg, start_learner=False)
    assert eng2.replayed == 2 and eng2.model_version == 2
    assert [a["action_id"] for a in answers] == [r[0] for r in eng2.store.db.execute(
        "SELECT chosen_id FROM events ORDER BY seq").fetchall()]
    for got, w in zip(jax.tree_util.tree_leaves(eng2.srv.state), want, strict=True):
        np.testing.assert_allclose(np.asarray(got, float), w, rtol=1e-5, atol=1e-6)
    eng2.close()
