"""The logic of ``banditkit evaluate`` and ``banditkit warmstart`` (their argument parsing lives in
:mod:`banditkit.cli.offline`).

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

import os
import re

import jax

from banditkit.offline.checks import LogError
from banditkit.offline.evaluate import evaluate
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
