"""A command never replaces the results an earlier run left in ``--out`` unless told to (``--overwrite``)."""

import pytest

from banditkit.cli import main


@pytest.mark.parametrize("left", ["compare.csv", "compare_run.json"])
def test_compare_refuses_a_folder_with_results_and_touches_nothing(tmp_path, capsys, left):
    out = tmp_path / "o"
    out.mkdir()
    (out / left).write_text("earlier\n")
    argv = ["compare", "--env", "mushroom", "--agents", "linear-greedy", "--steps", "5", "--seeds", "1",
            "--out", str(out), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"banditkit compare: error: {str(out)!r} already holds the results of an earlier 'compare' run "
                   f"({left}); nothing was changed. Pass --overwrite to replace them, --resume to continue that run, "
                   "or another --out"]
    assert sorted(p.name for p in out.iterdir()) == [left] and (out / left).read_text() == "earlier\n"


def test_overwrite_replaces_them_and_another_command_is_not_in_the_way(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "bo.csv").write_text("another command's results\n")  # not compare's: no refusal
    (out / "compare.csv").write_text("earlier\n")
    argv = ["compare", "--env", "mushroom", "--agents", "linear-greedy", "--steps", "5", "--seeds", "1",
            "--out", str(out), "--quiet", "--overwrite"]
    assert main(argv) == 0
    assert (out / "compare.csv").read_text().startswith("agent,") and (out / "bo.csv").read_text().startswith("another")
