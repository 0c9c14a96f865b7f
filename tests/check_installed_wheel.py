"""What ``pip install <wheel>`` gives a user: run by ``scripts/wheel_check.sh`` with the Python of a fresh venv that
holds the built wheel (and pytest) only, from a folder outside the checkout.

Not part of the test suite (the name does not match ``test_*.py``, so ``pytest`` in the checkout does not collect
it): there ``import banditkit`` is the checkout, which is exactly what these tests refuse.  ``BANDITKIT_CHECKOUT``
names the checkout the wheel was built from.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import pkgutil
import re
import sys
from importlib import resources
from pathlib import Path

import pytest

import banditkit

# The shipped tables and their row counts (data/README.md of the checkout, banditkit/datasets/shipped/README.md).
TABLES = {"mushroom": 8124, "shuttle": 58000, "adult": 48842}


@pytest.fixture(scope="module")
def checkout() -> Path:
    path = os.environ.get("BANDITKIT_CHECKOUT")
    if not path:
        pytest.fail("set BANDITKIT_CHECKOUT to the checkout the wheel was built from (scripts/wheel_check.sh does)")
    return Path(path).resolve()


def test_banditkit_is_the_installed_wheel_not_the_checkout(checkout):
    installed = Path(banditkit.__file__).resolve()
    assert Path(sys.prefix).resolve() in installed.parents, f"{installed} is not inside the venv {sys.prefix}"
    assert checkout not in installed.parents, f"{installed} is the checkout's copy"
    assert not any(Path(p or ".").resolve() == checkout for p in sys.path), "the checkout is on sys.path"
    assert md.version("banditkit") == banditkit.__version__


def _extras_requirements() -> set[str]:
    """Top-level names of the distributions that only an extra brings (``optuna``, ``rdata``, ...)."""
    names = set()
    for req in md.requires("banditkit") or []:
        if "extra ==" in req:
            names.add(re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower().replace("-", "_"))
    return names


def test_every_module_of_the_package_imports():
    """A module missing from the wheel, or a dependency missing from its metadata, fails here; a module that needs
    an extra (``banditkit.integrations.optuna``) may only fail for want of that extra's package."""
    optional = _extras_requirements()
    failures = []
    modules = [m.name for m in pkgutil.walk_packages(banditkit.__path__, "banditkit.")]
    assert len(modules) > 50, modules  # the whole package, not a stub
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0].lower() not in optional:
                failures.append(f"{name}: {e}")
    assert not failures, failures


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_shipped_tables_load_with_an_empty_cache(name, tmp_path, monkeypatch):
    from banditkit import datasets

    monkeypatch.setenv("BANDITKIT_DATA", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("BANDITKIT_TABLES", raising=False)
    frame = datasets.load(name)
    assert len(frame) == TABLES[name]
    folder = Path(str(datasets.tables_dir()))
    assert Path(banditkit.__file__).resolve().parent in folder.resolve().parents, folder


def test_the_package_is_typed():
    assert (resources.files("banditkit") / "py.typed").is_file()
