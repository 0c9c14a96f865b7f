"""BanditAgent's construction-time labels and (issue 72, item 3) its public functions never mutating the agent."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.agents import AgentShapes, BanditAgent
from banditkit.models import MLP


def _agent(**kw):
    return BanditAgent(MLP(features=(4,), out=3), "lofi", "ucb", **kw)


def test_spec_and_posterior_name_are_constructor_arguments():
    a = _agent(spec="LoFi-UCB", posterior_name="lofi")
    assert (a.spec, a.posterior_name, a.name) == ("LoFi-UCB", "lofi", "lofi-ucb")
    b = _agent()
    assert b.spec is None and b.posterior_name == "lofi"
    assert _agent(posterior_name="mine").name == "mine-ucb"


def _fingerprint(agent) -> dict:
    """Every attribute of the agent by identity and by value (``repr`` reaches into dicts, NamedTuples, modules)."""
    return {k: (id(v), repr(v)) for k, v in vars(agent).items()}


def test_init_act_observe_never_write_to_the_agent():
    agent = BanditAgent(MLP(features=(4,), out=3), "lofi", "thompson", warmup_steps=2)  # num_actions found at init
    before = _fingerprint(agent)
    key = jax.random.PRNGKey(0)
    x = jnp.linspace(-1.0, 1.0, 5)
    st = agent.init(key, x)
    for t in range(3):
        a, st = agent.act(jax.random.fold_in(key, t), st, x + t)
        st = agent.observe(st, x + t, a, 0.5 * t)
    st = agent.observe_batch(st, jnp.stack([x, -x]), jnp.array([0, 2]), jnp.array([1.0, -1.0]))
    agent.propensity(key, st, x, 1)
    agent.action_probabilities(key, st, x)
    agent.warmup(key, st)
    jax.jit(jax.vmap(agent.init, in_axes=(0, None)))(jax.random.split(key, 2), x)  # a traced init as well
    assert _fingerprint(agent) == before
    assert agent.num_actions is None and agent.num_actions_of(st) == 3
    assert st.shapes.contexts == ((5,),) and jax.tree_util.tree_leaves(st.shapes) == []  # static: no leaves


def test_two_inits_with_different_contexts_do_not_interfere():
    agent = BanditAgent(MLP(features=(4,), out=3), "lofi", "ucb")
    fresh = BanditAgent(MLP(features=(4,), out=3), "lofi", "ucb")
    key = jax.random.PRNGKey(1)
    x3, x6 = jnp.array([0.3, -0.2, 1.0]), jnp.linspace(-1.0, 1.0, 6)
    s3 = agent.init(key, x3)
    s6 = agent.init(key, x6)  # a second context shape: the first state still works, and each keeps its own shape
    ref = fresh.init(key, x3)
    for t in range(3):
        k_t = jax.random.fold_in(key, t)
        a3, s3 = agent.act(k_t, s3, x3 * t)
        a6, s6 = agent.act(k_t, s6, x6 * t)
        r, ref = fresh.act(k_t, ref, x3 * t)
        assert int(a3) == int(r)
        s3, ref = agent.observe(s3, x3 * t, a3, 1.0), fresh.observe(ref, x3 * t, r, 1.0)
        s6 = agent.observe(s6, x6 * t, a6, -1.0)
    for got, want in zip(jax.tree_util.tree_leaves(s3), jax.tree_util.tree_leaves(ref), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(ValueError, match=r"context has shape \(6,\) but the agent was initialised with contexts of "
                                         r"shape \(3,\)"):
        agent.act(key, s3, x6)
    per_arm = BanditAgent(MLP(features=(4,), out=1), "lofi", "thompson", per_arm=True)
    s4, s7 = per_arm.init(key, jnp.ones((4, 2))), per_arm.init(key, jnp.ones((7, 2)))
    assert (per_arm.num_actions_of(s4), per_arm.num_actions_of(s7)) == (4, 7)
    assert s7.shapes == AgentShapes(contexts=((7, 2),), num_actions=7)  # the public type of what init found
    assert int(per_arm.act(key, s7, jnp.eye(7, 2))[0]) in range(7)


def test_choose_and_update_are_act_and_observe_without_checks():
    agent = BanditAgent(MLP(features=(4,), out=3), "lofi", "thompson")
    key, x = jax.random.PRNGKey(2), jnp.array([0.5, -1.0])
    st = agent.init(key, x)
    assert int(agent.choose(key, st, x)) == int(agent.act(key, st, x)[0])
    mask = jnp.array([False, True, True])
    assert int(jax.jit(agent.choose)(key, st, x, mask)) == int(agent.act(key, st, x, mask)[0])
    via_update = jax.jit(agent.update)(st, x, jnp.int32(1), jnp.float32(0.7))
    via_observe = agent.observe(st, x, 1, 0.7)
    for got, want in zip(jax.tree_util.tree_leaves(via_update), jax.tree_util.tree_leaves(via_observe), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
