"""BO test functions: known optima at known minimisers, domain scaling, NumPy/JAX agreement, DrawNN estimate."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.environments import bo_functions as bf


@pytest.mark.parametrize("name", ["ackley", "ackley5", "ackley50", "branin", "hartmann6"])
def test_known_minimum_at_known_minimisers_and_not_beaten(name):
    f = bf.FUNCTIONS[name]
    vals = np.atleast_1d(f.value(f.minimizers))
    np.testing.assert_allclose(vals, f.minimum, atol=1e-5)
    rnd = f.value(np.random.default_rng(0).random((4000, f.dim)))
    assert rnd.min() > f.minimum and rnd.shape == (4000,)
    assert f.optimum == -f.minimum and f.reward(f.minimizers[0]) == pytest.approx(f.optimum, abs=1e-5)


def test_literature_values_and_domain_scaling():
    assert bf.FUNCTIONS["branin"].minimum == pytest.approx(0.397887, abs=1e-6)
    assert bf.FUNCTIONS["hartmann6"].minimum == pytest.approx(-3.32237, abs=1e-5)
    br = bf.FUNCTIONS["branin"]
    np.testing.assert_allclose(br.to_domain(br.minimizers), [[-np.pi, 12.275], [np.pi, 2.275], [9.42478, 2.475]],
                               atol=1e-6)
    # Branin at the domain corner (-5, 0): (0 - b·25 - 5c - 6)^2 + 10(1 - t)cos(-5) + 10
    b, c, t = 5.1 / (4 * np.pi**2), 5 / np.pi, 1 / (8 * np.pi)
    assert bf.branin(np.zeros(2)) == pytest.approx((-b * 25 - 5 * c - 6) ** 2 + 10 * (1 - t) * np.cos(-5) + 10)
    np.testing.assert_allclose(bf.ackley(np.full(3, 4 / 9)), 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="dimension 2"):
        bf.branin(np.zeros(3))
    with pytest.raises(ValueError, match="2 dimensions"):
        bf.make_function("branin", 3)
    with pytest.raises(ValueError, match="unknown BO function"):
        bf.make_function("rosenbrock")


def test_jax_input_gives_the_same_values_under_jit():
    x = np.random.default_rng(1).random((5, 6))
    for fn in (bf.hartmann6, bf.ackley, bf.drawnn):
        np.testing.assert_allclose(np.asarray(jax.jit(fn)(jnp.asarray(x, jnp.float32))), fn(x), rtol=2e-5, atol=2e-4)
    np.testing.assert_allclose(np.asarray(jax.jit(bf.branin)(jnp.asarray(x[:, :2]))), bf.branin(x[:, :2]), rtol=1e-5)


def test_drawnn_is_fixed_and_its_estimated_minimum_is_attained():
    f = bf.make_function("drawnn", 8)
    assert f.estimated and f.name == "drawnn8"
    fresh = bf.drawnn_weights.__wrapped__(8)  # recomputed, not the lru_cache's stored tuple
    for a, b in zip(fresh, bf.drawnn_weights(8), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(bf.drawnn_weights.__wrapped__(8, seed=1)[0], fresh[0])  # the seed sets the network
    assert float(f.value(f.minimizers[0])) == pytest.approx(f.minimum)
    assert f.value(np.random.default_rng(2).random((5000, 8))).min() >= f.minimum
    assert (f.minimizers >= 0).all() and (f.minimizers <= 1).all()
