"""``banditkit bo --space --objective`` never loses a finished evaluation (issue 71, item 3), driven as a user runs
it: the real command in a subprocess, on an objective file that raises at a chosen call or waits to be
interrupted (SIGINT, as Ctrl-C sends it), then ``--resume``."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

_ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}
_SPACE = '{"x": {"type": "float", "low": 0, "high": 1}, "k": {"type": "int", "low": 1, "high": 4}}'
_OBJECTIVE = '''import os, time
CALLS = [0]

def score(p):
    CALLS[0] += 1
    if CALLS[0] in [int(c) for c in os.environ.get("FAIL_AT", "").split(",") if c]:
        raise ValueError(f"no model for k={p['k']}")  # the user's line
    if CALLS[0] == int(os.environ.get("WAIT_AT", "0")):
        open("waiting", "w").close()
        time.sleep(float(os.environ.get("WAIT_S", "3")))
    return (p["x"] - 0.3) ** 2 + p["k"]
'''
_ARGS = ["--space", "space.json", "--objective", "obj:score", "--features", "8", "--rank", "2", "--candidates", "32",
         "--out", "o", "--quiet", "--save-every", "60"]


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "space.json").write_text(_SPACE)
    (tmp_path / "obj.py").write_text(_OBJECTIVE)
    return tmp_path


def _bo(folder, *args, env=(), wait=True):
    cmd = [sys.executable, "-m", "banditkit", "bo", *_ARGS, *args]
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**_ENV, **dict(env)})
    if not wait:
        return proc
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def _rows(folder) -> pd.DataFrame:
    return pd.read_csv(folder / "o" / "bo.csv")


def test_an_error_in_the_objective_keeps_every_finished_evaluation_and_resumes(folder):
    """The objective raises at its 5th call: exit status 1; the 4 finished evaluations are in bo.csv and the seed's
    checkpoint; stderr shows the user's file, line and source and the parameters it raised at, no banditkit frame.
    ``--resume`` (the objective fixed) evaluates the failing point first and completes the run, steps 1..8."""
    rc, _, err = _bo(folder, "--evals", "8", "--seeds", "1", env={"FAIL_AT": "5"})
    assert rc == 1, err
    assert 'obj.py", line 7, in score' in err and "raise ValueError(f\"no model for k={p['k']}\")" in err, err
    assert "ValueError: no model for k=" in err and "banditkit/" not in err.split("Traceback")[1].split("\n\n")[0]
    first = _rows(folder)
    assert list(first.step) == [1, 2, 3, 4] and list(first.seed) == [0] * 4
    assert (folder / "o" / "bo_state" / "seed0.bk").exists()
    assert "4 finished evaluation(s) are in o/bo.csv" in err and "o/bo_state/seed0.bk" in err and "--resume" in err
    raised_at = err.split("with {", 1)[1].split("}:", 1)[0]  # "'x': 0.1, 'k': 2"
    rc, _, err = _bo(folder, "--evals", "8", "--seeds", "1", "--resume")
    assert rc == 0, err
    df = _rows(folder)
    assert list(df.step) == list(range(1, 9))
    pd.testing.assert_frame_equal(df.iloc[:4], first)  # the finished rows are kept as they were
    assert f"'x': {float(df.x[4])!r}, 'k': {int(df.k[4])!r}" == raised_at  # the failing point was evaluated again first
    assert not (folder / "o" / "bo_state").exists()


def test_on_error_skip_drops_failing_points_and_debug_shows_full_tracebacks(folder):
    """``--on-error skip``: calls 2 and 4 raise; each is reported with its parameters and skipped, the run still
    makes its 6 evaluations, none of them at a failed point; ``--debug`` adds the full traceback (banditkit's
    frames too)."""
    rc, _, err = _bo(folder, "--evals", "6", "--seeds", "1", "--on-error", "skip", "--debug", env={"FAIL_AT": "2,4"})
    assert rc == 0, err
    skipped = [ln for ln in err.splitlines() if ln.endswith("skipped (--on-error skip)")]
    assert len(skipped) == 2 and all("ValueError: no model for k=" in ln for ln in skipped), err
    assert "banditkit/bo/loop.py" in err and 'obj.py", line 7, in score' in err
    df = _rows(folder)
    assert list(df.step) == list(range(1, 7))
    failed = {ln.split("failed at {")[1].split("}")[0] for ln in skipped}
    assert not failed & {f"'x': {float(x)!r}, 'k': {int(k)!r}" for x, k in zip(df.x, df.k, strict=True)}


def _interrupt(proc, times: int) -> tuple[str, str]:
    deadline = time.time() + 300
    while not os.path.exists(os.path.join(proc.args_cwd, "waiting")):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.05)
    for _ in range(times):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
    return proc.communicate(timeout=300)


def test_ctrl_c_saves_and_names_only_files_that_exist(folder):
    """One SIGINT while evaluation 3 runs: it finishes, is saved, exit status 130, the message names bo.csv (3 rows)
    and the checkpoint.  Two SIGINTs during the first evaluation: nothing had finished, no bo.csv is claimed (none
    exists), the checkpoint is named; a --resume then completes the run."""
    proc = _bo(folder, "--evals", "5", "--seeds", "1", env={"WAIT_AT": "3"}, wait=False)
    proc.args_cwd = str(folder)
    _, err = _interrupt(proc, 1)
    assert proc.returncode == 130, err
    assert list(_rows(folder).step) == [1, 2, 3]
    assert "interrupted; 3 finished evaluation(s) are in o/bo.csv" in err and "o/bo_state/seed0.bk" in err, err
    (folder / "waiting").unlink()
    proc = _bo(folder, "--evals", "5", "--seeds", "1", "--out", "p", env={"WAIT_AT": "1", "WAIT_S": "20"},
               wait=False)
    proc.args_cwd = str(folder)
    _, err = _interrupt(proc, 2)
    assert proc.returncode == 130, err
    assert "no evaluation had finished" in err and "bo.csv" not in err and "p/bo_state/seed0.bk" in err, err
    assert not (folder / "p" / "bo.csv").exists()
    rc, _, err = _bo(folder, "--evals", "5", "--seeds", "1", "--out", "p", "--resume")
    assert rc == 0, err
    assert list(pd.read_csv(folder / "p" / "bo.csv").step) == [1, 2, 3, 4, 5]
