"""Decision policies (pure functions of a PRNG key) and closed-form acquisition scores."""

from banditkit.policies.acquisition import (
    expected_improvement_score,
    probability_of_improvement_score,
    ucb_score,
)

__all__ = ["expected_improvement_score", "probability_of_improvement_score", "ucb_score"]
