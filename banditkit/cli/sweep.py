"""``banditkit sweep``: agents over a hyper-parameter × seed grid (:func:`banditkit.sweep`) into a resumable results
folder: ``sweep.csv`` (one column per axis), ``sweep_summary.md`` (one row per agent and grid point),
``sweep_regret.png`` (final regret against each axis), ``sweep_run.json``, ``sweep_state/`` (one checkpoint per
program while it runs).

Several processes (machines, or GPUs in one machine): start the same command in each with ``--distributed``
(the coordinator from ``--coordinator/--num-processes/--process-id``, else from ``BANDITKIT_COORDINATOR`` /
``BANDITKIT_NUM_PROCESSES`` / ``BANDITKIT_PROCESS_ID``, else from what JAX reads from the cluster launcher: SLURM,
Open MPI, ...).  The lanes are spread over every device of every process; process 0 writes ``--out``, which must be a
folder every process can read for ``--resume``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time

from banditkit.cli import args as cli_args
from banditkit.cli.bandit import agent_spec, env_id, settings_by_agent
from banditkit.cli.errors import CLIError
from banditkit.cli.folder import results_folder


def axis(text: str) -> tuple[str, list]:
    """``--grid NAME=V1,V2,...``: an axis and its values, each read as a Python literal (``1e-4``, ``10``, ``True``)
    or kept as text (``dense``)."""
    import ast

    name, sep, raw = text.partition("=")
    name = name.strip()
    values = [v.strip() for v in raw.split(",") if v.strip()]
    if not sep or not name.isidentifier() or not values:
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,..., e.g. obs_noise=1e-4,1e-2,0.1; got {text!r}")
    out = []
    for v in values:
        try:
            out.append(ast.literal_eval(v))
        except (ValueError, SyntaxError):
            out.append(v)
    return name, out


def _axes(pairs, option: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for name, values in pairs or []:
        if name in out:
            raise CLIError(f"{option} {name}=... given twice; give each axis once")
        out[name] = values
    return out


def _barrier(name: str) -> None:
    import jax

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.distributed:
        from banditkit.experiments.placement import initialize

        initialize(args.coordinator, args.num_processes, args.process_id)
    import pandas as pd

    from banditkit.experiments import grid as _grid
    from banditkit.experiments import placement
    from banditkit.experiments.results_folder import ResultsFolder, rows_to_resume
    from banditkit.experiments.sweep import check, program_name, sweep

    env = env_id(args.env)
    names = [a.strip() for a in args.agents.split(",") if a.strip()]
    if not names:
        raise CLIError("--agents needs a comma-separated list, e.g. hilofi,lofi")
    specs = {s.label: s for s in (agent_spec(a, args.policy) for a in names)}
    agents = {label: str(s) for label, s in specs.items()}  # {label: canonical spec text}
    scalar = _axes(args.grid, "--grid")
    struct = _axes(args.structural, "--structural")
    try:
        scalar = _grid.check_scalar_grid(scalar)
        struct = _grid.check_structural(struct, scalar)
        _grid.check_names(list(scalar) + list(struct))
    except ValueError as e:
        raise CLIError(re.sub(r"structural=\{'(\w+)': \[\.\.\.\]\}", r"--structural \1=V1,V2,...", str(e))) from None
    sets = dict(args.set or [])
    per_agent = settings_by_agent(specs, sets)  # each agent's share of --set (a key none takes is an error)
    for label, s in agents.items():  # every grid point's agent built before the folder is touched
        check({label: s}, env, scalar, structural=struct, posterior_kwargs=per_agent[label] or None)
    run = dict(env=env, agents=list(agents), grid=scalar, structural=struct, steps=args.steps, seeds=args.seeds,
               set=sets)
    programs = [(program_name(label, p), (label, p)) for label in agents for p in _grid.points(struct)]
    n_lanes = len(_grid.points(scalar)) * args.seeds
    writer = placement.is_writer()
    prog = "banditkit sweep"
    # process 0 writes the folder; the others only read the checkpoints it leaves there
    reader = contextlib.nullcontext(ResultsFolder(args.out, "sweep"))
    opened = results_folder(args, "sweep", prog, run) if writer else reader
    with opened as folder:
        old = pd.DataFrame()
        if writer and args.resume:
            parts = [(name, dict(agent=label) | {k: point[k] for k in struct}) for name, (label, point) in programs]
            old, _ = rows_to_resume(folder, parts, lanes_per_seed=n_lanes // args.seeds, steps=args.steps)
        _barrier("banditkit-sweep-folder-ready")  # the others read the checkpoints only once process 0 has sorted them
        t0 = time.perf_counter()
        try:
            frames = [sweep({label: s}, env, scalar, seeds=args.seeds, steps=args.steps, structural=struct,
                            posterior_kwargs=per_agent[label] or None, progress=not args.quiet, csv_path=folder.csv,
                            checkpoint_dir=folder.state_dir, save_every=args.save_every)
                      for label, s in agents.items()]
        except KeyboardInterrupt:
            print(f"{prog}: interrupted; finished chunks are in {folder.csv} and each program's progress in "
                  f"{folder.state_dir}/. Run the same command with --resume to continue", file=sys.stderr)
            return 130
        if not writer:
            return 0
        axes = frames[0].attrs["sweep_axes"]
        attrs = dict(frames[0].attrs, timing={k: v for f in frames for k, v in f.attrs["timing"].items()})
        # the rows kept, then the new ones; an empty frame (a program resumed at its end runs nothing) is left out,
        # or its missing columns would turn the integer columns into floats
        df = pd.concat([f for f in (old, *frames) if len(f)] or frames, ignore_index=True)
        df = df.sort_values(["agent", *axes, "seed", "step"], kind="stable").reset_index(drop=True)
        df.attrs.update(attrs)
        folder.write_rows(df)
        folder.finish()
        if not args.quiet:
            print(f"{env}: {len(agents)} agent(s) x {n_lanes // args.seeds} grid point(s) x {len(_grid.points(struct))}"
                  f" program(s) x {args.seeds} seed(s) x {args.steps} steps in {time.perf_counter() - t0:.1f} s on "
                  f"{placement.Placement(1).devices} device(s)\n")
        _report(df, folder, args.quiet)
    return 0


def _report(df, folder, quiet: bool) -> None:
    from banditkit.cli.report import save_plot, summary_markdown
    from banditkit.experiments.sweep_plot import plot_sweep

    md = summary_markdown(df)
    summary = folder.write_text("_summary.md", md + "\n")
    png = save_plot(plot_sweep, df, folder.path("_regret.png")) if df.attrs.get("sweep_axes") else None
    print(md)
    if not quiet:
        print(f"\nwrote {folder.csv}, {summary}" + (f", {png}" if png else ""))


def register(sub) -> None:
    """Add ``sweep`` to ``banditkit``'s sub-parsers."""
    p = sub.add_parser(
        "sweep",
        help="agents over a hyper-parameter x seed grid, on every device of every process",
        description="Run agents over a grid of hyper-parameters and seeds: the scalar axes (--grid) in one compiled "
        "program, each structural value (--structural) in its own; one results frame with a column per axis.",
    )
    cli_args.env_arg(p)
    p.add_argument("--agents", required=True, help="comma-separated posteriors or specs: hilofi,lofi,linear-ucb")
    p.add_argument("--policy", default="thompson", help="policy of the agents named by posterior only (default "
                   "thompson)")
    p.add_argument("--grid", action="append", type=axis, metavar="NAME=V1,V2,...",
                   help="a scalar axis, repeatable: obs_noise, init_cov, init_cov_hidden, init_cov_last, dynamics_cov, "
                   "forgetting, epsilon, beta, xi (e.g. --grid obs_noise=1e-4,1e-2,0.1)")
    p.add_argument("--structural", action="append", type=axis, metavar="NAME=V1,V2,...",
                   help="an axis that changes the program (rank=5,10; last_cov=dense,sqrt): one program per value")
    cli_args.set_arg(p)
    cli_args.common(p, steps=2000, seeds=3, out=os.path.join("results", "sweep"))
    d = p.add_argument_group("several processes (jax.distributed)")
    d.add_argument("--distributed", action="store_true",
                   help="join JAX's multi-process runtime first (start the same command in every process)")
    d.add_argument("--coordinator", default=None, metavar="HOST:PORT", help="address of process 0")
    d.add_argument("--num-processes", type=cli_args.positive, default=None)
    d.add_argument("--process-id", type=int, default=None)
    p.set_defaults(func=cmd_sweep)
