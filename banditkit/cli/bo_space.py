"""``banditkit bo --space FILE --objective MODULE:FUNCTION``: BayesOpt over a typed search space on the user's
function of a dict of values.  Writes into the results folder ``bo`` (one writer at a time; a new run replaces the
one there): ``bo.csv`` (agent, seed, step, one column per parameter, y, best_y; a seed's rows as it finishes),
``bo_run.json``, ``bo_summary.md`` and ``bo_best_y.png``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

from banditkit.cli.bo import features_arg, surrogate_kwargs
from banditkit.cli.errors import CLIError
from banditkit.cli.folder import writing
from banditkit.cli.report import save_plot


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


def cmd_bo_space(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from banditkit.bo import BayesOpt, optimize
    from banditkit.experiments.results_folder import ResultsFolder
    from banditkit.plotting import plot_bo

    if args.space is None or args.objective is None:
        raise CLIError("--space FILE and --objective MODULE:FUNCTION go together: the objective is a function of a "
                       "dict of the space's values (--function picks a test function on a box instead)")
    if args.resume:
        raise CLIError("--resume is not available with --space yet; run again without it")
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
    run = dict(space=args.space, objective=args.objective, evals=args.evals, seeds=args.seeds,
               **{k: (list(v) if isinstance(v, tuple) else v) for k, v in options.items()})
    name = f"{args.surrogate}-{args.acquisition}"
    with writing(ResultsFolder(args.out, "bo"), args, "banditkit bo") as folder:
        folder.start(run)
        from tqdm.auto import tqdm

        bar = tqdm(total=args.evals * args.seeds, desc=f"bo {args.objective}", disable=args.quiet)
        frames = []
        for seed in range(args.seeds):
            res = optimize(f, space=space, n_evals=args.evals, seed=seed, callback=lambda *_: bar.update(),
                           **options)
            h = res.history
            frame = pd.concat([pd.DataFrame(dict(agent=name, seed=seed, step=h.trial + 1)),
                               h[list(space.names)].reset_index(drop=True),
                               h[["y", "best_y"]].reset_index(drop=True)], axis=1)
            frame.to_csv(folder.csv, mode="a", header=seed == 0, index=False)  # kept if a later seed fails
            frames.append(frame)
        bar.close()
        df = pd.concat(frames, ignore_index=True)
        last = df.groupby("seed").tail(1)
        best = last.best_y.to_numpy()
        se = float(np.std(best, ddof=1) / np.sqrt(best.size)) if best.size > 1 else float("nan")
        i = int(np.argmin(df.y.to_numpy()) if args.direction == "minimize" else np.argmax(df.y.to_numpy()))
        best_params = {n: (lambda v: v.item() if hasattr(v, "item") else v)(df[n].iloc[i]) for n in space.names}
        md = "\n".join([
            "| agent | seeds | evals | best y (mean ± s.e. over seeds) | best y found | at |",
            "| --- | --- | --- | --- | --- | --- |",
            f"| {name} | {args.seeds} | {args.evals} | {np.mean(best):.6g} ± {se:.2g} | {df.y.iloc[i]:.6g} | "
            f"{', '.join(f'{k}={v!r}' for k, v in best_params.items())} |"])
        summary = folder.write_text("_summary.md", md + "\n")
        png = save_plot(plot_bo, df, folder.path("_best_y.png"))
        folder.finish()
        print(md)
        if not args.quiet:
            print(f"\nwrote {folder.csv}, {summary}, {png}")
    return 0
