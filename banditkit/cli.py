"""The ``banditkit`` command line (API.md §10): ``demo``, ``run``, ``compare``, ``bo``, ``data fetch|list``, and for
logged data ``evaluate`` and ``warmstart`` (:mod:`banditkit.offline.commands`).

Every experiment command writes into ``--out`` (created if needed)::

    <cmd>.csv            the tidy DataFrame, appended as chunks / seeds finish (an interrupted run keeps them)
    <cmd>_summary.md     the per-agent summary table (also printed)
    <cmd>_<plot>.png     cumulative regret (bandits) or simple regret (BO), mean ± s.e. over seeds
    <cmd>_run.json       the run's options, so that ``--resume`` can check it continues the same run
    <cmd>_timing.json    (bandits) each finished agent's compile and run times, for the summary of a resumed run
    <cmd>_state/         checkpoints of the work in progress (every ``--save-every`` s; removed when done): the
                         agent in progress (``demo``/``run``/``compare``), the seed in progress (``bo``, whose first
                         Ctrl-C stops after the current evaluation and saves it)

``<cmd> ... --resume`` keeps what had finished and continues the interrupted part exactly where it stopped.
``run`` / ``compare`` / ``bo`` ``--set KEY=VALUE`` (repeatable) set posterior (surrogate) hyper-parameters,
``--obs-noise`` the variance of the Gaussian reward likelihood and ``--adaptive-noise`` learns that variance online
(:func:`banditkit.posteriors.adaptive_noise`, for the filter backends that support it) — or, for one agent, a name
ending in ``-adaptive_noise`` (``--agents hilofi,hilofi-adaptive_noise``: fixed and learned side by side); all are
saved with the run's options.

``--quiet`` silences progress bars.  Every command first caps BLAS at one thread
(:func:`banditkit.threads.limit_blas_threads`; ``BANDITKIT_BLAS_THREADS=system`` leaves it).  Errors print one
line (``banditkit <cmd>: error: ...``) and exit with status 2
(1 when some dataset could not be fetched, 130 on Ctrl-C).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

DEMO_AGENTS = {
    "HiLoFi-TS": "hilofi-thompson",
    "LoFi-TS": "lofi-thompson",
    "neural-linear-TS": "neural_linear-thompson",
    "linear-TS": "linear-thompson",
    "eps-greedy": "replay_sgd-epsilon_greedy",
}
_POINT_ESTIMATE = {"eps_greedy", "epsilon_greedy", "greedy", "eps-greedy", "epsilon-greedy"}


class CLIError(Exception):
    """A user error reported as one line."""


class _Parser(argparse.ArgumentParser):
    """``argparse`` whose errors are one line (no usage dump) and exit with status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise CLIError(f"{self.prog}: error: {message} (see {self.prog} --help)")


# helpers ------------------------------------------------------------------------------------------------------------
def _env_id(name: str) -> str:
    from banditkit.environments import ENV_IDS

    if name in ENV_IDS:
        return name
    key = name.strip().lower().replace("_", "").replace("-", "")
    for env_id in ENV_IDS:
        short = env_id.split("/", 1)[1].rsplit("-v", 1)[0].lower()
        if key in (short, short + "v0"):
            return env_id
    names = ", ".join(i.split("/", 1)[1].rsplit("-v", 1)[0].lower() for i in ENV_IDS)
    raise CLIError(f"unknown environment {name!r}; choose one of: {names}")


def _spec(agent: str, policy: str) -> str:
    """``agent`` with ``--policy`` appended when it names a posterior only (``hilofi`` -> ``hilofi-thompson``,
    ``hilofi-adaptive_noise`` -> ``hilofi-thompson-adaptive_noise``); a full spec or a point-estimate baseline
    (``lofi-ucb``, ``eps_greedy``) is kept as written, and a bad name is reported where the agents are built."""
    from banditkit.agents.factory import ADAPTIVE_SUFFIX, parse_spec, split_noise_suffix

    a = agent.strip()
    core, learns = split_noise_suffix(a) if a else (a, False)
    if core in _POINT_ESTIMATE:
        return a
    try:
        parse_spec(f"{core}-{policy}")
    except ValueError:  # already has a policy, or no valid name at all
        return a
    return f"{core}-{policy}" + (f"-{ADAPTIVE_SUFFIX}" if learns else "")


def _out_dir(path: str) -> str:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise CLIError(f"cannot create the output folder {path!r}: {e.strerror}") from e
    return path


def _fresh(path: str) -> str:
    if os.path.exists(path):
        os.remove(path)
    return path


def _report(df, out: str, cmd: str, quiet: bool, bo: bool = False) -> None:
    from banditkit.experiments import summarize, to_markdown
    from banditkit.plotting import plot_bo, plot_regret

    summary = summarize(df)
    md = to_markdown(summary)
    with open(os.path.join(out, f"{cmd}_summary.md"), "w") as fh:
        fh.write(md + "\n")
    png = os.path.join(out, f"{cmd}_{'simple_regret' if bo else 'regret'}.png")
    (plot_bo if bo else plot_regret)(df, png)
    import matplotlib.pyplot as plt

    plt.close("all")
    print(md)
    if not quiet:
        print(f"\nwrote {os.path.join(out, cmd + '.csv')}, {os.path.join(out, cmd + '_summary.md')}, {png}")


def _check_resumable(run_file: str, run: dict, out: str, may_change: str = "", absent: dict | None = None) -> None:
    """``--resume``: the run saved in ``out`` must have been made with the options ``run`` (a one-line error
    naming each difference otherwise).  ``absent``: the value an option had in a saved file that does not name it
    (an option added later)."""
    import json

    if not os.path.exists(run_file):
        raise CLIError(f"nothing to resume in {out!r} (no {os.path.basename(run_file)}); run without --resume")
    with open(run_file) as fh:
        saved = json.load(fh)
    absent = absent or {}
    saved = {k: saved.get(k, absent.get(k)) for k in run}
    diff = [f"--{k.replace('_', '-')} {saved[k]!r} (now {v!r})" for k, v in run.items() if saved[k] != v]
    if diff:
        raise CLIError(f"--resume continues the run in {out!r}, made with other settings: {', '.join(diff)}; give "
                       f"the same options{may_change} or another --out")


def _write_json(path: str, value) -> None:
    """Write ``value`` as JSON atomically (an interruption leaves the previous file)."""
    import json

    with open(path + ".tmp", "w") as fh:
        json.dump(value, fh, indent=1)
    os.replace(path + ".tmp", path)


def _clear(state_dir: str) -> None:
    """Remove every checkpoint in ``state_dir`` (if it exists)."""
    if os.path.isdir(state_dir):
        for name in os.listdir(state_dir):
            os.remove(os.path.join(state_dir, name))


def _start_run(run_file: str, run: dict, csv: str, state_dir: str, *others: str) -> None:
    """A new run replaces the one in its folder: the CSV, the checkpoints and ``others`` go, the options are saved."""
    for path in (csv, *others):
        _fresh(path)
    _clear(state_dir)
    _write_json(run_file, run)


def _read_rows(csv: str):
    """The rows of an earlier run's CSV (an empty frame when it is missing or unreadable)."""
    import pandas as pd

    try:
        return pd.read_csv(csv)
    except (FileNotFoundError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        return pd.DataFrame()


def _write_rows(df, csv: str) -> None:
    if len(df):
        df.to_csv(csv + ".tmp", index=False)
        os.replace(csv + ".tmp", csv)
    elif os.path.exists(csv):
        os.remove(csv)


def _setting(text: str) -> tuple[str, object]:
    """``--set KEY=VALUE``: one posterior hyper-parameter; the value read as a Python literal (``20``, ``1e-2``,
    ``True``, ``None``), else kept as text (``gain``)."""
    import json

    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key.isidentifier() or not raw:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. rank=20 or dynamics_mode=gain; got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return key, raw
    try:  # saved with the run's options: as JSON reads it back (a tuple becomes a list), or not at all
        return key, json.loads(json.dumps(value))
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"--set {key}: {raw!r} is not a number, string, bool, None or list") from None


def _settings_by_agent(agents: dict, sets: dict) -> dict[str, dict]:
    """Each agent's share of ``--set``: the keys its posterior backend takes.  A key that no agent's backend takes
    is an error naming what they do take (checked before anything runs)."""
    import inspect

    from banditkit.agents.bandit import backends
    from banditkit.agents.factory import parse_spec

    taken: dict[str, dict] = {}
    names: dict[str, set] = {}
    for label, spec in agents.items():
        try:
            post = parse_spec(spec)[0]
        except ValueError as e:
            raise CLIError(str(e)) from None
        params = inspect.signature(backends()[post]).parameters
        takes_all = any(p.kind == p.VAR_KEYWORD for p in params.values())
        names[post] = {k for k, p in params.items() if p.kind == p.KEYWORD_ONLY}
        taken[label] = {k: v for k, v in sets.items() if takes_all or k in params}
    unused = [k for k in sets if not any(k in t for t in taken.values())]
    if unused:
        known = "; ".join(f"{post}: {', '.join(sorted(ks))}" for post, ks in names.items())
        raise CLIError(f"--set {', '.join(unused)}: no agent here takes it (their hyper-parameters: {known})")
    return taken


def _noise_by_agent(agents: dict, obs: float | None, adaptive: bool) -> dict[str, dict]:
    """Each agent's observation-noise settings from ``--obs-noise`` / ``--adaptive-noise``: ``make_agent`` keyword
    arguments.  ``--adaptive-noise`` wraps the agents whose backend :func:`banditkit.posteriors.adaptive_noise`
    supports (a run where none does is an error naming those backends); an agent whose spec ends in
    ``-adaptive_noise`` learns it anyway (``make_agent`` reads the suffix)."""
    from banditkit.agents.factory import parse_spec, split_noise_suffix
    from banditkit.posteriors.noise import SUPPORTED

    learnable = {label: parse_spec(spec)[0] in SUPPORTED for label, spec in agents.items()}
    if adaptive and not any(learnable.values()):
        raise CLIError(f"--adaptive-noise: none of these agents has a backend that learns its noise this way "
                       f"({', '.join(sorted(SUPPORTED))}); neural_linear and linear learn theirs already")
    kwargs = {}
    for label, spec in agents.items():
        kw = {} if obs is None else {"obs_noise": obs}
        if adaptive and learnable[label] and not split_noise_suffix(spec)[1]:
            kw["adaptive_noise"] = True
        kwargs[label] = kw
    return kwargs


def _bandit(cmd: str, agents: dict, args) -> int:
    import json

    import pandas as pd

    from banditkit.agents.factory import ADAPTIVE_SUFFIX, split_noise_suffix
    from banditkit.experiments import runner

    out = _out_dir(args.out)
    csv, run_file, state_dir = (os.path.join(out, n) for n in (f"{cmd}.csv", f"{cmd}_run.json", f"{cmd}_state"))
    timing_file = os.path.join(out, f"{cmd}_timing.json")
    env = _env_id(args.env)
    sets = dict(getattr(args, "set", None) or [])
    per_agent = _settings_by_agent(agents, sets)
    obs_noise, adaptive = getattr(args, "obs_noise", None), bool(getattr(args, "adaptive_noise", False))
    noise = _noise_by_agent(agents, obs_noise, adaptive)
    run = dict(env=env, agents=agents, steps=args.steps, seeds=args.seeds, set=sets, obs_noise=obs_noise,
               adaptive_noise=adaptive)
    labels = {a: f"{a}-{ADAPTIVE_SUFFIX}" if noise[a].get("adaptive_noise") else a for a in agents}  # rows say which
    twice = sorted({b for b in labels.values() if list(labels.values()).count(b) > 1})
    if twice:
        raise CLIError(f"--adaptive-noise: {', '.join(twice)} would run twice (an agent listed both with and without "
                       "the -adaptive_noise suffix); list it once, or drop --adaptive-noise to compare the two")
    agents, per_agent, noise = ({labels[a]: v for a, v in d.items()} for d in (agents, per_agent, noise))
    env_obj, built = None, {}
    custom = [a for a in agents if per_agent[a] or noise[a] or split_noise_suffix(agents[a])[1]]
    if custom:  # built before the folder is touched: a bad value loses nothing
        from banditkit.agents import make_agent

        env_obj = runner._make_env(env, {}, args.steps)
        for label in custom:
            try:
                built[label] = make_agent(agents[label], env_obj, posterior_kwargs=per_agent[label], **noise[label])
            except (TypeError, ValueError) as e:
                raise CLIError(f"{'--set for ' if per_agent[label] else ''}{label}: {e}") from None
    old = pd.DataFrame()
    timing: dict = {}
    finished: set[str] = set()
    if args.resume:
        _check_resumable(run_file, run, out, absent=dict(set={}, obs_noise=None, adaptive_noise=False))
        rows = _read_rows(csv)
        if not set(runner.COLUMNS) <= set(rows.columns):
            rows = pd.DataFrame(columns=runner.COLUMNS)
        keep = []
        for label in agents:  # each agent's rows up to the round its checkpoint can continue from
            mine = rows[rows.agent == label].dropna(subset=runner.COLUMNS)  # a line torn by a kill
            ck = runner.agent_checkpoint(state_dir, label)
            if len(mine) == args.steps * args.seeds:
                finished.add(label)
            else:
                upto = runner.checkpoint_rounds(ck)  # {seed: rounds run}; the Gymnasium loop's differ by seed
                mine = mine[mine.step < mine.seed.map(upto).fillna(0)]
                if len(mine) != sum(upto.values()):  # rows missing before the checkpoint: run this agent afresh
                    mine = mine.iloc[:0]
                    if os.path.exists(ck):
                        os.remove(ck)
            keep.append(mine)
        old = pd.concat(keep, ignore_index=True)
        _write_rows(old, csv)  # drops rows past a checkpoint and torn lines
        if os.path.exists(timing_file):
            with open(timing_file) as fh:
                timing = json.load(fh)
    else:
        _start_run(run_file, run, csv, state_dir, timing_file)
    os.makedirs(state_dir, exist_ok=True)
    t0 = time.perf_counter()
    frames = [old]
    try:
        for label, spec in agents.items():
            if label in finished:
                continue
            if env_obj is None:
                env_obj = runner._make_env(env, {}, args.steps)
            ck = runner.agent_checkpoint(state_dir, label)
            df = runner.run(env_obj, built.get(label, spec), args.steps, args.seeds, name=label,
                            progress=not args.quiet, csv_path=csv, checkpoint=ck, save_every=args.save_every)
            frames.append(df)
            timing.update(json.loads(json.dumps(df.attrs.get("timing", {}), default=float)))
            _write_json(timing_file, timing)
            os.remove(ck)
    except KeyboardInterrupt:
        print(f"banditkit {cmd}: interrupted; finished chunks are in {csv} and each agent's progress in {state_dir}/ "
              f"(saved at most --save-every s before). Run the same command with --resume to continue",
              file=sys.stderr)
        return 130
    order = {a: i for i, a in enumerate(agents)}
    df = pd.concat([f for f in frames if len(f)], ignore_index=True)
    df = df.sort_values(["agent", "seed", "step"], key=lambda c: c.map(order) if c.name == "agent" else c,
                        kind="stable").reset_index(drop=True)
    df.attrs["timing"] = timing
    df.to_csv(csv, index=False)  # the complete frame (the chunks were appended while running)
    _clear(state_dir)  # finished: no checkpoint is needed any more
    os.rmdir(state_dir)
    if not args.quiet:
        print(
            f"{env}: {len(agents)} agent(s) x {args.seeds} seed(s) x {args.steps} steps in "
            f"{time.perf_counter() - t0:.1f} s" + "".join(f"; --set {k}={v!r}" for k, v in sets.items())
            + ("" if obs_noise is None else f"; --obs-noise {obs_noise:g}")
            + ("; the agents ending in -adaptive_noise learn the observation variance online" if adaptive else "")
            + "\n"
        )
    _report(df, out, cmd, args.quiet)
    return 0


# commands -------------------------------------------------------------------------------------------------------------
def cmd_demo(args) -> int:
    agents = dict(DEMO_AGENTS)
    if args.agents:
        wanted = [a.strip() for a in args.agents.split(",") if a.strip()]
        by_key = {k.lower(): k for k in DEMO_AGENTS} | {v: k for k, v in DEMO_AGENTS.items()}
        unknown = [a for a in wanted if a.lower() not in by_key and a not in by_key]
        if unknown:
            raise CLIError(f"unknown demo agent(s) {unknown}; choose from {', '.join(DEMO_AGENTS)}")
        agents = {
            by_key.get(a, by_key.get(a.lower())): DEMO_AGENTS[by_key.get(a, by_key.get(a.lower()))] for a in wanted
        }
    return _bandit("demo", agents, args)


def cmd_run(args) -> int:
    spec = _spec(args.agent, args.policy)
    return _bandit("run", {spec: spec}, args)


def cmd_compare(args) -> int:
    names = [a for a in args.agents.split(",") if a.strip()]
    if not names:
        raise CLIError("banditkit compare: error: --agents needs a comma-separated list, e.g. hilofi,lofi,eps_greedy")
    specs = [_spec(a, args.policy) for a in names]
    return _bandit("compare", {s: s for s in specs}, args)


_BO_RUN = "bo_run.json"  # the settings of the run in --out, so that --resume can check it continues the same run
_BO_STATE = "bo_state"  # one checkpoint per unfinished seed: bo_state/seed<N>.bk


@contextlib.contextmanager
def _stop_between_evaluations(prog: str):
    """The first Ctrl-C asks the BO loop to stop at its next safe point (after an evaluation is told, the state
    then saved); a second one interrupts at once.  Yields ``{"stop": bool}``."""
    flag = {"stop": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag["stop"]:
            raise KeyboardInterrupt
        flag["stop"] = True
        print(f"\n{prog}: stopping after this evaluation and saving it (Ctrl-C again stops at once, keeping the "
              "last save)", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _bo_finished(csv: str, seeds: int, evals: int):
    """The rows of ``bo.csv`` for the seeds below ``seeds`` that have all ``evals`` steps (a row set torn by a
    kill is dropped, and the file rewritten without it), as ``{seed: frame}``."""
    import pandas as pd

    df = _read_rows(csv)
    done = {}
    if {"seed", "step"} <= set(df.columns):
        for seed, frame in df.groupby("seed"):
            if sorted(frame.step.tolist()) == list(range(1, evals + 1)):
                done[int(seed)] = frame.sort_values("step")
    if not done or sum(len(f) for f in done.values()) != len(df):  # torn / foreign rows: keep whole seeds only
        _write_rows(pd.concat([done[s] for s in sorted(done)]) if done else df.iloc[:0], csv)
    return {s: f for s, f in done.items() if s < seeds}


def _load_space(path: str):
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
        import json

        try:
            cfg = json.loads(text)
        except json.JSONDecodeError as e:
            raise CLIError(f"--space: {path!r} is not valid JSON ({e}); a .yaml / .yml file is read as YAML") from None
    try:
        return Space.from_config(cfg)
    except ValueError as e:
        raise CLIError(f"--space {path}: {e}") from None


def _load_objective(spec: str):
    """``MODULE:FUNCTION`` (the module importable from the current folder) → the function."""
    import importlib

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


def cmd_bo_space(args) -> int:
    """``banditkit bo --space FILE --objective MODULE:FUNCTION``: BayesOpt over a typed space on the user's function
    of a dict of values; writes bo.csv (agent, seed, step, one column per parameter, y, best_y), bo_summary.md and
    bo_best_y.png."""
    import numpy as np
    import pandas as pd

    from banditkit.bo import optimize

    if args.space is None or args.objective is None:
        raise CLIError("--space FILE and --objective MODULE:FUNCTION go together: the objective is a function of a "
                       "dict of the space's values (--function picks a test function on a box instead)")
    if args.resume:
        raise CLIError("--resume is not available with --space yet; run again without it")
    space = _load_space(args.space)
    f = _load_objective(args.objective)
    features = tuple(int(w) for w in args.features.split(",") if w.strip())
    sets = dict(args.set or [])
    if args.rank is not None and "rank" in sets:
        raise CLIError("give the surrogate's rank once: --rank or --set rank=..., not both")
    kwargs = ({} if args.rank is None else {"rank": args.rank}) | sets
    noise = {} if args.obs_noise is None else {"obs_noise": args.obs_noise}
    options = dict(surrogate=args.surrogate, acquisition=args.acquisition, direction=args.direction,
                   features=features, n_candidates=args.candidates, maximizer=args.maximizer,
                   trust_region=args.trust_region, surrogate_kwargs=kwargs or None, **noise)
    try:
        from banditkit.bo import BayesOpt

        BayesOpt(space=space, **options)  # settings checked before the folder is touched
    except (TypeError, ValueError) as e:
        raise CLIError(f"banditkit bo: {str(e).strip().splitlines()[0]}") from None
    out = args.out
    _out_dir(out)
    csv = os.path.join(out, "bo.csv")
    from tqdm.auto import tqdm

    bar = tqdm(total=args.evals * args.seeds, desc=f"bo {args.objective}", disable=args.quiet)
    name = f"{args.surrogate}-{args.acquisition}"
    frames = []
    for seed in range(args.seeds):
        res = optimize(f, space=space, n_evals=args.evals, seed=seed, callback=lambda *_: bar.update(), **options)
        h = res.history
        frame = pd.concat([pd.DataFrame(dict(agent=name, seed=seed, step=h.trial + 1)),
                           h[list(space.names)].reset_index(drop=True), h[["y", "best_y"]].reset_index(drop=True)],
                          axis=1)
        frame.to_csv(csv, mode="a", header=seed == 0, index=False)
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
    with open(os.path.join(out, "bo_summary.md"), "w") as fh:
        fh.write(md + "\n")
    from banditkit.plotting import plot_bo

    png = os.path.join(out, "bo_best_y.png")
    plot_bo(df, png)
    import matplotlib.pyplot as plt

    plt.close("all")
    print(md)
    if not args.quiet:
        print(f"\nwrote {csv}, {os.path.join(out, 'bo_summary.md')}, {png}")
    return 0


def cmd_bo(args) -> int:
    import numpy as np
    import pandas as pd

    from banditkit.bo import optimize
    from banditkit.environments.bo_functions import make_function

    if args.space is not None or args.objective is not None:
        return cmd_bo_space(args)

    try:
        fn = make_function(args.function, args.dim)
    except ValueError as e:
        raise CLIError(f"banditkit bo: error: {e}") from e
    features = tuple(int(w) for w in args.features.split(",") if w.strip())
    out = args.out  # made once the settings are checked: a refused command leaves no folder behind
    csv, run_file, state_dir = (os.path.join(out, n) for n in ("bo.csv", _BO_RUN, _BO_STATE))
    sets = dict(args.set or [])
    if args.rank is not None and "rank" in sets:
        raise CLIError("give the surrogate's rank once: --rank or --set rank=..., not both")
    kwargs = ({} if args.rank is None else {"rank": args.rank}) | sets
    noise = {} if args.obs_noise is None else {"obs_noise": args.obs_noise}
    from banditkit.posteriors import SUFFIX, split_suffix

    base, learns = split_suffix(args.surrogate)  # --surrogate hilofi-adaptive_noise is --adaptive-noise
    learns = learns or args.adaptive_noise
    flag = "--adaptive-noise" if args.adaptive_noise else f"--surrogate {args.surrogate}"
    if learns and base.strip().lower() == "gp":
        raise CLIError(f"{flag}: the gp surrogate fits its noise variance by marginal likelihood already; learning "
                       "the variance online is for the network surrogates (hilofi, lofi, lrkf, ...)")
    surrogate = f"{base}-{SUFFIX}" if learns else base
    if learns:
        from banditkit.posteriors import get

        try:
            get(surrogate)
        except ValueError as e:
            raise CLIError(f"{flag}: {e}") from None
    if sets or learns:  # the surrogate built once before the folder is touched: nothing is lost
        from banditkit.bo import BayesOpt

        try:
            BayesOpt([(0.0, 1.0)] * fn.dim, surrogate=surrogate, acquisition=args.acquisition,
                     surrogate_kwargs=kwargs, features=features, n_candidates=args.candidates, **noise)
        except (TypeError, ValueError) as e:
            raise CLIError(f"--set: {str(e).strip().splitlines()[0]}") from None
    _out_dir(out)
    run = dict(function=fn.name, dim=fn.dim, surrogate=base, acquisition=args.acquisition,
               evals=args.evals, features=list(features), rank=args.rank, candidates=args.candidates,
               maximizer=args.maximizer, trust_region=args.trust_region, set=sets, obs_noise=args.obs_noise,
               adaptive_noise=learns)
    if args.resume:
        _check_resumable(run_file, run, out, may_change=" (only --seeds may change)",
                         absent=dict(set={}, obs_noise=None, adaptive_noise=False))
        done = _bo_finished(csv, args.seeds, args.evals)
    else:
        _start_run(run_file, run, csv, state_dir)
        done = {}
    os.makedirs(state_dir, exist_ok=True)
    name = (f"{base}-{args.acquisition}" + {None: "", True: "-tr", False: "-global"}[args.trust_region]
            + (f"-{SUFFIX}" if learns else ""))
    minimum = fn.minimum
    from tqdm.auto import tqdm

    bar = tqdm(total=args.evals * args.seeds, desc=f"bo {fn.name}", disable=args.quiet,
               initial=args.evals * len(done))
    frames = dict(done)
    prog = "banditkit bo"
    try:
        with _stop_between_evaluations(prog) as flag:

            def after_each(opt, x, y):
                bar.update()
                if flag["stop"]:
                    raise KeyboardInterrupt  # optimize saves the checkpoint (a safe point) and re-raises

            for seed in range(args.seeds):
                if seed in done:
                    continue
                ck = os.path.join(state_dir, f"seed{seed}.bk")
                res = optimize(fn.value, [(0.0, 1.0)] * fn.dim, n_evals=args.evals, surrogate=surrogate,
                               acquisition=args.acquisition, direction="minimize", seed=seed,
                               callback=after_each, checkpoint=ck, save_every=args.save_every,
                               features=features, n_candidates=args.candidates, maximizer=args.maximizer,
                               trust_region=args.trust_region, surrogate_kwargs=kwargs, **noise)
                h = res.history
                frame = pd.DataFrame(dict(agent=name, seed=seed, step=h.trial + 1, y=h.y, best_y=h.best_y,
                                          simple_regret=h.best_y - minimum))
                frame.to_csv(csv, mode="a", header=not os.path.exists(csv) or os.path.getsize(csv) == 0,
                             index=False)  # finished seeds are kept whatever happens next
                os.remove(ck)
                frames[seed] = frame
                bar.n = args.evals * len(frames)
                bar.refresh()
    except KeyboardInterrupt:
        bar.close()
        kept = f"finished seeds ({', '.join(map(str, sorted(frames)))}) are in {csv}; " if frames else ""
        print(f"{prog}: interrupted; {kept}the seed in progress is saved in {state_dir}/ (after its last evaluation, "
              "or up to --save-every s earlier after a second Ctrl-C). Run the same command with --resume to "
              "continue", file=sys.stderr)
        return 130
    bar.close()
    if not os.listdir(state_dir):
        os.rmdir(state_dir)
    df = pd.concat([frames[s] for s in sorted(frames)], ignore_index=True)
    if not args.quiet:
        print(
            f"{fn.name} (dim {fn.dim}, minimum {minimum:.6g}): {name}, {args.seeds} seed(s) x {args.evals} evals; "
            f"final simple regret {np.mean(df.groupby('seed').simple_regret.last()):.4g}\n"
        )
    _report(df, out, "bo", args.quiet, bo=True)
    return 0


def cmd_data(args) -> int:
    from banditkit.datasets.__main__ import main as data_main

    argv = [args.action]
    if args.action == "fetch":
        argv += list(args.names) + (["--force"] if args.force else []) + (["--quiet"] if args.quiet else [])
    elif args.names:
        raise CLIError("banditkit data list: error: list takes no dataset names")
    return data_main(argv)


# parser -------------------------------------------------------------------------------------------------------------
def _checked(cast, ok, want: str):
    """An argparse ``type``: ``cast(text)``, refused with "expected WANT" when it fails or ``ok(value)`` is false."""

    def parse(text: str):
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"expected {want}, got {v}")
        return v

    return parse


_positive = _checked(int, lambda v: v >= 1, "a positive integer")
_seconds = _checked(float, lambda v: v >= 0, "a number of seconds >= 0")
_variance = _checked(float, lambda v: 0 < v < float("inf"), "a finite variance > 0 (e.g. 0.01)")


def _noise_args(p: argparse.ArgumentParser, default: float, units: str) -> None:
    from banditkit.posteriors.noise import SUPPORTED

    p.add_argument("--obs-noise", type=_variance, default=None, metavar="VARIANCE",
                   help=f"variance of the Gaussian reward likelihood, {units} (default {default:g}); with "
                   "--adaptive-noise its starting value")
    p.add_argument("--adaptive-noise", action="store_true",
                   help="learn the observation variance online (variational Bayes, bk.posteriors.adaptive_noise) "
                   f"instead of keeping it fixed; for the backends {', '.join(SUPPORTED)}")


def _set_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", type=_setting, metavar="KEY=VALUE",
                   help="a posterior hyper-parameter, repeatable: --set rank=20 --set dynamics_cov=0.01 --set "
                   "dynamics_mode=gain (run / compare: each agent whose backend takes the key; bo: the surrogate; "
                   "see help(bk.posteriors.NAME))")


def _common(p: argparse.ArgumentParser, steps: int, seeds: int, out: str) -> None:
    p.add_argument("--steps", type=_positive, default=steps, help=f"rounds per seed (default {steps})")
    p.add_argument("--seeds", type=_positive, default=seeds, help=f"number of seeds 0..n-1 (default {seeds})")
    p.add_argument("--out", default=out, help=f"output folder (default {out})")
    p.add_argument("--resume", action="store_true",
                   help="continue the run saved in --out (same options): finished agents are kept, the agent in "
                   "progress goes on from its last checkpoint with exactly the actions of an unstopped run")
    p.add_argument("--save-every", type=_seconds, default=60.0, metavar="SECONDS",
                   help="checkpoint the agent in progress (all seeds) to --out at most this often (default 60; 0: "
                   "after every chunk)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="banditkit",
        description="Contextual bandits and Bayesian optimisation with online Kalman-style neural posteriors.",
    )
    from banditkit import __version__

    p.add_argument("--version", action="version", version=f"banditkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    d = sub.add_parser(
        "demo",
        help="regret comparison of five agents on the shipped real Mushroom data",
        description="HiLoFi-TS, LoFi-TS, neural-linear-TS, linear-TS and eps-greedy on real data "
        "(UCI Mushroom, committed under data/): prints the summary and saves CSV, Markdown, PNG.",
    )
    d.add_argument("--env", default="mushroom", help="environment (default mushroom; shuttle, adult also offline)")
    d.add_argument(
        "--agents", default=None, help=f"subset of the demo agents, comma-separated ({', '.join(DEMO_AGENTS)})"
    )
    _common(d, steps=1500, seeds=3, out=os.path.join("results", "demo"))
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser(
        "run",
        help="one agent on one environment",
        description="Run one agent (posterior + policy) on an environment for --steps rounds and --seeds seeds.",
    )
    r.add_argument("--env", required=True, help="environment: mnist, mushroom, shuttle, adult, wheel, ...")
    r.add_argument(
        "--agent",
        required=True,
        help="posterior backend (hilofi, lofi, neural_linear, linear, ...), a full spec 'hilofi-ucb', or eps_greedy",
    )
    r.add_argument("--policy", default="thompson", help="thompson, ucb, greedy, epsilon_greedy (default thompson)")
    _set_arg(r)
    _noise_args(r, 0.1, "of the reward scaled to max |expected reward| = 1")
    _common(r, steps=2000, seeds=1, out="results")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser(
        "compare",
        help="several agents on one environment",
        description="Compare agents on the same environment and seeds.",
    )
    c.add_argument("--env", required=True, help="environment: mnist, mushroom, shuttle, adult, wheel, ...")
    c.add_argument("--agents", required=True,
                   help="comma-separated: hilofi,lofi,neural_linear,eps_greedy (a name ending in -adaptive_noise "
                   "learns its observation variance: hilofi,hilofi-adaptive_noise)")
    c.add_argument("--policy", default="thompson", help="policy for names without one (default thompson)")
    _set_arg(c)
    _noise_args(c, 0.1, "of the reward scaled to max |expected reward| = 1")
    _common(c, steps=2000, seeds=5, out="results")
    c.set_defaults(func=cmd_compare)

    b = sub.add_parser(
        "bo",
        help="Bayesian optimisation of a test function",
        description="Minimise a test function on its box with BayesOpt, several seeds; writes "
        "bo.csv (agent, seed, step, y, best_y, simple_regret), bo_summary.md, bo_simple_regret.png.",
    )
    b.add_argument("--function", default="branin", help="branin, hartmann6, ackley, drawnn (default branin)")
    b.add_argument("--dim", type=_positive, default=None, help="dimension for ackley / drawnn")
    b.add_argument("--surrogate", default="hilofi",
                   help="posterior backend of the surrogate (default hilofi), or gp; a name ending in -adaptive_noise "
                   "(hilofi-adaptive_noise) learns its observation variance, as --adaptive-noise does")
    b.add_argument("--acquisition", default="thompson", choices=["thompson", "ei", "pi", "ucb"])
    b.add_argument("--evals", type=_positive, default=40, help="evaluations per seed (default 40)")
    b.add_argument("--seeds", type=_positive, default=3, help="number of seeds (default 3)")
    b.add_argument("--features", default="180,180,180", help="hidden widths of the surrogate MLP (default 180,180,180)")
    b.add_argument("--rank", type=_positive, default=None, help="rank of low-rank surrogates (default 50)")
    b.add_argument("--candidates", type=_positive, default=1024, help="Sobol candidates per ask (default 1024)")
    _set_arg(b)
    _noise_args(b, 1e-2, "of the standardised objective")
    b.add_argument("--maximizer", default=None, choices=["ascent", "lbfgs"],
                   help="refinement of the best candidates: short projected gradient ascent or L-BFGS-B on the log "
                   "acquisition (default: ascent for thompson with a network, lbfgs otherwise)")
    b.add_argument("--trust-region", action=argparse.BooleanOptionalAction, default=None,
                   help="search only a TuRBO-style box around the best point, resized by success / failure, or "
                   "(--no-trust-region) the whole box (default: on for thompson and the gp surrogate)")
    b.add_argument("--space", default=None, metavar="FILE",
                   help="a typed search space (JSON, or YAML as .yaml / .yml): {name: {type: float|int|categorical, "
                   "low, high, log, step | choices}}; with --objective instead of --function")
    b.add_argument("--objective", default=None, metavar="MODULE:FUNCTION",
                   help="with --space: the function to optimise, called with a dict of the space's typed values and "
                   "returning a number (MODULE importable from the current folder)")
    b.add_argument("--direction", default="minimize", choices=["minimize", "maximize"],
                   help="with --objective: minimise (default) or maximise it (test functions are always minimised)")
    b.add_argument("--out", default="results", help="output folder (default results)")
    b.add_argument("--resume", action="store_true",
                   help="continue the run saved in --out (same options; --seeds may grow): finished seeds are kept "
                   "from bo.csv, an interrupted seed resumes from its checkpoint exactly where it stopped")
    b.add_argument("--save-every", type=_seconds, default=10.0, metavar="SECONDS",
                   help="checkpoint the seed in progress to --out/bo_state/ at most this often (default 10; 0: after "
                   "every evaluation); Ctrl-C stops after the current evaluation and saves it")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.set_defaults(func=cmd_bo)

    dt = sub.add_parser(
        "data", help="fetch or list datasets", description="banditkit data fetch [NAME ...] | banditkit data list"
    )
    dt.add_argument("action", choices=["fetch", "list"], help="fetch: download + verify into the cache; list")
    dt.add_argument("names", nargs="*", help="dataset names (fetch; default: every fetchable one)")
    dt.add_argument("--force", action="store_true", help="re-download even if cached")
    dt.add_argument("--quiet", action="store_true", help="no progress lines")
    dt.set_defaults(func=cmd_data)

    from banditkit.offline.commands import register as register_offline

    register_offline(sub)  # evaluate, warmstart (logged data; their logic lives in banditkit/offline/commands.py)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``banditkit`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "banditkit"
    try:
        args = build_parser().parse_args(argv)
        prog = f"banditkit {args.command}"
        from banditkit import threads

        threads.limit_blas_threads()  # one BLAS thread: the LAPACK calls inside jitted steps (banditkit/threads.py)
        return int(args.func(args) or 0)
    except CLIError as e:
        msg = str(e)
        print(msg if msg.startswith("banditkit") else f"{prog}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; finished chunks/seeds are in the CSV under --out", file=sys.stderr)
        return 130
    except (ValueError, TypeError, KeyError, FileNotFoundError, RuntimeError, OSError, ImportError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
