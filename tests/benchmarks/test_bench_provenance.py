"""benchmarks.harness.provenance.commit_note(): every result's machine line names the commit of the code that made
it, and says so when that code had uncommitted changes (such a row cannot be re-made from any commit)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import types

import pytest

from benchmarks.harness import provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root: pathlib.Path, *argv: str) -> str:
    cmd = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A throwaway git checkout laid out like banditkit's, with ``provenance.bk`` pointing into it."""
    for rel in ("banditkit/__init__.py", "benchmarks/suites/x.py", "benchmarks/results/x.csv",
                "benchmarks/studies/s/README.md", "README.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("a\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "one")
    monkeypatch.setattr(provenance, "bk", types.SimpleNamespace(__file__=str(tmp_path / "banditkit" / "__init__.py")))
    monkeypatch.delenv("BANDITKIT_COMMIT", raising=False)
    return tmp_path


def test_names_the_checkouts_commit(checkout):
    head = _git(checkout, "rev-parse", "--short", "HEAD")
    assert provenance.code_commit() == head
    assert provenance.commit_note() == f"; banditkit at commit {head}"


def test_results_and_docs_do_not_count_as_code_changes(checkout):
    (checkout / "benchmarks/results/x.csv").write_text("b\n")
    (checkout / "benchmarks/results/new.md").write_text("b\n")
    (checkout / "README.md").write_text("b\n")
    (checkout / "benchmarks/studies/s/README.md").write_text("b\n")  # a study's write-up is not code
    assert provenance.code_commit() == _git(checkout, "rev-parse", "--short", "HEAD")


@pytest.mark.parametrize("rel", ["banditkit/__init__.py", "benchmarks/suites/x.py", "banditkit/new_module.py",
                                 "benchmarks/studies/s/__init__.py"])
def test_changed_or_new_code_is_flagged(checkout, rel):
    (checkout / rel).write_text("changed\n")
    head = _git(checkout, "rev-parse", "--short", "HEAD")
    assert provenance.commit_note() == f"; banditkit at commit {head} plus uncommitted changes"


def test_environment_variable_overrides_and_no_git_gives_nothing(checkout, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("BANDITKIT_COMMIT", "abc1234")
    assert provenance.commit_note() == "; banditkit at commit abc1234"
    monkeypatch.delenv("BANDITKIT_COMMIT")
    plain = tmp_path_factory.mktemp("wheel")
    monkeypatch.setattr(provenance, "bk", types.SimpleNamespace(__file__=str(plain / "banditkit" / "__init__.py")))
    assert provenance.code_commit() == ""
    assert provenance.commit_note() == ""
