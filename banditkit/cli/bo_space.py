"""``banditkit bo --space FILE --objective MODULE:FUNCTION``: BayesOpt over a typed search space on the user's
function of a dict of values.  Writes into the results folder ``bo`` (one writer at a time; a new run replaces the
one there, ``--resume`` continues it): ``bo.csv`` (agent, seed, step, one column per parameter, y, best_y; a row as
each evaluation finishes), ``bo_run.json``, ``bo_state/seed<N>.bk`` (the seed in progress), ``bo_summary.md`` and
``bo_best_y.png``.

Nothing finished is lost.  When the objective raises (or returns something that is not one finite number), every
evaluation told so far is already in ``bo.csv`` and the seed's state is saved; the objective's own traceback is
shown (its frames, not banditkit's; ``--debug``: all of it) with the parameters it was called with.
``--on-error stop`` (default) then exits with status 1 — a ``--resume`` evaluates the failing point again first —
and ``--on-error skip`` drops the point (:meth:`~banditkit.bo.BayesOpt.fail`: not suggested again) and goes on, up
to ``MAX_FAILURES_IN_A_ROW`` failures in a row.  The first Ctrl-C stops after the evaluation in progress and
saves; the message names the files that hold the run.  ``--resume`` keeps the finished seeds' rows, rebuilds the
rows of the seed in progress from its checkpoint (the source of truth, whatever a kill left in the CSV) and
continues it exactly."""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
import sys
import traceback
from typing import Any

from banditkit.cli.bo import features_arg, run_name, stop_between_evaluations, surrogate_kwargs
from banditkit.cli.errors import CLIError
from banditkit.cli.folder import results_folder
from banditkit.cli.report import save_plot

MAX_FAILURES_IN_A_ROW = 10  # --on-error skip gives up after this many failed points in a row
PROG = "banditkit bo"


def load_space(path: str):
    """The typed search space in ``path``: JSON, or YAML (``.yaml`` / ``.yml``; needs PyYAML)."""
    from banditkit.bo.space import Space

    try:
        with open(path) as fh:
            text = fh.read()
    except OSError as e:
        raise CLIError(f"--space: cannot read {path!r}: {e.strerror}") from None
    if path.lower().endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise CLIError("--space: a YAML file needs PyYAML (pip install pyyaml); or write the space as JSON") \
                from None
        try:
            cfg = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise CLIError(f"--space: {path!r} is not valid YAML: {str(e).splitlines()[0]}") from None
    else:
        try:
            cfg = json.loads(text)
        except json.JSONDecodeError as e:
            raise CLIError(f"--space: {path!r} is not valid JSON ({e}); a .yaml / .yml file is read as YAML") from None
    try:
        return Space.from_config(cfg)
    except ValueError as e:
        raise CLIError(f"--space {path}: {e}") from None


def load_objective(spec: str):
    """``MODULE:FUNCTION`` (the module importable from the current folder) -> the function."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise CLIError(f"--objective must be MODULE:FUNCTION (e.g. mymodel:score), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise CLIError(f"--objective: cannot import {module!r} ({e}); run from the folder that holds it") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise CLIError(f"--objective: {module!r} has no function {name!r}")
    return fn


def user_traceback(exc: BaseException, debug: bool = False) -> str:
    """The traceback of ``exc`` raised by the user's objective: from the first frame outside banditkit on (the
    objective's own file and line; banditkit's frames that called it left out), or every frame with ``debug``;
    only the exception's line when no frame is the user's (e.g. the objective returned a string)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the banditkit package
    tb = exc.__traceback__
    if not debug:
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(root + os.sep):
            tb = tb.tb_next
    if tb is None:
        return "".join(traceback.format_exception_only(type(exc), exc))
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _params(x: dict) -> str:
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in x.items()) + "}"


def append_row(path: str, row: dict) -> None:
    """Append ``row`` to the CSV at ``path`` (its header first when the file is new or empty), flushed to disk."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)
        fh.flush()
        os.fsync(fh.fileno())


def checkpoint_rows(path: str, space, name: str, seed: int, direction: str) -> list[dict]:
    """The CSV rows of the evaluations held in the BayesOpt checkpoint at ``path`` (its unit-cube points decoded
    by ``space``), without building the optimiser."""
    import numpy as np

    from banditkit import checkpoint

    meta = checkpoint.load(path)[1].get("meta") or {}
    y = np.asarray(meta.get("y", []), np.float64)
    u = np.asarray(meta.get("u", []), np.float64).reshape(-1, space.dim)
    best = np.minimum.accumulate(y) if direction == "minimize" else np.maximum.accumulate(y)
    return [dict(agent=name, seed=seed, step=i + 1, **space.decode(u[i]), y=float(y[i]), best_y=float(best[i]))
            for i in range(y.size)]


def rows_to_resume(folder, args: argparse.Namespace, space, name: str) -> set[int]:
    """Rewrite ``bo.csv`` for a resume and return the finished seeds below ``--seeds``: a seed with all ``--evals``
    rows is kept; one with a checkpoint gets the rows of the evaluations the checkpoint holds; other rows of seeds
    below ``--seeds`` go (a seed torn without a checkpoint runs again).  Seeds beyond ``--seeds`` stay as they are."""
    import pandas as pd

    df = folder.read_rows()
    if not {"seed", "step"} <= set(df.columns):
        df = pd.DataFrame(columns=["seed", "step"])
    keep, done = [df[df.seed >= args.seeds]], set()
    for seed in range(args.seeds):
        mine = df[df.seed == seed]
        ck = os.path.join(folder.state_dir, f"seed{seed}.bk")
        if sorted(mine.step.tolist()) == list(range(1, args.evals + 1)):
            keep.append(mine.sort_values("step"))
            done.add(seed)
        elif os.path.exists(ck):
            keep.append(pd.DataFrame(checkpoint_rows(ck, space, name, seed, args.direction)))
    kept = pd.concat([k for k in keep if len(k)], ignore_index=True) if any(len(k) for k in keep) else df.iloc[:0]
    folder.write_rows(kept.sort_values(["seed", "step"], kind="stable") if len(kept) else kept)
    return done


def read_back(param, value: Any) -> Any:
    """A value of ``param`` as the CSV gave it back, as the space made it: a categorical choice by its text (an empty
    cell, read as NaN, is ``None``), a number as a Python number."""
    from banditkit.bo.space import Categorical

    if isinstance(param, Categorical):
        text = "" if value is None or (isinstance(value, float) and value != value) else str(value)
        for c in param.choices:
            if ("" if c is None else str(c)) == text:
                return c
    return value.item() if hasattr(value, "item") else value


def cmd_bo_space(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from banditkit.bo import BayesOpt, optimize
    from banditkit.plotting import plot_bo

    if args.space is None or args.objective is None:
        raise CLIError("--space FILE and --objective MODULE:FUNCTION go together: the objective is a function of a "
                       "dict of the space's values (--function picks a test function on a box instead)")
    space = load_space(args.space)
    f = load_objective(args.objective)
    features = features_arg(args.features)
    kwargs = surrogate_kwargs(args)
    noise = {} if args.obs_noise is None else {"obs_noise": args.obs_noise}
    options = dict(surrogate=args.surrogate, acquisition=args.acquisition, direction=args.direction,
                   features=features, n_candidates=args.candidates, maximizer=args.maximizer,
                   trust_region=args.trust_region, surrogate_kwargs=kwargs or None, **noise)
    try:
        BayesOpt(space=space, **options)  # settings checked before the folder is touched
    except (TypeError, ValueError) as e:
        raise CLIError(f"banditkit bo: {str(e).strip().splitlines()[0]}") from None
    run = json.loads(json.dumps(dict(space=args.space, space_config=space.to_config(), objective=args.objective,
                                     evals=args.evals, **options)))  # as bo_run.json reads back (lists, not tuples)
    name = run_name(args.surrogate, args.acquisition)
    with results_folder(args, "bo", PROG, run, may_change=" (only --seeds and --on-error may change)",
                        absent=dict(space_config=None)) as folder:
        done = rows_to_resume(folder, args, space, name) if args.resume else set()
        status = run_seeds(args, folder, space, f, options, name, done, optimize)
        if status:
            return status
        folder.finish(clear=False)  # a checkpoint of a seed beyond --seeds stays for a later --resume
        df = folder.read_rows()
        df = df[df.seed < args.seeds]
        last = df.groupby("seed").tail(1)
        best = last.best_y.to_numpy()
        over = "mean ± s.e. over seeds" if best.size > 1 else "mean over 1 seed"  # one seed has no s.e.
        se = f" ± {float(np.std(best, ddof=1) / np.sqrt(best.size)):.2g}" if best.size > 1 else ""
        i = int(np.argmin(df.y.to_numpy()) if args.direction == "minimize" else np.argmax(df.y.to_numpy()))
        best_params = {n: read_back(space[n], df[n].iloc[i]) for n in space.names}
        md = "\n".join([
            f"| agent | seeds | evals | best y ({over}) | best y found | at |",
            "| --- | --- | --- | --- | --- | --- |",
            f"| {name} | {args.seeds} | {args.evals} | {np.mean(best):.6g}{se} | {df.y.iloc[i]:.6g} | "
            f"{', '.join(f'{k}={v!r}' for k, v in best_params.items())} |"])
        summary = folder.write_text("_summary.md", md + "\n")
        png = save_plot(plot_bo, pd.DataFrame(df), folder.path("_best_y.png"))
        print(md)
        if not args.quiet:
            print(f"\nwrote {folder.csv}, {summary}, {png}")
    return 0


def run_seeds(args: argparse.Namespace, folder, space, f, options: dict, name: str, done: set[int],
              optimize) -> int:
    """Run the seeds not ``done``, a row into ``bo.csv`` after each evaluation and the seed's checkpoint in
    ``bo_state/``; returns 0, 1 (the objective failed, ``--on-error stop`` or too many failures in a row) or 130
    (Ctrl-C), having said on stderr what happened and where the run is kept."""
    from tqdm.auto import tqdm

    bar = tqdm(total=args.evals * args.seeds, desc=f"bo {args.objective}", disable=args.quiet,
               initial=args.evals * len(done))
    where: dict[str, Any] = {}

    def kept() -> str:
        """What is on disk, naming only files that exist."""
        rows = folder.read_rows()
        n = len(rows[rows.seed == where["seed"]]) if "seed" in rows else 0
        parts = [f"{len(rows)} finished evaluation(s) are in {folder.csv}"] if len(rows) else \
            ["no evaluation had finished"]
        if os.path.exists(where["ck"]):
            parts.append(f"seed {where['seed']}'s state ({n} evaluation(s)) is saved in {where['ck']}")
        return "; ".join(parts)

    try:
        with stop_between_evaluations(PROG) as stop:
            streak = [0]

            def after_each(opt, x, y):
                append_row(folder.csv, dict(agent=name, seed=where["seed"], step=opt.n_evals, **x, y=y,
                                            best_y=opt.best[1]))
                streak[0] = 0
                bar.update()
                if stop["stop"]:
                    raise KeyboardInterrupt  # optimize saves the checkpoint (a safe point) and re-raises

            def on_error(opt, x, exc) -> bool:
                where.update(x=x, exc=exc)
                if args.on_error == "stop" or stop["stop"]:
                    return False
                streak[0] += 1
                print(f"{PROG}: seed {where['seed']}: the objective failed at {_params(x)} "
                      f"({user_traceback(exc, args.debug).strip().splitlines()[-1]}); skipped (--on-error skip)",
                      file=sys.stderr, flush=True)
                if args.debug:
                    print(user_traceback(exc, True), file=sys.stderr, end="", flush=True)
                return streak[0] < MAX_FAILURES_IN_A_ROW

            for seed in range(args.seeds):
                if seed in done:
                    continue
                where.update(seed=seed, ck=os.path.join(folder.state_dir, f"seed{seed}.bk"))
                optimize(f, space=space, n_evals=args.evals, seed=seed, callback=after_each, checkpoint=where["ck"],
                         save_every=args.save_every, on_error=on_error, **options)
                os.remove(where["ck"])
    except KeyboardInterrupt:
        bar.close()
        print(f"{PROG}: interrupted; {kept()}. Run the same command with --resume to continue", file=sys.stderr)
        return 130
    except Exception as e:
        if e is not where.get("exc"):
            raise  # not the objective: banditkit's own error (main prints it; --debug: its traceback)
        bar.close()
        why = (f"{MAX_FAILURES_IN_A_ROW} points failed in a row" if args.on_error == "skip"
               else "stopped (--on-error stop)")
        print(f"{PROG}: the objective raised at seed {where['seed']} with {_params(where['x'])}:\n"
              f"{user_traceback(e, args.debug)}"
              f"{PROG}: {why}; {kept()}. Fix the objective and run the same command with --resume (the failing "
              "point is evaluated again first), or add --on-error skip to skip failing points", file=sys.stderr)
        return 1
    bar.close()
    return 0
