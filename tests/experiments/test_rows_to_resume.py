"""``rows_to_resume``: what a resumed results folder keeps, under both counting rules — the bandit runner's agents
(one lane per seed, a finished agent kept whole) and a sweep's programs (``lanes_per_seed`` grid points per seed,
picked also by their structural values).  Real checkpoint files (the compiled loop's format), small hand-made CSVs."""

import os

import numpy as np
import pandas as pd
import pytest

from banditkit.experiments.checkpoints import _save_state, agent_checkpoint
from banditkit.experiments.frames import COLUMNS
from banditkit.experiments.results_folder import ResultsFolder, rows_to_resume


def _rows(agent: str, seeds: list[int], steps: int, lanes: int = 1, **extra) -> pd.DataFrame:
    """``lanes × len(seeds) × steps`` rows of ``agent`` with the runner's columns (values: the row number)."""
    n = lanes * len(seeds) * steps
    df = pd.DataFrame({c: np.arange(n, dtype=float) for c in COLUMNS})
    df["agent"] = agent
    df["seed"] = np.tile(np.repeat(seeds, steps), lanes)
    df["step"] = np.tile(np.arange(steps), lanes * len(seeds))
    df["lane"] = np.repeat(np.arange(lanes), len(seeds) * steps)
    for k, v in extra.items():
        df[k] = v
    return df


def _checkpoint(folder: ResultsFolder, name: str, seeds: list[int], t_next: int) -> str:
    os.makedirs(folder.state_dir, exist_ok=True)
    path = agent_checkpoint(folder.state_dir, name)
    _save_state(path, {"x": np.zeros(2)}, dict(agent=name, seeds=seeds), t_next, np.zeros(len(seeds)), {}, 0.0)
    return path


@pytest.fixture
def folder(tmp_path):
    f = ResultsFolder(tmp_path, "sweep")
    with f.writing():
        yield f


def test_sweep_programs_keep_every_lane_before_their_checkpoint(folder):
    """Two programs of one label told apart by a structural column; 3 grid points x 2 seeds each.  Program A: rows
    up to round 6, checkpoint at 4 -> its 3·2·4 rows before round 4.  Program B: one row before its checkpoint is
    missing -> no rows, and its checkpoint is removed."""
    a = _rows("lofi", [0, 1], 6, lanes=3, rank=5)
    b = _rows("lofi", [0, 1], 3, lanes=3, rank=10)
    b = b.drop(index=b.index[(b.lane == 2) & (b.seed == 1) & (b.step == 1)])
    folder.write_rows(pd.concat([a, b], ignore_index=True))
    _checkpoint(folder, "lofi [rank=5]", [0, 1], 4)
    ck_b = _checkpoint(folder, "lofi [rank=10]", [0, 1], 3)

    parts = [("lofi [rank=5]", dict(agent="lofi", rank=5)), ("lofi [rank=10]", dict(agent="lofi", rank=10))]
    kept, finished = rows_to_resume(folder, parts, lanes_per_seed=3)

    expected = a[a.step < 4].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept.reset_index(drop=True), expected, check_dtype=False)
    assert finished == set()
    assert not os.path.exists(ck_b)
    assert len(folder.read_rows()) == 3 * 2 * 4  # the CSV rewritten with the rows kept


def test_lanes_per_seed_is_the_counting_rule(folder):
    """The same rows counted as one lane per seed do not add up (24 rows, 8 expected): nothing is kept."""
    folder.write_rows(_rows("lofi", [0, 1], 4, lanes=3))
    ck = _checkpoint(folder, "lofi", [0, 1], 4)
    kept, _ = rows_to_resume(folder, [("lofi", dict(agent="lofi"))])
    assert len(kept) == 0 and not os.path.exists(ck) and not os.path.exists(folder.csv)


def test_runner_agents_finished_whole_or_cut_at_their_checkpoint(folder):
    """Agent ``done`` has all steps x seeds rows (kept, finished, no checkpoint needed); agent ``half`` is cut at
    its checkpoint's round; a line torn by a kill (NaN) is dropped; an agent with neither rows nor checkpoint keeps
    nothing."""
    done = _rows("done", [0, 1], 5)
    half = _rows("half", [0, 1], 4)
    torn = pd.DataFrame({c: [np.nan] for c in [*COLUMNS, "lane"]}).assign(agent="half")
    folder.write_rows(pd.concat([done, half, torn], ignore_index=True))
    ck = _checkpoint(folder, "half", [0, 1], 2)

    kept, finished = rows_to_resume(folder, [(a, dict(agent=a)) for a in ("done", "half", "new")], whole=2 * 5)

    assert finished == {"done"}
    expected = pd.concat([done, half[half.step < 2]], ignore_index=True)
    pd.testing.assert_frame_equal(kept.reset_index(drop=True), expected, check_dtype=False)
    assert os.path.exists(ck)


def test_a_csv_without_the_runner_columns_keeps_nothing_and_restarts_each_part(folder):
    """An unreadable or foreign CSV: no rows kept, and a checkpoint whose rows are gone is removed (it would
    otherwise resume past rows that no longer exist)."""
    with open(folder.csv, "w") as fh:
        fh.write("something,else\n1,2\n")
    ck = _checkpoint(folder, "lofi [rank=5]", [0], 3)
    kept, _ = rows_to_resume(folder, [("lofi [rank=5]", dict(agent="lofi", rank=5))], lanes_per_seed=2)
    assert len(kept) == 0 and not os.path.exists(ck) and not os.path.exists(folder.csv)


def test_a_program_that_finished_past_steps_keeps_its_rows_and_checkpoint(folder):
    """The compiled loop pads its last chunk: 150 steps in chunks of 100 end with a checkpoint at round 200.  A
    sweep program that finished (all 150 rounds of its 2 grid points x 1 seed) is kept whole with its checkpoint,
    so the library skips it on resume instead of running it again; without ``steps`` the rows do not add up."""
    folder.write_rows(_rows("lofi", [0], 150, lanes=2))
    ck = _checkpoint(folder, "lofi", [0], 200)
    kept, _ = rows_to_resume(folder, [("lofi", dict(agent="lofi"))], lanes_per_seed=2, steps=150)
    assert len(kept) == 2 * 150 and os.path.exists(ck)

    kept, _ = rows_to_resume(folder, [("lofi", dict(agent="lofi"))], lanes_per_seed=2)
    assert len(kept) == 0 and not os.path.exists(ck)


def test_cli_sweep_resume_skips_a_finished_program_and_keeps_its_rows(tmp_path, monkeypatch):
    """``banditkit sweep --resume`` end to end: a finished program's checkpoint (at round 200 for 150 steps) is left
    as a kill before the folder was finished leaves it; the resume runs no segment of it and writes the same CSV
    (integer columns still integers).  Without any checkpoint, a resume runs the program again: the same CSV."""
    from banditkit import sweep
    from banditkit.cli import main
    from banditkit.cli.bandit import env_id
    from banditkit.experiments import compiled_loop
    from banditkit.runtime import threads

    monkeypatch.setattr(threads, "limit_blas_threads", lambda num_threads=1: threads._requested(num_threads) or {})
    out = tmp_path / "o"
    argv = ["sweep", "--env", "mushroom", "--agents", "linear", "--grid", "obs_noise=0.1,0.2", "--steps", "150",
            "--seeds", "1", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    fresh = pd.read_csv(out / "sweep.csv")
    sweep({"linear-thompson": "linear-thompson"}, env_id("mushroom"), {"obs_noise": [0.1, 0.2]}, seeds=1,
          steps=150, progress=False, checkpoint_dir=out / "sweep_state")
    ran = []
    advance = compiled_loop.Compiled.advance
    monkeypatch.setattr(compiled_loop.Compiled, "advance", lambda self, *a: ran.append(a[3]) or advance(self, *a))

    assert main([*argv, "--resume"]) == 0
    assert ran == []
    pd.testing.assert_frame_equal(pd.read_csv(out / "sweep.csv"), fresh)
    assert main([*argv, "--resume"]) == 0
    assert ran == [0, 100]
    pd.testing.assert_frame_equal(pd.read_csv(out / "sweep.csv"), fresh)
