"""The serving suite (changing MovieLens catalogue): its schedule against hand-computed entry and retirement rounds,
its metrics on a hand-made run, and end to end at a tiny size on a synthetic ratings table (no arm is ever chosen
while unavailable)."""

from fractions import Fraction
from math import ceil, floor

import numpy as np
import pandas as pd
import pytest

from benchmarks.suites import serving as S

# movie -> (first, last) rating time; every movie but 11 has 3 ratings (first, middle, last), 11 has one
SPANS = {1: (0, 1000), 2: (10, 1000), 3: (20, 600), 4: (30, 1000), 5: (40, 1000), 6: (50, 1000),
         7: (300, 1000), 8: (500, 1000), 9: (700, 1000), 10: (900, 950), 11: (0, 0)}
STEPS, WINDOW = 100, 10


def ratings() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for movie, (first, last) in SPANS.items():
        times = [first] if movie == 11 else [first, (first + last) // 2, last]
        rows += [(user, movie, int(rng.integers(1, 6)), t) for user, t in enumerate(times, start=1 + movie % 3)]
    extra = [(user, movie, int(rng.integers(1, 6)), 500) for user in range(6, 10) for movie in (1, 4, 6)]
    return pd.DataFrame(rows + extra, columns=["user_id", "movie_id", "rating", "timestamp"])


def test_catalogue_picks_by_the_rule_and_arms_are_live_exactly_from_entry_to_last_rating():
    cat = S.catalogue(ratings(), STEPS, k=6, min_ratings=3, new_arms=2, window=WINDOW)
    # eligible: 1..10 (11 has one rating); old (entry < 10): 1..6 -> ranks round(linspace(0, 5, 4)) = 0, 2, 3, 5;
    # new: 7..10 -> ranks 0, 3
    assert cat.movies.tolist() == [1, 3, 4, 6, 7, 10]
    t0, t1 = 0, 1000  # the eligible movies' clock
    for j, movie in enumerate(cat.movies):
        first, last = SPANS[movie]
        entry = ceil(Fraction(STEPS * (first - t0), t1 - t0))
        end = floor(Fraction(STEPS * (last - t0), t1 - t0))  # last round with τ_t ≤ last
        assert cat.entry[j] == entry
        expect = np.zeros(STEPS, bool)
        expect[entry:min(end, STEPS - 1) + 1] = True
        np.testing.assert_array_equal(cat.available[:, j], expect, err_msg=f"arm {j} (movie {movie})")
    assert cat.entry.tolist() == [0, 2, 3, 5, 30, 90]
    assert int(np.sum(cat.entry >= WINDOW)) == 2
    assert cat.available[:, 1].nonzero()[0].max() == 60  # movie 3 retires after its last rating (t = 600)
    assert cat.available[:, 5].nonzero()[0].tolist() == list(range(90, 96))  # movie 10: 900..950
    assert cat.available.any(axis=1).all()
    # the env's ratings: the picked movies only, renumbered 1..K in order
    back = cat.ratings.groupby("movie_id")["timestamp"].min()
    assert back.index.tolist() == [1, 2, 3, 4, 5, 6]
    assert back.tolist() == [SPANS[m][0] for m in cat.movies]
    table = S.arms_table(cat, WINDOW)
    assert table.retire_round.tolist() == [100, 61, 100, 100, 100, 96]
    assert table.new.tolist() == [False] * 4 + [True] * 2


def test_catalogue_refuses_impossible_requests_with_the_reason():
    with pytest.raises(ValueError, match="too few"):
        S.catalogue(ratings(), STEPS, k=6, min_ratings=3, new_arms=5, window=WINDOW)
    with pytest.raises(ValueError, match="--new-arms"):
        S.catalogue(ratings(), STEPS, k=6, min_ratings=3, new_arms=6, window=WINDOW)


def test_metrics_on_a_hand_made_run():
    expected = np.array([[1.0, 0.0, 5.0], [1.0, 2.0, 5.0], [1.0, 2.0, 0.5], [3.0, 2.0, 0.5]])
    live = np.array([[1, 1, 0], [1, 1, 1], [1, 1, 1], [0, 1, 1]], bool)
    entry = np.array([0, 0, 1])
    m = S.metrics(np.array([1, 2, 0, 2]), expected, live, entry, window=1)
    # oracle: arm 0 (5.0 is not live), arm 2, arm 1, arm 1 -> regrets 1, 0, 1, 1.5
    np.testing.assert_allclose(m.regret, [1.0, 0.0, 1.0, 1.5])
    # arm 2 is new (entry 1 >= W = 1) and young only at round 1 (age 0 < 1): chosen there -> 1 of 4 rounds
    assert m.young == 0.25 and m.tried == 1.0 and m.first_pick == 0 and m.unavailable == 0
    late = S.metrics(np.array([0, 1, 1, 2]), expected, live, entry, window=1)  # arm 2 first chosen 2 rounds in
    assert (late.tried, late.first_pick, late.young) == (0.0, 2.0, 0.0)
    never = S.metrics(np.array([0, 1, 1, 1]), expected, live, entry, window=1)  # censored: 3 rounds live, unchosen
    assert never.first_pick == 3.0
    assert S.metrics(np.array([2, 0, 0, 0]), expected, live, entry, window=1).unavailable == 2


def test_suite_end_to_end_never_serves_an_unavailable_arm(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "load_ratings", ratings)
    served = []
    real_serve = S.serve

    def spy(spec, env, seed, steps, live, draws=S.DRAWS):
        actions = real_serve(spec, env, seed, steps, live, draws)
        served.append((spec, live, actions))
        return actions

    monkeypatch.setattr(S, "serve", spy)
    S.main(["--steps", "40", "--seeds", "1", "--first-seed", "3", "--agents", "linear_ts,random", "--movies", "6",
            "--min-ratings", "3", "--new-arms", "2", "--young", "4", "--rank", "3", "--draws", "2",
            "--out", str(tmp_path)])
    assert [s for s, _, _ in served] == ["linear-thompson", None]
    for spec, live, actions in served:
        assert live[np.arange(40), actions].all(), spec
        assert np.all(S.catalogue(ratings(), 40, 6, 3, 2, 4).available == live)
    for suffix in (".md", ".csv", "_curve.csv", "_arms.csv", ".png"):
        assert (tmp_path / f"serving{suffix}").exists(), suffix
    rows = pd.read_csv(tmp_path / "serving.csv")
    assert list(zip(rows.agent, rows.seed, strict=True)) == [("linear_ts", 3), ("random", 3)]
    curve = pd.read_csv(tmp_path / "serving_curve.csv")
    last = curve[curve.step == 39].set_index("agent").cum_regret
    for agent, g in rows.groupby("agent"):
        assert last[agent] == pytest.approx(g.cum_regret.mean())
    # the table's regret, recomputed from the served actions and the simulator's expected rewards
    cat = S.catalogue(ratings(), 40, 6, 3, 2, 4)
    expected = np.asarray(S.make_env(cat, 40, 3).unwrapped.functional(3, 40).expected, np.float64)
    best = np.where(cat.available, expected, -np.inf).max(axis=1)
    for (spec, _, actions), agent in zip(served, ["linear_ts", "random"], strict=True):
        regret = np.sum(best - expected[np.arange(40), actions])
        assert rows.set_index("agent").cum_regret[agent] == pytest.approx(regret, rel=1e-9), spec
    assert (rows.cum_regret >= 0).all()
    md = (tmp_path / "serving.md").read_text()
    assert "**Command (this table):**" in md and "**Machine:**" in md and "| linear_ts |" in md
