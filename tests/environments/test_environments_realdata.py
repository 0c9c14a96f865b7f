"""Real-data checks (MNIST, Fashion-MNIST, MovieLens-100k): skip, naming the fetch command, when not cached.

CI runs ``banditkit data fetch mnist fashion_mnist movielens`` first.  Nothing here trains anything.
"""

from __future__ import annotations

import numpy as np
import pytest

import banditkit as bk

pytestmark = pytest.mark.realdata


def need(name: str) -> None:
    if not bk.datasets.is_cached(name):
        reason = f"{name} is not in the cache {bk.datasets.cache_dir()}: run `banditkit data fetch {name}`"
        print(reason)
        pytest.skip(reason)


@pytest.mark.parametrize("name, test_counts", [
    ("mnist", [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]),
    ("fashion_mnist", [1000] * 10),
])
def test_image_sets_full_size_pinned_content(name, test_counts):
    need(name)
    d = bk.datasets.load(name)
    assert d["X_train"].shape == (60000, 28, 28) and d["X_test"].shape == (10000, 28, 28)
    assert d["X_train"].dtype == np.uint8 and d["X_train"].max() == 255
    assert np.bincount(d["y_test"]).tolist() == test_counts
    sha = bk.datasets.sha256_arrays(d["X_train"], d["y_train"], d["X_test"], d["y_test"])
    assert sha == bk.datasets.CATALOG[name].content_sha256


@pytest.mark.parametrize("env_id", ["banditkit/MNIST-v0", "banditkit/FashionMNIST-v0"])
def test_image_bandit_functional_equals_gymnasium(env_id):
    import gymnasium as gym

    need("mnist" if "MNIST-v0" == env_id.split("/")[1] else "fashion_mnist")
    from gymnasium.utils.env_checker import check_env

    env = gym.make(env_id, max_steps=20)
    u = env.unwrapped
    assert u.default_model == "lenet5" and u.observation_space.shape == (784,)
    check_env(u, skip_render_check=True)
    obs, _ = env.reset(seed=5)
    fb = u.functional(5, 20)
    for t in range(20):
        np.testing.assert_array_equal(np.asarray(bk.environments.observation(fb, t)), obs)
        assert 0.0 <= obs.min() and obs.max() <= 1.0
        label = int(np.argmax(np.asarray(fb.expected[t])))
        obs, r, _, _, info = env.step(label)
        assert r == 1.0 and info["regret"] == 0.0


def test_movielens_ratings_and_tf_agents_simulator():
    need("movielens")
    df = bk.datasets.load("movielens")
    assert df.shape == (100000, 4) and df["user_id"].nunique() == 943 and df["movie_id"].nunique() == 1682
    assert bk.datasets.sha256_arrays(*(df[c].to_numpy() for c in df.columns)) == \
        bk.datasets.CATALOG["movielens"].content_sha256
    env = bk.environments.MovieLensBandit(max_steps=737)
    assert env.num_users == 737 and env.degenerate  # seed 002's 20 movies x rank 20: raw ratings
    assert env._rew.max(axis=1).mean() == pytest.approx(4.57, abs=0.01)
    smooth = bk.environments.MovieLensBandit(max_steps=10, rank=20, num_movies=50)
    assert smooth.num_users == 791 and not smooth.degenerate
    assert -1.9 < smooth._rew.min() < -1.7 and 6.4 < smooth._rew.max() < 6.6  # digest: about [-1.8, 6.5]
    from gymnasium.utils.env_checker import check_env

    check_env(smooth, skip_render_check=True)
    fb = smooth.functional(3, 10)
    obs, _ = smooth.reset(seed=3)
    np.testing.assert_array_equal(obs, np.asarray(bk.environments.observation(fb, 0)))
