"""Environments: registration, determinism, check_env, the functional form equals the Gymnasium sequence, the
showdown reward rules on hand-picked rows, MovieLens low-rank construction, KuaiRec rounds, error messages."""

from __future__ import annotations

import gymnasium as gym
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import banditkit as bk
from banditkit import environments as envs
from banditkit.environments import preprocess
from banditkit.environments.showdown import mushroom_rewards, wheel_rewards

OFFLINE = {  # ids that need no fetch, with the kwargs that make them small
    "banditkit/Mushroom-v0": {"max_steps": 40},
    "banditkit/Shuttle-v0": {"max_steps": 40},
    "banditkit/Adult-v0": {"max_steps": 40},
    "banditkit/Covertype-v0": {"max_steps": 40, "synthetic": True},
    "banditkit/Census-v0": {"max_steps": 40, "synthetic": True},
    "banditkit/Jester-v0": {"max_steps": 40, "synthetic": True},
    "banditkit/Financial-v0": {"max_steps": 40, "synthetic": True},
    "banditkit/Wheel-v0": {"max_steps": 40, "delta": 0.5},
    "banditkit/KuaiRec-v0": {"max_steps": 40, "synthetic": True},
}
BO = {
    "banditkit/Ackley-v0": {"dim": 3, "max_steps": 5},
    "banditkit/Branin-v0": {"max_steps": 5},
    "banditkit/Hartmann6-v0": {"max_steps": 5},
    "banditkit/DrawNN-v0": {"dim": 4, "max_steps": 5},
}


def test_every_api_id_is_registered_on_import():
    ids = ["MNIST", "FashionMNIST", "Mushroom", "Shuttle", "Adult", "Covertype", "Census", "Jester", "Financial",
           "Wheel", "MovieLens", "KuaiRec", "Ackley", "Branin", "Hartmann6", "DrawNN"]
    for i in ids:
        assert f"banditkit/{i}-v0" in gym.registry
    assert bk.environments.ENV_IDS.keys() == {f"banditkit/{i}-v0" for i in ids}


def _rollout(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    rewards, infos = [], []
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        assert not term
        out.append(obs)
        rewards.append(r)
        infos.append(info)
    return out, rewards, infos


@pytest.mark.parametrize("env_id", sorted(OFFLINE))
def test_bandit_env_deterministic_checked_and_functional_equals_gymnasium(env_id):
    env = gym.make(env_id, **OFFLINE[env_id])
    u = env.unwrapped
    assert u.task == "bandit" and u.num_actions == env.action_space.n
    assert u.default_model in {"mlp", "lenet5", "embedding_mlp"}
    check_env(u, skip_render_check=True)
    T = 25
    actions = np.random.default_rng(0).integers(0, u.num_actions, T)
    obs1, rew1, info1 = _rollout(env, 7, actions)
    obs2, rew2, _ = _rollout(env, 7, actions)
    np.testing.assert_array_equal(np.stack(obs1), np.stack(obs2))
    assert rew1 == rew2
    _, rew3, _ = _rollout(env, 8, actions)
    if getattr(u, "shuffle", True):  # another seed gives another episode (KuaiRec streams in time order)
        assert rew3 != rew1

    fb = u.functional(7, T)
    assert isinstance(fb, envs.FunctionalBandit)
    assert fb.rewards.shape == (T, u.num_actions) and fb.index.shape == (T,) and fb.index.dtype == jnp.int32
    assert fb.contexts.dtype == jnp.float32
    for t, a in enumerate(actions):
        np.testing.assert_array_equal(np.asarray(envs.observation(fb, t)), obs1[t])
        r, r_exp, r_opt = envs.step(fb, t, int(a))
        assert float(r) == rew1[t]
        assert float(r_exp) == info1[t]["expected_reward"] and float(r_opt) == info1[t]["optimal_reward"]
        np.testing.assert_array_equal(np.asarray(fb.expected[t]), info1[t]["expected_rewards"])
        assert info1[t]["regret"] == pytest.approx(info1[t]["optimal_reward"] - info1[t]["expected_reward"])
    # the first rounds do not depend on the episode length
    short = u.functional(7, 10)
    np.testing.assert_array_equal(np.asarray(short.rewards), np.asarray(fb.rewards[:10]))
    np.testing.assert_array_equal(np.asarray(short.contexts[short.index]), np.asarray(fb.contexts[fb.index[:10]]))


def test_episode_end_and_action_errors():
    env = bk.environments.WheelBandit(max_steps=3)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="out of range.*0..4"):
        env.step(5)
    with pytest.raises(ValueError, match="out of range"):
        env.step(-1)
    with pytest.raises(TypeError, match="integer"):
        env.step(1.5)
    assert [env.step(0)[3] for _ in range(3)] == [False, False, True]
    with pytest.raises(RuntimeError, match="max_steps=3"):
        env.step(0)
    with pytest.raises(ValueError, match="max_steps"):
        bk.environments.WheelBandit(max_steps=0)
    with pytest.raises(ValueError, match="seed"):
        env.unwrapped.functional(-1, 3)


def test_reset_without_seed_continues_the_seeded_stream():
    env = bk.environments.WheelBandit(max_steps=5)
    a = [env.reset(seed=3)[0], env.reset()[0]]
    b = [env.reset(seed=3)[0], env.reset()[0]]
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], a[1])


# ------------------------------------------------------------------------------------------- showdown reward rules
def test_mushroom_rewards_follow_the_showdown_rules():
    realised, expected = mushroom_rewards(np.array([False, False, True, True]), np.array([True, False, True, False]))
    np.testing.assert_array_equal(realised, [[0, 5], [0, 5], [0, -35], [0, 5]])
    np.testing.assert_array_equal(expected, [[0, 5], [0, 5], [0, -15], [0, -15]])


def test_mushroom_env_on_hand_picked_rows_and_bad_luck_frequency():
    df = bk.datasets.load("mushroom")
    X, poisonous = preprocess.mushroom(df)
    assert X.shape == (8124, 117) and (X.sum(axis=1) == 22).all()
    assert poisonous[0] and not poisonous[1]  # the first UCI rows: poisonous, edible
    env = bk.environments.MushroomBandit(max_steps=4000)
    ep = env.episode(0)
    rows_poison = ep.expected[:, 1] == -15.0
    assert set(np.unique(ep.rewards[rows_poison, 1])) == {5.0, -35.0}
    assert (ep.rewards[~rows_poison, 1] == 5.0).all() and (ep.rewards[:, 0] == 0).all()
    assert abs((ep.rewards[rows_poison, 1] == -35.0).mean() - 0.5) < 0.05
    # context of a poisonous round is one of the poisonous rows
    t = int(np.flatnonzero(rows_poison)[0])
    ctx = ep.contexts[ep.index[t]]
    assert poisonous[np.flatnonzero((X == ctx).all(axis=1))].all()


def test_wheel_rewards_on_hand_picked_contexts():
    x = np.array([[0.9, 0.1], [0.5, -0.8], [-0.6, 0.7], [-0.7, -0.7], [0.1, 0.1]])
    z = np.zeros((5, 6))
    expected, realised = wheel_rewards(x, delta=0.8, z=z)
    np.testing.assert_array_equal(np.argmax(expected, axis=1), [0, 1, 2, 3, 4])
    assert expected[0, 0] == 50 and expected[4, 4] == 1.2 and expected[4, 0] == 1.0
    np.testing.assert_array_equal(realised, expected)  # zero noise
    env = bk.environments.WheelBandit(max_steps=2000, delta=0.5)
    ep = env.episode(1)
    r = np.linalg.norm(ep.contexts, axis=1)
    assert (r <= 1).all() and ((r >= 0.5) == (ep.expected.max(axis=1) == 50)).all()
    noise = ep.rewards - ep.expected
    assert abs(noise[ep.expected == 1.0].std() - 0.05) < 0.005


def test_shuttle_adult_preprocessing_and_classification_reward():
    X, y = preprocess.shuttle(bk.datasets.load("shuttle"))
    assert X.shape == (58000, 9) and np.allclose(X.mean(axis=0), 0, atol=1e-4)
    assert np.bincount(y).tolist() == [45586, 50, 171, 8903, 3267, 10, 13]
    Xa, ya, names = preprocess.adult(bk.datasets.load("adult"))
    assert Xa.shape == (45222, 92) and len(names) == 14 and ya.max() == 13
    env = bk.environments.ShuttleBandit(max_steps=50)
    ep = env.episode(2)
    assert (ep.rewards.sum(axis=1) == 1).all() and np.array_equal(ep.rewards, ep.expected)


def test_classification_bandit_generic_reward_and_input_errors():
    X = np.array([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0]])
    env = bk.environments.ClassificationBandit(X, [2, 0, 1], max_steps=6)
    obs, _ = env.reset(seed=0)
    row = int(np.flatnonzero(np.isclose((X[:, 0] - 2) / np.std(X[:, 0]), obs[0]))[0])
    label = [2, 0, 1][row]
    _, r, *_ , info = env.step(label)
    assert r == 1.0 and info["regret"] == 0.0
    ep = env.episode(0)
    assert sorted(np.argmax(ep.rewards[:3], axis=1).tolist()) == [0, 1, 2]  # each row once per pass
    with pytest.raises(ValueError, match="shape"):
        bk.environments.ClassificationBandit(X, [0, 1])
    with pytest.raises(TypeError, match="integer class labels"):
        bk.environments.ClassificationBandit(X, [0.5, 1, 0])
    with pytest.raises(ValueError, match="labels must lie"):
        bk.environments.ClassificationBandit(X, [0, 1, 2], num_actions=2)


def test_jester_and_financial_follow_the_showdown_construction():
    R = bk.datasets.load("jester", synthetic=True).astype(np.float32)
    env = bk.environments.JesterBandit(max_steps=30, synthetic=True)
    ep = env.episode(4)
    for t in range(5):
        ctx, rew = ep.contexts[ep.index[t]], ep.rewards[t]
        full = np.concatenate([ctx, rew])
        match = [i for i in range(len(R)) if np.allclose(np.sort(R[i]), np.sort(full))]
        assert match, "context + rewards must be one user's 40 ratings"
    fin = bk.environments.FinancialBandit(max_steps=3000, synthetic=True)
    ep = fin.episode(0)
    resid = ep.rewards.astype(np.float64) - ep.expected
    np.testing.assert_allclose(resid.std(axis=0), 0.01 * np.arange(1, 9), rtol=0.08)
    X = ep.contexts[ep.index].astype(np.float64)
    beta, *_ = np.linalg.lstsq(X, ep.expected.astype(np.float64), rcond=None)
    np.testing.assert_allclose(np.linalg.norm(beta, axis=0), 1.0, rtol=1e-3)


# --------------------------------------------------------------------------------------------------- MovieLens
def _toy_ratings(n_users=12, n_movies=8, seed=0):
    rng = np.random.default_rng(seed)
    rows = [(u + 1, m + 1, int(rng.integers(1, 6)), 0) for u in range(n_users) for m in range(n_movies)
            if rng.random() < 0.6]
    return pd.DataFrame(rows, columns=["user_id", "movie_id", "rating", "timestamp"])


def test_movielens_low_rank_construction_and_degenerate_caveat():
    ratings = _toy_ratings()
    full = bk.environments.MovieLensBandit(max_steps=20, rank=6, num_movies=6, ratings=ratings)
    assert full.degenerate
    a = bk.environments.movielens.rating_matrix(ratings, 6)
    np.testing.assert_allclose(full._rew, a, atol=1e-4)  # rank = movies: raw ratings, 0 = unrated
    low = bk.environments.MovieLensBandit(max_steps=20, rank=2, num_movies=6, ratings=ratings)
    assert not low.degenerate and low.observation_space.shape == (2,)
    s = np.linalg.svd(a, compute_uv=False)
    err = np.linalg.norm(low._rew - a)
    assert err == pytest.approx(np.sqrt((s[2:] ** 2).sum()), rel=1e-4)  # Eckart-Young: best rank-2
    u, sv, _ = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(np.abs(low._ctx), np.abs(u[:, :2] * np.sqrt(sv[:2])), atol=1e-4)  # U_k sqrt(S_k)
    with pytest.raises(ValueError, match="rank"):
        bk.environments.MovieLensBandit(rank=30, num_movies=20, ratings=ratings)


# ------------------------------------------------------------------------------------------------------ KuaiRec
def test_kuairec_env_per_arm_features():
    env = gym.make("banditkit/KuaiRec-v0", synthetic=True)
    u = env.unwrapped
    assert u.per_arm_features and u.default_model == "embedding_mlp" and u.num_actions == 10
    obs, _ = env.reset(seed=0)
    assert obs.shape == (10, 9) and obs[:, 0].max() < u.num_items
    _, r, *_ = env.step(3)
    assert r == pytest.approx(float(np.log1p(u.rounds["watch_ratio"][0, 3])), rel=1e-6)
    assert np.all(np.diff(u.rounds["time0"]) >= 0)
    with pytest.raises(ValueError, match="exceeds"):
        bk.environments.KuaiRecBandit(max_steps=10**6, synthetic=True)


def test_manual_dataset_env_without_data_names_both_options():
    with pytest.raises(FileNotFoundError, match=r"data_dir=.*synthetic=True"):
        gym.make("banditkit/Covertype-v0")


# ------------------------------------------------------------------------------------------------------ BO
@pytest.mark.parametrize("env_id", sorted(BO))
def test_bo_env_checked_reward_is_negated_function(env_id):
    env = gym.make(env_id, **BO[env_id])
    u = env.unwrapped
    assert u.task == "bo" and u.default_model == "bo_mlp"
    check_env(u, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert info["optimum"] == pytest.approx(-u.function.minimum)
    x = np.full(u.dim, 0.25, dtype=np.float32)
    _, r, term, trunc, info = env.step(x)
    assert r == pytest.approx(-float(u.function.value(x.astype(np.float64))))
    assert info["regret"] == pytest.approx(info["optimum"] - r) and info["simple_regret"] == info["regret"]
    with pytest.raises(ValueError, match="outside the bounds"):
        env.step(np.full(u.dim, 1.5))
    with pytest.raises(ValueError, match="dimension"):
        env.step(np.zeros(u.dim + 1))


def test_small_data_sets_share_one_context_pool_across_seeds():
    env = bk.environments.ShuttleBandit(max_steps=30)
    a, b = env.functional(0, 30), env.functional(1, 30)
    assert a.contexts is b.contexts and a.contexts.shape == (58000, 9)  # one copy for a multi-seed run
    assert not np.array_equal(np.asarray(a.index), np.asarray(b.index))
    obs, _ = env.reset(seed=1)
    np.testing.assert_array_equal(obs, np.asarray(b.contexts[b.index[0]]))
