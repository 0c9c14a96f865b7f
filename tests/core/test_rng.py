"""``bk.rng``: the flat-drawn random functions return exactly what their ``jax.random`` namesakes return (both
threefry modes, eagerly, jitted and vmapped over keys), and the flat initialisers give exactly Flax's default
parameters — so ``bk.models`` and every posterior draw are unchanged by using them."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fast_compile import compiled_call

import banditkit as bk
from banditkit._xla import flat_random as rng

SHAPES = [(), (5,), (4, 3), (2, 3, 5)]


def _pairs(key):
    """``[(bk.rng draw, jax.random draw)]`` for every function and shape, and vmapped over 3 keys."""
    out = []
    for shape in SHAPES:
        out += [
            (rng.normal(key, shape), jax.random.normal(key, shape)),
            (rng.uniform(key, shape, minval=-2.0, maxval=3.0), jax.random.uniform(key, shape, minval=-2.0, maxval=3.0)),
            (rng.truncated_normal(key, -2, 2, shape), jax.random.truncated_normal(key, -2, 2, shape)),
            (rng.rademacher(key, shape, jnp.float32), jax.random.rademacher(key, shape, jnp.float32)),
        ]
    keys = jax.random.split(key, 3)  # the runner's seeds axis
    out.append((jax.vmap(lambda k: rng.normal(k, (4, 3)))(keys),
                jax.vmap(lambda k: jax.random.normal(k, (4, 3)))(keys)))
    out.append((rng.normal(key, (3, 2), jnp.float16), jax.random.normal(key, (3, 2), jnp.float16)))
    return out


@pytest.mark.parametrize("partitionable", [True, False])
def test_draws_equal_jax_random_bit_for_bit(partitionable):
    """Inside one jitted program (compile time dominates), and eagerly for one shape."""
    before = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", partitionable)
    try:
        key = jax.random.PRNGKey(11)
        pairs = compiled_call(_pairs, key)
        for ours, theirs in pairs:
            assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
            np.testing.assert_array_equal(ours, theirs)
        seeds = pairs[-2][0]
        assert not np.allclose(seeds[0], seeds[1])  # vmapped keys give different draws
        np.testing.assert_array_equal(np.asarray(rng.normal(key, (4, 3))), np.asarray(jax.random.normal(key, (4, 3))))
    finally:
        jax.config.update("jax_threefry_partitionable", before)


def test_new_style_keys_work_too():
    key = jax.random.key(3)
    np.testing.assert_array_equal(np.asarray(rng.normal(key, (3, 2))), np.asarray(jax.random.normal(key, (3, 2))))


@pytest.mark.parametrize("shape", [(7, 4), (5, 5, 6, 16), (3, 3, 1, 6)])
def test_lecun_normal_equals_flax_default_kernel_init(shape):
    key = jax.random.PRNGKey(2)
    ours, theirs = rng.lecun_normal()(key, shape), nn.initializers.lecun_normal()(key, shape)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize(
    "mode, distribution, axes",
    [("fan_in", "normal", dict(in_axis=-2, out_axis=0)),  # Flax's Embed default
     ("fan_out", "uniform", dict()), ("fan_avg", "truncated_normal", dict(in_axis=0, out_axis=-1))],
)
def test_variance_scaling_equals_jax(mode, distribution, axes):
    key, shape = jax.random.PRNGKey(5), (9, 3, 4)
    ours = rng.variance_scaling(2.0, mode, distribution, **axes)(key, shape)
    theirs = nn.initializers.variance_scaling(2.0, mode, distribution, **axes)(key, shape)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_variance_scaling_rejects_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        rng.variance_scaling(1.0, "fan_geo", "normal")
    with pytest.raises(ValueError, match="distribution"):
        rng.variance_scaling(1.0, "fan_in", "cauchy")
    with pytest.raises(ValueError, match="rank >= 2"):
        rng.lecun_normal()(jax.random.PRNGKey(0), (5,))


class _FlaxDefaultMLP(nn.Module):
    """``bk.models.MLP`` (elu) written with Flax's default initialisers, as the reference."""

    @nn.compact
    def __call__(self, x):
        x = nn.elu(nn.Dense(6, name="dense_0")(x))
        return nn.Dense(2, name="head")(x)


class _FlaxDefaultEmbedding(nn.Module):
    @nn.compact
    def __call__(self, x):
        idx = jnp.clip(jnp.round(x[0]).astype(jnp.int32), 0, 4)
        z = jnp.concatenate([nn.Embed(5, 10, name="embed")(idx), nn.Dense(10, name="features")(x[1:])])
        z = nn.elu(nn.Dense(8, name="dense_0")(z))
        return nn.Dense(1, name="head")(z)


class _FlaxDefaultLeNet5(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.elu(nn.Conv(6, (5, 5), padding="SAME", name="conv_0")(jnp.reshape(x, (1, 28, 28, 1))))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = nn.avg_pool(nn.elu(nn.Conv(16, (5, 5), padding="VALID", name="conv_1")(x)), (2, 2), strides=(2, 2))
        x = nn.elu(nn.Dense(84, name="dense_1")(nn.elu(nn.Dense(120, name="dense_0")(jnp.ravel(x)))))
        return nn.Dense(3, name="head")(x)


def _assert_same_params(ours, reference, x):
    a, b = compiled_call(lambda k: (ours.init(k, x), reference.init(k, x)), jax.random.PRNGKey(0))
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def test_models_initialise_exactly_as_with_flax_defaults():
    _assert_same_params(bk.models.MLP(features=(6,), out=2), _FlaxDefaultMLP(), jnp.zeros(3))
    _assert_same_params(bk.models.EmbeddingMLP(num_items=5, hidden=(8,)), _FlaxDefaultEmbedding(), jnp.zeros(4))
    _assert_same_params(bk.models.LeNet5(out=3), _FlaxDefaultLeNet5(), jnp.zeros(784))
