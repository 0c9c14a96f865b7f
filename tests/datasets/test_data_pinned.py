"""Pinned data hashes (issue 59, fault 1): loading trusts the hashes in the code, not the cache's own records.

* A poisoned cache — a registry-style dataset rewritten with zero images and its ``SOURCE.json`` rewritten to match —
  raises ``CorruptFileError`` naming the data set, the file and ``banditkit data fetch NAME --force``, through
  ``datasets.load`` and through ``gym.make``; the same for a poisoned copy of the real MovieLens cache (realdata).
* Verification runs once per process and file version, and again after the file changes.
* Every registry-carried or shipped catalogue entry pins a content hash; the real caches match their pins.
* User-supplied files (``data_dir=``): their hash is recorded at first use and a later change warns.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import time
import warnings

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import banditkit  # noqa: F401  (registers the banditkit/ environments)
from banditkit import datasets
from banditkit.datasets import CATALOG, CorruptFileError, UserFileChangedWarning, external, integrity, userfiles
from banditkit.datasets._paths import cache_dir, sha256_file

REGISTRY = [n for n, info in CATALOG.items() if info.kind == "fetch"]
USER_CACHE = cache_dir()  # the cache `banditkit data fetch` filled, read before any test points BANDITKIT_DATA away


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("BANDITKIT_DATA", str(root))
    return root


def _new_version(path) -> None:
    """Step the file's mtime forward, so a rewrite is a new file version even on a coarse filesystem clock."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9 * (1 + int(time.time()) % 1000)))


def _fake_mnist(cache, monkeypatch, seed=0):
    """A tiny MNIST-shaped cache entry as ``fetch`` leaves it; the catalogue pin is patched to its content."""
    rng = np.random.default_rng(seed)
    arrays = {"X_train": rng.integers(1, 256, (6, 28, 28), dtype=np.uint8),
              "y_train": rng.integers(0, 10, 6, dtype=np.uint8),
              "X_test": rng.integers(1, 256, (3, 28, 28), dtype=np.uint8),
              "y_test": rng.integers(0, 10, 3, dtype=np.uint8)}
    folder = cache / "mnist"
    folder.mkdir()
    np.savez_compressed(folder / "mnist.npz", **arrays)
    digest = integrity.content_hash("mnist", arrays)
    (folder / "SOURCE.json").write_text(json.dumps({"source": "test", "content_sha256": digest,
                                                    "files": {"mnist.npz": sha256_file(folder / "mnist.npz")}}))
    monkeypatch.setitem(CATALOG, "mnist", dataclasses.replace(CATALOG["mnist"], content_sha256=digest))
    return folder / "mnist.npz", arrays


def _rewrite_source_json(folder, data_file, content) -> None:
    """What a careless script would do: make the cache's own record agree with the poisoned file."""
    record = json.loads((folder / "SOURCE.json").read_text())
    record["files"][data_file.name] = sha256_file(data_file)
    record["content_sha256"] = content
    (folder / "SOURCE.json").write_text(json.dumps(record))


# --------------------------------------------------------------------------------------------------- pins exist
def test_every_registry_and_shipped_dataset_pins_its_content():
    for name, info in CATALOG.items():
        if info.kind in ("fetch", "committed"):
            assert re.fullmatch(r"[0-9a-f]{64}", info.content_sha256 or ""), name
        if info.kind == "committed":
            assert len(info.file_sha256) == len(info.files) == 1, name
            assert re.fullmatch(r"[0-9a-f]{64}", info.file_sha256[0]), name
    assert set(REGISTRY) == {"mnist", "fashion_mnist", "movielens"}


def test_an_entry_without_a_pin_is_refused_with_the_reason(cache, monkeypatch):
    _fake_mnist(cache, monkeypatch, seed=3)
    monkeypatch.setitem(CATALOG, "mnist", dataclasses.replace(CATALOG["mnist"], content_sha256=None))
    with pytest.raises(ValueError, match="'mnist' has no pinned content_sha256"):
        datasets.load("mnist")


# ---------------------------------------------------------------------------------------------- poisoned cache
def test_poisoned_cache_with_rewritten_source_json_is_refused(cache, monkeypatch):
    path, arrays = _fake_mnist(cache, monkeypatch)
    np.testing.assert_array_equal(datasets.load("mnist")["X_train"], arrays["X_train"])  # intact: loads
    poisoned = {**arrays, "X_train": np.zeros_like(arrays["X_train"]), "X_test": np.zeros_like(arrays["X_test"])}
    np.savez_compressed(path, **poisoned)
    _new_version(path)
    _rewrite_source_json(path.parent, path, integrity.content_hash("mnist", poisoned))
    with pytest.raises(CorruptFileError) as info:
        datasets.load("mnist")
    msg = str(info.value)
    assert "dataset 'mnist'" in msg and str(path) in msg and "`banditkit data fetch mnist --force`" in msg
    assert CATALOG["mnist"].content_sha256 in msg
    with pytest.raises(CorruptFileError, match="dataset 'mnist'"):
        gym.make("banditkit/MNIST-v0")  # the route: the environment never sees zero contexts


@pytest.mark.realdata
def test_poisoned_copy_of_the_real_movielens_cache_is_refused_against_the_real_pin(cache):
    src = USER_CACHE / "movielens"
    if not (src / "ratings.parquet").exists():
        pytest.skip("MovieLens is not cached: run `banditkit data fetch movielens`")
    shutil.copytree(src, cache / "movielens")
    path = cache / "movielens" / "ratings.parquet"
    df = datasets.load("movielens")  # the copy verifies against the pin in the code
    assert integrity.content_hash("movielens", df) == CATALOG["movielens"].content_sha256
    df["rating"] = np.int8(5)  # every film rated 5
    df.to_parquet(path, index=False)
    _new_version(path)
    _rewrite_source_json(path.parent, path, integrity.content_hash("movielens", df))
    with pytest.raises(CorruptFileError, match=r"dataset 'movielens'.*ratings\.parquet.*data fetch movielens --force"):
        datasets.load("movielens")


@pytest.mark.realdata
@pytest.mark.parametrize("name", REGISTRY)
def test_the_real_caches_match_the_pins_in_the_code(name):
    if not datasets.is_cached(name):
        pytest.skip(f"{name} is not cached: run `banditkit data fetch {name}`")
    data = datasets.load(name)
    assert integrity.content_hash(name, data) == CATALOG[name].content_sha256


# ------------------------------------------------------------------------------------------- verified once, again
def test_verification_runs_once_per_file_version_and_again_after_a_change(cache, monkeypatch):
    path, arrays = _fake_mnist(cache, monkeypatch, seed=1)
    calls = []
    real = integrity.content_hash
    monkeypatch.setattr(integrity, "content_hash", lambda name, data: calls.append(name) or real(name, data))
    for _ in range(3):
        datasets.load("mnist")
    assert calls == ["mnist"]
    # same size, same mtime put back: a rewrite still changes ctime, so the file is hashed again
    st = os.stat(path)
    time.sleep(0.05)  # past the filesystem clock's tick
    changed = {**arrays, "y_test": (arrays["y_test"] + 1) % 10}
    np.savez_compressed(path, **changed)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(CorruptFileError, match="checksum mismatch for dataset 'mnist'"):
        datasets.load("mnist")
    assert calls == ["mnist", "mnist"]


# ------------------------------------------------------------------------------------------------- user files
def _user_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in caught if issubclass(w.category, UserFileChangedWarning)]


def test_a_changed_user_file_warns_and_keeps_warning_until_accepted(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(userfiles, "_checked", set())
    folder = tmp_path / "jester"
    (path,) = external.write_synthetic("jester", folder, seed=0, n_users=20)
    first, caught = _user_warnings(lambda: datasets.load("jester", data_dir=folder))
    assert caught == []
    record = json.loads(userfiles.record_path().read_text())
    entry = record[str(path.resolve())]
    assert entry["dataset"] == "jester" and entry["sha256"] == sha256_file(path)
    _, caught = _user_warnings(lambda: datasets.load("jester", data_dir=folder))
    assert caught == []  # unchanged

    external.write_synthetic("jester", folder, seed=1, n_users=20)  # the user's file changes under banditkit
    _new_version(path)
    second, caught = _user_warnings(lambda: datasets.load("jester", data_dir=folder))
    assert not np.array_equal(first, second)
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "dataset 'jester'" in msg and str(path.resolve()) in msg and entry["sha256"] in msg
    assert sha256_file(path) in msg and str(userfiles.record_path()) in msg
    userfiles._checked.clear()  # a new process: the first hash is still the reference, so it warns again
    _, caught = _user_warnings(lambda: datasets.load("jester", data_dir=folder))
    assert len(caught) == 1

    record = json.loads(userfiles.record_path().read_text())  # accept the new file: drop its entry
    del record[str(path.resolve())]
    userfiles.record_path().write_text(json.dumps(record))
    userfiles._checked.clear()
    _, caught = _user_warnings(lambda: datasets.load("jester", data_dir=folder))
    assert caught == []
    assert json.loads(userfiles.record_path().read_text())[str(path.resolve())]["sha256"] == sha256_file(path)


def test_user_file_records_of_deleted_files_are_dropped(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(userfiles, "_checked", set())
    (old,) = external.write_synthetic("financial", tmp_path / "a", n_days=30)
    datasets.load("financial", data_dir=tmp_path / "a")
    old.unlink()
    external.write_synthetic("financial", tmp_path / "b", n_days=30)
    datasets.load("financial", data_dir=tmp_path / "b")
    assert list(json.loads(userfiles.record_path().read_text())) == [str((tmp_path / "b" / old.name).resolve())]


def test_a_user_file_hash_that_cannot_be_recorded_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(userfiles, "_checked", set())
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("BANDITKIT_DATA", str(blocker))  # the cache path is a file: the record cannot be written
    external.write_synthetic("financial", tmp_path / "d", n_days=30)
    with pytest.warns(RuntimeWarning, match="could not write the hash record.*'financial'.*BANDITKIT_DATA"):
        out = datasets.load("financial", data_dir=tmp_path / "d")
    pd.testing.assert_frame_equal(pd.DataFrame(out), pd.DataFrame(external.synthetic_financial(0, n_days=30)))
