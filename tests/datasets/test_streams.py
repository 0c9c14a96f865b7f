"""Non-stationary streams (``bk.datasets.streams``), the prequential loop (``bk.experiments.run_stream``, ``bk.run``
with a stream) and kalman_last_layer's bounded γ step.  Small synthetic data; one real-data check (skips if absent).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import banditkit as bk
from banditkit.datasets import streams as S
from banditkit.experiments.prequential import StreamLearner, run_stream, step_metrics
from banditkit.likelihoods import Categorical, Gaussian
from banditkit.models.nets import MLP
from banditkit.posteriors.kalman_last_layer import current_forgetting

K = 4


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(120, 6, 6)).astype(np.uint8)
    y = rng.integers(0, K, size=120)
    return x, y


# ---------------------------------------------------------------------------------------------------- builders
def test_stationary_shapes_and_determinism(data):
    x, y = data
    s = S.stationary(x, y, 150, seed=3)
    assert s.xs.shape == (150, 36) and s.ys.shape == (150, K) and s.task == "classification"
    assert s.xs.dtype == np.float32 and 0.0 <= s.xs.min() and s.xs.max() <= 1.0
    np.testing.assert_array_equal(s.boundaries, [0])
    np.testing.assert_array_equal(s.ys.argmax(1), y[s.info["index"]])
    assert len(set(s.info["index"][:120])) == 120  # without replacement while the pool lasts
    np.testing.assert_array_equal(S.stationary(x, y, 150, seed=3).xs, s.xs)
    assert not np.array_equal(S.stationary(x, y, 150, seed=4).xs, s.xs)
    assert S.stationary(x, y, 10, flatten=False).xs.shape == (10, 6, 6)


def test_permuted_fixed_within_task(data):
    x, y = data
    s = S.permuted(x, y, 70, task_len=30, seed=1)
    np.testing.assert_array_equal(s.boundaries, [0, 30, 60])
    np.testing.assert_array_equal(s.task_ids, np.arange(70) // 30)
    perms = s.info["perms"]
    assert perms.shape == (3, 36) and not np.array_equal(perms[0], perms[1])
    flat = x.reshape(120, -1).astype(np.float32) / 255
    for t in range(70):  # every step of task k uses permutation k
        np.testing.assert_array_equal(s.xs[t], flat[s.info["index"][t]][perms[t // 30]])


def test_split_tasks_and_labels(data):
    x, y = data
    s = S.split(x, y, 41, seed=2)  # pairs (0,1), (2,3): 20 + 21 steps
    np.testing.assert_array_equal(s.boundaries, [0, 20])
    labels = s.ys.argmax(1)
    assert set(labels[:20]) <= {0, 1} and set(labels[20:]) <= {2, 3} and s.ys.shape[1] == K
    r = S.split(x, y, 41, seed=2, relabel=True)
    assert r.ys.shape == (41, 2)
    np.testing.assert_array_equal(r.ys.argmax(1), labels % 2)


def test_rotating_angles_and_targets(data):
    x, y = data
    lin = S.rotating(x, y, 50, schedule="linear", angle_range=(0.0, 90.0), window=10)
    a = lin.info["angles"]
    assert a[0] == 0.0 and a[-1] == 90.0 and np.all(np.diff(a) > 0)  # monotone
    np.testing.assert_array_equal(lin.boundaries, np.arange(0, 50, 10))
    np.testing.assert_allclose(lin.xs[0], x[lin.info["index"][0]].ravel() / 255, atol=1e-6)  # angle 0: unchanged
    ou = S.rotating(x, y, 200, seed=5)
    np.testing.assert_array_equal(ou.info["angles"], S.rotating(x, y, 200, seed=5).info["angles"])
    assert ou.info["angles"][0] == 45.0 and 0 < ou.info["angles"].std() < 40
    reg = S.rotating(x, y, 60, target="angle", angle_class=2, seed=1)
    assert reg.task == "regression" and reg.ys.shape == (60, 1)
    assert np.all(y[reg.info["index"]] == 2)
    np.testing.assert_allclose(reg.ys[:, 0] * reg.info["angle_scale"] + reg.info["angle_mean"], reg.info["angles"],
                               rtol=1e-5)
    with pytest.raises(ValueError, match="images"):
        S.rotating(x.reshape(120, -1), y, 10)


def test_label_switch_maps(data):
    x, y = data
    s = S.label_switch(x, y, 90, switch_every=40, seed=0)
    maps = s.info["label_maps"]
    np.testing.assert_array_equal(s.boundaries, [0, 40, 80])
    np.testing.assert_array_equal(maps[0], np.arange(K))
    assert all(sorted(m) == list(range(K)) for m in maps)
    np.testing.assert_array_equal(s.ys.argmax(1), maps[s.task_ids, y[s.info["index"]]])
    h = s.head(50)
    assert len(h) == 50 and list(h.boundaries) == [0, 40] and h.info["index"].shape == (50,)


# ----------------------------------------------------------------------------------------------------- metrics
def test_step_metrics_hand_made():
    y = jnp.array([0.0, 1.0, 0.0])
    acc, nlpd, sq = step_metrics("classification", jnp.array([0.2, 0.7, 0.1]), jnp.eye(3), y)
    np.testing.assert_allclose([acc, nlpd, sq], [1.0, -np.log(0.7), (0.04 + 0.09 + 0.01) / 3], rtol=1e-6)
    acc, nlpd, _ = step_metrics("classification", jnp.array([0.6, 0.3, 0.1]), jnp.eye(3), y)
    np.testing.assert_allclose([acc, nlpd], [0.0, -np.log(0.3)], rtol=1e-6)
    logits = jnp.array([1.0, 2.0, 0.0])
    _, nlpd, _ = step_metrics("classification", logits, jnp.eye(3), y, output="logits")
    np.testing.assert_allclose(nlpd, -jax.nn.log_softmax(logits)[1], rtol=1e-6)
    acc, nlpd, _ = step_metrics("classification", jnp.array([0.2]), jnp.eye(1), jnp.array([0.0]))  # binary
    np.testing.assert_allclose([acc, nlpd], [1.0, -np.log(0.8)], rtol=1e-6)
    m, v, yr = jnp.array([0.5, -1.0]), jnp.array([[2.0, 0.3], [0.3, 1.0]]), jnp.array([1.5, 0.0])
    acc, nlpd, sq = step_metrics("regression", m, v, yr)
    assert np.isnan(acc)
    np.testing.assert_allclose(nlpd, -scipy.stats.multivariate_normal(m, v).logpdf(yr), rtol=1e-5)
    np.testing.assert_allclose(sq, 1.0, rtol=1e-6)


# ---------------------------------------------------------------------------------------------- prequential loop
def _tiny(stream):
    model = MLP(features=(3,), out=stream.num_outputs)
    return model, lambda key: model.init(key, jnp.zeros(stream.xs.shape[1]))


def test_prequential_equals_python_loop(data):
    x, y = data
    s = S.permuted(x, y, 24, task_len=8, seed=0)
    model, init = _tiny(s)
    post = bk.posteriors.lofi(model.apply, Categorical(), rank=2, init_cov=0.1, dynamics_cov=1e-4)
    df = run_stream(s, StreamLearner(post, init), seeds=[7], window=5)
    state = post.init(init(jax.random.PRNGKey(7)))
    upd, pred, prd = jax.jit(post.update), jax.jit(post.predictive), jax.jit(post.predict)
    rows = []
    for t in range(len(s)):
        state = prd(state)
        m, v = pred(state, s.xs[t])
        p = np.asarray(m, np.float64)
        rows.append([float(p.argmax() == s.ys[t].argmax()), -np.log(p[s.ys[t].argmax()]),
                     np.mean((s.ys[t] - p) ** 2)])
        state = upd(state, s.xs[t], s.ys[t])
    rows = np.array(rows)
    np.testing.assert_allclose(df[["accuracy", "nlpd", "sq_error"]].to_numpy(), rows, rtol=2e-4, atol=2e-5)
    np.testing.assert_array_equal(df.task_id, s.task_ids)
    np.testing.assert_allclose(df.accuracy_roll.iloc[-1], rows[-5:, 0].mean())
    np.testing.assert_allclose(df.rmse_roll.iloc[-1], np.sqrt(rows[-5:, 2].mean()), rtol=1e-6)


def test_bk_run_with_a_stream(data):
    x, y = data
    s = S.rotating(x, y, 30, target="angle", seed=0)
    model, init = _tiny(s)
    post = bk.posteriors.diag_ekf(model.apply, Gaussian(0.5))
    df = bk.run(s, (post, init), 20, seeds=2, name="vd-ekf")
    assert list(df.columns[:4]) == ["agent", "seed", "step", "task_id"] and len(df) == 40
    assert set(df.agent) == {"vd-ekf"} and df.attrs["timing"]["vd-ekf"]["mode"] == "prequential"
    assert df.nlpd.notna().all() and df.accuracy.isna().all() and (df.rmse_roll > 0).all()
    a, b = (df[df.seed == k].nlpd.to_numpy() for k in (0, 1))
    assert not np.allclose(a, b)  # seeds differ through the initial network
    dfs = bk.run(S.label_switch(x, y, 20, switch_every=10), "replay_sgd", 20, seeds=1)  # backend name
    assert len(dfs) == 20 and dfs.accuracy.between(0, 1).all()


# ----------------------------------------------------------------------------------------- kalman_last_layer γ
def test_kll_gamma_step_is_clipped_and_not_absorbing():
    """A 100σ surprise moves δ by at most lr·clip; the plain step (clip=None) jumps much further."""
    model = MLP(features=(4,), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(2))
    x, yb = jnp.ones(2), jnp.array([100.0])
    deltas = {}
    for clip in (10.0, None):
        post = bk.posteriors.kalman_last_layer(model.apply, Gaussian(0.01), forgetting_lr=0.01,
                                               forgetting_grad_clip=clip)
        step = jax.jit(lambda st, yy, post=post: post.update(post.predict(st), x, yy))
        st = post.init(params)
        for _ in range(5):  # shrink the covariance so that the drift matters
            st = step(st, model.apply(params, x))
        deltas[clip] = float(step(st, yb).delta - st.delta)
    assert 0 < deltas[10.0] <= 0.1 + 1e-6 and deltas[None] > 1.0
    with pytest.raises(ValueError, match="forgetting_grad_clip"):
        bk.posteriors.kalman_last_layer(model.apply, forgetting_grad_clip=0.0)
    assert 0 < float(current_forgetting(st)) <= 1


# --------------------------------------------------------------------------------------------------- real data
@pytest.mark.realdata
def test_fashion_mnist_permuted_stream():
    if not bk.datasets.is_cached("fashion_mnist"):
        reason = f"fashion_mnist not in the cache {bk.datasets.cache_dir()}: run `banditkit data fetch fashion_mnist`"
        print(reason)
        pytest.skip(reason)
    x, y = S.load_xy("fashion_mnist")
    s = S.permuted(x, y, 600, seed=0)
    assert s.xs.shape == (600, 784) and list(s.boundaries) == [0, 300] and s.ys.shape == (600, 10)
