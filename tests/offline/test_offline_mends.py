"""The OPE mends of issue 70: the Python API's reward model is cross-fitted by default (exactly the fold models),
Switch-DR's default threshold follows the arm count and the propensity floor (known values), and an out-of-range
action in a log that does not state its arm count is refused with its rows named."""

import jax
import numpy as np
import pandas as pd
import pytest

import banditkit.offline as off
from banditkit.agents import BanditAgent
from banditkit.models import MLP
from banditkit.offline import estimators as est

K, D, N = 3, 2, 30


def _log(n=N, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D))
    p0 = np.array([0.5, 0.3, 0.2])
    a = rng.choice(K, size=n, p=p0)
    r = x[np.arange(n), a % D] + 0.3 * a + 0.1 * rng.normal(size=n)
    cols = {f"x{j}": x[:, j] for j in range(D)}
    return off.from_frame(pd.DataFrame(cols | {"action": a, "reward": r, "propensity": p0[a]}), num_actions=K)


def _linear():
    return BanditAgent(MLP(features=(), out=K), "ekf", "greedy", obs_noise=0.1, posterior_kwargs=dict(init_cov=1.0))


def test_evaluate_cross_fits_the_reward_model_by_default():
    log, agent = _log(), _linear()
    target = np.eye(K)[np.arange(N) % K]
    fold = np.arange(N) % 2
    held_out = np.zeros((N, K))
    for f in range(2):  # each fold predicted by a model fitted on the other fold only
        state = off.warm_start(agent, log.subset(fold != f), jax.random.fold_in(jax.random.PRNGKey(0), f))
        held_out[fold == f] = off.predicted_rewards(agent, state, log.contexts[fold == f])
    in_sample = off.predicted_rewards(agent, off.warm_start(agent, log, jax.random.PRNGKey(0)), log.contexts)

    def dr_row(table):
        return table[table.estimator == "dr"].iloc[0]

    default = off.evaluate(log, {"t": target}, reward_model=agent, estimators=["dr"])
    want = est.dr(target, log.actions, log.rewards, log.propensities, held_out)
    assert dr_row(default).value == pytest.approx(want.value, rel=1e-5)
    assert dr_row(default).stderr == pytest.approx(want.stderr, rel=1e-5)
    assert default.attrs["reward_model_fit"] == "cross-fitted (2 folds)"
    opted_out = off.evaluate(log, {"t": target}, reward_model=agent, estimators=["dr"], cross_fit=False)
    want = est.dr(target, log.actions, log.rewards, log.propensities, in_sample)
    assert dr_row(opted_out).value == pytest.approx(want.value, rel=1e-5)
    assert opted_out.attrs["reward_model_fit"].startswith("in-sample")
    assert abs(dr_row(opted_out).value - dr_row(default).value) > 1e-4  # the two fits differ
    np.testing.assert_allclose(off.reward_predictions(agent, log), held_out, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="cross-fitting needs folds >= 2.*cross_fit=False"):
        off.evaluate(log, {"t": target}, reward_model=agent, folds=1)


def test_switch_tau_scales_with_the_arms_and_the_propensity_floor():
    assert est.switch_tau(4, [0.25, 0.25]) == pytest.approx(4.0)  # uniform over 4: τ = K
    assert est.switch_tau(14, np.full(5, 1 / 14)) == pytest.approx(14.0)  # τ = 10 used to cut all of these
    eps, k = 0.25, 4  # ε-greedy: the greedy arm has 1 − ε + ε/K, the others ε/K = 1/16
    p_other, p_greedy = eps / k, 1 - eps + eps / k
    assert est.switch_tau(k, [p_greedy, p_other]) == pytest.approx(k / np.sqrt(eps)) == pytest.approx(8.0)
    with pytest.raises(ValueError, match="propensities in \\(0, 1\\]"):
        est.switch_tau(3, [0.0, 0.5])

    rng = np.random.default_rng(1)
    n = 400
    greedy = rng.integers(0, k, size=n)  # the logger's greedy arm per row
    explore = rng.uniform(size=n) < eps
    a = np.where(explore, rng.integers(0, k, size=n), greedy)
    p = np.where(a == greedy, p_greedy, p_other)
    r = rng.normal(size=n) + (a == 2)
    q = np.full((n, k), 0.2)
    target = np.eye(k)[np.full(n, 2)]  # always arm 2
    w = target[np.arange(n), a] / p  # 1/p_greedy ≈ 1.23 or 1/p_other = 16
    assert set(np.round(w[w > 0], 4)) == {round(1 / p_greedy, 4), 16.0}
    manual = np.mean(0.2 + np.where(w <= 8.0, w, 0.0) * (r - 0.2))
    assert est.switch_dr(target, a, r, p, q).value == pytest.approx(manual, rel=1e-12)
    uniform_p = np.full(n, 1 / k)  # a uniform log: every weight is 0 or K = τ, so Switch-DR is DR
    assert est.switch_dr(target, a, r, uniform_p, q).value == pytest.approx(est.dr(target, a, r, uniform_p, q).value)
    log = off.from_arrays(rng.normal(size=(n, 2)), a, r, p, num_actions=k)
    table = off.evaluate(log, {"arm2": target}, reward_model=q)
    assert table.attrs["tau"] == pytest.approx(8.0)
    got = table[(table.policy == "arm2") & (table.estimator == "switch_dr")].value.iloc[0]
    assert got == pytest.approx(manual, rel=1e-12)


def test_an_out_of_range_action_in_a_log_without_an_arm_count_is_refused(tmp_path):
    a = np.array([0, 1, 2, 1, 0, 17, 2, 1, 0, 2])
    df = pd.DataFrame({"x0": np.arange(10.0), "action": a, "reward": np.ones(10), "propensity": np.full(10, 0.5)})
    with pytest.raises(off.LogError, match=r"arm 3 was never logged, yet row 5 \(value 17.0\) name") as e:
        off.from_frame(df)
    assert "pass num_actions= (--num-actions)" in str(e.value) and "fix or remove those rows" in str(e.value)
    df.to_csv(tmp_path / "log.csv", index=False)
    df.to_parquet(tmp_path / "log.parquet")  # a plain Parquet file: no banditkit metadata
    for name in ("log.csv", "log.parquet"):
        with pytest.raises(off.LogError, match="row 5"):
            off.load(tmp_path / name)
    assert off.load(tmp_path / "log.csv", num_actions=18).num_actions == 18  # the user says it is real
    with pytest.raises(off.LogError, match=r"action out of range \[0, 3\) \(3 arms\): row 5"):
        off.from_frame(df, num_actions=3)
    from banditkit.cli import main

    assert main(["evaluate", "--log", str(tmp_path / "log.parquet"), "--agents", "linear", "--quiet"]) == 2
