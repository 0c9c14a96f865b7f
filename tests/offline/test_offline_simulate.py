"""Logs drawn from banditkit's simulators: exact propensities, and estimators that find the simulator's true value."""

import numpy as np
import pytest

import banditkit.offline as off
from banditkit.offline import simulate as sim

ENV = "banditkit/Mushroom-v0"


def test_uniform_and_epsilon_greedy_logs_on_a_real_data_env():
    uni = sim.simulate_log(ENV, 600, seed=0)
    k = uni.log.num_actions
    np.testing.assert_array_equal(uni.log.propensities, np.full(600, 1.0 / k))
    eg = sim.simulate_log(ENV, 600, seed=0, logging=lambda x: sim.epsilon_greedy(uni.expected, 0.2))
    best = np.argmax(uni.expected, axis=1)
    want = np.where(eg.log.actions == best, 0.8 + 0.2 / k, 0.2 / k)
    np.testing.assert_allclose(eg.log.propensities, want)
    np.testing.assert_array_equal(eg.log.contexts, uni.log.contexts)  # the same traffic for every logging policy
    with pytest.raises(ValueError, match="rows of a distribution"):
        sim.simulate_log(ENV, 10, logging=np.ones((10, k)))


def test_ips_and_dr_find_the_true_value_of_a_fixed_rule():
    s = sim.simulate_log(ENV, 3000, seed=1)
    target = np.ones(len(s.log), int)  # "always eat": a random reward (arm 0 pays 0 for sure)
    truth = sim.true_value(off.target_probabilities(target, s.log), s.expected)
    table = off.evaluate(s.log, {"arm1": target}, reward_model=s.expected + 0.5, estimators=["ips", "dr"])
    for r in table[table.policy == "arm1"].itertuples():
        assert abs(r.value - truth) < 4 * r.stderr, (r.estimator, r.value, truth)
    exact = off.evaluate(s.log, {"arm1": target}, reward_model=s.expected, estimators=["dm"])
    assert exact.value.iloc[0] == pytest.approx(truth)
