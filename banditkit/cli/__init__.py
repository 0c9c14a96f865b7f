"""The ``banditkit`` command line (API.md §10): ``demo``, ``run``, ``compare`` (:mod:`~banditkit.cli.bandit`), ``bo``
(:mod:`~banditkit.cli.bo`, :mod:`~banditkit.cli.bo_space`), ``data fetch|list`` (:mod:`~banditkit.cli.data`), and for
logged data ``evaluate`` and ``warmstart`` (:mod:`~banditkit.cli.offline`).

Every experiment command writes into ``--out`` (created if needed) through
:class:`~banditkit.experiments.results_folder.ResultsFolder`::

    <cmd>.csv            the tidy DataFrame, appended as chunks / seeds finish (an interrupted run keeps them)
    <cmd>_summary.md     the per-agent summary table (also printed)
    <cmd>_<plot>.png     cumulative regret (bandits) or simple regret (BO), mean ± s.e. over seeds
    <cmd>_run.json       the run's options, so that ``--resume`` can check it continues the same run
    <cmd>_timing.json    (bandits) each finished agent's compile and run times, for the summary of a resumed run
    <cmd>_state/         checkpoints of the work in progress (every ``--save-every`` s; removed when done): the
                         agent in progress (``demo``/``run``/``compare``), the seed in progress (``bo``, whose first
                         Ctrl-C stops after the current evaluation and saves it)
    <cmd>.lock           while a process writes these files: its pid, host, start time and command

One process writes a command's files in a folder at a time: a second one (a new run or a ``--resume``) is refused
before it touches anything, with a message naming the folder and the writer.  The lock of a run that was killed is
taken over by the next run on the same host; one left by a process on another host needs ``--force-unlock`` (only
once that process has stopped).

A new run into a folder that holds an earlier run's results of the same command (``<cmd>.csv`` or ``<cmd>_run.json``)
is refused, nothing touched, unless ``--overwrite`` is given (:func:`banditkit.cli.folder.refuse_to_overwrite`).
``<cmd> ... --resume`` keeps what had finished and continues the interrupted part exactly where it stopped.
``run`` / ``compare`` / ``bo`` ``--set KEY=VALUE`` (repeatable) set posterior (surrogate) hyper-parameters,
``--obs-noise`` the variance of the Gaussian reward likelihood and ``--adaptive-noise`` learns that variance online
(:func:`banditkit.posteriors.adaptive_noise`, for the filter backends that support it) — or, for one agent, a name
ending in ``-adaptive_noise`` (``--agents hilofi,hilofi-adaptive_noise``: fixed and learned side by side); all are
saved with the run's options.

``--quiet`` silences progress bars.  Every command first caps BLAS at one thread
(:func:`banditkit.runtime.limit_blas_threads`; ``BANDITKIT_BLAS_THREADS=system`` leaves it).  Errors print one
line (``banditkit <cmd>: error: ...``) and exit with status 2 (1 when some dataset could not be fetched, 3 when
another process writes ``--out``, 130 on Ctrl-C).

Adding a command: a module here with ``cmd_NAME(args) -> int`` (raise :class:`~banditkit.cli.errors.CLIError` for
bad input) and ``register(sub)`` that calls ``sub.add_parser(...)`` and ``set_defaults(func=cmd_NAME)``; call its
``register`` from :func:`build_parser`.  A command that writes a resumable folder opens it with
:func:`banditkit.cli.folder.results_folder` (held for writing, ``--resume`` checked or a fresh start).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from banditkit.cli.bandit import DEMO_AGENTS
from banditkit.cli.errors import CLIError, Parser
from banditkit.cli.folder import BUSY_STATUS

# A user's error reported as one line (exit status 2); anything else is a bug and keeps its traceback.
_ONE_LINE = (ValueError, TypeError, KeyError, FileNotFoundError, RuntimeError, OSError, ImportError)

__all__ = ["main", "build_parser", "CLIError", "DEMO_AGENTS"]


def build_parser() -> argparse.ArgumentParser:
    """The ``banditkit`` parser: one sub-parser per command, each registered by its module."""
    from banditkit import __version__
    from banditkit.cli import bandit, bo, data, offline, serve, sweep

    p = Parser(
        prog="banditkit",
        description="Contextual bandits and Bayesian optimisation with online Kalman-style neural posteriors.",
    )
    p.add_argument("--version", action="version", version=f"banditkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    bandit.register(sub)  # demo, run, compare
    bo.register(sub)
    data.register(sub)
    sweep.register(sub)
    offline.register(sub)  # evaluate, warmstart (logged data; their logic lives in banditkit/offline/commands.py)
    serve.register(sub)  # the decision service (banditkit/serve)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``banditkit`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "banditkit"
    try:
        args = build_parser().parse_args(argv)
        args.argv = argv  # this process's command line, for the lock record of the folder it writes
        prog = f"banditkit {args.command}"
        from banditkit.runtime import threads

        threads.limit_blas_threads()  # one BLAS thread: the LAPACK calls inside jitted steps (banditkit.runtime)
        return int(args.func(args) or 0)
    except CLIError as e:
        msg = str(e)
        print(msg if msg.startswith("banditkit") else f"{prog}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; finished chunks/seeds are in the CSV under --out", file=sys.stderr)
        return 130
    except Exception as e:
        # imported here, not at the top: the module is light, but its package (banditkit.experiments) is not
        from banditkit.experiments.folder_lock import FolderBusy

        if isinstance(e, FolderBusy):
            print(f"{prog}: error: {e}", file=sys.stderr)
            return BUSY_STATUS
        if not isinstance(e, _ONE_LINE):
            raise
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
