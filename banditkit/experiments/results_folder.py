"""A resumable results folder: the files one command keeps in it, one writer at a time, and what a resume keeps.

For the command (or experiment) ``name`` in ``folder``::

    <name>.csv          the tidy rows, appended as work finishes (an interrupted run keeps them)
    <name>_run.json     the run's options: a resume must give the same ones
    <name>_state/       checkpoints of the work in progress (removed by :meth:`ResultsFolder.finish`)
    <name>.lock         present while a process writes these files (:class:`~banditkit.experiments.folder_lock.
                        FolderLock`, with the writer's pid, host and start time)

Typical use::

    folder = ResultsFolder("results", "compare")
    with folder.writing(owner="banditkit compare ..."):    # FolderBusy if another process writes it
        if resume:
            folder.check_resumable(run)                    # ResumeMismatch naming each changed option
            rows = folder.read_rows()
        else:
            folder.start(run)                              # the earlier run's files go, the options are saved
        ...                                                # append rows to folder.csv, checkpoints in folder.state_dir
        folder.finish()

Every write goes through :func:`banditkit.checkpoint.atomic_file` (a temporary file moved into place), and only
inside :meth:`ResultsFolder.writing`: a second writer is refused before it touches a file.  What a resume keeps:
:func:`whole_seeds` (BayesOpt: the seeds with every step) and :func:`rows_to_resume` (the bandit runner's agents and
a sweep's programs: each one's rows up to the round its checkpoint continues from).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

import pandas as pd

from banditkit.checkpoint import atomic_file
from banditkit.experiments.folder_lock import FolderBusy, FolderLock

__all__ = ["ResultsFolder", "ResumeMismatch", "FolderBusy", "whole_seeds", "rows_to_resume"]


class ResumeMismatch(ValueError):
    """A resume asked of a folder that holds no run, or a run made with other options."""


def write_json(path: str, value: Any) -> None:
    """``value`` as JSON in ``path``, atomically (an interruption leaves the previous file)."""
    with atomic_file(path, ".json") as tmp, open(tmp, "w") as fh:
        json.dump(value, fh, indent=1)


def write_text(path: str, text: str) -> None:
    """``text`` in ``path``, atomically."""
    with atomic_file(path, os.path.splitext(path)[1]) as tmp, open(tmp, "w") as fh:
        fh.write(text)


def write_csv(df: pd.DataFrame, path: str) -> None:
    """``df`` (without its index) as CSV in ``path``, atomically."""
    with atomic_file(path, ".csv") as tmp:
        df.to_csv(tmp, index=False)


class ResultsFolder:
    """The files of ``name`` in ``folder`` (see the module docstring); writing methods work only inside
    :meth:`writing`."""

    def __init__(self, folder: str | os.PathLike, name: str):
        self.folder, self.name = os.fspath(folder), name
        self._lock: FolderLock | None = None

    def path(self, suffix: str) -> str:
        """``<folder>/<name><suffix>`` (``path("_timing.json")``)."""
        return os.path.join(self.folder, self.name + suffix)

    @property
    def csv(self) -> str:
        return self.path(".csv")

    @property
    def run_file(self) -> str:
        return self.path("_run.json")

    @property
    def state_dir(self) -> str:
        return self.path("_state")

    @property
    def lock_file(self) -> str:
        return self.path(".lock")

    @property
    def lock(self) -> FolderLock | None:
        """The lock while :meth:`writing` holds it (its ``taken_over``: the record of a stopped writer)."""
        return self._lock

    @contextlib.contextmanager
    def writing(self, *, owner: str = "", force_unlock: bool = False,
                force_hint: str = "force_unlock=True") -> Iterator[ResultsFolder]:
        """Create the folder if needed and hold its writer lock for the block (:class:`FolderBusy` if another
        process holds it: nothing is touched then).  ``owner`` describes this writer to the others; ``force_unlock``
        takes over a lock whose process cannot be checked from here (another host)."""
        try:
            os.makedirs(self.folder, exist_ok=True)
        except OSError as e:
            raise ValueError(f"cannot create the output folder {self.folder!r}: {e.strerror}") from e
        lock = FolderLock(self.lock_file, owner=owner, force=force_unlock, force_hint=force_hint)
        with lock:
            self._lock = lock
            try:
                yield self
            finally:
                self._lock = None

    def _writer(self) -> None:
        if self._lock is None or not self._lock.held:
            raise RuntimeError(f"{self.folder!r}: write into a ResultsFolder only inside `with folder.writing():`, "
                               "which makes this process its one writer")

    # -- reading ---------------------------------------------------------------------------------------------------
    def check_resumable(self, run: dict, *, may_change: str = "", absent: dict | None = None) -> None:
        """A resume continues the run saved here only if it was made with the options ``run``
        (:class:`ResumeMismatch` naming each difference otherwise).  ``absent``: the value an option had in a saved
        file that does not name it (an option added later); ``may_change``: told the user, e.g. " (only --seeds may
        change)"."""
        if not os.path.exists(self.run_file):
            raise ResumeMismatch(f"nothing to resume in {self.folder!r} (no {os.path.basename(self.run_file)}); "
                                 "run without --resume")
        with open(self.run_file) as fh:
            saved = json.load(fh)
        absent = absent or {}
        saved = {k: saved.get(k, absent.get(k)) for k in run}
        diff = [f"--{k.replace('_', '-')} {saved[k]!r} (now {v!r})" for k, v in run.items() if saved[k] != v]
        if diff:
            raise ResumeMismatch(f"--resume continues the run in {self.folder!r}, made with other settings: "
                                 f"{', '.join(diff)}; give the same options{may_change} or another --out")

    def read_rows(self) -> pd.DataFrame:
        """The rows of the CSV (an empty frame when it is missing or unreadable)."""
        try:
            return pd.read_csv(self.csv)
        except (FileNotFoundError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
            return pd.DataFrame()

    def read_json(self, suffix: str) -> Any:
        """The JSON in ``<name><suffix>``, or ``None`` when there is none."""
        try:
            with open(self.path(suffix)) as fh:
                return json.load(fh)
        except FileNotFoundError:
            return None

    # -- writing ---------------------------------------------------------------------------------------------------
    def start(self, run: dict, others: Iterable[str] = ()) -> None:
        """A new run replaces the one here: the CSV, the checkpoints and the files ``<name><suffix>`` for each of
        ``others`` go; the options ``run`` are saved."""
        self._writer()
        for path in (self.csv, *(self.path(s) for s in others)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        self.clear_state()
        write_json(self.run_file, run)

    def write_rows(self, df: pd.DataFrame) -> None:
        """Replace the CSV by ``df`` (removed when ``df`` is empty)."""
        self._writer()
        if len(df):
            write_csv(df, self.csv)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.csv)

    def write_json(self, suffix: str, value: Any) -> None:
        """``value`` as JSON in ``<name><suffix>``."""
        self._writer()
        write_json(self.path(suffix), value)

    def write_text(self, suffix: str, text: str) -> str:
        """``text`` in ``<name><suffix>``; returns the path."""
        self._writer()
        write_text(self.path(suffix), text)
        return self.path(suffix)

    def clear_state(self) -> None:
        """Remove every checkpoint in the state folder (if there is one)."""
        self._writer()
        if os.path.isdir(self.state_dir):
            for entry in os.listdir(self.state_dir):
                os.remove(os.path.join(self.state_dir, entry))

    def finish(self, clear: bool = True) -> None:
        """The run is complete: its checkpoints and their folder go (``clear=False``: the folder only if empty, so
        that checkpoints of work this run did not ask for, e.g. seeds beyond a smaller ``--seeds``, stay)."""
        if clear:
            self.clear_state()
        with contextlib.suppress(OSError):
            os.rmdir(self.state_dir)


def whole_seeds(folder: ResultsFolder, seeds: int, steps: int) -> dict[int, pd.DataFrame]:
    """``{seed: rows}`` of the seeds below ``seeds`` whose rows in the CSV have exactly the steps ``1..steps``.
    Rows of other seeds that are not whole (a seed torn by a kill) are dropped from the file."""
    df = folder.read_rows()
    done = {}
    if {"seed", "step"} <= set(df.columns):
        for seed, frame in df.groupby("seed"):
            if sorted(frame.step.tolist()) == list(range(1, steps + 1)):
                done[int(seed)] = frame.sort_values("step")
    if not done or sum(len(f) for f in done.values()) != len(df):  # torn / foreign rows: keep whole seeds only
        folder.write_rows(pd.concat([done[s] for s in sorted(done)]) if done else df.iloc[:0])
    return {s: f for s, f in done.items() if s < seeds}


def rows_to_resume(folder: ResultsFolder, parts: Iterable[tuple[str, dict[str, Any]]], *, lanes_per_seed: int = 1,
                   whole: int | None = None, steps: int | None = None) -> tuple[pd.DataFrame, set[str]]:
    """``(rows, finished)`` for resuming work saved as one checkpoint per part in the folder's state folder
    (:func:`banditkit.experiments.checkpoints.agent_checkpoint`): the bandit runner's agents, or a sweep's programs.

    ``parts``: ``(name, {column: value})``, the part's checkpoint name and the values picking its rows (its agent
    label, a sweep program's structural values).  A part with exactly ``whole`` rows is finished (kept, its name in
    ``finished``).  Another, whose checkpoint has run rounds ``u_s`` of seed ``s``, keeps its rows with
    ``step < u_s`` when there are ``lanes_per_seed · Σ_s u_s`` of them (the counting rule: a sweep runs every seed in
    ``lanes_per_seed`` lanes, one per grid point), else none and its checkpoint is removed: it runs afresh.
    ``steps``: the rounds per seed; a checkpoint past them (the compiled loop's last chunk padded beyond ``steps``)
    counts as ``u_s = steps``, so a part that finished keeps its rows.  The CSV is rewritten with the rows kept
    (dropping rows past a checkpoint and lines torn by a kill)."""
    from banditkit.experiments.checkpoints import agent_checkpoint, checkpoint_rounds
    from banditkit.experiments.frames import COLUMNS

    rows = folder.read_rows()
    if not set(COLUMNS) <= set(rows.columns):
        rows = pd.DataFrame(columns=COLUMNS)
    rows = rows.dropna(subset=COLUMNS)  # a line torn by a kill
    keep, finished = [], set()
    for name, match in parts:
        mine = rows
        for column, value in match.items():
            mine = mine[mine[column].astype(str) == str(value)] if column in mine else mine.iloc[:0]
        ck = agent_checkpoint(folder.state_dir, name)
        if whole is not None and len(mine) == whole:
            finished.add(name)
        else:
            upto = checkpoint_rounds(ck)  # {seed: rounds run}; the Gymnasium loop's differ by seed
            if steps is not None:
                upto = {seed: min(u, steps) for seed, u in upto.items()}
            mine = mine[mine.step < mine.seed.map(upto).fillna(0)]
            if len(mine) != lanes_per_seed * sum(upto.values()):  # rows missing before the checkpoint
                mine = mine.iloc[:0]
                if os.path.exists(ck):
                    os.remove(ck)
        keep.append(mine)
    kept = pd.concat(keep, ignore_index=True) if keep else rows.iloc[:0]
    folder.write_rows(kept)
    return kept, finished
