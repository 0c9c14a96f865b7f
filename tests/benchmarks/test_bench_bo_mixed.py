"""The mixed-space BO suite (benchmarks/suites/bo_mixed.py): each Optuna peer is constructed by the suite and runs past
its startup trials on the suite's Ackley-mixed space (float, int and categorical parameters); a missing or mismatched
BoTorch install is named instead of failing mid-run; a re-run skips the (task, method, seed) runs already in the CSV.

GPSampler and BoTorch need torch (and botorch with optuna-integration), ``[bench]``-only dependencies that the
``[test]`` extra does not install, so their runs are checked by the benchmark itself, not here; what is checked here
for them is that a missing or mismatched install is named before a run starts."""

from __future__ import annotations

import importlib.metadata

import optuna
import pandas as pd
import pytest

from benchmarks.suites import bo_mixed

PEERS = [m for m in bo_mixed.METHODS if not m.startswith("bk_")]  # banditkit's own sampler: tests/test_optuna_*.py
MODEL_BASED = {"gpsampler", "botorch"}  # need torch: [bench] only


def test_the_peer_list_holds_the_issue_53_peers():
    assert PEERS == ["tpe", "gpsampler", "botorch", "random"]


@pytest.mark.parametrize("method", [m for m in PEERS if m not in MODEL_BASED])
def test_each_peer_runs_past_its_startup_on_a_mixed_space(method, monkeypatch):
    monkeypatch.setattr(bo_mixed, "N_STARTUP", 2)
    sampler = bo_mixed.make_sampler(method, seed=0)
    proposed: list[dict] = []
    inner = sampler.sample_relative
    monkeypatch.setattr(sampler, "sample_relative", lambda *a: proposed.append(inner(*a)) or proposed[-1])

    task = bo_mixed.AckleyMixed()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.optimize(lambda t: task.value(task.suggest(t)), n_trials=4)

    trials = study.trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 4
    for t in trials:
        assert all(type(t.params[f"x{j}"]) is float and -5.0 <= t.params[f"x{j}"] <= 5.0 for j in range(3))
        assert all(type(t.params[f"x{j}"]) is int and -5 <= t.params[f"x{j}"] <= 5 for j in (3, 4))
        assert t.params["c"] in ("a", "b", "c")
        assert t.value == pytest.approx(task.value(t.params))
    assert len(proposed) == 4  # the suite's sampler object is the one the study asked


def _versions(monkeypatch, versions: dict[str, str]) -> None:
    """Make ``importlib.metadata.version`` report ``versions`` (others: not installed)."""

    def version(dist: str) -> str:
        if dist not in versions:
            raise importlib.metadata.PackageNotFoundError(dist)
        return versions[dist]

    monkeypatch.setattr(importlib.metadata, "version", version)


def test_a_newer_optuna_integration_than_optuna_is_named_not_run(monkeypatch):
    """optuna-integration 5's BoTorchSampler raises only after the startup trials under optuna 4: caught up front."""
    versions = {"torch": "2.5.0", "botorch": "0.18.1", "optuna": "4.9.0", "optuna-integration": "5.0.0"}
    _versions(monkeypatch, versions)
    want = 'optuna-integration 5.0.0 needs a newer optuna than 4.9.0 (`pip install "optuna-integration==4.9.0"`)'
    assert bo_mixed.unavailable() == {"botorch": want}
    versions["optuna-integration"] = "4.9.0"
    assert bo_mixed.unavailable() == {}


def test_missing_torch_or_botorch_is_named_with_the_install_line(monkeypatch):
    _versions(monkeypatch, {"torch": "2.5.0", "optuna": "4.9.0", "optuna-integration": "4.9.0"})
    reason = bo_mixed.unavailable()["botorch"]
    assert reason.endswith("missing: botorch)") and "pip install" in reason
    _versions(monkeypatch, {"optuna": "4.9.0"})
    got = bo_mixed.unavailable()
    assert set(got) == {"gpsampler", "botorch"}
    assert got["botorch"].endswith("missing: botorch, optuna-integration, torch)")


def test_a_rerun_skips_runs_in_the_csv_and_a_fresh_out_remakes_them(tmp_path):
    args = ["--tasks", "ackley_mixed", "--methods", "tpe,random", "--seeds", "2", "--budget", "3"]
    assert bo_mixed.main([*args, "--out", str(tmp_path / "a")]) == 0
    runs = pd.read_csv(tmp_path / "a" / "bo_mixed_runs.csv")
    assert sorted(zip(runs.method, runs.seed, strict=True)) == [("random", 0), ("random", 1), ("tpe", 0), ("tpe", 1)]
    assert len(pd.read_csv(tmp_path / "a" / "bo_mixed_iters.csv")) == 4 * 3
    assert bo_mixed.main([*args, "--seeds", "3", "--out", str(tmp_path / "a")]) == 0  # adds seed 2 only
    again = pd.read_csv(tmp_path / "a" / "bo_mixed_runs.csv")
    assert len(again) == 6 and again.iloc[:4].equals(runs) and set(again.seed.iloc[4:]) == {2}
    assert bo_mixed.main([*args, "--out", str(tmp_path / "b")]) == 0  # a fresh folder re-makes every run
    fresh = pd.read_csv(tmp_path / "b" / "bo_mixed_runs.csv")
    assert fresh.final_best.tolist() == runs.final_best.tolist()  # seeded peers: the same runs again
    md = (tmp_path / "b" / "bo_mixed.md").read_text()
    assert "| tpe |" in md and "| random |" in md and "| botorch |" not in md and bo_mixed.BOTORCH_NOTE not in md
