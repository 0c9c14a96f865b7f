"""Bad inputs at the public entry points give a clear ``ValueError`` / ``TypeError`` (or the documented subclass).

One table: each case is ``(callable, expected exception, words that must all appear in the message)``.  The callables
take a small context ``c`` (an agent and its state, a ``BayesOpt``, envs, an empty folder) built once per module.

Cases whose entry point exists but lacks the check are kept in the table, marked
``xfail(strict=True, reason="<file>: <function> ...")``: they fail today for the stated reason and will turn into a
hard failure (XPASS) the moment the check lands, so the mark must then be removed.  No case is skipped.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit import checkpoint, validation

NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def c(tmp_path_factory):
    """Shared objects for the table (built once: the agent's jitted observe compiles only on a valid call)."""
    empty = tmp_path_factory.mktemp("empty_dir")
    model = bk.models.MLP(features=(4,), out=3)
    agent = bk.agents.BanditAgent(model, "ekf", "thompson")
    state = agent.init(jax.random.PRNGKey(0), jnp.zeros(2))
    wheel = gymnasium.make("banditkit/Wheel-v0")
    wheel.reset(seed=0)
    branin = gymnasium.make("banditkit/Branin-v0")
    branin.reset(seed=0)
    opt = bk.BayesOpt(bounds=[(-5, 10), (0, 15)], seed=0)
    not_ckpt = os.path.join(empty, "plain.npz")
    np.savez(not_ckpt, a=np.ones(2))
    os.makedirs(os.path.join(empty, "sub"), exist_ok=True)
    return SimpleNamespace(
        agent=agent, state=state, ctx=jnp.ones(2), model=model, wheel=wheel, branin=branin, opt=opt,
        empty=str(os.path.join(empty, "sub")), missing=str(os.path.join(empty, "does", "not", "exist")),
        not_ckpt=not_ckpt,
    )  # fmt: skip


def _key():
    return jax.random.PRNGKey(1)


def case(id, fn, exc, *words, xfail=None):
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(fn, exc, words, id=id, marks=marks)


CASES = [
    # ---- agent.observe / act: rewards, contexts, actions -----------------------------------------------------
    case("observe-nan-reward", lambda c: c.agent.observe(c.state, c.ctx, 1, NAN), ValueError,
         "reward", "finite", "nan"),
    case("observe-inf-reward", lambda c: c.agent.observe(c.state, c.ctx, 1, INF), ValueError,
         "reward", "finite", "inf"),
    case("observe-neg-inf-reward", lambda c: c.agent.observe(c.state, c.ctx, 0, -np.inf), ValueError,
         "reward", "finite"),
    case("observe-nan-context", lambda c: c.agent.observe(c.state, jnp.array([NAN, 1.0]), 1, 1.0), ValueError,
         "context", "finite"),
    case("observe-inf-context", lambda c: c.agent.observe(c.state, jnp.array([1.0, INF]), 1, 1.0), ValueError,
         "context", "finite"),
    case("observe-string-reward", lambda c: c.agent.observe(c.state, c.ctx, 1, "1.0"), TypeError, "reward", "numeric"),
    case("observe-action-too-big", lambda c: c.agent.observe(c.state, c.ctx, 3, 1.0), ValueError, "action 3",
         "out of range", "0..2"),
    case("observe-action-negative", lambda c: c.agent.observe(c.state, c.ctx, -1, 1.0), ValueError, "out of range"),
    case("observe-wrong-context-shape", lambda c: c.agent.observe(c.state, jnp.ones(3), 1, 1.0), ValueError,
         "context", "shape", "(2,)"),
    case("act-wrong-context-shape", lambda c: c.agent.act(_key(), c.state, jnp.ones(3)), ValueError, "context",
         "shape", "(2,)"),
    case("act-nan-context", lambda c: c.agent.act(_key(), c.state, jnp.array([NAN, 1.0])), ValueError, "context",
         "finite"),
    case("observe-vector-reward", lambda c: c.agent.observe(c.state, c.ctx, 1, jnp.ones(2)), ValueError, "reward",
         "shape"),
    case("agent-unknown-backend", lambda c: bk.agents.BanditAgent(c.model, "nope", "thompson"), ValueError,
         "unknown posterior backend", "'nope'", "hilofi", "lofi", "ekf"),
    case("agent-unknown-policy", lambda c: bk.agents.BanditAgent(c.model, "ekf", "nope"), ValueError,
         "unknown policy", "thompson", "ucb"),
    case("agent-bad-model", lambda c: bk.agents.BanditAgent(object(), "ekf", "thompson"), TypeError, "model"),
    case("make-agent-unknown-posterior", lambda c: bk.agents.make_agent("nope-thompson", c.wheel), ValueError,
         "nope-thompson", "hilofi", "neural_linear"),
    case("make-agent-unknown-policy", lambda c: bk.agents.make_agent("ekf-nope", c.wheel), ValueError,
         "unknown policy", "thompson"),
    # ---- registries --------------------------------------------------------------------------------------------
    case("posteriors-get-unknown", lambda c: bk.posteriors.get("hilofy"), ValueError, "unknown posterior backend",
         "hilofi", "lofi", "ekf"),
    case("policies-get-unknown", lambda c: bk.policies.get("tompson"), ValueError, "unknown policy", "thompson"),
    case("run-unknown-env", lambda c: bk.run("banditkit/Nope-v0", "ekf-thompson", steps=5, seeds=1), ValueError,
         "Nope", "banditkit/Mushroom-v0", "banditkit/Wheel-v0"),
    case("run-unknown-agent", lambda c: bk.run("banditkit/Wheel-v0", "nope-thompson", steps=5, seeds=1), ValueError,
         "nope", "hilofi"),
    case("run-zero-steps", lambda c: bk.run("banditkit/Wheel-v0", "ekf-thompson", steps=0, seeds=1), ValueError,
         "steps", "positive"),
    case("run-zero-seeds", lambda c: bk.run("banditkit/Wheel-v0", "ekf-thompson", steps=5, seeds=0), ValueError,
         "seeds"),
    case("policy-ucb-negative-beta", lambda c: bk.policies.ucb(beta=-1.0), ValueError, "beta", ">= 0"),
    case("policy-eps-out-of-range", lambda c: bk.policies.epsilon_greedy(epsilon=1.5), ValueError, "epsilon", "[0, 1]"),
    # ---- posterior factories -----------------------------------------------------------------------------------
    case("posterior-last-layer-unknown",
         lambda c: bk.posteriors.hilofi(c.model.apply, last_layer="nohead").init(
             c.model.init(jax.random.PRNGKey(0), jnp.zeros(2))),
         ValueError, "last_layer='nohead'", "head"),
    case("posterior-negative-init-cov", lambda c: bk.posteriors.ekf(c.model.apply, init_cov=-1.0), ValueError,
         "init_cov", ">= 0 (0 freezes the block)"),
    case("posterior-negative-dynamics-cov", lambda c: bk.posteriors.ekf(c.model.apply, dynamics_cov=-0.1), ValueError,
         "dynamics_cov", ">= 0"),
    # lofi's rank=0 is the diagonal VD-EKF by design (seed 000 App. A.4); a negative rank is an error
    case("posterior-negative-rank", lambda c: bk.posteriors.lofi(c.model.apply, rank=-1), ValueError, "rank", ">= 0"),
    case("posterior-zero-rank-lrkf", lambda c: bk.posteriors.lrkf(c.model.apply, rank=0), ValueError, "rank"),
    # ---- environments ------------------------------------------------------------------------------------------
    case("env-step-action-out-of-range", lambda c: c.wheel.step(99), ValueError, "action 99", "out of range", "0..4"),
    case("env-step-negative-action", lambda c: c.wheel.step(-1), ValueError, "out of range"),
    case("env-step-float-action", lambda c: c.wheel.step(1.5), TypeError, "integer", "1.5"),
    case("env-step-array-action", lambda c: c.wheel.step(np.array([0, 1])), TypeError, "single integer"),
    case("bo-env-point-outside", lambda c: c.branin.step(np.array([1.5, 0.2])), ValueError, "outside", "[0.0, 1.0]"),
    case("bo-env-wrong-dim", lambda c: c.branin.step(np.array([0.5, 0.2, 0.1])), ValueError, "dimension 2"),
    case("bo-env-nan-point", lambda c: c.branin.step(np.array([NAN, 0.2])), ValueError, "finite"),
    case("env-bad-dim", lambda c: gymnasium.make("banditkit/Ackley-v0", dim=0), ValueError, "dim", "positive"),
    # ---- Bayesian optimisation ---------------------------------------------------------------------------------
    case("bo-bounds-low-above-high", lambda c: bk.BayesOpt(bounds=[(1, 0), (0, 1)]), ValueError, "low < high",
         "dimension 0"),
    case("bo-bounds-low-equals-high", lambda c: bk.BayesOpt(bounds=[(0, 1), (2, 2)]), ValueError, "low < high",
         "dimension 1"),
    case("bo-bounds-wrong-shape", lambda c: bk.BayesOpt(bounds=[(0, 1, 2)]), ValueError, "(low, high)", "(dim, 2)"),
    case("bo-bounds-not-finite", lambda c: bk.BayesOpt(bounds=[(0, INF)]), ValueError, "finite"),
    case("bo-bounds-not-numbers", lambda c: bk.BayesOpt(bounds=[("a", "b")]), TypeError, "bounds"),
    case("bo-unknown-surrogate", lambda c: bk.BayesOpt(bounds=[(0, 1)], surrogate="nope"), ValueError, "nope",
         "hilofi"),
    case("bo-unknown-acquisition", lambda c: bk.BayesOpt(bounds=[(0, 1)], acquisition="nope"), ValueError,
         "acquisition", "thompson", "ei"),
    case("bo-bad-direction", lambda c: bk.BayesOpt(bounds=[(0, 1)], direction="up"), ValueError, "direction",
         "minimize"),
    case("tell-point-outside", lambda c: c.opt.tell([11.0, 1.0], 1.0), ValueError, "outside", "[-5.0, 10.0]"),
    case("tell-wrong-dimension", lambda c: c.opt.tell([1.0], 1.0), ValueError, "dimension 2"),
    case("tell-nan-y", lambda c: c.opt.tell([1.0, 1.0], NAN), ValueError, "y", "finite", "nan"),
    case("tell-inf-y", lambda c: c.opt.tell([1.0, 1.0], INF), ValueError, "y", "finite", "inf"),
    case("tell-nan-x", lambda c: c.opt.tell([NAN, 1.0], 1.0), ValueError, "x", "finite"),
    case("tell-batch-length-mismatch", lambda c: c.opt.tell([[1.0, 1.0], [2.0, 2.0]], [1.0]), ValueError,
         "2 rows", "one value per row"),
    case("optimize-bad-bounds", lambda c: bk.bo.optimize(lambda x: 0.0, [(1, 0)], n_evals=3), ValueError,
         "low < high"),
    case("bo-load-missing-file", lambda c: bk.BayesOpt.load(os.path.join(c.empty, "nope.bk")), FileNotFoundError,
         "does not exist"),
    # ---- datasets ------------------------------------------------------------------------------------------------
    case("dataset-unknown-name", lambda c: bk.datasets.load("mnsit"), ValueError, "unknown dataset", "mnist",
         "mushroom", "kuairec"),
    case("dataset-data-dir-missing", lambda c: bk.datasets.load("kuairec", data_dir=c.missing), ValueError,
         "does not exist", "does/not/exist"),
    case("dataset-data-dir-lacks-files", lambda c: bk.datasets.load("jester", data_dir=c.empty), ValueError,
         "lacks", "jester_data_40jokes_19181users.npy"),
    case("dataset-data-dir-lacks-files-kuairec", lambda c: bk.datasets.load("kuairec", data_dir=c.empty), ValueError,
         "small_matrix.csv"),
    case("dataset-data-dir-lacks-files-covertype", lambda c: bk.datasets.load("covertype", data_dir=c.empty),
         ValueError, "covtype.data"),
    case("dataset-manual-without-dir", lambda c: bk.datasets.load("census"), FileNotFoundError, "data_dir",
         "synthetic=True"),
    case("dataset-not-fetched", lambda c: bk.datasets.load("mnist"), FileNotFoundError, "banditkit data fetch mnist"),
    case("env-data-dir-missing", lambda c: gymnasium.make("banditkit/KuaiRec-v0", data_dir=c.missing), ValueError,
         "does not exist"),
    case("env-data-not-fetched", lambda c: gymnasium.make("banditkit/MNIST-v0"), FileNotFoundError,
         "banditkit data fetch mnist"),
    # ---- checkpoints and shared validators ------------------------------------------------------------------------
    case("checkpoint-not-a-checkpoint", lambda c: checkpoint.load(c.not_ckpt), ValueError,
         "not a banditkit checkpoint"),
    case("checkpoint-missing", lambda c: checkpoint.load(c.missing), FileNotFoundError, "does not exist"),
    case("validation-check-dir-is-file", lambda c: validation.check_dir(c.not_ckpt), ValueError, "is a file"),
    case("validation-choice-suggests", lambda c: validation.check_choice("policy", "tompson", ["thompson", "ucb"]),
         ValueError, "did you mean 'thompson'", "thompson, ucb"),
    case("validation-shape", lambda c: validation.check_shape("context", np.zeros((2, 3)), (None, 4)), ValueError,
         "context must have shape (any, 4)", "(2, 3)"),
]  # fmt: skip


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    """Every case sees an empty dataset cache (so 'not fetched' is deterministic on any machine)."""
    monkeypatch.setenv("BANDITKIT_DATA", str(tmp_path / "cache"))


@pytest.mark.parametrize("fn, exc, words", CASES)
def test_bad_input(c, fn, exc, words):
    with pytest.raises(exc) as info:
        fn(c)
    message = str(info.value)
    missing = [w for w in words if w not in message]
    assert not missing, f"message lacks {missing}: {message!r}"


def test_table_size():
    """The report quotes this number; keep it honest."""
    n_xfail = sum(1 for p in CASES if p.marks)
    assert len(CASES) >= 60 and n_xfail <= 8, (len(CASES), n_xfail)


def test_valid_calls_still_work(c):
    """The checks do not reject good input: a finite observe and an in-bounds tell go through."""
    s = c.agent.observe(c.state, c.ctx, 2, 0.5)
    assert int(s.step) == 1
    c.opt.tell([0.0, 1.0], 3.0)
    assert c.opt.n_evals == 1
    obs, r, term, trunc, info = c.wheel.step(4)
    assert np.isfinite(r) and "regret" in info
