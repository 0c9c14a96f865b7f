"""The shipped tables (issue 60): Mushroom, Shuttle and Adult are package data read with ``importlib.resources``.

* The three ``.csv.gz`` files and their attribution are resources of ``banditkit.datasets`` (folder ``shipped``),
  their bytes equal the SHA-256 values pinned in the catalogue, and ``pyproject.toml`` declares them as package
  data (a built wheel carries them: the slow test builds one).
* There is one copy: the repository's ``data/`` holds no table.
* ``$BANDITKIT_TABLES`` still points the loader at another folder: an identical copy loads, a re-compressed copy
  (other gzip bytes, same content) loads through the content pin, an altered copy is refused naming the variable.
"""

from __future__ import annotations

import fnmatch
import gzip
import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

from banditkit import datasets
from banditkit.datasets import CATALOG, CorruptFileError, DatasetNotFoundError, tables
from banditkit.datasets._paths import ENV_TABLES, SHIPPED_FOLDER, sha256_bytes

TABLES = ("mushroom", "shuttle", "adult")
ROOT = Path(__file__).resolve().parents[2]


def _resource(name: str):
    return resources.files("banditkit.datasets") / SHIPPED_FOLDER / tables.TABLE_FILES[name]


@pytest.mark.parametrize("name", TABLES)
def test_each_table_is_a_package_resource_with_the_pinned_bytes(name, monkeypatch):
    monkeypatch.delenv(ENV_TABLES, raising=False)
    res = _resource(name)
    assert res.is_file()
    assert sha256_bytes(res.read_bytes()) == CATALOG[name].file_sha256[0]
    assert str(datasets.tables_dir() / tables.TABLE_FILES[name]) == str(res)  # the loader's default is the resource
    assert datasets.is_cached(name)
    pd.testing.assert_frame_equal(datasets.load(name), tables.parse(res.read_bytes()))


def test_attribution_ships_with_the_tables():
    readme = (resources.files("banditkit.datasets") / SHIPPED_FOLDER / "README.md").read_text()
    assert "CC BY 4.0" in readme and "https://doi.org/10.24432/C5959T" in readme
    for name in TABLES:
        assert CATALOG[name].file_sha256[0] in readme


def test_one_copy_of_the_truth():
    assert not list((ROOT / "data").glob("*.csv*")), "the tables live in banditkit/datasets/shipped/ only"


def test_pyproject_declares_every_shipped_file_as_package_data():
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["banditkit"]
    shipped = ROOT / "banditkit" / "datasets" / SHIPPED_FOLDER
    files = sorted(p.relative_to(ROOT / "banditkit").as_posix() for p in shipped.iterdir() if p.is_file())
    assert len(files) == 4
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f"{f} is not package data"


@pytest.mark.slow
def test_a_built_wheel_carries_the_tables(tmp_path):
    import setuptools  # noqa: F401 - the [test] extra installs both: a missing build tool fails, not skips
    import wheel  # noqa: F401
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copy(ROOT / "LICENSE", src)
    shutil.copytree(ROOT / "banditkit", src / "banditkit", ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(tmp_path / "dist")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (whl,) = (tmp_path / "dist").glob("banditkit-*.whl")
    with zipfile.ZipFile(whl) as z:
        for name in TABLES:
            member = f"banditkit/datasets/{SHIPPED_FOLDER}/{tables.TABLE_FILES[name]}"
            assert sha256_bytes(z.read(member)) == CATALOG[name].file_sha256[0]
        assert f"banditkit/datasets/{SHIPPED_FOLDER}/README.md" in z.namelist()
        licence = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE")]  # pyproject's license-files
        assert len(licence) == 1 and z.read(licence[0]) == (ROOT / "LICENSE").read_bytes()


# ------------------------------------------------------------------------------------------ $BANDITKIT_TABLES
@pytest.fixture
def own_tables(tmp_path, monkeypatch):
    folder = tmp_path / "tables"
    folder.mkdir()
    for name in TABLES:
        (folder / tables.TABLE_FILES[name]).write_bytes(_resource(name).read_bytes())
    monkeypatch.setenv(ENV_TABLES, str(folder))
    monkeypatch.setenv("BANDITKIT_DATA", str(tmp_path / "cache"))
    return folder


def test_env_override_reads_that_folder(own_tables):
    assert datasets.tables_dir() == own_tables
    pd.testing.assert_frame_equal(datasets.load("shuttle"), tables.parse(_resource("shuttle").read_bytes()))
    row = datasets.available().set_index("name").loc["shuttle"]
    assert bool(row["cached"]) and ENV_TABLES in row["source"]


def test_env_override_recompressed_copy_loads_through_the_content_pin(own_tables):
    path = own_tables / tables.TABLE_FILES["mushroom"]
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()), compresslevel=1, mtime=12345))
    assert sha256_bytes(path.read_bytes()) != CATALOG["mushroom"].file_sha256[0]
    pd.testing.assert_frame_equal(datasets.load("mushroom"), tables.parse(_resource("mushroom").read_bytes()))


def test_env_override_altered_copy_is_refused_naming_the_variable(own_tables):
    path = own_tables / tables.TABLE_FILES["mushroom"]
    text = gzip.decompress(path.read_bytes()).decode().replace("poisonous", "edible", 1)
    path.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(CorruptFileError) as info:
        datasets.load("mushroom")
    msg = str(info.value)
    assert "dataset 'mushroom'" in msg and str(path) in msg and f"unset {ENV_TABLES}" in msg
    path.write_bytes(b"not gzip")
    with pytest.raises(CorruptFileError, match=f"dataset 'mushroom'.*corrupt.*{ENV_TABLES}"):
        datasets.load("mushroom")


def test_env_override_without_the_file_falls_back_to_the_cache_then_names_the_fetch(own_tables):
    (own_tables / tables.TABLE_FILES["adult"]).unlink()
    assert not datasets.is_cached("adult")
    with pytest.raises(DatasetNotFoundError, match="banditkit data fetch adult"):
        datasets.load("adult")
