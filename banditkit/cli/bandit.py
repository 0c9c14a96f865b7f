"""``banditkit demo | run | compare``: bandit agents on an environment, several seeds, into a resumable results folder
(:class:`~banditkit.experiments.results_folder.ResultsFolder`: ``<cmd>.csv``, ``<cmd>_run.json``, ``<cmd>_state/``,
plus ``<cmd>_timing.json``: each finished agent's compile and run times, for the summary of a resumed run)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from banditkit.cli import args as cli_args
from banditkit.cli.errors import CLIError
from banditkit.cli.folder import results_folder
from banditkit.cli.report import report

DEMO_AGENTS = {
    "HiLoFi-TS": "hilofi-thompson",
    "LoFi-TS": "lofi-thompson",
    "neural-linear-TS": "neural_linear-thompson",
    "linear-TS": "linear-thompson",
    "eps-greedy": "replay_sgd-epsilon_greedy",
}


def env_id(name: str) -> str:
    """The registered environment id for a short name (``mushroom`` -> ``banditkit/Mushroom-v0``)."""
    from banditkit.environments import ENV_IDS

    if name in ENV_IDS:
        return name
    key = name.strip().lower().replace("_", "").replace("-", "")
    for eid in ENV_IDS:
        short = eid.split("/", 1)[1].rsplit("-v", 1)[0].lower()
        if key in (short, short + "v0"):
            return eid
    names = ", ".join(i.split("/", 1)[1].rsplit("-v", 1)[0].lower() for i in ENV_IDS)
    raise CLIError(f"unknown environment {name!r}; choose one of: {names}")


def agent_spec(text: str, policy: str | None = "thompson"):
    """The :class:`~banditkit.agents.AgentSpec` of ``text``, parsed once, with ``policy`` for a name without one
    (``hilofi`` -> ``hilofi-thompson``; its label keeps the user's words, ``-adaptive_noise`` last; ``None``: Thompson
    sampling, the label the user's words as written); a bad spec is a one-line :class:`CLIError` naming the valid
    names."""
    from banditkit.agents.spec import AgentSpec

    try:
        return AgentSpec.parse(text, policy=policy)
    except ValueError as e:
        raise CLIError(str(e)) from None


def learns_noise(spec) -> bool:
    """Whether ``spec``'s backend can learn its Gaussian observation variance online (``--adaptive-noise``)."""
    return spec.posterior in cli_args.noise_learners()


def settings_by_agent(agents: dict, sets: dict) -> dict[str, dict]:
    """Each agent's share of ``--set`` (``agents``: ``{label: AgentSpec}``): the hyper-parameters its posterior
    backend takes (:func:`banditkit.agents.bandit.backend_settings`).  A key that no agent's backend takes is an error
    naming what they do take (checked before anything runs)."""
    from banditkit.agents.bandit import backend_settings

    taken: dict[str, dict] = {}
    names: dict[str, frozenset] = {}
    for label, s in agents.items():
        keys = backend_settings(s.posterior)
        names[s.posterior] = keys if keys is not None else frozenset(["any"])
        taken[label] = {k: v for k, v in sets.items() if keys is None or k in keys}
    unused = [k for k in sets if not any(k in t for t in taken.values())]
    if unused:
        known = "; ".join(f"{post}: {', '.join(sorted(ks))}" for post, ks in names.items())
        raise CLIError(f"--set {', '.join(unused)}: no agent here takes it (their hyper-parameters: {known})")
    return taken


def with_noise(agents: dict, adaptive: bool) -> dict:
    """``agents`` (``{label: AgentSpec}``) with ``--adaptive-noise`` applied: the specs whose backend learns its noise
    this way (:func:`learns_noise`) learn it (:meth:`~banditkit.agents.AgentSpec.learning_noise`; their label ends in
    ``-adaptive_noise``), keyed by their labels.  A run where none can is an error naming those backends; two agents
    that become one (listed with and without the suffix) are an error too."""
    if not adaptive:
        return dict(agents)
    if not any(learns_noise(s) for s in agents.values()):
        from banditkit.posteriors import registry

        can = ", ".join(sorted(cli_args.noise_learners()))
        own = ", ".join(registry.names(learns_own_noise=True))
        raise CLIError(f"--adaptive-noise: none of these agents has a backend that learns its noise this way ({can}); "
                       f"{own} learn theirs already")
    specs = [s.learning_noise() if learns_noise(s) else s for s in agents.values()]
    labels = [s.label for s in specs]
    twice = sorted({b for b in labels if labels.count(b) > 1})
    if twice:
        raise CLIError(f"--adaptive-noise: {', '.join(twice)} would run twice (an agent listed both with and without "
                       "the -adaptive_noise suffix); list it once, or drop --adaptive-noise to compare the two")
    return {s.label: s for s in specs}


def run_bandit(cmd: str, agents: dict, args: argparse.Namespace) -> int:
    """Run ``agents`` (``{label: AgentSpec}``) for ``banditkit CMD``: settings checked and the agents built before
    the folder is touched, then — as the folder's one writer — a fresh start or a resume, one agent after another
    (each checkpointed in ``<cmd>_state/``), and the summary."""
    import pandas as pd

    from banditkit.agents import make_agent
    from banditkit.experiments import runner
    from banditkit.experiments.checkpoints import agent_checkpoint
    from banditkit.experiments.resolve import make_env
    from banditkit.experiments.results_folder import rows_to_resume

    env = env_id(args.env)
    sets = dict(getattr(args, "set", None) or [])
    obs_noise, adaptive = getattr(args, "obs_noise", None), bool(getattr(args, "adaptive_noise", False))
    run = dict(env=env, agents={label: s.label for label, s in agents.items()}, steps=args.steps, seeds=args.seeds,
               set=sets, obs_noise=obs_noise, adaptive_noise=adaptive)
    agents = with_noise(agents, adaptive)  # the rows say which agents learn their noise
    per_agent = settings_by_agent(agents, sets)
    env_obj = make_env(env, steps=args.steps)
    built = {}
    noise = {} if obs_noise is None else {"obs_noise": obs_noise}
    for label, s in agents.items():  # built before the folder is touched: a bad value loses nothing
        try:
            built[label] = make_agent(s, env_obj, posterior_kwargs=per_agent[label], **noise)
        except (TypeError, ValueError) as e:
            raise CLIError(f"{'--set for ' if per_agent[label] else ''}{label}: {e}") from None
    prog = f"banditkit {cmd}"
    with results_folder(args, cmd, prog, run, others=["_timing.json"],
                        absent=dict(set={}, obs_noise=None, adaptive_noise=False)) as folder:
        old = pd.DataFrame()
        timing: dict = {}
        finished: set[str] = set()
        if args.resume:
            old, finished = rows_to_resume(folder, [(label, dict(agent=label)) for label in agents],
                                           whole=args.steps * args.seeds)
            timing = folder.read_json("_timing.json") or {}
        t0 = time.perf_counter()
        frames = [old]
        try:
            for label in agents:
                if label in finished:
                    continue
                ck = agent_checkpoint(folder.state_dir, label)
                df = runner.run(env_obj, built[label], args.steps, args.seeds, name=label,
                                progress=not args.quiet, csv_path=folder.csv, checkpoint=ck,
                                save_every=args.save_every)
                frames.append(df)
                timing.update(json.loads(json.dumps(df.attrs.get("timing", {}), default=float)))
                folder.write_json("_timing.json", timing)
                os.remove(ck)
        except KeyboardInterrupt:
            print(f"{prog}: interrupted; finished chunks are in {folder.csv} and each agent's progress in "
                  f"{folder.state_dir}/ (saved at most --save-every s before). Run the same command with --resume to "
                  "continue", file=sys.stderr)
            return 130
        order = {a: i for i, a in enumerate(agents)}
        df = pd.concat([f for f in frames if len(f)], ignore_index=True)
        df = df.sort_values(["agent", "seed", "step"], key=lambda c: c.map(order) if c.name == "agent" else c,
                            kind="stable").reset_index(drop=True)
        df.attrs["timing"] = timing
        folder.write_rows(df)  # the complete frame (the chunks were appended while running)
        folder.finish()  # no checkpoint is needed any more
        if not args.quiet:
            print(
                f"{env}: {len(agents)} agent(s) x {args.seeds} seed(s) x {args.steps} steps in "
                f"{time.perf_counter() - t0:.1f} s" + "".join(f"; --set {k}={v!r}" for k, v in sets.items())
                + ("" if obs_noise is None else f"; --obs-noise {obs_noise:g}")
                + ("; the agents ending in -adaptive_noise learn the observation variance online" if adaptive else "")
                + "\n"
            )
        report(df, folder, args.quiet)
    return 0


# commands -------------------------------------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
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
    return run_bandit("demo", {label: agent_spec(text) for label, text in agents.items()}, args)


def cmd_run(args: argparse.Namespace) -> int:
    s = agent_spec(args.agent, args.policy)
    return run_bandit("run", {s.label: s}, args)


def cmd_compare(args: argparse.Namespace) -> int:
    names = [a for a in args.agents.split(",") if a.strip()]
    if not names:
        raise CLIError("banditkit compare: error: --agents needs a comma-separated list, e.g. hilofi,lofi,eps_greedy")
    specs = [agent_spec(a, args.policy) for a in names]
    return run_bandit("compare", {s.label: s for s in specs}, args)


# --obs-noise for bandit agents: what make_agent uses without it, in the units the agent observes rewards in
BANDIT_NOISE_DEFAULT = ("chosen from the data by make_agent: HiLoFi and LRKF weigh a few variances by their evidence, "
                        "other filters take a constant")
BANDIT_NOISE_UNITS = "of the reward divided by the largest |reward| observed so far"

def register(sub) -> None:
    """Add ``demo``, ``run`` and ``compare`` to ``banditkit``'s sub-parsers."""
    d = sub.add_parser(
        "demo",
        help="regret comparison of five agents on the shipped real Mushroom data",
        description="HiLoFi-TS, LoFi-TS, neural-linear-TS, linear-TS and eps-greedy on real data "
        "(UCI Mushroom, shipped in the package): prints the summary and saves CSV, Markdown, PNG.",
    )
    d.add_argument("--env", default="mushroom", help="environment (default mushroom; shuttle, adult also offline)")
    d.add_argument(
        "--agents", default=None, help=f"subset of the demo agents, comma-separated ({', '.join(DEMO_AGENTS)})"
    )
    cli_args.common(d, steps=1500, seeds=3, out=os.path.join("results", "demo"))
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser(
        "run",
        help="one agent on one environment",
        description="Run one agent (posterior + policy) on an environment for --steps rounds and --seeds seeds.",
    )
    cli_args.env_arg(r)
    r.add_argument(
        "--agent",
        required=True,
        help="posterior backend (hilofi, lofi, neural_linear, linear, ...), a full spec 'hilofi-ucb', or eps_greedy",
    )
    r.add_argument("--policy", default="thompson", help="thompson, ucb, greedy, epsilon_greedy (default thompson)")
    cli_args.set_arg(r)
    cli_args.noise_args(r, BANDIT_NOISE_DEFAULT, BANDIT_NOISE_UNITS)
    cli_args.common(r, steps=2000, seeds=1, out="results")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser(
        "compare",
        help="several agents on one environment",
        description="Compare agents on the same environment and seeds.",
    )
    cli_args.env_arg(c)
    c.add_argument("--agents", required=True,
                   help="comma-separated: hilofi,lofi,neural_linear,eps_greedy (a name ending in -adaptive_noise "
                   "learns its observation variance: hilofi,hilofi-adaptive_noise)")
    c.add_argument("--policy", default="thompson", help="policy for names without one (default thompson)")
    cli_args.set_arg(c)
    cli_args.noise_args(c, BANDIT_NOISE_DEFAULT, BANDIT_NOISE_UNITS)
    cli_args.common(c, steps=2000, seeds=5, out="results")
    c.set_defaults(func=cmd_compare)
