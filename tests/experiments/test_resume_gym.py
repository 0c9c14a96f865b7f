"""Nothing lost in the Gymnasium loop either: ``run(compiled=False, checkpoint=path)`` saves the seed in progress,
and a resumed run (env replayed from its reset seed, every replayed reward checked) ends with exactly the rows of
a run never stopped — for any env, including one without a functional form."""

import gymnasium
import numpy as np
import pandas as pd
import pytest

from banditkit.experiments import checkpoints, runner

KW = dict(steps=60, seeds=[3, 5], chunk_size=10, progress=False)


class PlainEnv(gymnasium.Env):
    """A user's env: Gymnasium's API only (no ``functional``), wrapping Mushroom; ``noise`` adds global-RNG noise
    to the reward, so the env no longer replays from its reset seed."""

    def __init__(self, noise: bool = False, max_steps: int = 1000):
        import banditkit.environments  # noqa: F401  (registers the ids)

        self.inner = gymnasium.make("banditkit/Mushroom-v0", max_steps=max_steps).unwrapped
        self.observation_space, self.action_space = self.inner.observation_space, self.inner.action_space
        self.max_steps, self.noise = max_steps, noise

    def __getattr__(self, name):  # num_actions, default_model, ... as the wrapped env's; never its functional form
        if name in ("functional", "stream", "oracle") or name.startswith("_") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def reset(self, *, seed=None, options=None):
        return self.inner.reset(seed=seed, options=options)

    def step(self, action):
        obs, r, term, trunc, info = self.inner.step(action)
        return obs, r + (np.random.rand() if self.noise else 0.0), term, trunc, info


class Stop(Exception):
    pass


def _stop_at(n):
    chunks = []

    def on_chunk(df):
        chunks.append(df)
        if len(chunks) == n:
            raise Stop

    return on_chunk


@pytest.mark.parametrize("stop_chunk, rounds", [(3, {3: 20, 5: 0}), (8, {3: 60, 5: 10})])
def test_gymnasium_run_resumes_exactly(tmp_path, stop_chunk, rounds):
    """Stopped in the first seed or in the second (the first finished): the checkpoint says how far each seed got,
    and the resumed run returns exactly the reference rows after it, cumulative regret included."""
    assert not hasattr(PlainEnv().unwrapped, "functional")
    ref = runner.run(PlainEnv(), "hilofi-thompson", **KW)
    assert ref.attrs["mode"] == "gymnasium"
    ck = tmp_path / "state" / "hilofi.bk"
    with pytest.raises(Stop):
        runner.run(PlainEnv(), "hilofi-thompson", checkpoint=ck, save_every=0, on_chunk=_stop_at(stop_chunk), **KW)
    assert checkpoints.checkpoint_rounds(ck) == rounds  # the rows are delivered before the chunk's state is saved
    assert checkpoints.checkpoint_round(ck) == min(rounds.values())
    rest = runner.run(PlainEnv(), "hilofi-thompson", checkpoint=ck, **KW)
    done = ref.seed.map(rounds)
    pd.testing.assert_frame_equal(rest, ref[ref.step >= done].reset_index(drop=True))
    assert checkpoints.checkpoint_rounds(ck) == {3: 60, 5: 60}
    assert runner.run(PlainEnv(), "hilofi-thompson", checkpoint=ck, **KW).empty  # finished: nothing left to run


def test_gymnasium_resume_checks_the_env_and_the_run(tmp_path):
    ck = tmp_path / "lin.bk"
    with pytest.raises(Stop):
        runner.run(PlainEnv(), "linear-thompson", checkpoint=ck, save_every=0, on_chunk=_stop_at(2), **KW)
    with pytest.raises(ValueError, match="reward .* in round 0 .*reset seed alone"):
        runner.run(PlainEnv(noise=True), "linear-thompson", checkpoint=ck, **KW)
    with pytest.raises(ValueError, match="another run.*steps"):
        runner.run(PlainEnv(), "linear-thompson", checkpoint=ck, **{**KW, "steps": 70})
    with pytest.raises(ValueError, match="Gymnasium loop; resume it with compiled=False"):
        runner.run("banditkit/Mushroom-v0", "linear-thompson", checkpoint=ck, **KW)
    compiled = tmp_path / "compiled.bk"
    runner.run("banditkit/Mushroom-v0", "linear-thompson", checkpoint=compiled, **{**KW, "steps": 20})
    assert checkpoints.checkpoint_rounds(compiled) == {3: 20, 5: 20}
    with pytest.raises(ValueError, match="compiled loop; resume it with compiled=True"):
        runner.run("banditkit/Mushroom-v0", "linear-thompson", checkpoint=compiled, compiled=False,
                   **{**KW, "steps": 20})
    assert checkpoints.checkpoint_rounds(tmp_path / "absent.bk") == {}


def test_gymnasium_compare_with_a_checkpoint_dir(tmp_path):
    """compare(checkpoint_dir=...) on an env without a functional form: one checkpoint per agent, each finished."""
    folder = tmp_path / "per_agent"
    df = runner.compare(["linear-greedy", "linear-thompson"], PlainEnv(), steps=30, seeds=2, progress=False,
                        checkpoint_dir=folder)
    assert len(df) == 2 * 2 * 30
    for name in ("linear-greedy", "linear-thompson"):
        assert checkpoints.checkpoint_rounds(checkpoints.agent_checkpoint(folder, name)) == {0: 30, 1: 30}
