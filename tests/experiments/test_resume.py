"""Nothing lost (issue 6): a saved BayesOpt resumes in a *fresh process* with identical suggestions and history, a
killed ``banditkit compare`` keeps every chunk it had written, and an interrupted BO run (``optimize(checkpoint=...)``,
``banditkit bo``) resumes exactly where it stopped."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from chunk_stop import Stop, stop_at_chunk

from banditkit.bo import BayesOpt
from banditkit.runtime import threads

SMALL = dict(surrogate="hilofi", surrogate_kwargs=dict(rank=5), features=(32, 32), n_candidates=256)


def quad(x):
    return float(np.sum((np.asarray(x) - np.array([0.3, 1.2])) ** 2))


_CHILD = r"""
import json, sys
import numpy as np
from banditkit.runtime import threads
from banditkit.bo import BayesOpt
opt = BayesOpt.load(sys.argv[1])
nxt = opt.ask(n=2)
hist = opt.history
print(json.dumps({"ask": np.asarray(nxt).tolist(), "y": hist["y"].tolist(), "best": float(opt.best[1])}))
"""


def test_bayesopt_resumes_exactly_in_a_fresh_process(tmp_path):
    opt = BayesOpt([(0.0, 1.0), (0.0, 2.0)], seed=11, **SMALL)
    for _ in range(8):  # past the initial design, so the surrogate state matters
        x = opt.ask()
        opt.tell(x, quad(x))
    path = tmp_path / "run.bk"
    opt.save(path)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    child = json.loads(out.stdout.strip().splitlines()[-1])
    # the original process continues: the child's next suggestions and history are exactly ours
    np.testing.assert_array_equal(np.asarray(child["ask"]), opt.ask(n=2))
    np.testing.assert_array_equal(np.asarray(child["y"]), opt.history["y"].to_numpy())
    assert child["best"] == opt.best[1]


def test_killed_compare_keeps_finished_chunks(tmp_path):
    """SIGKILL mid-run (no chance to clean up): the CSV holds whole chunks, readable, with the documented columns."""
    out = tmp_path / "r"
    csv = out / "compare.csv"
    cmd = [sys.executable, "-m", "banditkit.cli", "compare", "--env", "mushroom", "--agents", "linear-greedy,hilofi",
           "--steps", "100000", "--seeds", "1", "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "JAX_PLATFORMS": "cpu"})
    try:
        deadline = time.time() + 420
        while time.time() < deadline and proc.poll() is None:
            if csv.exists() and csv.stat().st_size > 0:
                time.sleep(1.0)  # let it write at least one more chunk, then kill it hard
                break
            time.sleep(0.5)
        assert proc.poll() is None, f"compare ended before it could be killed: {proc.stderr.read()[-1000:]!r}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    df = pd.read_csv(csv)
    assert len(df) > 0 and len(df) < 200_000
    assert {"agent", "seed", "step", "reward", "regret", "cumulative_regret"} <= set(df.columns)
    first = df[df.agent == df.agent.iloc[0]]
    steps = np.sort(first.step.to_numpy())
    np.testing.assert_array_equal(steps, np.arange(len(steps)) + steps[0])  # contiguous rounds, no torn row
    np.testing.assert_allclose(first.sort_values("step").regret.cumsum().to_numpy(),
                               first.sort_values("step").cumulative_regret.to_numpy(), rtol=1e-5, atol=1e-3)


def test_optimize_with_a_checkpoint_resumes_exactly(tmp_path):
    """``optimize(checkpoint=...)``: stopped after 7 evaluations, then interrupted inside the objective (the
    suggestion not yet evaluated is saved), then resumed — the same 12 points and values as one uninterrupted run."""
    from banditkit.bo import optimize

    bounds = [(-1, 1), (0, 2)]
    ref = optimize(quad, bounds, n_evals=12, direction="minimize", seed=3, **SMALL).history
    ck = tmp_path / "run.bk"
    assert len(optimize(quad, bounds, n_evals=7, direction="minimize", seed=3, checkpoint=ck, **SMALL).history) == 7
    calls = []

    def interrupted_on_third_call(x):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return quad(x)

    with pytest.raises(KeyboardInterrupt):
        optimize(interrupted_on_third_call, bounds, n_evals=12, direction="minimize", seed=3, checkpoint=ck,
                 save_every=3600, **SMALL)
    saved = BayesOpt.load(ck)
    assert saved.n_evals == 9 and saved.pending.shape == (1, 2)  # saved at the interruption, not at the interval
    res = optimize(quad, bounds, n_evals=12, direction="minimize", seed=3, checkpoint=ck, **SMALL).history
    pd.testing.assert_frame_equal(res, ref)
    assert BayesOpt.load(ck).n_evals == 12  # saved at the end
    with pytest.raises(ValueError, match=r"other settings \(seed: saved 3, now 4\)"):
        optimize(quad, bounds, n_evals=12, direction="minimize", seed=4, checkpoint=ck, **SMALL)
    with pytest.raises(ValueError, match="save_every"):
        optimize(quad, bounds, n_evals=3, checkpoint=tmp_path / "other.bk", save_every=-1, **SMALL)


@pytest.fixture
def _no_process_blas_cap(monkeypatch):
    """``main`` caps BLAS threads for the whole process; here it only checks the request, so that the rest of
    the suite keeps the library's defaults (as in ``test_cli.py``)."""
    monkeypatch.setattr(threads, "limit_blas_threads", lambda num_threads=1: threads._requested(num_threads) or {})


def _signal_once_saved(argv: list[str], checkpoint, sig: int) -> tuple[int, str]:
    """Start ``banditkit ARGV`` in a subprocess, send it ``sig`` as soon as ``checkpoint`` exists (so mid-run),
    return ``(exit status, stderr)``."""
    proc = subprocess.Popen([sys.executable, "-m", "banditkit", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    try:
        deadline = time.time() + 420
        while time.time() < deadline and proc.poll() is None and not os.path.exists(checkpoint):
            time.sleep(0.1)
        assert proc.poll() is None, f"the run ended before it could be stopped: {proc.stderr.read()[-1000:]!r}"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


_BO_ARGS = ["bo", "--evals", "150", "--seeds", "2", "--features", "8", "--rank", "2", "--candidates", "32", "--quiet"]


def test_bo_command_ctrl_c_then_resume_is_exact(tmp_path, _no_process_blas_cap):
    """``banditkit bo``: SIGINT mid-seed stops after the current evaluation and saves it (exit 130, the message
    says --resume); ``--resume`` then finishes with exactly the rows of a run that was never stopped."""
    from banditkit.cli import main

    out = tmp_path / "stopped"
    ck = out / "bo_state" / "seed0.bk"
    rc, err = _signal_once_saved([*_BO_ARGS, "--save-every", "0", "--out", str(out)], ck, signal.SIGINT)
    assert rc == 130, err
    assert "--resume" in err and "Traceback" not in err
    stopped_at = BayesOpt.load(ck).n_evals
    assert 0 < stopped_at < 150 and not (out / "bo.csv").exists()
    assert main([*_BO_ARGS, "--out", str(out), "--resume"]) == 0
    assert not (out / "bo_state").exists()  # every seed finished: no checkpoint left
    ref = tmp_path / "ref"
    assert main([*_BO_ARGS, "--out", str(ref)]) == 0
    a, b = (pd.read_csv(d / "bo.csv").sort_values(["seed", "step"], ignore_index=True) for d in (out, ref))
    assert len(a) == 300
    pd.testing.assert_frame_equal(a, b)


def test_bo_command_resume_checks_the_run(tmp_path, capsys, _no_process_blas_cap):
    """--resume keeps finished seeds (a torn last seed is dropped), refuses other settings or an empty --out."""
    from banditkit.cli import main

    small = ["bo", "--evals", "6", "--features", "8", "--rank", "2", "--candidates", "32", "--quiet"]
    out = tmp_path / "r"
    assert main([*small, "--seeds", "1", "--out", str(out)]) == 0
    first = pd.read_csv(out / "bo.csv")
    with open(out / "bo.csv", "a") as fh:  # a seed cut short by a kill
        fh.write("hilofi-thompson,1,1,3.0,3.0,2.6\nhilofi-thompson,1,2,")
    assert main([*small, "--seeds", "2", "--out", str(out), "--resume"]) == 0
    df = pd.read_csv(out / "bo.csv")
    assert len(df) == 12 and sorted(df.seed.unique()) == [0, 1]
    pd.testing.assert_frame_equal(df[df.seed == 0].reset_index(drop=True), first)
    capsys.readouterr()
    for argv, words in [
        ([*small, "--seeds", "2", "--features", "16", "--out", str(out), "--resume"], ["--features [8] (now [16])"]),
        ([*small, "--out", str(tmp_path / "empty"), "--resume"], ["nothing to resume"]),
        ([*small, "--save-every", "-1", "--out", str(out)], ["seconds >= 0"]),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and all(w in err for w in words), err


def test_run_with_a_checkpoint_continues_exactly(tmp_path):
    """``run(checkpoint=...)``: stopped at its third chunk (the rows of that chunk delivered, the checkpoint from
    the second), resumed: the rounds from the checkpoint on, exactly as in a run never stopped, with the
    cumulative regret going on from the saved totals."""
    from banditkit.experiments import checkpoints, runner

    kw = dict(steps=300, seeds=2, chunk_size=50, progress=False)
    ref = runner.run("banditkit/Mushroom-v0", "hilofi-thompson", **kw)
    ck = tmp_path / "state" / "hilofi.bk"  # the folder is made on the first save

    with pytest.raises(Stop):
        runner.run("banditkit/Mushroom-v0", "hilofi-thompson", checkpoint=ck, save_every=0,
                   on_chunk=stop_at_chunk(3), **kw)
    assert checkpoints.checkpoint_round(ck) == 100  # the rows are delivered before the chunk's state is saved
    rest = runner.run("banditkit/Mushroom-v0", "hilofi-thompson", checkpoint=ck, **kw)
    pd.testing.assert_frame_equal(rest, ref[ref.step >= 100].reset_index(drop=True))
    assert checkpoints.checkpoint_round(ck) == 300
    with pytest.raises(ValueError, match="another run.*seeds"):
        runner.run("banditkit/Mushroom-v0", "hilofi-thompson", checkpoint=ck, **{**kw, "seeds": 3})
    with pytest.raises(ValueError, match="checkpoint_dir"):
        runner.compare(["linear-greedy"], "banditkit/Mushroom-v0", steps=5, checkpoint=ck)
    folder = tmp_path / "per_agent"
    runner.compare(["linear-greedy", "linear-thompson"], "banditkit/Mushroom-v0", steps=40, progress=False,
                   checkpoint_dir=folder)
    assert sorted(os.listdir(folder)) == ["linear-greedy.bk", "linear-thompson.bk"]
    assert checkpoints.checkpoint_round(folder / "linear-thompson.bk") == 40


# 6000 rounds in chunks of 300: the kill comes as the second agent's first chunk is saved, with ~3 s of its run
# left (compiling is most of this test's time; 12000 rounds added ~9 s and no more coverage)
_STEPS = 6000
_COMPARE_ARGS = ["compare", "--env", "mushroom", "--agents", "linear-greedy,hilofi", "--steps", str(_STEPS), "--seeds",
                 "2", "--quiet"]


def test_killed_compare_resumes_exactly(tmp_path, _no_process_blas_cap):
    """SIGKILL while the second agent runs, then ``--resume``: the first agent's rows are kept, the second goes on
    from its checkpoint (rows past it dropped), and the CSV equals that of a run never stopped."""
    from banditkit.cli import main

    out = tmp_path / "killed"
    ck = out / "compare_state" / "hilofi-thompson.bk"
    rc, _ = _signal_once_saved([*_COMPARE_ARGS, "--save-every", "0", "--out", str(out)], ck, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    from banditkit.experiments.checkpoints import checkpoint_round

    assert 0 < checkpoint_round(ck) < _STEPS
    assert main([*_COMPARE_ARGS, "--out", str(out), "--resume"]) == 0
    assert not (out / "compare_state").exists()
    ref = tmp_path / "ref"
    assert main([*_COMPARE_ARGS, "--out", str(ref)]) == 0
    a, b = (pd.read_csv(d / "compare.csv") for d in (out, ref))
    assert len(a) == 2 * 2 * _STEPS
    pd.testing.assert_frame_equal(a, b)
    assert "hilofi-thompson" in (out / "compare_summary.md").read_text()


def test_compare_resume_checks_the_run(tmp_path, capsys, _no_process_blas_cap):
    """--resume of a finished run only re-reports it; a damaged CSV makes it run again (no gap in the rows);
    other options or an empty --out are one-line errors."""
    from banditkit.cli import main

    args = ["compare", "--env", "mushroom", "--agents", "linear-greedy", "--steps", "200", "--seeds", "2", "--quiet"]
    out = tmp_path / "c"
    assert main([*args, "--out", str(out)]) == 0
    first = pd.read_csv(out / "compare.csv")
    assert main([*args, "--out", str(out), "--resume"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "compare.csv"), first)
    assert "linear-greedy" in (out / "compare_summary.md").read_text()
    (out / "compare.csv").write_text("agent,seed,st")  # cut by a kill in the header line
    assert main([*args, "--out", str(out), "--resume"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "compare.csv"), first)
    capsys.readouterr()
    for argv, words in [
        ([*args[:-2], "3", "--quiet", "--out", str(out), "--resume"], ["--seeds 2 (now 3)"]),
        ([*args, "--out", str(tmp_path / "empty"), "--resume"], ["nothing to resume"]),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and all(w in err for w in words), err
