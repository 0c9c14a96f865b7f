"""``banditkit evaluate --log STORE``: the decision service's SQLite store (written here with stdlib sqlite3 and
banditkit.serve.schema.SCHEMA) read as a log, a user's own target policy from a file, and the counterfactual report,
checked against values computed by hand."""

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

import banditkit.offline as off
from banditkit.cli import main
from banditkit.offline import counterfactual as cf
from banditkit.offline import estimators as est
from banditkit.offline.commands import run_evaluate
from banditkit.offline.policy_file import policy_probabilities
from banditkit.offline.store import is_store, read_store
from banditkit.serve.schema import SCHEMA, SCHEMA_VERSION


def _store(path, events, rewards, meta=None):
    """``events``: dicts with event_id, context, actions (ids or (id, features)), chosen, probability and optional
    baseline / probabilities / spec; ``rewards``: {event_id: (reward, source)}."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO meta VALUES (?, ?)",
                    [("schema_version", str(SCHEMA_VERSION)), ("spec", "linear-thompson")] + list((meta or {}).items()))
    for t, e in enumerate(events):
        acts = [{"id": a, "features": None} if isinstance(a, str) else {"id": a[0], "features": a[1]}
                for a in e["actions"]]
        names = [a["id"] for a in acts]
        con.execute("INSERT INTO events (event_id, ts, context, actions, chosen_id, chosen_index, probability, "
                    "probabilities, baseline_id, spec, model_version, response) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (e["event_id"], float(t), json.dumps(e["context"]), json.dumps(acts), e["chosen"],
                     names.index(e["chosen"]), e["probability"], json.dumps(e.get("probabilities"))
                     if e.get("probabilities") else None, e.get("baseline"), e.get("spec", "linear-thompson"), 1, "{}"))
    for eid, (r, source) in rewards.items():
        con.execute("INSERT INTO rewards VALUES (?, ?, ?, ?)", (eid, r, 0.0, source))
    con.commit()
    con.close()
    return path


IDS = ["b", "a", "c"]  # first seen in this order: arms 0, 1, 2


def _fixed(n=24, seed=0):
    rng = np.random.default_rng(seed)
    probs = np.array([0.5, 0.3, 0.2])
    events, rewards = [], {}
    for i in range(n):
        k = int(rng.choice(3, p=probs))
        events.append(dict(event_id=f"e{i}", context=[float(rng.normal()), 1.0], actions=IDS, chosen=IDS[k],
                           probability=float(probs[k])))
        if i % 6 != 5:  # every sixth event has no reward yet
            rewards[f"e{i}"] = (float(k == 2) + 0.1 * i, "default" if i == 0 else "observed")
    return events, rewards


def test_a_fixed_catalogue_store_reads_as_a_log_detected_by_content(tmp_path):
    events, rewards = _fixed()
    path = _store(tmp_path / "traffic.bin", events, rewards)  # no .db / .sqlite extension
    assert is_store(path) and not is_store(tmp_path / "missing")
    log, info = read_store(path)
    kept = [e for e in events if e["event_id"] in rewards]
    assert len(log) == len(kept) == 20 and info.unrewarded == 4 and info.events == 24
    assert info.action_ids == ("b", "a", "c") and info.fixed_actions and info.default_rewards == 1
    assert info.specs == {"linear-thompson": 20} and "4 without a reward left out" in info.summary()
    assert log.available is None and not log.per_arm and log.num_actions == 3
    np.testing.assert_array_equal(log.actions, [IDS.index(e["chosen"]) for e in kept])
    np.testing.assert_allclose(log.propensities, [e["probability"] for e in kept])
    np.testing.assert_allclose(log.rewards, [rewards[e["event_id"]][0] for e in kept])
    np.testing.assert_allclose(log.contexts, [e["context"] for e in kept], rtol=1e-6)
    assert log.extra.event_id.tolist() == [e["event_id"] for e in kept]
    assert len(off.load(path)) == 20  # the Python API reads it too
    # the service's slot order (meta 'catalogue') and slot count (meta 'num_actions') win over first-seen order
    path = _store(tmp_path / "slots.db", events, rewards, {"catalogue": json.dumps(["c", "b"]), "num_actions": "4"})
    log, info = read_store(path)
    assert info.action_ids == ("c", "b", "a", "<slot 3>") and log.num_actions == 4 and not info.fixed_actions
    np.testing.assert_array_equal(log.actions, [("c", "b", "a").index(e["chosen"]) for e in kept])
    assert log.available[:, :3].all() and not log.available[:, 3].any()


def test_own_policy_file_and_the_counterfactual_report_on_a_store(tmp_path, capsys):
    events, rewards = _fixed()
    path = _store(tmp_path / "traffic.db", events, rewards)
    log, _ = read_store(path)
    # the user's policy, keyed by event_id and covering unrewarded events too: "c" on even events, else "a"
    chosen = {e["event_id"]: ("c" if int(e["event_id"][1:]) % 2 == 0 else "a") for e in events}
    lines = [json.dumps({"event_id": k, "action": v}) for k, v in reversed(list(chosen.items()))]  # any order
    (tmp_path / "mine.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "ev"
    assert main(["evaluate", "--log", str(path), "--policy", str(tmp_path / "mine.jsonl"), "--reward-model", "none",
                 "--out", str(out), "--quiet"]) == 0
    table = pd.read_csv(out / "evaluate.csv")
    pi = np.eye(3)[[IDS.index(chosen[e]) for e in log.extra.event_id]]
    w = pi[np.arange(len(log)), log.actions] / log.propensities
    ips = table[(table.policy == "mine") & (table.estimator == "ips")].iloc[0]
    assert ips.value == pytest.approx(np.mean(w * log.rewards))
    diff = w * log.rewards - log.rewards  # paired by row
    half = 1.959963984540054 * diff.std(ddof=1) / np.sqrt(len(diff))
    assert ips.vs_logged == pytest.approx(diff.mean())
    assert (ips.vs_logged_lower, ips.vs_logged_upper) == pytest.approx((diff.mean() - half, diff.mean() + half))
    w_u = (1 / 3) / log.propensities
    assert ips.vs_uniform == pytest.approx(np.mean((w - w_u) * log.rewards))
    md = (out / "evaluate.md").read_text()
    assert "| mine | " in md and "minus logged policy" in md and "4 without a reward left out" in md
    assert "| mine | ips |" in capsys.readouterr().out

    probs = pd.DataFrame({"event_id": list(chosen), "p_c": 0.5, "p_a": 0.25, "p_b": 0.25})
    got = policy_probabilities(probs, log, ("b", "a", "c"))
    np.testing.assert_allclose(got, np.tile([0.25, 0.25, 0.5], (len(log), 1)))
    with pytest.raises(ValueError, match=r"no row for 1 evaluated events: 'e1'"):
        policy_probabilities(probs[probs.event_id != "e1"], log, ("b", "a", "c"))
    with pytest.raises(ValueError, match=r"never offered: rows? 0.*'zz'"):
        policy_probabilities(pd.DataFrame({"event_id": list(chosen), "action": "zz"}), log, ("b", "a", "c"))
    with pytest.raises(ValueError, match="either an 'action' column or probability columns"):
        policy_probabilities(probs.assign(action="a"), log, ("b", "a", "c"))


def test_variable_action_sets_with_features_and_apprentice_rows(tmp_path):
    events = [
        dict(event_id="x1", context=[1.0], actions=[("a", [0.5]), ("b", [1.5])], chosen="b", probability=0.6),
        dict(event_id="x2", context=[2.0], actions=[("b", [2.5]), ("c", [3.5])], chosen="c", probability=0.3),
        # apprentice: the agent chose b, the baseline's c was served: its propensity comes from probabilities
        dict(event_id="x3", context=[3.0], actions=[("c", [4.0]), ("b", [5.0])], chosen="b", probability=0.7,
             baseline="c", probabilities=[0.25, 0.75]),
    ]
    path = _store(tmp_path / "s.sqlite", events, {e["event_id"]: (1.0, "observed") for e in events})
    log, info = read_store(path)  # positional: arm k is the event's k-th action, as the service scores them
    assert info.positional and info.action_ids == () and not info.fixed_actions and log.per_arm
    assert info.apprentice == 1 and "1 events served the baseline's action" in info.summary()
    assert log.num_actions == 2 and log.available is None
    np.testing.assert_array_equal(log.actions, [1, 1, 0])
    np.testing.assert_allclose(log.propensities, [0.6, 0.3, 0.25])
    np.testing.assert_allclose(log.contexts[2], [[3.0, 4.0], [3.0, 5.0]])  # [context, features of action k]
    with pytest.raises(ValueError, match=r"absent from the event's action set: rows 1, 2"):  # "a" only in x1
        policy_probabilities(pd.DataFrame({"event_id": ["x1", "x2", "x3"], "action": "a"}), log)
    got = policy_probabilities(pd.DataFrame({"event_id": ["x3", "x2", "x1"], "action": "b"}), log)
    np.testing.assert_array_equal(got, [[0, 1], [1, 0], [0, 1]])
    wide, _ = read_store(path, num_actions=3)  # room for a third action: masked
    np.testing.assert_array_equal(wide.available, np.tile([True, True, False], (3, 1)))
    np.testing.assert_allclose(off.targets.uniform_probabilities(wide)[0], [0.5, 0.5, 0.0])

    free = [dict(event_id=f"z{i}", context=[], actions=["a", "b"], chosen="a", probability=0.5) for i in range(3)]
    log, _ = read_store(_store(tmp_path / "free.db", free, {"z0": (1.0, "observed"), "z2": (0.0, "observed")}))
    np.testing.assert_array_equal(log.contexts, np.ones((2, 1)))  # a context-free service: x0 = 1

    bad = [dict(events[0], event_id="y1", context="oops")] + events[1:]
    with pytest.raises(ValueError, match=r"context is not a JSON list of numbers: events 'y1'"):
        read_store(_store(tmp_path / "bad.db", bad, {"y1": (1.0, "observed")}))
    con = sqlite3.connect(tmp_path / "other.db")
    con.execute("CREATE TABLE t (x)")
    con.close()
    with pytest.raises(ValueError, match="not a banditkit serve store"):
        read_store(tmp_path / "other.db")


def test_spec_b_on_the_traffic_spec_a_served(tmp_path):
    events, rewards = _fixed(n=48, seed=3)
    path = _store(tmp_path / "traffic.db", events, rewards)
    res = run_evaluate(str(path), ["linear-greedy"], out=str(tmp_path / "ev"))
    table, report = res.table, res.counterfactual
    assert res.store.rewarded == 40 and table.attrs["train_rows"] == 20 and table.attrs["test_rows"] == 20
    assert list(report.policy) == ["linear-greedy", "uniform", "logging"] and report.attrs["estimator"] == "dr"
    dr = table[(table.policy == "linear-greedy") & (table.estimator == "dr")].iloc[0]
    logged = table[table.policy == "logging"].iloc[0]
    assert dr.vs_logged == pytest.approx(dr.value - logged.value)
    assert dr.vs_logged_lower < dr.vs_logged < dr.vs_logged_upper
    uni = table[(table.policy == "uniform") & (table.estimator == "dr")].iloc[0]
    assert dr.vs_uniform == pytest.approx(dr.value - uni.value)
    assert logged.vs_uniform == pytest.approx(logged.value - uni.value)
    assert "minus uniform" in cf.to_markdown(report)


def test_lift_is_the_paired_difference():
    rng = np.random.default_rng(0)
    t1, t0 = rng.normal(size=50), rng.normal(size=50)
    d = est.lift("dr", (t1, None, None), (t0, None, None))
    assert d.value == pytest.approx(np.mean(t1 - t0))
    assert d.stderr == pytest.approx(np.std(t1 - t0, ddof=1) / np.sqrt(50))
    with pytest.raises(ValueError, match="ratios"):
        est.lift("sndr", (t1, t1, t1), (t0, None, None))


def test_own_policy_file_by_row_for_a_plain_log(tmp_path):
    rng = np.random.default_rng(2)
    n, k = 30, 3
    p0 = np.array([0.6, 0.3, 0.1])
    a = rng.choice(k, size=n, p=p0)
    r = rng.normal(size=n) + a
    df = pd.DataFrame({"x0": rng.normal(size=n), "action": a, "reward": r, "propensity": p0[a]})
    off.write_parquet(off.from_frame(df, num_actions=k), tmp_path / "log.parquet")
    probs = np.tile([0.2, 0.3, 0.5], (n, 1))
    pd.DataFrame({"p_0": probs[:, 0], "p_1": probs[:, 1], "p_2": probs[:, 2]}).to_parquet(tmp_path / "soft.parquet")
    res = run_evaluate(str(tmp_path / "log.parquet"), policies=[str(tmp_path / "soft.parquet")], reward_model=None,
                       estimators=["ips", "snips"], out=str(tmp_path / "ev"))
    assert res.table.attrs["train_rows"] == 0 and res.store is None  # only --policy: every row evaluated
    ips = res.table[(res.table.policy == "soft") & (res.table.estimator == "ips")].iloc[0]
    assert ips.value == pytest.approx(np.mean(probs[np.arange(n), a] / p0[a] * r))
    assert list(res.counterfactual.policy) == ["soft", "uniform", "logging"]
    pd.DataFrame({"action": np.zeros(n - 1, int)}).to_csv(tmp_path / "short.csv", index=False)
    with pytest.raises(ValueError, match=r"has 29 rows; a plain log's policy needs exactly one per log row \(30\)"):
        policy_probabilities(tmp_path / "short.csv", off.read_parquet(tmp_path / "log.parquet"))
    only_snips = run_evaluate(str(tmp_path / "log.parquet"), policies=[str(tmp_path / "soft.parquet")],
                              reward_model=None, estimators=["snips"], out=str(tmp_path / "ev2"))
    assert only_snips.counterfactual is None
    assert "No counterfactual report" in (tmp_path / "ev2" / "evaluate.md").read_text()


@pytest.mark.parametrize("action_dim", [0, 1])
def test_a_store_the_real_engine_wrote(tmp_path, action_dim):
    from banditkit.serve.engine import Engine, ServeConfig
    from banditkit.serve.validate import RankRequest, RewardRequest

    cfg = ServeConfig(spec="linear-thompson", context_dim=2, action_dim=action_dim, max_actions=3, draws=16)
    eng = Engine(tmp_path / "live.db", cfg, start_learner=False)
    sets = [["a", "b"], ["b", "c", "a"], ["c", "a"], ["a", "b", "c"]] * 2
    reqs = [RankRequest(f"e{i}", [0.1 * i, 1.0], ids, [[float(len(n))] for n in ids] if action_dim else None, None)
            for i, ids in enumerate(sets)]
    answers = [json.loads(t) for t in eng.rank(reqs)]
    eng.reward([RewardRequest(f"e{i}", float(i)) for i in range(6)])  # e6, e7 wait for theirs
    eng.close()
    log, info = read_store(tmp_path / "live.db")
    assert (len(log), info.unrewarded, info.positional) == (6, 2, bool(action_dim))
    np.testing.assert_allclose(log.propensities, [a["probability"] for a in answers[:6]])
    np.testing.assert_allclose(log.rewards, np.arange(6.0))
    if action_dim:  # arm k = the event's k-th action; its row is [context, features]
        served = [s.index(a["action_id"]) for s, a in zip(sets[:6], answers[:6], strict=True)]
        np.testing.assert_array_equal(log.actions, served)
        np.testing.assert_allclose(log.contexts[1, 2], [0.1, 1.0, 1.0])
    else:  # arm k = the service's k-th catalogue slot
        assert info.action_ids == tuple(eng.catalogue) == ("a", "b", "c")
        np.testing.assert_array_equal(log.actions, [eng.catalogue.index(a["action_id"]) for a in answers[:6]])
    first = pd.DataFrame({"event_id": [f"e{i}" for i in range(8)], "action": [s[0] for s in sets]})
    pi = policy_probabilities(first, log, info.action_ids or None)
    w = pi[np.arange(6), log.actions] / log.propensities
    table = off.evaluate(log, {"first": pi}, reward_model=None, estimators=["ips"])
    assert table.value.iloc[0] == pytest.approx(np.mean(w * log.rewards))
