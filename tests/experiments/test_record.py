"""``run(record=...)``: functions of the agent state recorded per round, in both loops and across a resume."""

from __future__ import annotations

import gymnasium
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from chunk_stop import Stop, stop_at_chunk

import banditkit as bk

RECORD = {"observed": lambda s: s.step, "r_hat": lambda s: bk.posteriors.noise_variance(s.posterior)}


KW = dict(steps=60, seeds=2, progress=False, chunk_size=20, record=RECORD)


@pytest.fixture(scope="module")
def env_agent():
    env = gymnasium.make("banditkit/Wheel-v0")
    return env, bk.agents.make_agent("lofi-thompson", env, adaptive_noise=True, obs_noise=0.5)


@pytest.fixture(scope="module")
def compiled_run(env_agent):
    """The compiled run with ``record`` (60 rounds, 2 seeds, chunks of 20): both tests below read it, neither
    changes it."""
    env, agent = env_agent
    return bk.run(env, agent, **KW)


def test_recorded_columns_in_both_loops(env_agent, compiled_run):
    """``state.step`` after round t's observe is t + 1 (an exact oracle); the learned variance is the same in the
    compiled and the Gymnasium loop, and it moves (rewards of the Wheel are noise-free: it falls from 0.5)."""
    env, agent = env_agent
    a = compiled_run
    b = bk.run(env, agent, compiled=False, **KW)
    assert list(a.columns[-2:]) == ["observed", "r_hat"] and list(b.columns) == list(a.columns)
    for df in (a, b):
        assert (df.observed == df.step + 1).all()
    np.testing.assert_array_equal(a.action, b.action)
    np.testing.assert_allclose(a.r_hat, b.r_hat, rtol=1e-4)
    last = a[a.step == 59].r_hat.to_numpy()
    assert (last < 0.5).all() and np.isfinite(a.r_hat).all()


def test_record_survives_a_resume_and_reaches_compare(env_agent, compiled_run, tmp_path):
    env, agent = env_agent
    kw, ref = KW, compiled_run
    ck = tmp_path / "rec.bk"

    with pytest.raises(Stop):  # the state after the first chunk is saved
        bk.run(env, agent, checkpoint=ck, save_every=0, on_chunk=stop_at_chunk(2), **kw)
    rest = bk.run(env, agent, checkpoint=ck, **kw)
    pd.testing.assert_frame_equal(rest, ref[ref.step >= 20].reset_index(drop=True))
    with pytest.raises(ValueError, match="another run"):  # the checkpoint's run recorded other columns
        bk.run(env, agent, checkpoint=ck, **{**kw, "record": {"observed": RECORD["observed"]}})
    both = bk.compare({"vb": agent, "fixed": "lofi-thompson"}, env, steps=20, seeds=1, progress=False,
                      record={"n": lambda s: s.step, "r_hat": RECORD["r_hat"]})
    assert (both.n == both.step + 1).all()
    vb, fixed = (both[both.agent == a] for a in ("vb", "fixed"))  # noise_variance is None for a fixed variance
    assert np.isfinite(vb.r_hat).all() and fixed.r_hat.isna().all() and len(fixed) == 20


def test_record_errors_say_what_is_wrong(env_agent):
    env, agent = env_agent
    kw = dict(steps=5, progress=False)
    with pytest.raises(ValueError, match="'reward'.*other than"):
        bk.run(env, agent, record={"reward": lambda s: s.step}, **kw)
    with pytest.raises(TypeError, match="function of the agent state"):
        bk.run(env, agent, record={"x": 3}, **kw)
    with pytest.raises(TypeError, match="must be a dict"):
        bk.run(env, agent, record=[lambda s: s.step], **kw)
    with pytest.raises(ValueError, match=r"record\['v'\] must return one number per round.*\(3,\)"):
        bk.run(env, agent, record={"v": lambda s: jnp.zeros(3)}, **kw)
