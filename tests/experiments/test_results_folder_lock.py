"""One writer per results folder (issue 59, fault 2): a second writer of a folder — a second run or a ``--resume`` —
is refused naming the folder and the first writer, and touches nothing; the lock of a killed run is taken over on the
same host; one naming another host needs ``--force-unlock``.  Real processes where it matters: the CLI runs are
subprocesses, and the stale lock is that of a process killed with SIGKILL."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pandas as pd
import pytest

from banditkit.cli import main
from banditkit.experiments import folder_lock
from banditkit.experiments.folder_lock import FolderBusy, FolderLock
from banditkit.experiments.results_folder import ResultsFolder
from banditkit.runtime import threads

_ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}


@pytest.fixture(autouse=True)
def _no_process_blas_cap(monkeypatch):
    """``main`` caps BLAS threads for the whole process; here it only checks the request (as in test_cli.py)."""
    monkeypatch.setattr(threads, "limit_blas_threads", lambda num_threads=1: threads._requested(num_threads) or {})


def _wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 300.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the process ended before {what}: {proc.stderr.read()[-2000:]!r}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=60)


# ------------------------------------------------------------------------------------------------ the lock itself
_HOLDER = r"""
import sys, time
from banditkit.experiments.folder_lock import FolderLock
lock = FolderLock(sys.argv[1], owner="holder process").acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_a_second_lock_is_refused_naming_the_holder_and_released_locks_are_removed(tmp_path):
    path = str(tmp_path / "run.lock")
    with FolderLock(path, owner="banditkit run --out x") as first:
        rec = json.loads(open(path).read())
        assert (rec["pid"], rec["host"], rec["owner"]) == (os.getpid(), socket.gethostname(), "banditkit run --out x")
        with pytest.raises(FolderBusy) as e:
            FolderLock(path).acquire()  # another open file: refused even within one process
        msg = str(e.value)
        assert e.value.checked and e.value.owner == rec
        for word in [repr(str(tmp_path)), f"pid {os.getpid()}", socket.gethostname(), rec["started"],
                     "banditkit run --out x", "another folder"]:
            assert word in msg, msg
        assert first.taken_over is None
    assert not os.path.exists(path)  # released: no file left behind
    with FolderLock(path) as again:  # and free again
        assert again.held and again.taken_over is None


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path):
    path = str(tmp_path / "bo.lock")
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_ENV)
    try:
        assert proc.stdout.readline().strip() == "locked", proc.stderr.read()[-2000:]
        with pytest.raises(FolderBusy, match=f"pid {proc.pid} on host"):
            FolderLock(path).acquire()  # alive: refused
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        _stop(proc)
    assert json.loads(open(path).read())["pid"] == proc.pid  # the killed process could not clean up
    with FolderLock(path) as lock:
        assert lock.taken_over["pid"] == proc.pid and lock.taken_over["owner"] == "holder process"
        assert json.loads(open(path).read())["pid"] == os.getpid()


def _foreign_record(path) -> dict:
    rec = dict(pid=12345, host="another-host.example", started="2026-12-01 10:00:00 UTC", owner="banditkit bo")
    with open(path, "w") as fh:
        json.dump(rec, fh)
    return rec


def test_a_lock_from_another_host_needs_force(tmp_path):
    """flock need not reach across hosts, so a record naming another host is not judged stale: refused with the
    way to force it; ``force=True`` takes it over."""
    path = str(tmp_path / "compare.lock")
    rec = _foreign_record(path)
    with pytest.raises(FolderBusy) as e:
        FolderLock(path, force_hint="--force-unlock").acquire()
    msg = str(e.value)
    assert not e.value.checked
    for word in ["pid 12345 on host another-host.example", "another host", "--force-unlock", path]:
        assert word in msg, msg
    assert json.loads(open(path).read()) == rec  # untouched
    with FolderLock(path, force=True) as lock:
        assert lock.taken_over == rec


def test_without_flock_a_record_file_is_the_lock(tmp_path, monkeypatch):
    """Where flock is unavailable the O_EXCL record file is the lock: a live pid on this host is busy, a dead one
    is stale and replaced, another host needs force."""
    monkeypatch.setattr(folder_lock, "fcntl", None)
    path = str(tmp_path / "run.lock")
    with FolderLock(path, owner="first"):
        with pytest.raises(FolderBusy, match=f"pid {os.getpid()}"):
            FolderLock(path).acquire()
    assert not os.path.exists(path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid names no process now
    with open(path, "w") as fh:
        json.dump(dict(pid=dead.pid, host=socket.gethostname(), started="then", owner="crashed"), fh)
    with FolderLock(path) as lock:
        assert lock.taken_over["pid"] == dead.pid
        assert json.loads(open(path).read())["pid"] == os.getpid()
    rec = _foreign_record(path)
    with pytest.raises(FolderBusy, match="another host"):
        FolderLock(path).acquire()
    with FolderLock(path, force=True) as lock:
        assert lock.taken_over == rec
    assert not os.path.exists(path)


def test_a_file_system_that_refuses_flock_falls_back_to_the_record_file(tmp_path, monkeypatch):
    """flock failing with ENOLCK (NFS without a lock daemon): the empty file it made is removed and the O_EXCL
    record file is the lock."""
    import errno
    import types

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(folder_lock, "fcntl", types.SimpleNamespace(LOCK_EX=2, LOCK_NB=4, flock=no_flock))
    path = str(tmp_path / "bo.lock")
    with FolderLock(path, owner="nfs"):
        assert json.loads(open(path).read())["owner"] == "nfs"
        with pytest.raises(FolderBusy, match=f"pid {os.getpid()}"):
            FolderLock(path).acquire()
    assert not os.path.exists(path)


def test_a_results_folder_writes_only_while_it_holds_the_lock(tmp_path):
    folder = ResultsFolder(tmp_path / "r", "run")
    with pytest.raises(RuntimeError, match="only inside"):
        folder.start({"steps": 1})
    with folder.writing(owner="test") as f:
        f.start({"steps": 1})
        assert os.path.exists(f.lock_file)
        with pytest.raises(FolderBusy):
            with ResultsFolder(tmp_path / "r", "run").writing():
                pass
        with ResultsFolder(tmp_path / "r", "bo").writing():  # another command's files in the same folder: its own
            pass
    assert not os.path.exists(folder.lock_file)
    assert json.loads(open(folder.run_file).read()) == {"steps": 1}


# ------------------------------------------------------------------------------------------------ the CLI
_OBJECTIVE = """
import os, time

def score(p):
    while not os.path.exists("go"):  # the test lets the first run go on once the second has been refused
        time.sleep(0.05)
    return (p["x"] - 0.3) ** 2
"""
_BO_SPACE = ["bo", "--space", "space.json", "--objective", "slowobjective:score", "--evals", "6", "--seeds", "1",
             "--features", "8", "--rank", "2", "--candidates", "32", "--out", "shared", "--quiet"]


def test_two_bo_runs_into_one_folder(tmp_path, monkeypatch, capsys):
    """``banditkit bo`` twice at once into one folder: the second (a run or a --resume) exits with status 3 and a
    message naming the folder and the first run's pid, host and start time; the first finishes with each step
    once."""
    (tmp_path / "space.json").write_text('{"x": {"type": "float", "low": 0, "high": 1}}')
    (tmp_path / "slowobjective.py").write_text(_OBJECTIVE)
    out = tmp_path / "shared"
    first = subprocess.Popen([sys.executable, "-m", "banditkit", *_BO_SPACE], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_ENV)
    try:
        _wait_for(lambda: (out / "bo.lock").exists() and (out / "bo_run.json").exists(), first, "the first run "
                  "holds the folder")
        second = subprocess.run([sys.executable, "-m", "banditkit", *_BO_SPACE], cwd=tmp_path, capture_output=True,
                                text=True, env=_ENV, timeout=300)
        assert second.returncode == 3, second.stderr
        err = second.stderr.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        owner = json.loads((out / "bo.lock").read_text())
        assert owner["pid"] == first.pid
        for word in ["banditkit bo: error:", "'shared'", f"pid {first.pid}", owner["host"], owner["started"],
                     "slowobjective:score"]:
            assert word in err, err
        # a --resume of the folder the first run is writing is refused the same way (in this process)
        monkeypatch.chdir(tmp_path)
        resume = ["bo", "--evals", "6", "--seeds", "1", "--features", "8", "--rank", "2", "--candidates", "32",
                  "--out", "shared", "--resume", "--quiet"]
        capsys.readouterr()
        assert main(resume) == 3
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"pid {first.pid}" in err, err
        (tmp_path / "go").touch()
        _, ferr = first.communicate(timeout=300)
        assert first.returncode == 0, ferr[-2000:]
    finally:
        _stop(first)
    df = pd.read_csv(out / "bo.csv")
    assert len(df) == 6 and sorted(df.step) == list(range(1, 7)) and set(df.seed) == {0}
    assert not (out / "bo.lock").exists()


_COMPARE = ["compare", "--env", "mushroom", "--agents", "linear-greedy", "--seeds", "1", "--quiet"]


def test_compare_refused_while_another_writes_then_takes_over_the_lock_of_the_killed_run(tmp_path, capsys):
    """A second ``compare`` into a folder a live ``compare`` writes is refused and leaves the first run's files as
    they were; once the first is killed (SIGKILL: no clean-up), the next run takes its lock over, saying so, and
    writes each step once."""
    out = tmp_path / "c"
    first = subprocess.Popen([sys.executable, "-m", "banditkit", *_COMPARE, "--steps", "100000", "--save-every", "0",
                              "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env=_ENV)
    try:
        _wait_for(lambda: (out / "compare.csv").exists() and (out / "compare.csv").stat().st_size > 0, first,
                  "the first run writes rows")
        run_json = (out / "compare_run.json").read_text()
        capsys.readouterr()
        assert main([*_COMPARE, "--steps", "30", "--out", str(out)]) == 3
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"pid {first.pid}" in err and repr(str(out)) in err, err
        assert (out / "compare_run.json").read_text() == run_json  # nothing of the first run was replaced
        assert (out / "compare.csv").stat().st_size > 0
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        _stop(first)
    assert json.loads((out / "compare.lock").read_text())["pid"] == first.pid  # left behind by the kill
    assert main([*_COMPARE, "--steps", "30", "--out", str(out), "--overwrite"]) == 0  # the killed run's rows go
    err = capsys.readouterr().err
    assert f"was locked by pid {first.pid}" in err and "which has stopped" in err, err
    df = pd.read_csv(out / "compare.csv")
    assert len(df) == 30 and sorted(df.step) == list(range(30))
    assert json.loads((out / "compare_run.json").read_text())["steps"] == 30
    assert not (out / "compare.lock").exists()


def test_results_files_get_the_permissions_of_a_plain_write(tmp_path):
    """The atomic writes (a temporary file moved into place) leave the mode ``open(path, "w")`` would: not
    ``mkstemp``'s owner-only ``0o600``, and an existing file's own mode when it is replaced."""
    from banditkit.experiments.results_folder import write_csv, write_json

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    want = plain.stat().st_mode & 0o777
    write_csv(pd.DataFrame({"a": [1]}), str(tmp_path / "rows.csv"))
    assert (tmp_path / "rows.csv").stat().st_mode & 0o777 == want
    os.chmod(tmp_path / "rows.csv", 0o640)
    write_csv(pd.DataFrame({"a": [2]}), str(tmp_path / "rows.csv"))
    assert (tmp_path / "rows.csv").stat().st_mode & 0o777 == 0o640
    write_json(str(tmp_path / "run.json"), {"a": 1})
    assert (tmp_path / "run.json").stat().st_mode & 0o777 == want
