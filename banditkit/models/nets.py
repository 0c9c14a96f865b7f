"""The seeds' reward networks as Flax modules, each applied to ONE unbatched input.

Every module ends in a ``Dense`` named ``head``, so the hidden/last split of the HiLoFi family, neural-linear
and the last-layer Kalman filter can find the last layer by path, and takes ``return_features=True`` to
return the input of ``head`` (the last-layer features ``φ(x)``).  Batching is the caller's ``jax.vmap``.

``MLP(features=(50,), out=K)``             ``x (D,) -> Dense... -> head (out,)``; activation ``elu`` by default.
``LeNet5(out=K)``                          seed 003's ELU LeNet-5: ``x (784,)`` reshaped to ``(28, 28, 1)``;
                                           Conv6 5×5 SAME → elu → avgpool2 → Conv16 5×5 VALID → elu → avgpool2
                                           → 120 → elu → 84 → elu → head. ``out=1``: 60,941 parameters;
                                           ``out=10``: 61,706.
``EmbeddingMLP(num_items, ...)``           seed 003's KuaiRec model: ``x = [item_id, features...]``;
                                           ``Embed(num_items, 10)(item_id)`` ⊕ ``Dense(10)(features)`` → 3×Dense(50)
                                           elu → head (1,).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flax.linen as nn
import jax.numpy as jnp

from banditkit._xla import flat_random as rng

# Flax's default initialisers (same parameters) with flat draws: they compile several times faster on CPU
# (banditkit._xla.flat_random)
_KERNEL = rng.lecun_normal()
_EMBED = rng.variance_scaling(1.0, "fan_in", "normal", out_axis=0)


class MLP(nn.Module):
    """Fully connected network ``x (D,) -> (out,)`` with hidden widths ``features`` and a ``head`` layer."""

    features: Sequence[int] = (50,)
    out: int = 1
    activation: Callable = nn.elu

    @nn.compact
    def __call__(self, x, return_features: bool = False):
        x = jnp.ravel(x)
        for i, width in enumerate(self.features):
            x = self.activation(nn.Dense(width, kernel_init=_KERNEL, name=f"dense_{i}")(x))
        if return_features:
            return x
        return nn.Dense(self.out, kernel_init=_KERNEL, name="head")(x)


class LeNet5(nn.Module):
    """The seeds' LeNet-5 with ELU activations on a flattened 28×28 image ``x (784,)``."""

    out: int = 10
    activation: Callable = nn.elu

    @nn.compact
    def __call__(self, x, return_features: bool = False):
        x = jnp.reshape(x, (1, 28, 28, 1))
        x = self.activation(nn.Conv(6, (5, 5), padding="SAME", kernel_init=_KERNEL, name="conv_0")(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = self.activation(nn.Conv(16, (5, 5), padding="VALID", kernel_init=_KERNEL, name="conv_1")(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = jnp.ravel(x)
        x = self.activation(nn.Dense(120, kernel_init=_KERNEL, name="dense_0")(x))
        x = self.activation(nn.Dense(84, kernel_init=_KERNEL, name="dense_1")(x))
        if return_features:
            return x
        return nn.Dense(self.out, kernel_init=_KERNEL, name="head")(x)


class EmbeddingMLP(nn.Module):
    """Seed 003's KuaiRec model on ``x = [item_id, f_1..f_k]`` (item id stored as a float)."""

    num_items: int
    embed_dim: int = 10
    feature_dim: int = 10
    hidden: Sequence[int] = (50, 50, 50)
    out: int = 1
    activation: Callable = nn.elu

    @nn.compact
    def __call__(self, x, return_features: bool = False):
        idx = jnp.clip(jnp.round(x[0]).astype(jnp.int32), 0, self.num_items - 1)
        e = nn.Embed(self.num_items, self.embed_dim, embedding_init=_EMBED, name="embed")(idx)
        f = nn.Dense(self.feature_dim, kernel_init=_KERNEL, name="features")(x[1:])
        z = jnp.concatenate([e, f])
        for i, width in enumerate(self.hidden):
            z = self.activation(nn.Dense(width, kernel_init=_KERNEL, name=f"dense_{i}")(z))
        if return_features:
            return z
        return nn.Dense(self.out, kernel_init=_KERNEL, name="head")(z)
