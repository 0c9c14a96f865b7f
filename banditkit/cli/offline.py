"""``banditkit evaluate`` and ``banditkit warmstart``: argument parsing for off-policy evaluation and warm starts
from a log; the work is done by :mod:`banditkit.offline.commands` (``run_evaluate`` / ``run_warmstart``)."""

from __future__ import annotations

import argparse
import os
import sys
import time

# the names of banditkit.offline.estimators.ESTIMATORS, written out so that --help imports nothing heavy
ESTIMATOR_NAMES = "dm, ips, snips, dr, sndr, switch_dr"


def _spec(text: str) -> str:
    """``text`` checked as an agent spec (:class:`~banditkit.agents.AgentSpec`, parsed before any work: a bad one is
    a one-line error naming the valid names), returned as the label its rows and files are named by."""
    from banditkit.cli.bandit import agent_spec

    return agent_spec(text.strip(), None).label


def _specs(text: str) -> list[str]:
    """The comma-separated agent specs of ``--agents``, each checked by :func:`_spec`."""
    specs = [_spec(s) for s in text.split(",") if s.strip()]
    if not specs:
        raise ValueError("--agents needs at least one agent spec, e.g. linear-greedy,hilofi-thompson")
    return specs


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}") from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text}")
    return v


def _progress(args):
    """``None`` with ``--quiet``, else a function printing one progress line to stderr with the seconds so far."""
    if args.quiet:
        return None
    start = time.perf_counter()

    def say(line: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s] {line}", file=sys.stderr, flush=True)

    return say


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", required=True, help="the logged feedback: a Parquet (or CSV) file with columns x0.. (or "
                   "a{k}_x{j}), action, reward and propensity (see help(banditkit.offline.log)), or the SQLite store "
                   "of banditkit serve (detected by content; see help(banditkit.offline.store))")
    p.add_argument("--num-actions", type=int, default=None, help="number of arms K (default: from the file)")
    p.add_argument("--weighting", choices=["resample"], default=None,
                   help="warm-start on an importance-resampled log (rows drawn with probability ∝ 1/propensity)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed (agent initialisation, Monte-Carlo draws)")
    p.add_argument("--quiet", action="store_true", help="print less")


def register(sub) -> None:
    """Add the ``evaluate`` and ``warmstart`` sub-commands to ``banditkit``'s sub-parsers."""
    e = sub.add_parser(
        "evaluate",
        help="off-policy evaluation of agents or your own policy on a log or a banditkit serve store",
        description="Warm-start each agent on the first --train-fraction of the log, then estimate its value on "
        "the rest (DM, IPS, SNIPS, DR, SNDR, Switch-DR with intervals) next to the logging policy's and uniform's, "
        "with --policy files (your own targets) evaluated alongside; then the counterfactual report: each "
        "target's value minus the logged policy's and minus uniform's, with intervals.  Writes evaluate.csv, "
        "evaluate.md and evaluate.png into --out.",
    )
    _common(e)
    e.add_argument("--agents", default=None,
                   help="comma-separated agent specs: linear-greedy,hilofi-thompson,... (what would they have earned?)")
    e.add_argument("--policy", action="append", default=None, metavar="FILE",
                   help="your own target policy: a CSV / Parquet / JSON-lines file with an 'action' column or p_<arm> "
                   "probability columns, one row per event (keyed by event_id for a store, by row for a plain log); "
                   "repeatable (see help(banditkit.offline.policy_file))")
    e.add_argument("--train-fraction", type=_fraction, default=None,
                   help="share of the log (its first rows) the agents and the reward model learn from (default "
                   "0.5 with --agents, 0 with only --policy; 0: agents at their prior, the reward model cross-fitted "
                   "on the log)")
    e.add_argument("--reward-model", default="linear",
                   help="agent spec of the reward model for DM / DR (default linear; 'none': IPS and SNIPS only)")
    e.add_argument("--estimators", default=None, help=f"comma-separated subset of {ESTIMATOR_NAMES}")
    e.add_argument("--interval", choices=["normal", "bootstrap"], default="normal", help="interval kind")
    e.add_argument("--alpha", type=float, default=0.05, help="1 - confidence level of the intervals (default 0.05)")
    e.add_argument("--folds", type=int, default=2, help="cross-fitting folds with --train-fraction 0 (default 2)")
    e.add_argument("--draws", type=int, default=256,
                   help="Monte-Carlo draws for the action probabilities of Thompson-sampling agents (default 256)")
    e.add_argument("--out", default=os.path.join("results", "evaluate"), help="output folder")
    e.set_defaults(func=cmd_evaluate)

    w = sub.add_parser(
        "warmstart",
        help="start an agent from a logged-feedback file and save it for serving",
        description="One pass of the agent's observe over the whole log; the state is saved (atomically) as "
        "<out>/<agent>.bk, which bk.offline.ServingAgent.load reads.",
    )
    _common(w)
    w.add_argument("--agent", required=True, help="agent spec, e.g. hilofi-thompson")
    w.add_argument("--out", default="results", help="output folder (default results)")
    w.set_defaults(func=cmd_warmstart)


def cmd_evaluate(args) -> int:
    from banditkit.offline.commands import run_evaluate

    if args.agents is None and not args.policy:
        raise ValueError("nothing to evaluate: give --agents SPEC,... and/or --policy FILE")
    agents = _specs(args.agents) if args.agents is not None else []  # every spec checked before any work
    reward_model = None if str(args.reward_model).lower() == "none" else _spec(args.reward_model)
    estimators = [s.strip() for s in args.estimators.split(",")] if args.estimators else None
    table, _, paths, _ = run_evaluate(
        args.log, agents, policies=args.policy, out=args.out,
        num_actions=args.num_actions,
        train_fraction=args.train_fraction, reward_model=reward_model, estimators=estimators,
        interval=args.interval, alpha=args.alpha, folds=args.folds, num_draws=args.draws,
        weighting=args.weighting, seed=args.seed, progress=_progress(args),
    )
    with open(paths["md"]) as fh:
        print(fh.read().rstrip())
    if not args.quiet:
        print(f"\ntrained on {table.attrs['train_rows']} rows, evaluated on {table.attrs['test_rows']}; wrote "
              f"{', '.join(paths.values())}")
    return 0


def cmd_warmstart(args) -> int:
    from banditkit.offline.commands import run_warmstart

    path = run_warmstart(args.log, _spec(args.agent), out=args.out, num_actions=args.num_actions,
                         weighting=args.weighting, seed=args.seed, progress=_progress(args))
    print(f"wrote {path}" if not args.quiet else path)
    return 0
