"""``banditkit serve``'s command line: what it refuses before it starts serving (no server is started here)."""

from __future__ import annotations

import pytest

from banditkit.cli import main
from banditkit.serve.store import SQLiteStore


def test_a_new_store_needs_an_agent(tmp_path, capsys):
    assert main(["serve", "--store", str(tmp_path / "log.db")]) == 2
    assert "--agent is required for a new store" in capsys.readouterr().err


def test_a_restart_may_not_contradict_the_store(tmp_path, capsys):
    pytest.importorskip("uvicorn")
    store = SQLiteStore(tmp_path / "log.db")
    store.set_meta({"spec": "linear-thompson", "context_dim": "2", "action_dim": "3", "num_actions": "4", "seed": "0",
                    "draws": "32"})
    store.close()
    assert main(["serve", "--store", str(tmp_path / "log.db"), "--context-dim", "5"]) == 2
    err = capsys.readouterr().err
    assert "was made with context_dim='2', not '5'" in err and err.startswith("banditkit serve: error:")


def test_a_missing_token_file_is_refused(tmp_path, capsys):
    pytest.importorskip("uvicorn")
    argv = ["serve", "--agent", "linear-thompson", "--store", str(tmp_path / "log.db"), "--token-file",
            str(tmp_path / "nope")]
    assert main(argv) == 2
    assert "cannot read --token-file" in capsys.readouterr().err
    assert not (tmp_path / "log.db").exists()  # refused before the store was made


def test_a_store_of_another_schema_version_is_refused(tmp_path):
    store = SQLiteStore(tmp_path / "log.db")
    store.set_meta({"schema_version": "99"})
    store.close()
    with pytest.raises(ValueError, match="schema version 99"):
        SQLiteStore(tmp_path / "log.db")


def test_a_file_that_is_not_a_store_is_refused(tmp_path, capsys):
    (tmp_path / "notes.db").write_text("not a database, just text " * 100)
    assert main(["serve", "--agent", "linear-thompson", "--store", str(tmp_path / "notes.db")]) == 2
    assert "is not a banditkit serve store" in capsys.readouterr().err
