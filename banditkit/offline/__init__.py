"""Bandits on logged data: the log format, off-policy evaluation, and learning from logs.

::

    log = bk.offline.read_parquet("traffic.parquet")            # validated: LogError names the bad rows
    state = bk.offline.warm_start(agent, log)                    # one pass of agent.observe over the log
    table = bk.offline.evaluate(log, {"mine": (agent, state)})   # DM, IPS, SNIPS, DR, SNDR, Switch-DR + intervals

Modules: :mod:`~banditkit.offline.log` (format, Parquet), :mod:`~banditkit.offline.checks` (validation),
:mod:`~banditkit.offline.estimators` and :mod:`~banditkit.offline.intervals` (OPE), :mod:`~banditkit.offline.targets`
(target policies as probabilities), :mod:`~banditkit.offline.frozen` (a frozen agent on logged contexts),
:mod:`~banditkit.offline.reward_model` (q̂ for DM / DR), :mod:`~banditkit.offline.warmstart` (learning from logs),
:mod:`~banditkit.offline.evaluate` (the table), :mod:`~banditkit.offline.report` (its files),
:mod:`~banditkit.offline.serving` (an agent behind a service), :mod:`~banditkit.offline.simulate` (logs from the
simulators, with the truth), :mod:`~banditkit.offline.store` (the decision service's SQLite store as a log),
:mod:`~banditkit.offline.policy_file` (a user's own target policy from a file),
:mod:`~banditkit.offline.counterfactual` (each target against the logged policy and uniform),
:mod:`~banditkit.offline.commands` (the work of ``banditkit evaluate`` / ``warmstart``).
"""

from banditkit.offline import counterfactual as counterfactual  # the module: bk.offline.counterfactual.report
from banditkit.offline.checks import LogError, MissingPropensityWarning
from banditkit.offline.estimators import (
    ESTIMATORS,
    dm,
    dr,
    importance_weights,
    ips,
    lift,
    sndr,
    snips,
    switch_dr,
    switch_tau,
    weight_diagnostics,
)
from banditkit.offline.evaluate import evaluate, to_markdown
from banditkit.offline.frozen import agent_probabilities, predicted_rewards
from banditkit.offline.intervals import Estimate
from banditkit.offline.log import LoggedFeedback, from_arrays, from_frame, load, read_parquet, write_parquet
from banditkit.offline.policy_file import policy_probabilities
from banditkit.offline.reward_model import agent_for_log, log_env, reward_predictions
from banditkit.offline.serving import Decision, ServingAgent
from banditkit.offline.simulate import log_from_run, simulate_log, true_value
from banditkit.offline.store import StoreInfo, read_store
from banditkit.offline.targets import target_probabilities, uniform_probabilities
from banditkit.offline.warmstart import resample_rows, warm_start

__all__ = [
    "LoggedFeedback",
    "LogError",
    "MissingPropensityWarning",
    "from_arrays",
    "from_frame",
    "load",
    "read_parquet",
    "write_parquet",
    "Estimate",
    "ESTIMATORS",
    "dm",
    "ips",
    "snips",
    "dr",
    "sndr",
    "switch_dr",
    "switch_tau",
    "lift",
    "importance_weights",
    "weight_diagnostics",
    "evaluate",
    "to_markdown",
    "target_probabilities",
    "uniform_probabilities",
    "policy_probabilities",
    "read_store",
    "StoreInfo",
    "agent_probabilities",
    "predicted_rewards",
    "reward_predictions",
    "agent_for_log",
    "log_env",
    "warm_start",
    "resample_rows",
    "ServingAgent",
    "Decision",
    "simulate_log",
    "log_from_run",
    "true_value",
]
