"""``log EI`` / ``log PI``: exact against an independent quadrature oracle, deep into the underflow region."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special

from banditkit.policies import (
    expected_improvement_score,
    log_expected_improvement_score,
    log_probability_of_improvement_score,
)


def log_h_oracle(z: float) -> float:
    """``log h(z)``, ``h(z) = φ(z) + z Φ(z) = ∫_0^∞ Φ(z − s) ds``, by quadrature of ``Φ(z − s) / Φ(z)`` (≤ 1)."""
    l0 = special.log_ndtr(z)
    v, _ = integrate.quad(lambda s: np.exp(special.log_ndtr(z - s) - l0), 0.0, np.inf, epsabs=0.0, epsrel=1e-12,
                          limit=200)
    return float(l0 + np.log(v))


# both sides of the branch points −1 and −10, and far beyond float32 / float64 underflow of EI itself
Z = np.concatenate([np.linspace(-80.0, 8.0, 89), [-1.0 - 1e-7, -1.0 + 1e-7, -10.0 - 1e-6, -10.0 + 1e-6]])


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-6)])
def test_log_ei_matches_quadrature(dtype, tol):
    sd, best, xi = 0.7, 0.3, 0.01
    mean = best + xi + Z * sd
    with jax.enable_x64(dtype == np.float64):
        got = np.asarray(log_expected_improvement_score(jnp.asarray(mean, dtype), jnp.asarray(sd, dtype), best, xi))
    want = np.log(sd) + np.array([log_h_oracle(z) for z in Z])
    assert np.all(np.isfinite(got))
    # relative on the log where it is large, absolute near 0 (float32 resolves ~1e-7 relative)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_log_ei_is_log_of_ei_where_ei_is_representable():
    mean = jnp.linspace(-3.0, 3.0, 61)
    with jax.enable_x64(True):
        ei = expected_improvement_score(jnp.asarray(mean, jnp.float64), 1.3, 0.2, 0.05)
        lei = log_expected_improvement_score(jnp.asarray(mean, jnp.float64), 1.3, 0.2, 0.05)
    np.testing.assert_allclose(np.exp(lei), ei, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_ei_gradient_is_exact_and_never_vanishes(dtype):
    """``d log EI / dμ = Φ(z) / (σ h(z))``: finite and correct where EI's own gradient is exactly 0."""
    sd = 0.5
    zs = np.array([-60.0, -25.0, -12.0, -9.0, -4.0, -1.5, 0.0, 2.0])
    with jax.enable_x64(dtype == np.float64):
        g = jax.vmap(jax.grad(lambda m: log_expected_improvement_score(m, sd, 0.0)))(jnp.asarray(zs * sd, dtype))
        g_ei = jax.vmap(jax.grad(lambda m: expected_improvement_score(m, sd, 0.0)))(jnp.asarray(zs * sd, dtype))
    want = np.exp(special.log_ndtr(zs) - np.array([log_h_oracle(z) for z in zs])) / sd
    np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=1e-4 if dtype == np.float32 else 1e-10)
    assert float(g_ei[0]) == 0.0  # the plain EI's gradient underflows: why the maximiser uses the log


def test_zero_std_branches():
    with jax.enable_x64(True):
        mean = jnp.array([0.5, 1.0, 2.0], jnp.float64)
        lei = log_expected_improvement_score(mean, jnp.zeros(3), 1.0)
        lpi = log_probability_of_improvement_score(mean, jnp.zeros(3), 1.0)
        g = jax.grad(lambda m: log_expected_improvement_score(m, 0.0, 1.0))(jnp.float64(2.0))
    np.testing.assert_array_equal(lei, [-np.inf, -np.inf, 0.0])  # log max(d, 0): d = 1 at the last point
    np.testing.assert_array_equal(lpi, [-np.inf, -np.inf, 0.0])
    assert float(g) == 1.0  # d log d / dμ = 1/d at d = 1


def test_log_pi_matches_scipy():
    z = np.linspace(-40.0, 6.0, 47)
    with jax.enable_x64(True):
        got = log_probability_of_improvement_score(jnp.asarray(2.0 * z + 0.1, jnp.float64), 2.0, 0.1)
    # jax.scipy.special.log_ndtr's own asymptotic series is good to ~6e-8 relative around z ≈ −20 (measured)
    np.testing.assert_allclose(got, special.log_ndtr(z), rtol=2e-7)
