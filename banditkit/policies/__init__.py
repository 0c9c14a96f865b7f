"""Decision policies (pure functions of a PRNG key) and closed-form acquisition scores.

A policy scores K candidates (bandit arms or BO points); see :mod:`banditkit.policies.base` for the interface::

    reward_fn, moments_fn = bk.policies.point_candidates(posterior, apply_fn, points)
    index = bk.policies.ucb(beta=2.0).choose(key, posterior, state, reward_fn, moments_fn)
"""

from banditkit.policies.acquisition import (
    expected_improvement_score,
    log_expected_improvement_score,
    log_probability_of_improvement_score,
    probability_of_improvement_score,
    ucb_score,
)
from banditkit.policies.base import Policy, output_candidates, point_candidates
from banditkit.policies.rules import (
    ALIASES,
    POLICIES,
    epsilon_greedy,
    expected_improvement,
    get,
    greedy,
    probability_of_improvement,
    thompson,
    ucb,
)

__all__ = [
    "Policy",
    "point_candidates",
    "output_candidates",
    "thompson",
    "ucb",
    "greedy",
    "epsilon_greedy",
    "expected_improvement",
    "probability_of_improvement",
    "get",
    "POLICIES",
    "ALIASES",
    "expected_improvement_score",
    "log_expected_improvement_score",
    "log_probability_of_improvement_score",
    "probability_of_improvement_score",
    "ucb_score",
]
