"""The counterfactual report: what each target policy would have earned on the traffic the logged policy served,
against that policy's own value and against choosing uniformly at random — each with an interval.

It is a view of :func:`~banditkit.offline.evaluate.evaluate`'s table for one plain-mean estimator (default: the
first of :data:`ESTIMATOR_ORDER` in the table — DR when a reward model and propensities are there, else IPS, else
DM).  With per-row terms ``t_i(π)`` of that estimator (its value is ``V̂(π) = (1/n) Σ t_i(π)``,
:func:`~banditkit.offline.estimators.row_terms`), each target's row has

* ``value``: ``V̂(π)`` with its ``1 − α`` interval;
* ``vs_logged``: ``V̂(π) − r̄`` (``r̄`` the mean logged reward: the logged policy's own value on these rows), with
  the interval of the per-row differences ``t_i(π) − r_i``;
* ``vs_uniform``: ``V̂(π) − V̂(uniform)``, uniform over each row's available arms, the interval again over the
  per-row differences;

and the ``logged`` row has ``r̄`` and ``r̄ − V̂(uniform)``.  The differences are paired by row, so their intervals are
narrower than the two values' intervals side by side would suggest; like every interval here they treat the reward
model as fixed (see :mod:`banditkit.offline.estimators`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from banditkit.offline.evaluate import LIFT_COLUMNS

ESTIMATOR_ORDER = ("dr", "ips", "dm")
LOGGED, UNIFORM = "logging", "uniform"
COLUMNS = ["policy", "estimator", "value", "lower", "upper", *LIFT_COLUMNS, "n"]


def report(table: pd.DataFrame, estimator: str | None = None) -> pd.DataFrame:
    """The report (columns :data:`COLUMNS`): the rows of ``table`` for ``estimator`` (default: module docstring),
    one per target in the table's order, then the logging policy's ``on_policy`` row."""
    present = list(dict.fromkeys(table.estimator))
    name = estimator if estimator is not None else next((e for e in ESTIMATOR_ORDER if e in present), None)
    if name is None or name not in present:
        raise ValueError(f"the counterfactual report needs one of {', '.join(ESTIMATOR_ORDER)} in the table (it has "
                         f"{', '.join(present)}): give the log propensities or a reward model")
    rows = table[(table.estimator == name) & (table.policy != LOGGED)]
    logged = table[table.policy == LOGGED]
    out = pd.concat([rows, logged])[COLUMNS].reset_index(drop=True)
    out.loc[out.policy == UNIFORM, ["vs_uniform", "vs_uniform_lower", "vs_uniform_upper"]] = np.nan  # 0 by definition
    out.attrs.update(alpha=table.attrs.get("alpha", 0.05), estimator=name)
    return out


def _cell(v, lo, hi, digits: int, signed: bool = False) -> str:
    if not np.isfinite(v):
        return ""
    f = f"+.{digits}f" if signed else f".{digits}f"
    return f"{v:{f}} [{lo:{f}}, {hi:{f}}]"


def to_markdown(view: pd.DataFrame, digits: int = 4) -> str:
    """The report as GitHub Markdown: value, minus the logged policy's, minus uniform's, each with its interval."""
    level = f"{100 * (1 - view.attrs.get('alpha', 0.05)):.0f}%"
    lines = [f"| policy | value ({view.attrs.get('estimator', '')}, {level} interval) | minus logged policy | "
             "minus uniform |", "| --- | --- | --- | --- |"]
    for r in view.itertuples(index=False):
        lines.append(f"| {r.policy} | {_cell(r.value, r.lower, r.upper, digits)} | "
                     f"{_cell(r.vs_logged, r.vs_logged_lower, r.vs_logged_upper, digits, True)} | "
                     f"{_cell(r.vs_uniform, r.vs_uniform_lower, r.vs_uniform_upper, digits, True)} |")
    return "\n".join(lines)
