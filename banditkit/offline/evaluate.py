"""``evaluate(log, policies)``: an off-policy evaluation table — every target policy × every estimator, with
intervals, weight diagnostics and the logging policy's own on-policy value.

::

    table = bk.offline.evaluate(log, {"greedy-hilofi": (agent, state), "always-0": np.zeros(n, int)},
                                reward_model="linear")

One row per ``(policy, estimator)`` with columns ``policy, estimator, value, stderr, lower, upper, n, interval,
ess, max_weight, mean_weight`` (the weight diagnostics of :func:`~banditkit.offline.estimators.weight_diagnostics`,
NaN for DM), and a row ``policy = "logging", estimator = "on_policy"``: the mean logged reward, the logging
policy's value on the same traffic, to compare the targets with.

The plain-mean estimators (``dm``, ``ips``, ``dr``, ``switch_dr``) also get the counterfactual columns
``vs_logged`` (the target's value minus the mean logged reward) and ``vs_uniform`` (minus the same estimator's value
of choosing uniformly among each row's available arms), each with ``_lower`` / ``_upper`` bounds: differences of
means over the same rows, so their intervals are those of the per-row differences
(:func:`~banditkit.offline.estimators.lift`), narrower than the two values' intervals side by side.  The
``on_policy`` row's ``vs_uniform`` uses the first of DR, IPS, DM computed.  Self-normalised estimators (ratios) get
NaN there.  :mod:`banditkit.offline.counterfactual` turns the table into the counterfactual report.

``table.attrs`` records the reward model and how it was fitted, the interval level, Switch-DR's ``τ`` and, per agent
target, whether its probabilities are exact or a ``num_draws`` Monte-Carlo estimate.

A reward model given as a spec or an unfitted agent is **cross-fitted** by default (``cross_fit=True``, ``folds=2``):
row ``i``'s predictions come from a model fitted on the other folds only, so a row's own reward never enters the
model that corrects it.  A model fitted on the very rows it evaluates follows their noise: DR's correction terms
``r_i − q̂_{i a_i}`` shrink, and so do the intervals (about half the real spread with a flexible model, in a
held-out check).  The price: each fold's model learns from ``(F − 1)/F`` of the rows, so for a model too small to
follow the noise the estimates get noisier (more folds shrink that price, at ``F`` fits).  ``cross_fit=False`` fits
it on all the evaluated rows (the old behaviour; cheaper, and harmless for a model far smaller than the log).  A
fitted ``(agent, state)`` or an array is used as given.

Without propensities in the log only DM is computed (IPS-family estimators asked for by name raise); without a
reward model (``reward_model=None``) only IPS and SNIPS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from banditkit.offline import estimators as est
from banditkit.offline.intervals import estimate
from banditkit.offline.log import load
from banditkit.offline.reward_model import reward_predictions
from banditkit.offline.targets import target_probabilities, uniform_probabilities
from banditkit.policies.propensity import DEFAULT_DRAWS, is_exact

LIFT_COLUMNS = ["vs_logged", "vs_logged_lower", "vs_logged_upper", "vs_uniform", "vs_uniform_lower",
                "vs_uniform_upper"]
COLUMNS = ["policy", "estimator", "value", "stderr", "lower", "upper", "n", "interval", "ess", "max_weight",
           "mean_weight", *LIFT_COLUMNS]
LOGGED_FIRST = ("dr", "ips", "dm")  # the estimator of uniform's value in the on_policy row's vs_uniform


def _estimators(names, has_p: bool, has_model: bool) -> list[str]:
    if names is None:
        return [e for e in est.ESTIMATORS
                if (has_p or e not in est.NEED_PROPENSITY) and (has_model or e not in est.NEED_MODEL)]
    out = []
    for name in names:
        key = str(name).strip().lower().replace("-", "_")
        if key not in est.ESTIMATORS:
            raise ValueError(f"unknown estimator {name!r}; choose from {sorted(est.ESTIMATORS)}")
        if key in est.NEED_PROPENSITY and not has_p:
            raise ValueError(f"estimator {key!r} needs propensities, and the log has none (only 'dm' applies)")
        if key in est.NEED_MODEL and not has_model:
            raise ValueError(f"estimator {key!r} needs a reward model: pass reward_model= (a spec such as "
                             "'linear', an agent, or an (n, K) array)")
        out.append(key)
    return out


def evaluate(
    log,
    policies: Mapping,
    *,
    reward_model="linear",
    estimators: Sequence[str] | None = None,
    alpha: float = 0.05,
    interval: str = "normal",
    n_boot: int = 1000,
    tau: float | None = None,
    cross_fit: bool = True,
    folds: int = 2,
    num_draws: int = DEFAULT_DRAWS,
    key=None,
    seed: int = 0,
) -> pd.DataFrame:
    """The OPE table of the module docstring.

    Args:
      log: a :class:`~banditkit.offline.log.LoggedFeedback`, DataFrame or Parquet path.
      policies: ``{name: target}`` with targets as :func:`~banditkit.offline.targets.target_probabilities` takes
        them (``(n,)`` actions, ``(n, K)`` probabilities, or ``(agent, state)``).
      reward_model: for DM / DR / SNDR / Switch-DR, as :func:`~banditkit.offline.reward_model.reward_predictions`
        takes it (a spec string fitted on the log, an agent, ``(agent, state)``, an ``(n, K)`` array); ``None``
        skips them.
      estimators: names from :data:`~banditkit.offline.estimators.ESTIMATORS` (default: all that apply).
      alpha: the intervals are ``1 − alpha``; interval: ``"normal"`` or ``"bootstrap"`` (``n_boot`` replicates,
        ``seed``).
      tau: Switch-DR's weight threshold (``None``: ``√(K / p_min)``,
        :func:`~banditkit.offline.estimators.switch_tau`).
      cross_fit: cross-fit a reward model that is fitted here over ``folds`` (>= 2) folds of the log (default);
        ``False``: fit it on all the evaluated rows (see the module docstring).
      num_draws: Monte-Carlo draws for agent targets whose policy has no exact probabilities (Thompson sampling).
      key: PRNG key for the reward-model fit and the Monte-Carlo draws.
    """
    log = load(log)
    if not isinstance(policies, Mapping) or not policies:
        raise ValueError("policies must be a non-empty dict {name: target}")
    has_p = log.propensities is not None
    names = _estimators(estimators, has_p, reward_model is not None)
    if cross_fit and folds < 2:
        raise ValueError(f"cross-fitting needs folds >= 2, got folds={folds}; pass cross_fit=False to fit the reward "
                         "model on the evaluated rows themselves")
    q_hat = None
    if any(e in est.NEED_MODEL for e in names):
        q_hat = reward_predictions(reward_model, log, key, folds=folds if cross_fit else 1)
    if tau is None and has_p:
        tau = est.switch_tau(log.num_actions, log.propensities)
    kw = dict(alpha=alpha, interval=interval, n_boot=n_boot, seed=seed)
    data = (log.actions, log.rewards, log.propensities, q_hat)
    logged_terms = (np.asarray(log.rewards, np.float64), None, None)
    uniform = uniform_probabilities(log)
    uniform_terms = {e: est.row_terms(e, uniform, *data, tau=tau) for e in names if e in est.LIFT_ESTIMATORS}

    def lifts(e, terms) -> dict:
        out = dict.fromkeys(LIFT_COLUMNS, np.nan)
        for col, base in (("vs_logged", logged_terms), ("vs_uniform", uniform_terms.get(e))):
            if base is not None and terms[2] is None and (col == "vs_uniform" or terms is not logged_terms):
                d = est.lift(e, terms, base, **kw)
                out.update({col: d.value, f"{col}_lower": d.lower, f"{col}_upper": d.upper})
        return out

    rows = []
    exact = {}
    for pname, target in policies.items():
        probs = target_probabilities(target, log, key, num_draws=num_draws)
        if isinstance(target, tuple) and len(target) == 2 and hasattr(target[0], "policy"):
            exact[str(pname)] = True if is_exact(target[0].policy) else f"monte-carlo ({num_draws} draws)"
        diag = est.weight_diagnostics(probs, log.actions, log.propensities) if has_p else {}
        for e in names:
            terms = est.row_terms(e, probs, *data, tau=tau)
            res = estimate(e, *terms, **kw)
            d = diag if e != "dm" else {}
            rows.append(dict(policy=str(pname), **res._asdict(), ess=d.get("ess", np.nan),
                             max_weight=d.get("max_weight", np.nan), mean_weight=d.get("mean_weight", np.nan),
                             **(lifts(e, terms) if e in est.LIFT_ESTIMATORS else dict.fromkeys(LIFT_COLUMNS, np.nan))))
    logged = estimate("on_policy", log.rewards, **kw)
    first = next((e for e in LOGGED_FIRST if e in uniform_terms), None)
    rows.append(dict(policy="logging", **logged._asdict(), ess=float(len(log)), max_weight=1.0, mean_weight=1.0,
                     **(lifts(first, logged_terms) if first else dict.fromkeys(LIFT_COLUMNS, np.nan))))
    table = pd.DataFrame(rows)[COLUMNS]
    table.attrs.update(
        alpha=alpha,
        tau=tau,
        reward_model=None if reward_model is None else _describe(reward_model),
        reward_model_fit=_fit(reward_model, cross_fit, folds),
        exact_probabilities=exact,
    )
    return table


def _describe(model) -> str:
    if isinstance(model, str):
        return model
    if isinstance(model, tuple):
        return f"fitted {getattr(model[0], 'name', type(model[0]).__name__)}"
    if hasattr(model, "observe"):
        return getattr(model, "name", type(model).__name__)
    return "given (n, K) predictions"


def _fit(model, cross_fit: bool, folds: int) -> str | None:
    if model is None:
        return None
    if isinstance(model, tuple) or not (isinstance(model, str) or hasattr(model, "observe")):
        return "given"
    return f"cross-fitted ({folds} folds)" if cross_fit else "in-sample (fitted on the evaluated rows)"


def to_markdown(table: pd.DataFrame, digits: int = 4) -> str:
    """The table as GitHub Markdown: value with its interval, per policy and estimator."""
    lines = ["| policy | estimator | value | interval | stderr | ESS |", "| --- | --- | --- | --- | --- | --- |"]
    for r in table.itertuples(index=False):
        ess = "" if not np.isfinite(r.ess) else f"{r.ess:.0f}"
        lines.append(f"| {r.policy} | {r.estimator} | {r.value:.{digits}f} | [{r.lower:.{digits}f}, "
                     f"{r.upper:.{digits}f}] | {r.stderr:.{digits}f} | {ess} |")
    return "\n".join(lines)
