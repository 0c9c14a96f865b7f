"""The logic of ``banditkit evaluate`` and ``banditkit warmstart`` (the ``banditkit.cli`` package only registers
them: :func:`register`).

``banditkit evaluate --log FILE --agents SPEC,SPEC,... [--out DIR]``::

    log = read the Parquet (or CSV) log;  train, test = the first --train-fraction of its rows, the rest
    each agent:    built for the log's arms and context shape (make_agent), warm-started on train, then frozen;
                   its action probabilities on the test contexts are the target policy
    reward model:  --reward-model (default linear) warm-started on train, its posterior-mean rewards on test
                   (with --train-fraction 0: cross-fitted over --folds on the log itself)
    table:         DM, IPS, SNIPS, DR, SNDR, Switch-DR of every agent on test (those the log allows), with
                   intervals, and the logging policy's own mean reward on test

and writes ``evaluate.csv``, ``evaluate.md`` (printed) and ``evaluate.png`` into ``--out``.

``banditkit warmstart --log FILE --agent SPEC [--out DIR]`` warm-starts one agent on the whole log and saves it as
a :class:`~banditkit.offline.serving.ServingAgent` checkpoint (``<out>/<spec>.bk``), ready to serve from.
"""

from __future__ import annotations

import argparse
import os
import re

import jax

from banditkit.offline.checks import LogError
from banditkit.offline.estimators import ESTIMATORS
from banditkit.offline.evaluate import evaluate, to_markdown
from banditkit.offline.log import LoggedFeedback, load
from banditkit.offline.report import write_report
from banditkit.offline.reward_model import agent_for_log, reward_predictions
from banditkit.offline.warmstart import warm_start


def read_log(path: str, num_actions: int | None = None) -> LoggedFeedback:
    """The log at ``path``; a :class:`LogError` becomes a one-line ``ValueError`` (the CLI prints one line)."""
    try:
        return load(path, num_actions)
    except LogError as e:
        raise ValueError(f"{path}: invalid bandit log: " + "; ".join(e.problems)) from e


def _specs(text: str) -> list[str]:
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        raise ValueError("--agents needs at least one agent spec, e.g. linear-greedy,hilofi-thompson")
    return specs


def run_evaluate(
    log_path: str,
    agents: list[str],
    *,
    out: str = os.path.join("results", "evaluate"),
    num_actions: int | None = None,
    train_fraction: float = 0.5,
    reward_model: str | None = "linear",
    estimators: list[str] | None = None,
    interval: str = "normal",
    alpha: float = 0.05,
    folds: int = 2,
    num_draws: int = 256,
    weighting: str | None = None,
    seed: int = 0,
):
    """``(table, paths)``: the module docstring's ``evaluate`` pipeline."""
    log = read_log(log_path, num_actions)
    if not 0.0 <= train_fraction < 1.0:
        raise ValueError(f"--train-fraction must be in [0, 1), got {train_fraction}")
    train, test = log.split(train_fraction) if train_fraction > 0 else (None, log)
    key = jax.random.PRNGKey(seed)
    policies = {}
    for i, spec in enumerate(agents):
        agent = agent_for_log(spec, log)
        k = jax.random.fold_in(key, i)
        if train is not None:
            state = warm_start(agent, train, k, weighting=weighting, seed=seed)
        else:
            state = agent.init(k, log.contexts[0])
        policies[spec] = (agent, state)
    q_hat = None
    if reward_model is not None:
        rm = agent_for_log(reward_model, log)
        k = jax.random.fold_in(key, len(agents))
        if train is not None:
            q_hat = reward_predictions((rm, warm_start(rm, train, k)), test)
        else:
            q_hat = reward_predictions(rm, test, k, folds=folds)
    table = evaluate(test, policies, reward_model=q_hat, estimators=estimators, alpha=alpha, interval=interval,
                     num_draws=num_draws, key=jax.random.fold_in(key, 10_000), seed=seed)
    table.attrs.update(reward_model=reward_model, train_rows=0 if train is None else len(train), test_rows=len(test),
                       log=os.fspath(log_path))
    return table, write_report(table, out, "evaluate")


def run_warmstart(log_path: str, spec: str, *, out: str = "results", num_actions: int | None = None,
                  weighting: str | None = None, seed: int = 0) -> str:
    """Warm-start ``spec`` on the whole log and save it as a serving checkpoint; returns the file written."""
    from banditkit.offline.serving import ServingAgent

    log = read_log(log_path, num_actions)
    serving = ServingAgent.from_log(spec, log, seed=seed, weighting=weighting)
    os.makedirs(out, exist_ok=True)
    return serving.save(os.path.join(out, re.sub(r"[^A-Za-z0-9_.-]+", "_", spec) + ".bk"))


# ------------------------------------------------------------------------------------------------ argparse
def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}") from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text}")
    return v


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", required=True, help="the logged feedback: a Parquet (or CSV) file with columns x0.. (or "
                   "a{k}_x{j}), action, reward and propensity (see help(banditkit.offline.log))")
    p.add_argument("--num-actions", type=int, default=None, help="number of arms K (default: from the file)")
    p.add_argument("--weighting", choices=["resample"], default=None,
                   help="warm-start on an importance-resampled log (rows drawn with probability ∝ 1/propensity)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed (agent initialisation, Monte-Carlo draws)")
    p.add_argument("--quiet", action="store_true", help="print less")


def register(sub) -> None:
    """Add the ``evaluate`` and ``warmstart`` sub-commands to ``banditkit``'s sub-parsers."""
    e = sub.add_parser(
        "evaluate",
        help="off-policy evaluation of agents on a logged-feedback file",
        description="Warm-start each agent on the first --train-fraction of the log, then estimate its value on "
        "the rest (DM, IPS, SNIPS, DR, SNDR, Switch-DR with intervals) next to the logging policy's; writes "
        "evaluate.csv, evaluate.md and evaluate.png into --out.",
    )
    _common(e)
    e.add_argument("--agents", required=True, help="comma-separated agent specs: linear-greedy,hilofi-thompson,...")
    e.add_argument("--train-fraction", type=_fraction, default=0.5,
                   help="share of the log (its first rows) the agents and the reward model learn from (default "
                   "0.5; 0: agents at their prior, the reward model cross-fitted on the log)")
    e.add_argument("--reward-model", default="linear",
                   help="agent spec of the reward model for DM / DR (default linear; 'none': IPS and SNIPS only)")
    e.add_argument("--estimators", default=None, help=f"comma-separated subset of {', '.join(ESTIMATORS)}")
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
    reward_model = None if str(args.reward_model).lower() == "none" else args.reward_model
    estimators = [s.strip() for s in args.estimators.split(",")] if args.estimators else None
    table, paths = run_evaluate(
        args.log, _specs(args.agents), out=args.out, num_actions=args.num_actions,
        train_fraction=args.train_fraction, reward_model=reward_model, estimators=estimators,
        interval=args.interval, alpha=args.alpha, folds=args.folds, num_draws=args.draws,
        weighting=args.weighting, seed=args.seed,
    )
    print(to_markdown(table))
    if not args.quiet:
        print(f"\ntrained on {table.attrs['train_rows']} rows, evaluated on {table.attrs['test_rows']}; wrote "
              f"{paths['csv']}, {paths['md']}, {paths['png']}")
    return 0


def cmd_warmstart(args) -> int:
    path = run_warmstart(args.log, args.agent, out=args.out, num_actions=args.num_actions, weighting=args.weighting,
                         seed=args.seed)
    print(f"wrote {path}" if not args.quiet else path)
    return 0
