"""banditkit.checkpoint: round trips are bit-exact, structure mismatches are explained, files are pickle-free."""

from __future__ import annotations

import json
import os
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit import checkpoint


@pytest.fixture(scope="module")
def model_and_post():
    model = bk.models.MLP(features=(4,), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(2))
    post = bk.posteriors.ekf(model.apply, bk.likelihoods.Gaussian(0.1), init_cov=0.5, dynamics_cov=1e-3)
    state = post.init(params)
    for i in range(3):
        state = post.update(post.predict(state), jnp.array([0.3 * i, -0.2]), jnp.array([0.1 * i]))
    return model, params, post, state


def _assert_tree_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb, strict=True):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def test_posterior_state_round_trip_exact_and_resumes(tmp_path, model_and_post):
    _, params, post, state = model_and_post
    f = tmp_path / "state.npz"
    out = checkpoint.save(f, state, posterior=post, meta={"step": 3, "seed": np.int64(7)})
    assert out == str(f)
    loaded, meta = checkpoint.load(f, template=post.init(params), posterior=post)
    assert type(loaded) is type(state)
    _assert_tree_equal(loaded, state)
    assert meta["name"] == "ekf"
    assert meta["hyper"] == {"init_cov": 0.5, "dynamics_cov": 1e-3, "forgetting": 1.0}
    assert meta["dtype"] == "float32"
    assert meta["meta"] == {"step": 3, "seed": 7}
    assert meta["banditkit_version"] == bk.__version__
    assert "EKFState" in meta["treedef"]
    assert checkpoint.header(f) == meta  # the same metadata, without reading the arrays
    # resuming from the loaded state gives exactly what continuing the original does
    x, y = jnp.array([0.5, 0.5]), jnp.array([1.0])
    _assert_tree_equal(post.update(loaded, x, y), post.update(state, x, y))
    # restore = init on template params + load
    restored, _ = checkpoint.restore(f, post, params)
    _assert_tree_equal(restored, state)


def test_float64_round_trip(tmp_path, x64):
    state = {"mean": jnp.arange(3, dtype=jnp.float64) / 3, "count": jnp.int64(2**40)}
    checkpoint.save(tmp_path / "s.npz", state)
    loaded, meta = checkpoint.load(tmp_path / "s.npz", template=state)
    _assert_tree_equal(loaded, state)
    assert meta["dtype"] == "float64" and meta["name"] is None


def test_keys_bfloat16_and_template_free_load(tmp_path, model_and_post):
    _, _, _, state = model_and_post
    tree = {
        "post": state,
        "key": jax.random.key(3),
        "old_key": jax.random.PRNGKey(4),
        "half": jnp.array([1.5, -2.25], jnp.bfloat16),
        "lst": [jnp.ones(2), jnp.zeros((1, 2))],
    }
    checkpoint.save(tmp_path / "t.npz", tree)
    loaded, _ = checkpoint.load(tmp_path / "t.npz", template=tree)
    np.testing.assert_array_equal(jax.random.key_data(loaded["key"]), jax.random.key_data(tree["key"]))
    assert jax.random.normal(loaded["key"]) == jax.random.normal(tree["key"])
    assert loaded["half"].dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(loaded["half"], np.float32), [1.5, -2.25])
    # no template: nested dicts / lists, NamedTuple fields as keys
    raw, _ = checkpoint.load(tmp_path / "t.npz")
    assert set(raw) == {"post", "key", "old_key", "half", "lst"}
    np.testing.assert_array_equal(raw["post"]["cov"], state.cov)
    assert isinstance(raw["lst"], list) and raw["lst"][1].shape == (1, 2)


def test_file_is_plain_npz_without_pickle(tmp_path, model_and_post):
    _, _, post, state = model_and_post
    f = tmp_path / "state.npz"
    checkpoint.save(f, state, posterior=post)
    with np.load(f, allow_pickle=False) as z:  # would raise if any member needed pickle
        assert set(z.files) == {".mean", ".cov", "__banditkit_meta__"}
        header = json.loads(bytes(z["__banditkit_meta__"]).decode())
        np.testing.assert_array_equal(z[".cov"], state.cov)
    assert header["format"] == checkpoint.FORMAT
    assert [leaf["key"] for leaf in header["leaves"]] == [".mean", ".cov"]


def test_structure_mismatch_lists_differences(tmp_path, model_and_post):
    model, params, post, state = model_and_post
    f = tmp_path / "state.npz"
    checkpoint.save(f, state, posterior=post)
    # a different model size: shapes differ
    big = bk.models.MLP(features=(5,), out=1)
    other = bk.posteriors.ekf(big.apply, init_cov=0.5, dynamics_cov=1e-3)
    bigp = big.init(jax.random.PRNGKey(0), jnp.zeros(2))
    with pytest.raises(ValueError, match=r"\.mean: shape \(17,\) in the file, \(21,\) in the template"):
        checkpoint.load(f, template=other.init(bigp))
    # different fields
    with pytest.raises(ValueError, match="template has leaves the file lacks"):
        checkpoint.load(f, template={"mean": state.mean, "cov": state.cov, "extra": jnp.zeros(1)})
    # dtype differs
    with pytest.raises(ValueError, match="dtype float32 in the file, int32 in the template"):
        checkpoint.load(f, template=state._replace(mean=state.mean.astype(jnp.int32)))
    # same paths and shapes but a different NamedTuple type
    from typing import NamedTuple

    class Other(NamedTuple):
        mean: jax.Array
        cov: jax.Array

    with pytest.raises(ValueError, match="tree structure differs"):
        checkpoint.load(f, template=Other(state.mean, state.cov))


def test_backend_and_hyper_mismatch(tmp_path, model_and_post):
    model, params, post, state = model_and_post
    f = tmp_path / "state.npz"
    checkpoint.save(f, state, posterior=post)
    other = bk.posteriors.ekf(model.apply, init_cov=2.0, dynamics_cov=1e-3)
    with pytest.raises(ValueError, match=r"hyper-parameters differ.*'init_cov': \(0.5, 2.0\)"):
        checkpoint.restore(f, other, params)
    renamed = post._replace(name="lofi")
    with pytest.raises(ValueError, match="written by backend 'ekf', not 'lofi'"):
        checkpoint.load(f, template=state, posterior=renamed)


def test_atomic_write_keeps_old_file_on_failure(tmp_path, model_and_post, monkeypatch):
    _, _, post, state = model_and_post
    f = tmp_path / "state.npz"
    checkpoint.save(f, state, posterior=post, meta={"v": 1})
    before = f.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.np, "savez", boom)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(f, state, meta={"v": 2})
    assert f.read_bytes() == before  # the old checkpoint is intact
    assert os.listdir(tmp_path) == ["state.npz"]  # no temp file left behind


def test_bad_files_and_arguments(tmp_path, model_and_post):
    _, _, post, state = model_and_post
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoint.load(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="not a readable .npz checkpoint"):
        checkpoint.load(junk)
    plain = tmp_path / "plain.npz"
    np.savez(plain, a=np.ones(2))
    with pytest.raises(ValueError, match="not a banditkit checkpoint"):
        checkpoint.load(plain)
    # truncated file
    good = tmp_path / "good.npz"
    checkpoint.save(good, state)
    trunc = tmp_path / "trunc.npz"
    trunc.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ValueError, match="truncated"):
        checkpoint.load(trunc)
    # a pickled object array smuggled into the archive is refused, never unpickled
    evil = tmp_path / "evil.npz"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(evil, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, zin.read(name))
        import io

        buf = io.BytesIO()
        np.save(buf, np.array([object()], dtype=object), allow_pickle=True)
        zout.writestr("x.npy", buf.getvalue())
    with pytest.raises(ValueError, match="pickled object data.*refuses"):
        checkpoint.load(evil)
    with pytest.raises(TypeError, match=r"meta\['f'\] is a builtin_function.*JSON cannot store"):
        checkpoint.save(tmp_path / "m.npz", state, meta={"f": print})
    with pytest.raises(TypeError, match="meta must be a dict"):
        checkpoint.save(tmp_path / "m.npz", state, meta=[1])
    with pytest.raises(ValueError, match="directory .* does not exist"):
        checkpoint.save(tmp_path / "no" / "such" / "dir.npz", state)
    with pytest.raises(ValueError, match="no array leaves"):
        checkpoint.save(tmp_path / "e.npz", {})


def test_agent_state_round_trip_and_resume(tmp_path):
    """A BanditAgent state (posterior state, step counter, warm-up buffer) saves and resumes exactly."""
    model = bk.models.MLP(features=(4,), out=3)
    agent = bk.agents.BanditAgent(model, "ekf", "thompson", warmup_steps=2)
    ctx = jnp.array([0.5, -1.0])
    state = agent.init(jax.random.PRNGKey(0), ctx)
    for a in range(3):
        state = agent.observe(state, ctx * a, a, 0.1 * a)
    f = tmp_path / "agent.npz"
    checkpoint.save(f, state, posterior=agent.posterior, meta={"agent": agent.name})
    template = agent.init(jax.random.PRNGKey(1), ctx)
    loaded, meta = checkpoint.load(f, template=template, posterior=agent.posterior)
    assert type(loaded) is type(state) and int(loaded.step) == 3
    assert meta["meta"] == {"agent": "ekf-thompson"}
    _assert_tree_equal(loaded, state)
    key = jax.random.PRNGKey(5)
    assert int(agent.act(key, loaded, ctx)[0]) == int(agent.act(key, state, ctx)[0])
    _assert_tree_equal(agent.observe(loaded, ctx, 1, 1.0), agent.observe(state, ctx, 1, 1.0))


@pytest.mark.parametrize("backend", ["hilofi", "lrkf"])
def test_low_rank_factor_saved_as_one_array_loads_as_mix_and_basis(tmp_path, backend):
    """A checkpoint from before low-rank blocks kept ``C = M B`` stores ``C`` as one array: it loads as ``(I, C)``,
    the same factor, and resumes exactly as the state it came from; a shape that does not fit still fails."""
    model = bk.models.MLP(features=(4,), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(2))
    post = getattr(bk.posteriors, backend)(model.apply, bk.likelihoods.Gaussian(0.1), rank=3)
    state = post.init(params)
    for i in range(3):
        state = post.update(post.predict(state), jnp.array([0.3 * i, -0.2]), jnp.array([0.1 * i]))
    field = "cov_hidden" if backend == "hilofi" else "cov"
    old = state._replace(**{field: getattr(state, field).dense()})  # the old layout: C (d, D) as one leaf
    f = tmp_path / "old.npz"
    checkpoint.save(f, old, posterior=post)
    loaded, _ = checkpoint.load(f, template=post.init(params), posterior=post)
    factor = getattr(loaded, field)
    np.testing.assert_array_equal(factor.mix, np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(factor.basis, getattr(old, field))
    x, y = jnp.array([0.5, 0.5]), jnp.array([1.0])
    a, b = post.update(loaded, x, y), post.update(state, x, y)
    np.testing.assert_allclose(getattr(a, field).dense(), getattr(b, field).dense(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.mean if backend == "lrkf" else a.mean_hidden,
                               b.mean if backend == "lrkf" else b.mean_hidden, rtol=1e-5, atol=1e-6)
    bad = old._replace(**{field: getattr(old, field)[:, :-1]})  # one parameter short: still a clear mismatch
    checkpoint.save(f, bad, posterior=post)
    with pytest.raises(ValueError, match="shape"):
        checkpoint.load(f, template=post.init(params), posterior=post)
