"""Policies and acquisition scores on hand-made posteriors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from banditkit import policies
from banditkit.policies import expected_improvement_score, probability_of_improvement_score, ucb_score
from banditkit.posteriors import Posterior


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


# ---------------------------------------------------------------------------------------------------------------
# Policies on a hand-made posterior: K independent arms, θ_k ~ N(m_k, v_k), expected reward of arm k = θ_k.


def _arm_posterior(obs_noise=0.0):
    """State (m, v); 'params' are the K arm values; candidate inputs are one-hot rows."""

    def init(params):
        return params

    def predictive(state, x):
        m, v = state
        return jnp.atleast_1d(m @ x), jnp.atleast_2d(v @ x + obs_noise)

    def sample(key, state):
        m, v = state
        return m + jnp.sqrt(v) * jax.random.normal(key, m.shape)

    post = Posterior(init, lambda s: s, lambda s, x, y: s, predictive, sample, lambda s: s[0], name="arms")
    apply_fn = lambda params, x: jnp.atleast_1d(params @ x)
    return post, apply_fn


def _choose(policy, m, v, key=0, best=None):
    post, apply_fn = _arm_posterior()
    state = (jnp.asarray(m, jnp.float32), jnp.asarray(v, jnp.float32))
    reward_fn, moments_fn = policies.point_candidates(post, apply_fn, jnp.eye(len(m)))
    return int(policy.choose(jax.random.PRNGKey(key), post, state, reward_fn, moments_fn, best)), (
        post,
        state,
        reward_fn,
        moments_fn,
    )


M = [0.0, 1.0, 0.5, 0.9]
V = [0.0, 0.01, 4.0, 0.0]


def test_greedy_and_ucb_beta0_pick_the_best_mean():
    assert _choose(policies.greedy(), M, V)[0] == 1
    assert _choose(policies.ucb(beta=0.0), M, V)[0] == 1
    # a large β prefers the uncertain arm: 0.5 + 3·2 > 1 + 3·0.1
    assert _choose(policies.ucb(beta=3.0), M, V)[0] == 2


def test_ucb_scores_are_mean_plus_beta_std():
    _, (post, state, reward_fn, moments_fn) = _choose(policies.ucb(beta=2.0), M, V)
    s = policies.ucb(beta=2.0).score(jax.random.PRNGKey(0), post, state, reward_fn, moments_fn)
    np.testing.assert_allclose(s, np.asarray(M) + 2.0 * np.sqrt(V), rtol=1e-6)


def test_epsilon_zero_is_greedy_and_one_is_uniform():
    for k in range(20):
        assert _choose(policies.epsilon_greedy(0.0), M, V, key=k)[0] == 1
    _, (post, state, reward_fn, moments_fn) = _choose(policies.greedy(), M, V)
    pol = policies.epsilon_greedy(1.0)
    keys = jax.random.split(jax.random.PRNGKey(1), 4000)
    picks = jax.vmap(lambda k: pol.choose(k, post, state, reward_fn, moments_fn))(keys)
    freq = np.bincount(np.asarray(picks), minlength=4) / 4000
    np.testing.assert_allclose(freq, 0.25, atol=0.03)
    # ε = 0.2: greedy arm with probability 0.8 + 0.2/4
    pol = policies.epsilon_greedy(0.2)
    picks = jax.vmap(lambda k: pol.choose(k, post, state, reward_fn, moments_fn))(keys)
    assert abs(np.mean(np.asarray(picks) == 1) - 0.85) < 0.03


def test_thompson_picks_the_arm_with_the_best_draw():
    m, v = [0.0, 0.2, 0.1], [1.0, 1.0, 1.0]
    post, _ = _arm_posterior()
    state = (jnp.asarray(m), jnp.asarray(v))
    picks = []
    for k in range(30):
        a, _ = _choose(policies.thompson(), m, v, key=k)
        draw = post.sample(jax.random.PRNGKey(k), state)
        assert a == int(jnp.argmax(draw))
        picks.append(a)
    assert len(set(picks)) > 1  # it explores
    # zero variance: Thompson is greedy
    assert _choose(policies.thompson(), M, [0.0] * 4, key=3)[0] == 1


def test_predictive_thompson_draws_each_candidate():
    m, v = np.array([0.0, 0.2, 0.1]), np.array([1.0, 0.25, 4.0])
    pol = policies.thompson(variant="predictive")
    for k in range(10):
        a, _ = _choose(pol, m, v, key=k)
        eps = jax.random.normal(jax.random.PRNGKey(k), (3,))
        assert a == int(np.argmax(m + np.sqrt(v) * np.asarray(eps)))
    assert _choose(pol, M, [0.0] * 4)[0] == 1


def test_ei_and_pi_choices():
    # incumbent 1.0 (arm 1, certain): EI of a certain arm at the incumbent is 0, the uncertain arm wins
    assert _choose(policies.expected_improvement(xi=0.0), M, V)[0] == 2
    a, (post, state, reward_fn, moments_fn) = _choose(policies.expected_improvement(xi=0.0), M, V)
    s = policies.expected_improvement(xi=0.0).score(jax.random.PRNGKey(0), post, state, reward_fn, moments_fn)
    assert float(s[0]) == 0.0 and float(s[3]) == 0.0
    # with everything certain nothing improves on a higher external incumbent; PI is then a step
    s = policies.probability_of_improvement(xi=0.0).score(
        jax.random.PRNGKey(0), post, (state[0], jnp.zeros(4)), reward_fn, moments_fn, 0.95
    )
    np.testing.assert_allclose(s, [0.0, 1.0, 0.0, 0.0])


def test_policies_run_inside_jit_vmap_and_scan():
    _, (post, state, reward_fn, moments_fn) = _choose(policies.greedy(), M, V)
    for pol in [policies.thompson(), policies.ucb(1.0), policies.epsilon_greedy(0.1), policies.expected_improvement()]:

        def body(carry, key, pol=pol):
            return carry, pol.choose(key, post, state, reward_fn, moments_fn)

        _, picks = jax.jit(lambda keys, body=body: jax.lax.scan(body, 0, keys))(
            jax.random.split(jax.random.PRNGKey(0), 8)
        )
        assert picks.shape == (8,) and picks.dtype == jnp.int32
        assert np.all((np.asarray(picks) >= 0) & (np.asarray(picks) < 4))


def test_get_resolves_aliases_and_lists_valid_names():
    assert policies.get("ts").name == "thompson"
    assert policies.get("eps_greedy", epsilon=0.3).hyper == {"epsilon": 0.3}
    assert policies.get("EI").name == "expected_improvement"
    assert policies.get("pts").hyper == {"variant": "predictive"}
    with pytest.raises(ValueError, match="choose one of"):
        policies.get("softmax")
    with pytest.raises(ValueError, match="epsilon"):
        policies.epsilon_greedy(1.5)
    with pytest.raises(ValueError, match="beta"):
        policies.ucb(-1.0)
    with pytest.raises(ValueError, match="parameter"):
        policies.thompson("banana")
