"""The logic of ``banditkit evaluate`` and ``banditkit warmstart`` (their argument parsing lives in
:mod:`banditkit.cli.offline`).

``banditkit evaluate --log PATH [--agents SPEC,SPEC,...] [--policy FILE ...] [--out DIR]``::

    log = the Parquet / CSV log, or a decision service's store (an SQLite file, detected by content:
          banditkit.offline.store; events without a reward are left out and counted)
    train, test = the first --train-fraction of its rows, the rest (default 0.5 with --agents; 0 with only --policy:
                  nothing to train, every row evaluated)
    each agent:    built for the log's arms and context shape (make_agent), warm-started on train, then frozen;
                   its action probabilities on the test contexts are the target policy
    each --policy: a user's own target from a file of actions or probabilities per event (banditkit.offline.policy_file;
                   by event_id for a store, by row for a plain log), restricted to the test rows
    uniform:       always added as a target: uniform over each row's available arms
    reward model:  --reward-model (default linear) warm-started on train, its posterior-mean rewards on test
                   (with --train-fraction 0: cross-fitted over --folds on the log itself)
    table:         DM, IPS, SNIPS, DR, SNDR, Switch-DR of every target on test (those the log allows), with
                   intervals, and the logging policy's own mean reward on test
    counterfactual: per target, its value, minus the logged policy's, minus uniform's, each with an interval
                   (banditkit.offline.counterfactual: DR, else IPS, else DM)

and writes ``evaluate.csv`` (with the counterfactual columns), ``evaluate.md`` (both tables; printed) and
``evaluate.png`` into ``--out``.

``banditkit warmstart --log FILE --agent SPEC [--out DIR]`` warm-starts one agent on the whole log and saves it as
a :class:`~banditkit.offline.serving.ServingAgent` checkpoint (``<out>/<spec>.bk``), ready to serve from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np
import pandas as pd

from banditkit.offline import counterfactual as cf
from banditkit.offline import store
from banditkit.offline.checks import LogError
from banditkit.offline.evaluate import evaluate
from banditkit.offline.frozen import agent_probabilities
from banditkit.offline.log import LoggedFeedback, load
from banditkit.offline.policy_file import policy_probabilities
from banditkit.offline.report import write_report
from banditkit.offline.reward_model import agent_for_log, reward_predictions
from banditkit.offline.targets import uniform_probabilities
from banditkit.offline.warmstart import warm_start
from banditkit.policies.propensity import is_exact


class Evaluation(NamedTuple):
    """What :func:`run_evaluate` made: the OPE ``table``, the ``counterfactual`` report (``None`` when
    ``estimators`` left out DR, IPS and DM), the files written
    (``paths``), and the :class:`~banditkit.offline.store.StoreInfo` of a store log (``None`` for a plain log)."""

    table: pd.DataFrame
    counterfactual: pd.DataFrame | None
    paths: dict
    store: store.StoreInfo | None


def read_log(path: str, num_actions: int | None = None) -> tuple[LoggedFeedback, store.StoreInfo | None]:
    """``(log, store info or None)`` from ``path``; a :class:`LogError` becomes a one-line ``ValueError`` (the CLI
    prints one line)."""
    try:
        if store.is_store(path):
            return store.read_store(path, num_actions)
        return load(path, num_actions), None
    except LogError as e:
        raise ValueError(f"{path}: invalid bandit log: " + "; ".join(e.problems)) from e


def _names(paths: list[str], taken: set[str]) -> list[str]:
    out = []
    for p in paths:
        base = os.path.splitext(os.path.basename(p))[0] or "policy"
        name, i = base, 2
        while name in taken:
            name, i = f"{base}-{i}", i + 1
        taken.add(name)
        out.append(name)
    return out


def run_evaluate(
    log_path: str,
    agents: list[str] | None = None,
    *,
    policies: list[str] | None = None,
    out: str = os.path.join("results", "evaluate"),
    num_actions: int | None = None,
    train_fraction: float | None = None,
    reward_model: str | None = "linear",
    estimators: list[str] | None = None,
    interval: str = "normal",
    alpha: float = 0.05,
    folds: int = 2,
    num_draws: int = 256,
    weighting: str | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> Evaluation:
    """The module docstring's ``evaluate`` pipeline.  ``progress``: called with one line per stage (the command
    line prints them to stderr)."""
    say = progress or (lambda line: None)
    agents, policies = list(agents or []), list(policies or [])
    if not agents and not policies:
        raise ValueError("nothing to evaluate: give --agents SPEC,... and/or --policy FILE")
    log, info = read_log(log_path, num_actions)
    say(f"read {len(log)} rows, {log.num_actions} arms from {log_path}")
    if train_fraction is None:
        train_fraction = 0.5 if agents else 0.0
    if not 0.0 <= train_fraction < 1.0:
        raise ValueError(f"--train-fraction must be in [0, 1), got {train_fraction}")
    cut = int(np.floor(train_fraction * len(log)))
    if train_fraction > 0 and not 0 < cut < len(log):
        raise ValueError(f"--train-fraction {train_fraction} of a {len(log)}-row log leaves one side empty")
    train = log.subset(np.arange(cut)) if cut else None
    test = log.subset(np.arange(cut, len(log))) if cut else log
    key = jax.random.PRNGKey(seed)
    draws_key = jax.random.fold_in(key, 10_000)
    targets: dict[str, np.ndarray] = {}
    exact: dict[str, object] = {}
    for i, spec in enumerate(agents):
        say(f"agent {i + 1}/{len(agents)} {spec}: " + (f"warm start on {len(train)} rows, then " if train is not None
                                                        else "") + f"its action probabilities on {len(test)} rows")
        agent = agent_for_log(spec, log)
        k = jax.random.fold_in(key, i)
        state = warm_start(agent, train, k, weighting=weighting, seed=seed) if train is not None \
            else agent.init(k, log.contexts[0])
        targets[spec] = agent_probabilities(agent, state, test.contexts, draws_key, available=test.available,
                                            num_draws=num_draws)
        exact[spec] = True if is_exact(agent.policy) else f"monte-carlo ({num_draws} draws)"
    ids = None if info is None else info.action_ids
    for name, path in zip(_names(policies, set(targets) | {cf.LOGGED, cf.UNIFORM}), policies, strict=True):
        targets[name] = policy_probabilities(path, log, ids)[cut:]
    targets[cf.UNIFORM] = uniform_probabilities(test)
    q_hat = None
    if reward_model is not None:
        say(f"reward model {reward_model}: " + (f"fit on {len(train)} rows" if train is not None
                                               else f"cross-fitted ({folds} folds)"))
        rm = agent_for_log(reward_model, log)
        k = jax.random.fold_in(key, len(agents))
        if train is not None:
            q_hat = reward_predictions((rm, warm_start(rm, train, k)), test)
        else:
            q_hat = reward_predictions(rm, test, k, folds=folds)
    say(f"estimating {len(targets)} targets' values on {len(test)} rows")
    table = evaluate(test, targets, reward_model=q_hat, estimators=estimators, alpha=alpha, interval=interval,
                     seed=seed)
    table.attrs.update(reward_model=reward_model, train_rows=0 if train is None else len(train), test_rows=len(test),
                       log=os.fspath(log_path), exact_probabilities=exact,
                       reward_model_fit=None if reward_model is None else
                       f"fitted on the first {cut} rows" if train is not None else f"cross-fitted ({folds} folds)")
    try:
        report = cf.report(table)
    except ValueError as e:  # --estimators left out every plain-mean estimator: the table alone
        report, note = None, f"No counterfactual report: {e}."
    else:
        note = None
    paths = write_report(table, out, "evaluate", extra_markdown=_report_markdown(report, info, note))
    return Evaluation(table, report, paths, info)


def _report_markdown(report: pd.DataFrame | None, info, note: str | None) -> str:
    if report is None:
        return note + ("" if info is None else f"\n\n{info.summary()}")
    head = "What each target would have earned on the traffic the logged policy served"
    if info is not None:
        head += f" (served by {', '.join(info.specs)})"
    return (f"{head}; estimator {report.attrs['estimator']}, differences paired by row:\n\n" + cf.to_markdown(report)
            + ("" if info is None else f"\n\n{info.summary()}"))


def run_warmstart(log_path: str, spec: str, *, out: str = "results", num_actions: int | None = None,
                  weighting: str | None = None, seed: int = 0, progress: Callable[[str], None] | None = None) -> str:
    """Warm-start ``spec`` on the whole log and save it as a serving checkpoint; returns the file written.
    ``progress``: called with one line per stage."""
    from banditkit.offline.serving import ServingAgent

    say = progress or (lambda line: None)
    log, _ = read_log(log_path, num_actions)
    say(f"read {len(log)} rows, {log.num_actions} arms from {log_path}; warm-starting {spec} on them")
    serving = ServingAgent.from_log(spec, log, seed=seed, weighting=weighting)
    os.makedirs(out, exist_ok=True)
    return serving.save(os.path.join(out, re.sub(r"[^A-Za-z0-9_.-]+", "_", spec) + ".bk"))
