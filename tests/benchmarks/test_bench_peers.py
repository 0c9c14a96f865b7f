"""The peer libraries of the headline suite (benchmarks/peers/, benchmarks/suites/headline.py).

Each peer learns a linear stream (far above chance), MABWiser's fast update picks exactly the arms of
``MAB.partial_fit``, a peer's frame has the runner's columns and the data the agents get, and the headline suite runs
agents and peers into one table that ``--merge`` extends and ``--check`` re-makes; the overview bolds the best row
and measures issue 55's targets.  Vowpal Wabbit, MABWiser and contextualbandits (built from
source) are test dependencies (the [test] extra).
"""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom
from threadpoolctl import threadpool_limits
from toys import REPO

import banditkit as bk
from benchmarks.harness import merge, run, tables
from benchmarks.peers import PEERS, play
from benchmarks.peers.mabwiser import MABWiserLearner
from benchmarks.suites import headline


def _linear_stream(steps: int = 300, dim: int = 4, arms: int = 3, seed: int = 0):
    """Contexts ``x ~ N(0, I)``, rewards ``r_k = x·w_k + 0.1 ε`` (float32, as the runner feeds them); the best arm."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(dim, arms))
    x = rng.normal(size=(steps, dim)).astype(np.float32)
    expected = x @ w
    rewards = (expected + 0.1 * rng.normal(size=expected.shape)).astype(np.float32)
    return x, rewards, expected.argmax(axis=1)


@pytest.mark.parametrize("name", list(PEERS))
def test_each_peer_learns_a_linear_stream(name):
    """Over the last 150 of 300 rounds the peer pulls the best of 3 arms so often that a uniform-random policy would
    do as well with probability < 1e-5 (Binomial(150, 1/3) tail; chance's mean is 50)."""
    x, rewards, best = _linear_stream()
    with threadpool_limits(1):  # as the suite runs them (--blas-threads 1); many threads on tiny matrices crawl
        actions = play.play(PEERS[name].make(num_actions=3, seed=0), x, rewards)
    hits = int((actions == best)[150:].sum())
    assert binom.sf(hits - 1, 150, 1 / 3) < 1e-5, f"{name}: best arm {hits} of 150 late rounds"


@pytest.mark.parametrize("policy", ["LinTS", "LinUCB"])
def test_mabwiser_fast_update_picks_the_arms_of_partial_fit(policy):
    x, rewards, _ = _linear_stream(steps=120, dim=3, arms=4, seed=1)
    fast = play.play(MABWiserLearner(4, seed=5, policy=policy, fast=True), x, rewards)
    public = play.play(MABWiserLearner(4, seed=5, policy=policy, fast=False), x, rewards)
    np.testing.assert_array_equal(fast, public)
    assert len(set(fast.tolist())) > 1


class _Recorder:
    """A fake peer: arm ``t mod K`` at round ``t``; records the contexts and rewards it is given."""

    def __init__(self, num_actions: int, seed: int):
        self.k, self.t, self.seen, self.got = num_actions, 0, [], []

    def choose(self, x):
        self.seen.append(np.array(x))
        return self.t % self.k

    def update(self, x, action, reward):
        self.got.append(reward)
        self.t += 1


def test_a_peer_frame_has_the_runner_columns_and_the_agents_data():
    env = gym.make("banditkit/Wheel-v0", max_steps=40)
    made = []

    def make(num_actions, seed):
        made.append(_Recorder(num_actions, seed))
        return made[-1]

    df, timing = play.run_peer(env, "recorder", 40, [0, 3], make=make)
    assert list(df.columns) == bk.experiments.COLUMNS
    for learner, seed in zip(made, [0, 3], strict=True):
        fb = env.unwrapped.functional(seed, 40)
        index = np.asarray(fb.index)
        ctx, rew, exp = (np.asarray(a, np.float32) for a in (fb.contexts, fb.rewards, fb.expected))
        np.testing.assert_array_equal(np.stack(learner.seen), ctx[index[:40]])  # what the runner's scan feeds
        rows = df[df.seed == seed].sort_values("step")
        a = np.arange(40) % 5
        np.testing.assert_array_equal(rows.action, a)
        np.testing.assert_array_equal(rows.reward, rew[np.arange(40), a])
        np.testing.assert_array_equal(learner.got, rew[np.arange(40), a])
        np.testing.assert_array_equal(rows.expected_reward, exp[np.arange(40), a])
        np.testing.assert_array_equal(rows.optimal_reward, exp.max(axis=1)[:40])
        regret = exp.max(axis=1)[:40].astype(np.float64) - exp[np.arange(40), a].astype(np.float64)
        np.testing.assert_allclose(rows.regret, regret)
        np.testing.assert_allclose(rows.cumulative_regret, np.cumsum(regret))
    assert timing["steps"] == 40 and timing["seeds"] == 2 and timing["compile_s"] == 0.0
    seeds = tables.per_seed(play.combine(run.Result(df, {"recorder": timing}), play.run_peers(env, [], 40, [0])))
    assert sorted(seeds.seed) == [0, 3] and (seeds.steps == 40).all()


def test_a_per_arm_context_is_refused_with_the_reason():
    learner = PEERS["vw_squarecb"].make(num_actions=3, seed=0)
    with pytest.raises(ValueError, match="per-arm features"):
        learner.choose(np.zeros((3, 4), np.float32))


def test_selection_naming_only_agents_or_only_peers_runs_only_them():
    def pick(agents="", peers=""):
        args = type("A", (), dict(agents=agents, peers=peers))()
        got_agents, got_peers = headline._selection(args)
        return list(got_agents), got_peers

    assert pick() == (list(headline.AGENTS), list(PEERS))
    assert pick(agents="hilofi_ts") == (["hilofi_ts"], [])
    assert pick(peers="vw_squarecb") == ([], ["vw_squarecb"])
    assert pick(agents="linear_ts", peers="all") == (["linear_ts"], list(PEERS))
    with pytest.raises(SystemExit, match="unknown peer"):
        pick(peers="bogus")


def test_the_headline_agents_are_make_agents_defaults_and_the_protocol_agents_keep_their_variance():
    from banditkit.agents import make_agent
    from banditkit.agents.factory import NOISE_GRID
    from benchmarks import agents as A

    env = headline.make_env("Shuttle", 50)
    for name, spec in headline.AGENTS.items():
        got, want = headline.agent_set()[name](env), make_agent(spec, env)
        assert got.likelihood == want.likelihood and dict(got.posterior.hyper) == dict(want.posterior.hyper), name
        assert got.auto_scale, name  # nothing read from the env's expected rewards (issue 69)
    assert headline.agent_set()["hilofi_ts"](env).posterior.hyper["obs_noises"] == NOISE_GRID
    assert A.agent_factory("hilofi-thompson")(env).likelihood.obs_noise == A.PROTOCOL_OBS_NOISE


def _summary(rows: dict[str, tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame([dict(agent=n, cum_reward=m, cum_reward_se=s, steps=5000, seeds=5, nonfinite_seeds=0)
                         for n, (m, s) in rows.items()]).set_index("agent")


def test_overview_bolds_the_best_and_measures_the_targets():
    found = {"Shuttle": _summary({"hilofi_ts": (100.0, 1.0), "linear_ts": (90.0, 1.0), "vw_squarecb": (95.0, 2.0),
                                  "lofi_ts": (93.0, 1.0), "lrkf_ts": (200.0, 1.0)}),
             "Adult": _summary({"hilofi_ts": (10.0, 1.0), "linear_ts": (11.0, 1.0), "lofi_ts": (9.0, 1.0)})}
    table = "\n".join(headline.overview_table(found))
    shuttle = next(line for line in table.splitlines() if line.startswith("| lrkf_ts "))
    assert "**200.0 ± 1.0**" in shuttle  # the best row of a data set, whichever it is
    adult = next(line for line in table.splitlines() if line.startswith("| linear_ts "))
    assert adult.endswith("| 90.0 ± 1.0 | **11.0 ± 1.0** |")
    refs = "\n".join(headline.overview_table(found, {"Shuttle": ("1.0 ± 0.1", "300.0 ± 0.0"), "Adult": None}))
    assert "| uniform-random policy (reference) | | 1.0 ± 0.1 | — |" in refs
    text = "\n".join(headline.targets(found))
    # lrkf_ts is not a rival of HiLoFi-TS; VW is: z = 5 / sqrt(1 + 4) = 2.24
    assert "Shuttle: hilofi_ts 100.0 vs the best rival `vw_squarecb` 95.0 (z = +2.24): **ahead**" in text
    assert "Adult: hilofi_ts 10.0 vs the best rival `linear_ts` 11.0 (z = -0.71): **matches**" in text
    assert "NOT ASSESSED" in text  # two data sets, not the protocol's four
    assert "- lofi_ts ahead of linear_ts on 1 of these 2 data sets (Shuttle)" in text


@pytest.mark.slow
def test_the_suite_runs_agents_and_peers_into_one_table(tmp_path, monkeypatch, capsys):
    """On the synthetic wheel bandit (in place of the real data sets): one table with an agent's and a peer's rows,
    ``--peers X --merge`` adds a peer and keeps the rest, ``--check`` re-makes the peers' rows and writes nothing
    (an agent's ``--check``: tests/benchmarks/test_bench_kuairec.py, test_bench_diagnostics.py)."""
    monkeypatch.setattr(headline, "DATASETS", ("Wheel",))
    monkeypatch.setattr(headline, "make_env", lambda name, steps: gym.make("banditkit/Wheel-v0", max_steps=steps))
    base = ["--steps", "30", "--seeds", "2", "--datasets", "Wheel", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", ["headline", *base])
    headline.main([*base, "--agents", "linear_ts", "--peers", "vw_squarecb"])
    seeds = pd.read_csv(tmp_path / "headline_wheel_seeds.csv")
    assert sorted(set(seeds.agent)) == ["linear_ts", "vw_squarecb"] and (seeds.steps == 30).all()
    headline.main([*base, "--peers", "mabwiser_linucb", "--merge"])
    seeds = pd.read_csv(tmp_path / "headline_wheel_seeds.csv")
    assert list(dict.fromkeys(seeds.agent)) == ["linear_ts", "vw_squarecb", "mabwiser_linucb"]
    md = (tmp_path / "headline_wheel.md").read_text()
    assert "| vw_squarecb | 2 | 30 |" in md and "| mabwiser_linucb | 2 | 30 |" in md
    overview = (tmp_path / "headline.md").read_text()
    assert overview.count("**") >= 2 and "| mabwiser_linucb | MABWiser |" in overview
    random, oracle = headline.references(str(tmp_path), "headline", "Wheel")  # parsed from headline_wheel.md
    assert f"| uniform-random policy (reference) | | {random} |" in overview
    assert f"| oracle, best arm every round (reference) | | {oracle} |" in overview
    assert float(random.split(" ± ")[0]) < float(oracle.split(" ± ")[0])

    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    headline.main([*base, "--agents", "none", "--peers", "vw_squarecb,mabwiser_linucb", "--check", "25"])
    out = capsys.readouterr().out
    for name in ("vw_squarecb", "mabwiser_linucb"):
        assert f"[check headline_wheel] {name}: re-made:" in out
    assert merge.check_exit_status() == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_overview_rewrite_keeps_the_hand_written_run_notes(tmp_path):
    import shutil

    results = os.path.join(REPO, "benchmarks", "results")
    shutil.copy(os.path.join(results, "headline_shuttle_seeds.csv"), tmp_path)  # the committed 20-seed rows
    (tmp_path / "headline.md").write_text("# old\n\n**Run note (by hand):** kept.\n\nits second paragraph.\n")
    for _ in range(2):  # a re-run or --render rewrites the overview: the notes stay, once
        headline.write_overview(str(tmp_path))
        md = (tmp_path / "headline.md").read_text()
        assert md.count("**Run note (by hand):** kept.") == 1 and "its second paragraph." in md
        assert "| hilofi_ts | banditkit | **4895.4 ± 3.2** |" in md and "# old" not in md  # the committed rows
