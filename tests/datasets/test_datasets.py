"""Datasets: safe unpickling/extraction, converters, the fetch machinery (offline, file:// sources), committed
tables, own-copy loaders vs synthetic look-alikes, KuaiRec rounds, errors that name the fix."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import zipfile

import numpy as np
import pandas as pd
import pytest

from banditkit import datasets
from banditkit.cli import main as banditkit_main
from banditkit.datasets import catalog, external, formats, safe
from banditkit.datasets import fetching as fetch_mod


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("BANDITKIT_DATA", str(root))
    return root


# --------------------------------------------------------------------------------------------- safe file handling
def test_numpy_only_unpickler_loads_arrays_and_refuses_other_globals(tmp_path):
    good = ((np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2])), {"k": np.eye(2)})
    p = tmp_path / "ok.pkl.gz"
    with gzip.open(p, "wb") as f:
        pickle.dump(good, f, protocol=2)
    out = datasets.load_numpy_pickle(p)
    np.testing.assert_array_equal(out[0][0], good[0][0])
    np.testing.assert_array_equal(out[1]["k"], np.eye(2))

    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps(os.getcwd))  # a global outside NumPy
    with pytest.raises(datasets.UnsafeFileError, match="only NumPy arrays"):
        datasets.load_numpy_pickle(bad)


def test_truncated_pickle_gives_corrupt_file_error_with_refetch_hint(tmp_path):
    p = tmp_path / "mnist.pkl.gz"
    with gzip.open(p, "wb") as f:
        pickle.dump((np.zeros((3, 784), np.float32),) * 3, f)
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(datasets.CorruptFileError, match="fetch again"):
        datasets.load_numpy_pickle(p, refetch="Run `banditkit data fetch mnist --force`.")


@pytest.mark.parametrize("name", ["../evil", "/etc/passwd", "a/../../b", "C:/x"])
def test_unsafe_member_names_are_refused(name):
    with pytest.raises(safe.UnsafeFileError):
        safe.safe_member_name(name)


def test_zip_extraction_stays_inside_destination(tmp_path):
    z = tmp_path / "a.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("pkg/data/x.txt", "hello")
        zf.writestr("../escape.txt", "nope")
    got = safe.zip_members(z, ["pkg/data/x.txt"], tmp_path / "out")
    assert got["pkg/data/x.txt"].read_text() == "hello"
    assert got["pkg/data/x.txt"].parent == tmp_path / "out"
    with pytest.raises(safe.UnsafeFileError):
        safe.zip_members(z, ["../escape.txt"], tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()
    with pytest.raises(FileNotFoundError):
        safe.zip_members(z, ["missing"], tmp_path / "out")
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(datasets.CorruptFileError):
        safe.zip_members(tmp_path / "broken.zip", ["x"], tmp_path / "out")


# ------------------------------------------------------------------------------------------------- raw formats
def _write_idx(path, arr: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, arr.ndim]) + np.array(arr.shape, dtype=">u4").tobytes()
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def _fake_idx_set(folder, n_train=6, n_test=4, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, 28, 28)),
              "train-labels-idx1-ubyte.gz": rng.integers(0, 10, n_train),
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, 28, 28)),
              "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, n_test)}
    folder.mkdir(parents=True, exist_ok=True)
    for name, a in arrays.items():
        _write_idx(folder / name, a)
    return arrays


def test_idx_reader_round_trip_and_truncation(tmp_path):
    arrays = _fake_idx_set(tmp_path)
    d = formats.mnist_from_idx(*(tmp_path / n for n in arrays))
    np.testing.assert_array_equal(d["X_train"], arrays["train-images-idx3-ubyte.gz"])
    np.testing.assert_array_equal(d["y_test"], arrays["t10k-labels-idx1-ubyte.gz"])
    raw = gzip.decompress((tmp_path / "train-images-idx3-ubyte.gz").read_bytes())
    (tmp_path / "short.gz").write_bytes(gzip.compress(raw[:-5]))
    with pytest.raises(datasets.CorruptFileError, match="expected"):
        formats.read_idx(tmp_path / "short.gz")


def test_mnist_pickle_layout_converts_to_exact_bytes(tmp_path):
    rng = np.random.default_rng(1)
    imgs = [rng.integers(0, 256, (n, 784)) for n in (5, 2, 3)]
    labels = [rng.integers(0, 10, n) for n in (5, 2, 3)]
    p = tmp_path / "mnist.pkl.gz"
    with gzip.open(p, "wb") as f:
        pickle.dump(tuple((i.astype(np.float32) / 256, lab) for i, lab in zip(imgs, labels, strict=True)), f)
    d = formats.mnist_from_pickle(p)
    np.testing.assert_array_equal(d["X_train"].reshape(7, 784), np.concatenate(imgs[:2]))
    np.testing.assert_array_equal(d["y_train"], np.concatenate(labels[:2]))
    np.testing.assert_array_equal(d["X_test"].reshape(3, 784), imgs[2])


# --------------------------------------------------------------------------------------- fetch machinery (offline)
def _info(name, sources, content=None):
    return catalog.DatasetInfo(name=name, kind="fetch", description="t", licence="t", sources=tuple(sources),
                               content_sha256=content, files=(f"{name}.npz",))


def test_fetch_falls_back_to_next_source_verifies_and_loads(tmp_path, empty_cache, monkeypatch):
    arrays = _fake_idx_set(tmp_path / "srv")
    members = tuple(arrays)
    bad = catalog.Source("dead", "url", "file:///nonexistent/folder/", members, formats.mnist_from_idx)
    good = catalog.Source("local", "url", (tmp_path / "srv").as_uri() + "/", members, formats.mnist_from_idx)
    expected = fetch_mod.content_hash("mnist", formats.mnist_from_idx(*(tmp_path / "srv" / m for m in members)))
    monkeypatch.setitem(catalog.CATALOG, "mnist", _info("mnist", [bad, good], expected))
    res = datasets.fetch(["mnist"], progress=False)
    assert res["mnist"]["status"] == "fetched" and res["mnist"]["source"] == "local"
    assert res["mnist"]["sha256"] == expected
    d = datasets.load("mnist")
    np.testing.assert_array_equal(d["X_train"], arrays["train-images-idx3-ubyte.gz"])
    assert (empty_cache / "mnist" / "SOURCE.json").exists()
    assert datasets.fetch(["mnist"], progress=False)["mnist"]["status"] == "cached"
    row = datasets.available().set_index("name").loc["mnist"]
    assert bool(row["cached"]) and row["source"] == "local"


def test_fetch_rejects_member_checksum_mismatch_and_reports_every_source(tmp_path, empty_cache, monkeypatch):
    arrays = _fake_idx_set(tmp_path / "srv")
    members = tuple(arrays)
    src = catalog.Source("pinned", "url", (tmp_path / "srv").as_uri() + "/", members, formats.mnist_from_idx,
                         member_sha256=("0" * 64,) * 4)
    monkeypatch.setitem(catalog.CATALOG, "mnist", _info("mnist", [src]))
    with pytest.raises(datasets.FetchError, match="SHA-256 mismatch") as e:
        datasets.fetch(["mnist"], progress=False)
    assert e.value.results["mnist"]["status"] == "failed"
    assert not (empty_cache / "mnist").exists()


def test_fetch_from_zip_url_extracts_only_the_member(tmp_path, empty_cache, monkeypatch):
    z = tmp_path / "ml-100k.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("ml-100k/u.data", "2\t5\t4\t100\n1\t3\t5\t200\n")
        zf.writestr("ml-100k/README", "x")
    src = catalog.Source("zip", "url", z.as_uri(), ("ml-100k/u.data",), formats.movielens_from_udata)
    rows = pd.DataFrame([[1, 3, 5, 200], [2, 5, 4, 100]], columns=formats.RATING_COLUMNS)
    pin = fetch_mod.content_hash("movielens", formats._tidy_ratings(rows))  # load verifies against the pin
    info = catalog.DatasetInfo(name="movielens", kind="fetch", description="t", licence="t", sources=(src,),
                               files=("ratings.parquet",), content_sha256=pin)
    monkeypatch.setitem(catalog.CATALOG, "movielens", info)
    datasets.fetch("movielens", progress=False)
    df = datasets.load("movielens")
    assert df.values.tolist() == [[1, 3, 5, 200], [2, 5, 4, 100]]  # sorted by user, movie


def test_fetch_and_load_name_errors(empty_cache):
    with pytest.raises(ValueError, match="available datasets: .*mnist"):
        datasets.fetch(["not-a-dataset"], progress=False)
    with pytest.raises(ValueError, match="did you mean 'mushroom'"):
        datasets.load("mushrom")
    with pytest.raises(datasets.DatasetNotFoundError, match="banditkit data fetch mnist"):
        datasets.load("mnist")
    with pytest.raises(datasets.DatasetNotFoundError, match=r"data_dir=.*synthetic=True"):
        datasets.load("kuairec")
    with pytest.raises(ValueError, match="only for"):
        datasets.load("mushroom", synthetic=True)
    assert datasets.fetch(["kuairec"], progress=False)["kuairec"]["status"] == "manual"


def test_cli_list_and_fetch_exit_codes(empty_cache, capsys):
    assert banditkit_main(["data", "list"]) == 0
    assert "mushroom" in capsys.readouterr().out
    assert banditkit_main(["data", "fetch", "covertype", "--quiet"]) == 0
    assert banditkit_main(["data", "fetch", "nonsense", "--quiet"]) == 2
    assert "banditkit data: error: " in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- committed tables
def test_committed_tables_match_pinned_content_and_showdown_counts():
    m, s, a = datasets.load("mushroom"), datasets.load("shuttle"), datasets.load("adult")
    for name, df in (("mushroom", m), ("shuttle", s), ("adult", a)):
        assert fetch_mod.content_hash(name, df) == catalog.CATALOG[name].content_sha256
    assert m.shape == (8124, 23) and m["class"].value_counts().to_dict() == {"edible": 4208, "poisonous": 3916}
    assert (m["stalk-root"] == "?").sum() == 2480
    assert s.shape == (58000, 10) and s["class"].value_counts().to_dict() == {
        1: 45586, 4: 8903, 5: 3267, 3: 171, 2: 50, 7: 13, 6: 10}
    assert a.shape == (48842, 15) and a["income"].value_counts().to_dict() == {"<=50K": 37155, ">50K": 11687}
    table = datasets.available().set_index("name")
    assert table.loc["mushroom", "cached"] and table.loc["mushroom", "kind"] == "committed"


# ---------------------------------------------------------------------------------- own-copy loaders and synthetic
@pytest.mark.parametrize("name", ["kuairec", "covertype", "census", "jester", "financial"])
def test_official_file_loaders_read_the_synthetic_files(name, tmp_path, empty_cache):  # records hashes there
    external.write_synthetic(name, tmp_path)
    got = datasets.load(name, data_dir=tmp_path)
    want = datasets.load(name, synthetic=True)
    if name == "kuairec":
        a, b = datasets.kuairec_rounds(**got), datasets.kuairec_rounds(**want)
        np.testing.assert_array_equal(a["features"], b["features"])
        np.testing.assert_allclose(a["rewards"], b["rewards"], rtol=1e-6)
    elif isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want)
    else:
        np.testing.assert_allclose(got, want)
    with pytest.raises(ValueError, match="does not exist"):
        datasets.load(name, data_dir=tmp_path / "nowhere")


def test_write_synthetic_takes_the_generators_size(tmp_path, empty_cache):
    size = dict(n_users=6, n_videos=15, n_days=3, per_day=10)
    external.write_synthetic("kuairec", tmp_path, seed=2, **size)
    got = datasets.kuairec_rounds(**datasets.load("kuairec", data_dir=tmp_path))
    want = datasets.kuairec_rounds(**external.synthetic_kuairec(2, **size))
    np.testing.assert_array_equal(got["features"], want["features"])
    np.testing.assert_allclose(got["rewards"], want["rewards"], rtol=1e-6)
    assert got["num_videos"] == 15 and len(got["rewards"]) == 6 * 3  # 6 users x 3 days x 10 videos, blocks of 10
    with pytest.raises(ValueError, match=r"unknown size argument\(s\) \['n_items'\].*n_users"):
        external.write_synthetic("kuairec", tmp_path, n_items=5)


def test_schemas_of_synthetic_look_alikes():
    cov = datasets.load("covertype", synthetic=True)
    assert list(cov.columns) == external.COVERTYPE_COLUMNS and cov["Cover_Type"].between(1, 7).all()
    assert (cov.filter(like="Soil_Type").sum(axis=1) == 1).all()
    cen = datasets.load("census", synthetic=True)
    assert list(cen.columns) == external.CENSUS_COLUMNS and len(cen.columns) == 69
    jes = datasets.load("jester", synthetic=True)
    assert jes.shape[1] == 40 and jes.min() >= -10 and jes.max() <= 10
    assert datasets.load("financial", synthetic=True).shape[1] == 21


def test_kuairec_rounds_use_yesterdays_counters_blocks_and_time_order():
    inter = pd.DataFrame({
        "user_id": [7] * 5 + [3] * 4,
        "video_id": [10, 11, 10, 12, 11, 12, 10, 11, 12],
        "timestamp": [100.0, 101, 102, 103, 104, 50, 51, 52, 53],
        "date": [20200706] * 5 + [20200706] * 4,
        "watch_ratio": [0.5, 1.0, 2.0, 0.0, 3.0, 1.5, 0.2, 0.7, 9.0],
    })
    counts = {c: [0, 0, 0, 0, 0, 0] for c in external.KUAIREC_COUNTS}
    counts["like_cnt"] = [1, 2, 3, 100, 200, 300]  # day 5 -> used on day 6; day 6 values must not leak
    daily = pd.DataFrame({"video_id": [10, 11, 12, 10, 11, 12], "date": [20200705] * 3 + [20200706] * 3, **counts})
    r = datasets.kuairec_rounds(inter, daily, block=2)
    # user 3: 4 rows -> 2 blocks (t0 = 50, 52); user 7: 5 rows -> 2 blocks (t0 = 100, 102), last row dropped
    np.testing.assert_array_equal(r["time0"], [50, 52, 100, 102])
    np.testing.assert_array_equal(r["user"], [3, 3, 7, 7])
    assert r["features"].shape == (4, 2, 9) and r["num_videos"] == 3
    np.testing.assert_array_equal(r["video_ids"], [10, 11, 12])
    # first round: user 3 watched videos 12, 10 -> indices 2, 0; like counts of the previous day: 3, 1
    np.testing.assert_array_equal(r["features"][0, :, 0], [2, 0])
    np.testing.assert_allclose(r["features"][0, :, 1], np.log1p([3, 1]), rtol=1e-6)
    np.testing.assert_allclose(r["rewards"][0], np.log1p([1.5, 0.2]), rtol=1e-6)


def test_in_between_has_two_clusters_and_a_gap():
    d = datasets.load("in_between")
    x = d["x"][:, 0]
    assert d["x"].shape == (128, 1) and d["y"].shape == (128,) and d["x_grid"].shape == (200, 1)
    assert ((np.abs(x) >= 0.3) & (np.abs(x) <= 0.7)).all() and (x > 0).any() and (x < 0).any()


def test_available_lists_every_catalogue_entry_with_licence(empty_cache):
    table = datasets.available()
    assert set(table["name"]) == set(catalog.CATALOG)
    assert {"name", "cached", "source", "size", "sha256", "licence"} <= set(table.columns)
    assert not table.set_index("name").loc["mnist", "cached"]
    assert table["licence"].str.len().min() > 0


def test_content_hash_is_independent_of_dtype_quirks():
    a = pd.DataFrame({"user_id": [1], "movie_id": [2], "rating": [3], "timestamp": [4]})
    b = formats._tidy_ratings(a.astype("int64"))
    assert fetch_mod.content_hash("movielens", b) == fetch_mod.content_hash("movielens", formats._tidy_ratings(a))
    buf = io.BytesIO()
    np.save(buf, np.zeros(2))
    assert datasets.sha256_arrays(np.zeros(2)) != datasets.sha256_arrays(np.zeros(2, np.float32))


def test_tampered_cache_file_gives_checksum_error_with_refetch_command(tmp_path, empty_cache, monkeypatch):
    arrays = _fake_idx_set(tmp_path / "srv")
    src = catalog.Source("local", "url", (tmp_path / "srv").as_uri() + "/", tuple(arrays), formats.mnist_from_idx)
    pin = fetch_mod.content_hash("mnist", formats.mnist_from_idx(*(tmp_path / "srv" / m for m in arrays)))
    monkeypatch.setitem(catalog.CATALOG, "mnist", _info("mnist", [src], pin))
    datasets.fetch(["mnist"], progress=False)
    path = empty_cache / "mnist" / "mnist.npz"
    raw = path.read_bytes()
    path.write_bytes(raw[:-10])  # a truncated archive no longer opens: refused before its content is hashed
    with pytest.raises(datasets.CorruptFileError, match=r"dataset 'mnist'.*corrupt.*data fetch mnist --force"):
        datasets.load("mnist")
