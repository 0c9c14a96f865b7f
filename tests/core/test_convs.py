"""banditkit._xla.conv.canonical_convs: the same function, every convolution in XLA:CPU's fast layout."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend import core as jcore

from banditkit._xla.conv import _fast_specs, canonical_convs

LAYOUTS = [  # (lhs, rhs, out) specs, spatial rank, grouping
    (("NCHW", "OIHW", "NCHW"), 2, 1),
    (("NHWC", "HWIO", "NHWC"), 2, 1),
    (("NHWC", "OIHW", "NCHW"), 2, 2),
    (("NWC", "WIO", "NWC"), 1, 1),
    (("CHWN", "IHWO", "HWNC"), 2, 1),
]


def _conv_eqns(jaxpr: jcore.Jaxpr):
    for eqn in jaxpr.eqns:
        if eqn.primitive is lax.conv_general_dilated_p:
            yield eqn
        for sub in jcore.jaxprs_in_params(eqn.params):
            yield from _conv_eqns(sub)


def _operands(specs, nd, groups, key):
    """Random lhs / rhs for ``specs`` (batch 3, 4 input channels, 6 output channels, spatial 9 / kernel 3)."""
    dn = lax.conv_dimension_numbers((1,) * (nd + 2), (1,) * (nd + 2), specs)
    lhs_shape, rhs_shape = [0] * (nd + 2), [0] * (nd + 2)
    for axis, size in zip(dn.lhs_spec, (3, 4, *[9] * nd), strict=True):
        lhs_shape[axis] = size
    for axis, size in zip(dn.rhs_spec, (6, 4 // groups, *[3] * nd), strict=True):
        rhs_shape[axis] = size
    k1, k2 = jax.random.split(key)
    return jax.random.normal(k1, lhs_shape), jax.random.normal(k2, rhs_shape)


@pytest.mark.parametrize("specs,nd,groups", LAYOUTS)
def test_same_convolution_and_kernel_gradient_in_every_layout(specs, nd, groups):
    lhs, rhs = _operands(specs, nd, groups, jax.random.PRNGKey(0))

    def f(x, k):
        return lax.conv_general_dilated(x, k, (2,) * nd, [(1, 2)] * nd, rhs_dilation=(2,) * nd,
                                        dimension_numbers=specs, feature_group_count=groups)

    def loss_grads(x, k):  # both gradients: the kernel one is the batch-contracting convolution
        return jax.grad(lambda x, k: jnp.sum(jnp.tanh(f(x, k)) ** 2), argnums=(0, 1))(x, k)

    for fun in (f, loss_grads):
        want = jax.jit(fun)(lhs, rhs)
        got = jax.jit(canonical_convs(fun))(lhs, rhs)
        for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)
        convs = list(_conv_eqns(jax.make_jaxpr(canonical_convs(fun))(lhs, rhs).jaxpr))
        assert convs and all(e.params["dimension_numbers"] == _fast_specs(nd) for e in convs)


class _TinyConvNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.elu(nn.Conv(4, (3, 3), padding="SAME")(jnp.reshape(x, (1, 8, 8, 1))))
        x = nn.elu(nn.Conv(3, (3, 3), padding="VALID")(x))
        return nn.Dense(2)(jnp.ravel(x))


def _sgd_steps(n):
    """``n`` full-batch SGD steps of a two-convolution net on 16 images, in ``lax.scan`` (the warm-up fit's loop)."""
    model = _TinyConvNet()
    xs = jax.random.uniform(jax.random.PRNGKey(1), (16, 64))
    ys = jax.random.normal(jax.random.PRNGKey(2), (16, 2))

    def loss(params):
        return jnp.mean((jax.vmap(lambda x: model.apply(params, x))(xs) - ys) ** 2)

    def run(params):
        def step(p, _):
            g = jax.grad(loss)(p)
            return jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, p, g), loss(p)

        return lax.scan(step, params, None, length=n)

    return model.init(jax.random.PRNGKey(0), xs[0]), run


def test_sgd_loop_in_a_scan_is_rewritten_and_compiles_to_fast_convolutions():
    params, run = _sgd_steps(3)
    batch = jax.tree_util.tree_map(lambda a: jnp.stack([a, 0.9 * a]), params)  # two seeds, vmapped
    plain = jax.jit(jax.vmap(run)).lower(batch).compile()
    fast = jax.jit(canonical_convs(jax.vmap(run))).lower(batch).compile()
    want, got = plain(batch), fast(batch)
    for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-6)
    # XLA keeps the explicit transposes: every convolution of the compiled loop is in the fast layout
    hlo = [ln for ln in fast.as_text().splitlines() if " convolution(" in ln]
    assert hlo and all("dim_labels=b01f_01io->b01f" in ln for ln in hlo), hlo
    slow = [ln for ln in plain.as_text().splitlines() if " convolution(" in ln]
    assert any("dim_labels=b01f_01io->b01f" not in ln for ln in slow)  # what the rewrite is for


def test_functions_without_convolutions_and_pytrees_pass_through():
    def f(tree, scale):
        return {"y": jnp.sin(tree["a"]) * scale, "z": (tree["b"] @ tree["b"].T,)}

    tree = {"a": jnp.arange(3.0), "b": jnp.ones((2, 4))}
    want, got = f(tree, 2.0), canonical_convs(f)(tree, 2.0)
    assert jax.tree_util.tree_structure(want) == jax.tree_util.tree_structure(got)
    for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
