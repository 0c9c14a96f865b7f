"""The bandit command line is thin (issue 72, items 2 and 5): specs parsed once by ``AgentSpec`` (a bad one is a
one-line error before anything is written), no private imports or signature reading, and a "compiling" line."""

import ast
import pathlib

import pytest

from banditkit.agents import AgentSpec
from banditkit.cli import main

CLI = pathlib.Path(__file__).resolve().parents[2] / "banditkit" / "cli"


def _one_line_error(capsys, argv, *words):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err


def test_a_bad_spec_or_policy_is_one_line_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "c"
    base = ["--env", "mushroom", "--steps", "5", "--out", str(out), "--quiet"]
    _one_line_error(capsys, ["compare", "--agents", "hilofi,hilofy", *base], "cannot read agent spec 'hilofy'",
                    "hilofi")
    _one_line_error(capsys, ["run", "--agent", "lofi", "--policy", "bogus", *base], "unknown policy 'bogus'")
    _one_line_error(capsys, ["run", "--agent", "lofi-bogus", *base], "unknown policy 'bogus'")
    assert not out.exists()


def test_offline_specs_are_checked_before_the_log_is_read(tmp_path, capsys):
    missing = str(tmp_path / "no_such_log.parquet")  # read only after every spec parsed: the spec error comes first
    _one_line_error(capsys, ["evaluate", "--log", missing, "--agents", "linear-greedy,hilofy"],
                    "banditkit evaluate: error: cannot read agent spec 'hilofy'")
    _one_line_error(capsys, ["evaluate", "--log", missing, "--agents", "linear", "--reward-model", "lineer"],
                    "cannot read agent spec 'lineer'")
    _one_line_error(capsys, ["warmstart", "--log", missing, "--agent", "lofi-bogus"], "unknown policy 'bogus'")
    _one_line_error(capsys, ["evaluate", "--log", missing, "--agents", "linear"], "no_such_log")  # then the log


def test_adaptive_noise_refusal_names_the_backends_that_learn_their_own(tmp_path, capsys):
    from banditkit.posteriors import registry

    own = registry.names(learns_own_noise=True)
    assert "linear" in own and "neural_linear" in own
    _one_line_error(capsys, ["compare", "--env", "mushroom", "--agents", "linear", "--adaptive-noise", "--out",
                             str(tmp_path / "c")], f"{', '.join(own)} learn theirs already")
    assert not (tmp_path / "c").exists()


def test_spec_labels_keep_the_users_words():
    spec = AgentSpec.parse("Diag-EKF", policy="ucb")
    assert (spec, spec.label) == (AgentSpec("diag_ekf", "ucb"), "Diag-EKF-ucb")
    learned = spec.learning_noise()
    assert learned == AgentSpec("diag_ekf", "ucb", True) and learned.label == "Diag-EKF-ucb-adaptive_noise"
    assert learned.learning_noise() is learned and AgentSpec("lofi").label == "lofi-thompson"
    assert AgentSpec.parse("hilofi").label == "hilofi" and AgentSpec.parse("hilofi", policy="ucb").policy == "ucb"


def _private_uses(path: pathlib.Path) -> list[str]:
    """``from banditkit... import _name``, ``module._name`` on an imported banditkit module, ``import inspect``."""
    tree = ast.parse(path.read_text())
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("banditkit"):
            for a in node.names:
                modules.add(a.asname or a.name)
                if a.name.startswith("_"):
                    found.append(f"from {node.module} import {a.name}")
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name == "inspect"]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_")):
            found.append(f"{node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("name", ["bandit.py", "offline.py"])
def test_the_cli_uses_only_public_names(name):
    assert _private_uses(CLI / name) == []


def test_compare_says_it_is_compiling_each_agent(tmp_path, capsys):
    argv = ["compare", "--env", "mushroom", "--agents", "linear-greedy", "--steps", "5", "--out", str(tmp_path)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "compiling linear-greedy…" in err
    line = err[err.index("compiling linear-greedy…"):].splitlines()[0]
    assert line.endswith(" s") and float(line.split("…")[1].split()[0]) > 0, line
    assert main([*argv, "--quiet", "--overwrite"]) == 0
    assert "compiling" not in capsys.readouterr().err
