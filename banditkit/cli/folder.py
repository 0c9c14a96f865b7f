"""A command's results folder opened for writing: this process its one writer (``--force-unlock`` to take over a
lock that names a process on another host), with a note on stderr when the lock of a stopped run is taken over; and
set up for the command's run (:func:`results_folder`: ``--resume`` checked, or a fresh start)."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from banditkit.cli.errors import CLIError

if TYPE_CHECKING:  # imported where used: building the parser imports nothing heavy
    from banditkit.experiments.results_folder import ResultsFolder

__all__ = ["writing", "results_folder", "BUSY_STATUS"]

BUSY_STATUS = 3  # the exit status when another process writes --out (2: bad input)


def owner(argv: list[str]) -> str:
    """This process as other processes' messages name it: ``banditkit ARGS...`` (at most 300 characters)."""
    text = " ".join(["banditkit", *argv])
    return text if len(text) <= 300 else text[:297] + "..."


@contextlib.contextmanager
def writing(folder: ResultsFolder, args: argparse.Namespace, prog: str) -> Iterator[ResultsFolder]:
    """``folder.writing(...)`` with the command line's owner record and ``--force-unlock``."""
    argv = getattr(args, "argv", None) or sys.argv[1:]
    with folder.writing(owner=owner(argv), force_unlock=bool(getattr(args, "force_unlock", False)),
                        force_hint="--force-unlock") as f:
        old = f.lock.taken_over if f.lock is not None else None
        if old is not None:
            why = "which has stopped" if old.get("host") == socket.gethostname() else "taken over by --force-unlock"
            print(f"{prog}: note: {folder.folder!r} was locked by pid {old.get('pid')} on host {old.get('host')} "
                  f"(started {old.get('started')}), {why}; this run is its writer now", file=sys.stderr)
        yield f


def refuse_to_overwrite(folder: ResultsFolder, args: argparse.Namespace, prog: str) -> None:
    """A fresh run into a folder that holds an earlier run's results (its CSV or its options file) is refused,
    nothing touched, unless ``--overwrite`` was given: :class:`~banditkit.cli.errors.CLIError` saying what is there
    and the three ways on."""
    held = [f for f in (folder.csv, folder.run_file) if os.path.exists(f)]
    if held and not getattr(args, "overwrite", False):
        what = " and ".join(os.path.basename(f) for f in held)
        raise CLIError(f"{prog}: error: {folder.folder!r} already holds the results of an earlier {folder.name!r} run "
                       f"({what}); nothing was changed. Pass --overwrite to replace them, --resume to continue that "
                       "run, or another --out")


@contextlib.contextmanager
def results_folder(args: argparse.Namespace, name: str, prog: str, run: dict, *, others: Iterable[str] = (),
                   absent: dict | None = None, may_change: str = "") -> Iterator[ResultsFolder]:
    """The folder ``name`` in ``--out`` held for writing (:func:`writing`) and set up for the run whose options are
    ``run``: with ``--resume`` checked to hold a run made with them (:meth:`ResultsFolder.check_resumable`, with
    ``absent`` and ``may_change``), else started afresh (:meth:`ResultsFolder.start`: the earlier CSV, checkpoints
    and ``<name><suffix>`` of each of ``others`` removed) — only with ``--overwrite`` when an earlier run left its
    results there (:func:`refuse_to_overwrite`); its state folder created.  What a resume keeps is the
    caller's to read."""
    from banditkit.experiments.results_folder import ResultsFolder

    with writing(ResultsFolder(args.out, name), args, prog) as folder:
        if args.resume:
            folder.check_resumable(run, may_change=may_change, absent=absent)
        else:
            refuse_to_overwrite(folder, args, prog)
            folder.start(run, others=others)
        os.makedirs(folder.state_dir, exist_ok=True)
        yield folder
