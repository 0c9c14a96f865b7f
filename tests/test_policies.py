"""Policies and acquisition scores on hand-made posteriors."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import norm

from banditkit.policies import expected_improvement_score, probability_of_improvement_score, ucb_score


def test_acquisition_closed_forms_match_scipy():
    mu = np.array([-1.0, 0.3, 2.0, 1.0])
    sd = np.array([0.5, 1.5, 1.0, 2.0])
    best, xi = 0.8, 0.1
    d = mu - best - xi
    z = d / sd
    np.testing.assert_allclose(expected_improvement_score(mu, sd, best, xi), d * norm.cdf(z) + sd * norm.pdf(z), 1e-5)
    np.testing.assert_allclose(probability_of_improvement_score(mu, sd, best, xi), norm.cdf(z), 1e-5)
    np.testing.assert_allclose(ucb_score(mu, sd, 2.0), mu + 2.0 * sd, 1e-6)


def test_ei_monte_carlo():
    f = 2.0 + 1.5 * np.random.default_rng(0).standard_normal(400_000)
    assert abs(float(expected_improvement_score(2.0, 1.5, 1.0)) - np.maximum(f - 1.0, 0).mean()) < 5e-3


def test_zero_variance_limits():
    mu = jnp.array([0.5, 1.0, 2.0])
    zero = jnp.zeros(3)
    # EI is zero at the incumbent with zero variance, max(d, 0) elsewhere (no dropped factors)
    np.testing.assert_allclose(expected_improvement_score(mu, zero, 1.0), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(probability_of_improvement_score(mu, zero, 1.0), [0.0, 0.0, 1.0])
    # the limit σ -> 0 agrees with the σ = 0 branch
    np.testing.assert_allclose(expected_improvement_score(mu, 1e-6 * jnp.ones(3), 1.0), [0.0, 0.0, 1.0], atol=1e-6)


def test_acquisition_gradients_finite_and_correct():
    mu = jnp.array([0.0, 1.0, 2.0])
    sd = jnp.array([0.0, 1.0, 0.7])
    gm, gs = jax.grad(lambda m, s: expected_improvement_score(m, s, 1.0).sum(), argnums=(0, 1))(mu, sd)
    assert np.all(np.isfinite(gm)) and np.all(np.isfinite(gs))
    # dEI/dμ = Φ(z), dEI/dσ = φ(z) where σ > 0
    z = (np.array([1.0, 2.0]) - 1.0) / np.array([1.0, 0.7])
    np.testing.assert_allclose(gm[1:], norm.cdf(z), rtol=1e-5)
    np.testing.assert_allclose(gs[1:], norm.pdf(z), rtol=1e-5)
    gm, gs = jax.grad(lambda m, s: probability_of_improvement_score(m, s, 1.0).sum(), argnums=(0, 1))(mu, sd)
    assert np.all(np.isfinite(gm)) and np.all(np.isfinite(gs))
