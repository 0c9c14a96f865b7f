"""Off-policy estimators on a toy bandit whose target values are known exactly, and their closed-form identities."""

import warnings

import numpy as np
import pandas as pd
import pytest

import banditkit.offline as off
from banditkit.offline import estimators as est
from banditkit.offline.intervals import estimate

K, X = 3, 5  # arms, distinct contexts
RNG = np.random.default_rng(0)
MU = RNG.uniform(0.1, 0.9, size=(X, K))  # Bernoulli reward means μ(x, k)


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


PI0 = _softmax(RNG.normal(scale=1.0, size=(X, K)))  # logging policy π₀(k | x): stochastic, full support
TARGETS = {
    "deterministic": np.eye(K)[np.argmax(MU + RNG.normal(scale=0.2, size=(X, K)), axis=1)],
    "stochastic": _softmax(RNG.normal(scale=2.0, size=(X, K))),
}


def _true_value(pi):  # contexts uniform over X
    return float(np.mean(np.sum(pi * MU, axis=1)))


def _logs(n_logs, n, seed):
    """``n_logs`` independent logs of ``n`` rows: context index, action, reward, propensity."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, X, size=(n_logs, n))
    cum = np.cumsum(PI0[x], axis=-1)
    a = (rng.uniform(size=(n_logs, n, 1)) > cum).sum(-1)
    r = (rng.uniform(size=(n_logs, n)) < MU[x, a]).astype(float)
    return x, a, r, PI0[x, a]


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_ips_and_dr_are_unbiased_over_many_logs(kind):
    pi = TARGETS[kind]
    truth = _true_value(pi)
    xs, as_, rs, ps = _logs(400, 200, seed=1)
    biased_model = MU + 0.3  # DR is unbiased whatever the model; DM with this model is not
    vals = {"ips": [], "dr": [], "dm": [], "snips": [], "sndr": []}
    covered = 0
    for x, a, r, p in zip(xs, as_, rs, ps, strict=True):
        target, q = pi[x], biased_model[x]
        res = est.ips(target, a, r, p)
        vals["ips"].append(res.value)
        covered += res.lower <= truth <= res.upper
        vals["dr"].append(est.dr(target, a, r, p, q).value)
        vals["dm"].append(est.dm(target, q).value)
        vals["snips"].append(est.snips(target, a, r, p).value)
        vals["sndr"].append(est.sndr(target, a, r, p, q).value)
    for name in ("ips", "dr"):
        v = np.asarray(vals[name])
        mc_err = v.std(ddof=1) / np.sqrt(len(v))
        assert abs(v.mean() - truth) < 4 * mc_err, (name, v.mean(), truth, mc_err)
    dm = np.asarray(vals["dm"])
    assert abs(dm.mean() - truth) > 10 * dm.std(ddof=1) / np.sqrt(len(dm))  # the test can see a bias
    for name in ("snips", "sndr"):  # consistent: bias O(1/n) — small next to one log's standard error
        v = np.asarray(vals[name])
        assert abs(v.mean() - truth) < 0.25 * v.std(ddof=1), name
    assert 0.90 <= covered / len(xs) <= 0.99  # the 95% normal interval covers the truth ~95% of the time


def _one_log(n=300, seed=3, noise=True):
    x, a, r, p = (v[0] for v in _logs(1, n, seed))
    if not noise:
        r = MU[x, a]  # rewards equal their means: an exact model leaves no residual
    return x, a, r, p


def test_dr_equals_dm_with_an_exact_model_and_ips_with_a_zero_model():
    pi = TARGETS["stochastic"]
    x, a, r, p = _one_log(noise=False)
    exact = MU[x]
    np.testing.assert_allclose(est.dr(pi[x], a, r, p, exact).value, est.dm(pi[x], exact).value, rtol=1e-12)
    np.testing.assert_allclose(est.sndr(pi[x], a, r, p, exact).value, est.dm(pi[x], exact).value, rtol=1e-12)
    x, a, r, p = _one_log()
    zero = np.zeros((len(x), K))
    for k in ("value", "stderr", "lower", "upper"):
        assert getattr(est.dr(pi[x], a, r, p, zero), k) == pytest.approx(getattr(est.ips(pi[x], a, r, p), k))
        assert getattr(est.sndr(pi[x], a, r, p, zero), k) == pytest.approx(getattr(est.snips(pi[x], a, r, p), k))


def test_switch_dr_spans_dm_and_dr():
    pi = TARGETS["deterministic"]
    x, a, r, p = _one_log()
    q = MU[x] + 0.1
    assert est.switch_dr(pi[x], a, r, p, q, tau=np.inf).value == pytest.approx(est.dr(pi[x], a, r, p, q).value)
    assert est.switch_dr(pi[x], a, r, p, q, tau=0.0).value == pytest.approx(est.dm(pi[x], q).value)
    w = est.importance_weights(pi[x], a, p)
    tau = float(np.median(w[w > 0]))
    keep = w <= tau
    manual = np.mean(np.sum(pi[x] * q, 1) + np.where(keep, w, 0) * (r - q[np.arange(len(a)), a]))
    assert est.switch_dr(pi[x], a, r, p, q, tau=tau).value == pytest.approx(manual)


def test_snips_closed_form_and_delta_method_stderr():
    pi = TARGETS["stochastic"]
    x, a, r, p = _one_log()
    w = est.importance_weights(pi[x], a, p)
    res = est.snips(pi[x], a, r, p)
    v = np.sum(w * r) / np.sum(w)
    psi = w * (r - v) / w.mean()
    assert res.value == pytest.approx(v)
    assert res.stderr == pytest.approx(psi.std(ddof=1) / np.sqrt(len(w)))
    assert res.lower < res.value < res.upper


def test_bootstrap_interval_agrees_with_the_normal_one_on_a_large_log():
    pi = TARGETS["deterministic"]
    x, a, r, p = _one_log(n=3000)
    normal = est.ips(pi[x], a, r, p)
    boot = est.ips(pi[x], a, r, p, interval="bootstrap", n_boot=400, seed=1)
    assert boot.value == normal.value
    assert boot.stderr == pytest.approx(normal.stderr, rel=0.15)
    assert boot.lower == pytest.approx(normal.lower, abs=0.5 * normal.stderr)
    assert boot.upper == pytest.approx(normal.upper, abs=0.5 * normal.stderr)
    with pytest.raises(ValueError, match="interval must be"):
        estimate("x", r, interval="jackknife")


def _frame(x, a, r, p=None):
    df = pd.DataFrame({"x0": x.astype(float), "action": a, "reward": r})
    if p is not None:
        df["propensity"] = p
    return df


def test_evaluate_table_and_missing_propensities():
    x, a, r, p = _one_log()
    log = off.from_frame(_frame(x, a, r, p), num_actions=K)
    pols = {"det": np.argmax(TARGETS["deterministic"][x], 1), "sto": TARGETS["stochastic"][x]}
    table = off.evaluate(log, pols, reward_model=MU[x])
    assert set(table["estimator"]) == {"dm", "ips", "snips", "dr", "sndr", "switch_dr", "on_policy"}
    row = table[(table.policy == "sto") & (table.estimator == "ips")].iloc[0]
    assert row.value == pytest.approx(est.ips(TARGETS["stochastic"][x], a, r, p).value)
    assert np.isfinite(row.ess) and 0 < row.ess <= len(x)
    assert table[table.policy == "logging"].value.iloc[0] == pytest.approx(r.mean())
    assert "| sto | dr |" in off.to_markdown(table)

    with pytest.warns(off.MissingPropensityWarning, match="only the direct method"):
        bare = off.from_frame(_frame(x, a, r), num_actions=K)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        only_dm = off.evaluate(bare, pols, reward_model=MU[x])
    assert set(only_dm["estimator"]) == {"dm", "on_policy"}
    with pytest.raises(ValueError, match="needs propensities"):
        off.evaluate(bare, pols, reward_model=MU[x], estimators=["ips"])
    with pytest.raises(ValueError, match="needs the logging policy's propensities"):
        est.dr(TARGETS["stochastic"][x], a, r, None, MU[x])
    with pytest.raises(ValueError, match="needs a reward model"):
        off.evaluate(log, pols, reward_model=None, estimators=["dr"])


def test_bad_targets_name_their_rows():
    x, a, r, p = _one_log(n=20)
    log = off.from_frame(_frame(x, a, r, p), num_actions=K)
    probs = TARGETS["stochastic"][x].copy()
    probs[4] = [0.5, 0.4, 0.0]
    with pytest.raises(ValueError, match=r"sum to 1 in every row: row 4 \(value 0.9"):
        off.target_probabilities(probs, log)
    probs[4] = [1.2, -0.2, 0.0]
    with pytest.raises(ValueError, match=r"finite and >= 0: row 4"):
        off.target_probabilities(probs, log)
    acts = np.zeros(20, int)
    acts[[2, 9]] = [3, -1]
    with pytest.raises(ValueError, match=r"out of range \[0, 3\): rows 2, 9 \(values 3, -1\)"):
        off.target_probabilities(acts, log)
    with pytest.raises(ValueError, match=r"shape \(n, K\) = \(20, 3\)"):
        off.target_probabilities(np.ones((20, 2)) / 2, log)
    with pytest.raises(ValueError, match="shape"):
        off.evaluate(log, {"t": acts * 0}, reward_model=np.zeros((19, K)))
