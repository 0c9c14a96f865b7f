"""A command's results folder opened for writing: this process its one writer (``--force-unlock`` to take over a
lock that names a process on another host), with a note on stderr when the lock of a stopped run is taken over."""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from collections.abc import Iterator

from banditkit.experiments.folder_lock import FolderBusy
from banditkit.experiments.results_folder import ResultsFolder

__all__ = ["writing", "FolderBusy", "BUSY_STATUS"]

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
