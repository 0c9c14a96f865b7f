"""banditkit.debug: the checking mode finds the first non-finite step and names the field."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import banditkit as bk
from banditkit import debug


@pytest.fixture(scope="module")
def setup():
    model = bk.models.MLP(features=(4,), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(2))
    post = bk.posteriors.ekf(model.apply, bk.likelihoods.Gaussian(0.1), dynamics_cov=1e-4)
    xs = jax.random.normal(jax.random.PRNGKey(1), (40, 2))
    ys = jnp.sin(xs[:, 0])[:, None]
    return post, post.init(params), xs, ys


def test_clean_run_reports_none(setup):
    post, state, xs, ys = setup
    r = debug.first_nonfinite(post, state, xs, ys)
    assert r == {"step": None, "field": None, "fields": [], "steps": 40, "finite_steps": 40}


@pytest.mark.parametrize("k", [0, 13, 39])
def test_nan_observation_at_step_k(setup, k):
    post, state, xs, ys = setup
    r = debug.first_nonfinite(post, state, xs, ys.at[k, 0].set(jnp.nan))
    assert r["step"] == k and r["finite_steps"] == k
    assert r["field"] == "y"
    # the NaN reaches the mean through the innovation; the covariance does not depend on y
    assert ".mean" in r["fields"] and ".cov" not in r["fields"]


def test_inf_input_and_pytree_inputs(setup):
    post, state, xs, ys = setup
    r = debug.first_nonfinite(post, state, xs.at[7, 1].set(jnp.inf), ys[:, 0])  # (T,) ys accepted
    assert r["step"] == 7 and r["field"] == "x"
    assert {"predictive.mean", "predictive.cov", ".mean", ".cov"} <= set(r["fields"])

    # x as a pytree (context, one-hot action): field names carry the path
    model = bk.models.MLP(features=(3,), out=1)
    apply = lambda p, x: model.apply(p, jnp.concatenate([x[0], x[1]]))
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(4))
    post2 = bk.posteriors.ekf(apply)
    ctx = jnp.ones((10, 2)).at[4, 0].set(jnp.nan)
    act = jax.nn.one_hot(jnp.arange(10) % 2, 2)
    r2 = debug.first_nonfinite(post2, post2.init(params), (ctx, act), jnp.zeros(10), check_predictive=False)
    assert r2["step"] == 4 and r2["field"] == "x[0]"


def test_state_blow_up_inside_the_filter_is_located():
    """A filter whose own arithmetic overflows at step 5 (finite inputs): the state field is reported."""
    from banditkit.posteriors.base import Posterior

    def update(s, x, y):
        return {"a": s["a"] * x[0], "b": s["b"] + y[0]}

    toy = Posterior(
        init=lambda p: p,
        predict=lambda s: s,
        update=update,
        predictive=lambda s, x: (s["b"][None], jnp.eye(1)),
        sample=lambda k, s: s,
        mean=lambda s: s,
    )
    state = {"a": jnp.float32(1.0), "b": jnp.float32(0.0)}
    xs = jnp.full((10, 1), 1e10, jnp.float32)  # 1e10^4 = 1e40 overflows float32 at the 4th product (step 3)
    r = debug.first_nonfinite(toy, state, xs, jnp.zeros(10))
    assert r["step"] == 3 and r["fields"] == ["['a']"]


def test_length_mismatch_is_rejected(setup):
    post, state, xs, ys = setup
    with pytest.raises(ValueError, match="same number of steps"):
        debug.first_nonfinite(post, state, xs[:5], ys)


def test_debug_nans_context_manager_raises_and_restores():
    f = jax.jit(lambda x: jnp.log(x) * 0.0)
    assert jnp.isnan(f(-1.0))  # silently NaN by default
    with debug.debug_nans():
        assert jax.config.jax_debug_nans
        with pytest.raises(FloatingPointError):
            f(-1.0)
    assert not jax.config.jax_debug_nans and not jax.config.jax_debug_infs


def test_nonfinite_fields(setup):
    _, state, _, _ = setup
    assert debug.nonfinite_fields(state) == []
    assert debug.nonfinite_fields(state._replace(cov=state.cov.at[1, 1].set(-jnp.inf))) == [".cov"]
