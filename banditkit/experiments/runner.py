"""Run agents on bandit environments over several seeds: a compiled loop and a Gymnasium loop, same numbers.

Compiled loop (``compiled=True``; needs ``env.unwrapped.stream(seed, steps)``, or the older ``functional``)::

    per seed s:  fb_s = env.unwrapped.stream(s, steps)         # contexts, index, rewards (pre-drawn)
                 (regret from env.unwrapped.oracle(s, steps) after the agent has chosen; NaN without one)
                 k_init, k_act = split(PRNGKey(s));  state = agent.init(k_init, fb_s.contexts[fb_s.index[0]])
    round t:     key_t = fold_in(k_act, t);  x_t = contexts[index[t]]
                 a_t, state = act(key_t, state, x_t);  r_t = rewards[t, a_t];  state = observe(state, x_t, a_t, r_t)

``lax.scan`` over rounds (in chunks, so a progress bar can advance and finished chunks can be saved), ``vmap`` over
seeds, and the seed axis sharded over all local devices with ``jax.sharding`` when there is more than one (seeds are
padded to a multiple of the device count; the padding is dropped).

Gymnasium loop (``compiled=False``; any env): ``obs, info = env.reset(seed=s)``, then the same keys, ``agent.act``,
``env.step``, ``agent.observe``.  For the same seed the two loops consume the same PRNG stream and the same reward
table, so they give the same actions and rewards (up to float rounding differences between one fused program and
per-step calls, which can only matter at exact ties).

The result is a tidy DataFrame, one row per (agent, seed, step): ``agent, seed, step, action, reward,
expected_reward, optimal_reward, regret, cumulative_regret, synthetic`` with ``regret = optimal_reward −
expected_reward`` (the pseudo-regret of the chosen arm) and ``synthetic`` the env's ``unwrapped.synthetic`` (True on
generated data: the wheel bandit, a ``synthetic=True`` look-alike of a data set the user did not supply).  Timing is
kept out of the rows: ``df.attrs["timing"][agent]`` holds
``compile_s`` (tracing + XLA compilation), ``run_s`` (execution only) and ``per_step_s = run_s / steps`` (all seeds
advance together), and ``df.attrs["mode"]``.  ``run(record={column: fn})`` appends one column per function of the
agent state after each round's ``observe`` (the compiled loop evaluates it inside the scan).

Propensities (``run(propensities=True)``, both loops): each row also gets ``propensity``, the agent's probability
``π(a_t | x_t)`` of the action it took (``BanditAgent.propensity`` with the key ``agent.propensity_key(key_t)``,
independent of the draw that chose the action): exact for greedy / UCB / EI / PI / ε-greedy and the warm-up, for
Thompson sampling a Monte-Carlo estimate over ``propensities`` draws (``True``: 256) plus the chosen one;
``timing[agent]["propensity"]`` says which.  With the env's contexts (its functional form) the rows are a log in
:mod:`banditkit.offline`'s format (``bk.offline.simulate.log_from_run``).

Health check (compiled loop): after every scan segment one jitted reduction tells, per seed, whether every
floating-point leaf of the agent state is finite.  A posterior that went NaN/inf still "acts" (``argmax`` of NaN
scores is arm 0), so its rewards would pass for a result; instead the runner warns (``RuntimeWarning`` naming the
seeds and the round by which it was seen) and records ``timing["nonfinite"] = {seed: round}`` (empty when healthy).
``bk.debug.first_nonfinite`` then finds the exact step and field.

Checkpoints (``run(checkpoint=path, save_every=s)``): in the compiled loop, at the end of a chunk, once ``s``
seconds have passed since the last save, and after the last chunk, the vmapped agent state and the loop's position
(next round, cumulative-regret totals, health flags, run time so far) are written atomically
(:mod:`banditkit.checkpoint`).  A run given an existing checkpoint of the same agent name, seeds, steps and chunking
starts from its next round; the keys are ``fold_in(k_act, t)`` and the data pre-drawn, so the rounds it runs are
exactly those of a run never stopped.  The Gymnasium loop saves the seed in progress and replays its env
(:mod:`banditkit.experiments.checkpoints`).

Diagnostics (both loops): a backend that declares ``diagnostics`` (:class:`~banditkit.posteriors.base.Posterior`)
reports numbers about each seed's final posterior state, ``{key: value}``; the runner records each key as
``timing[key] = {seed: value}`` (e.g. a neural-linear posterior's ``discarded_retrainings = {seed: [rejected,
retrainings]}``: body retrainings that diverged and were discarded, so a bad optimiser leaves finite but untrained
features rather than NaNs) and shows the message under ``"warning"`` as a ``RuntimeWarning`` naming the seeds.

Warm-up: an agent whose posterior refits to warm-up data (``agent.warmup_rounds = τ > 0``) has ``agent.warmup`` called
once at round ``τ`` with the key ``agent.warmup_key(round key)``, in both loops.

Where each part lives (this module holds :func:`run` and :func:`compare` only; import the rest from its module):
:mod:`~banditkit.experiments.resolve` (env and agent from ids / specs), :mod:`~banditkit.experiments.compiled_loop`,
:mod:`~banditkit.experiments.gym_loop`, :mod:`~banditkit.experiments.frames` (the columns, CSV / callback sinks),
:mod:`~banditkit.experiments.checkpoints` (both loops), :mod:`~banditkit.experiments.health` (finiteness, backend
diagnostics).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from banditkit.experiments.checkpoints import agent_checkpoint
from banditkit.experiments.frames import _check_record, _propensity_draws, _Sink
from banditkit.experiments.prequential import seed_list as _seeds
from banditkit.experiments.resolve import agent_label, make_env, resolve_agent


def run(
    env,
    agent,
    steps: int,
    seeds: int | Sequence[int] = 1,
    *,
    compiled: bool | None = None,
    progress: bool = True,
    name: str | None = None,
    chunk_size: int | None = None,
    on_chunk: Callable[[pd.DataFrame], None] | None = None,
    csv_path: str | os.PathLike | None = None,
    checkpoint: str | os.PathLike | None = None,
    save_every: float = 60.0,
    record: dict[str, Callable[[Any], Any]] | None = None,
    propensities: bool | int = False,
    **env_kwargs,
) -> pd.DataFrame:
    """Run one agent on a bandit environment for ``steps`` rounds and each seed; a tidy DataFrame.

    Args:
      env: a Gymnasium id (``"banditkit/Mushroom-v0"``; ``env_kwargs`` go to ``gymnasium.make``) or an env object;
        a :class:`~banditkit.datasets.streams.Stream` runs :func:`~banditkit.experiments.prequential.run_stream`
        instead (``agent``: a ``StreamLearner``, ``(posterior, init_params)`` or a backend name).
      agent: a :class:`~banditkit.agents.BanditAgent` or a spec string (``"hilofi-thompson"``).
      steps: rounds per seed.
      seeds: a count ``n`` (seeds ``0..n-1``) or a list of integer seeds.
      compiled: ``True``: ``lax.scan`` + ``vmap`` over seeds (needs ``env.unwrapped.stream`` or ``functional``);
        ``False``: the Gymnasium step loop (any env with a ``Discrete`` action space); ``None``: compiled when the
        env has a compiled form.
      progress: show a tqdm progress bar.
      name: the ``agent`` column (default: the spec string or ``agent.name``).
      chunk_size: rounds per compiled chunk (progress / saving granularity; default ``ceil(steps / 20)``, at
        least 100).
      on_chunk: called with each finished chunk's rows (a DataFrame) — e.g. to save partial results.  In the
        compiled loop its ``attrs["nonfinite"]`` maps the seeds whose agent state has gone NaN/inf so far to the
        round by which it had (the same check as the run's ``timing[name]["nonfinite"]``).
      csv_path: append each finished chunk to this CSV (header written once), so an interrupted run keeps what it
        finished.
      checkpoint: a file to which the agent state is saved at the end of a chunk once ``save_every`` seconds have
        passed since the last save, and after the last chunk (the compiled loop: every seed's; the Gymnasium loop,
        which runs the seeds in turn: the seed in progress, after each seed too).  If the file exists (made by the
        same agent name, seeds, steps, chunk size and loop, else ``ValueError``), the run continues from it: only
        the rounds not run yet are run and returned (``cumulative_regret`` goes on from the saved totals), with
        exactly the actions of a run that was never stopped.  The Gymnasium loop puts the env back by replaying
        the saved actions after ``env.reset(seed=s)`` and checks every replayed reward (an env that does not
        replay is a ``ValueError``; :mod:`banditkit.experiments.checkpoints`).  Rows of an interrupted run that
        the caller kept past the checkpoint are the caller's to drop (:func:`checkpoint_rounds`).
      save_every: seconds between checkpoint saves (0: every chunk).
      record: ``{column: fn}``: after each round's ``observe``, ``fn(agent_state)`` (a jax-traceable function of the
        :class:`~banditkit.agents.bandit.AgentState`, one number) is recorded in its own column, e.g. the learned
        observation variance ``{"noise": lambda s: bk.posteriors.noise_variance(s.posterior)}``.  A function that
        returns ``None`` (it does not apply to this agent: ``noise_variance`` of a posterior whose variance is fixed)
        gives NaN, so one ``record`` serves a :func:`compare` of different agents.  In the compiled loop it runs
        inside the scan (no extra pass).
      propensities: ``True`` (or a number of Monte-Carlo draws, default 256) adds the column ``propensity``: the
        agent's probability of each action it took (the module docstring); needs a :class:`BanditAgent`.

    Returns:
      DataFrame with columns ``agent, seed, step, action, reward, expected_reward, optimal_reward, regret,
      cumulative_regret, synthetic`` (then the ``record`` columns; ``synthetic``: the env runs on generated data);
      ``df.attrs["timing"] = {agent: {compile_s, run_s, per_step_s, steps, seeds, mode}}``.
    """
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    steps = int(steps)
    from banditkit.datasets.streams import Stream

    if isinstance(env, Stream):  # a prequential stream: predict-then-update metrics (experiments/prequential.py)
        from banditkit.experiments.prequential import run_stream

        return run_stream(env, agent, steps, seeds, name=name)
    seed_list = _seeds(seeds)
    env = make_env(env, steps=steps, **env_kwargs)
    u = getattr(env, "unwrapped", env)
    if getattr(u, "task", "bandit") == "bo":
        raise ValueError("this is a Bayesian-optimisation env: use bk.bo.optimize / banditkit bo, not run()")
    agent = resolve_agent(agent, env)
    label = agent_label(agent, name)
    from banditkit.experiments.compiled_loop import _run_compiled, has_oracle, has_play_stream
    from banditkit.experiments.gym_loop import _run_gym

    playable = has_play_stream(u)
    if compiled is None:
        compiled = playable
    if compiled and not playable:
        raise ValueError(f"{type(u).__name__} has no compiled form (env.unwrapped.stream or functional); use "
                         "compiled=False (the Gymnasium loop runs any env with a Discrete action space)")
    max_steps = getattr(u, "max_steps", None)
    if not compiled and isinstance(max_steps, int) and max_steps < steps:
        raise ValueError(
            f"the env's episode has max_steps={max_steps} < steps={steps}: make it with max_steps={steps} "
            "(or pass the env id so run() does it)"
        )
    chunk = int(chunk_size) if chunk_size else max(100, int(math.ceil(steps / 20)))
    chunk = max(1, min(chunk, steps))
    if checkpoint is not None:
        if not save_every >= 0:
            raise ValueError(f"save_every must be a number of seconds >= 0, got {save_every!r}")
        checkpoint = os.fspath(checkpoint)
        os.makedirs(os.path.dirname(os.path.abspath(checkpoint)), exist_ok=True)
    record = _check_record(record)
    draws = _propensity_draws(propensities, agent, record)
    sink = _Sink(csv_path, on_chunk)
    loop = _run_compiled if compiled else _run_gym
    timing = loop(agent, u if compiled else env, label, seed_list, steps, chunk, progress, sink, checkpoint, save_every,
                  record, draws=draws)
    if draws:
        from banditkit.policies.propensity import is_exact

        timing["propensity"] = "exact" if is_exact(agent.policy) else f"monte-carlo ({draws} draws + the chosen one)"
    df = sink.frame()
    regret_known = bool(np.isfinite(df["expected_reward"].to_numpy()).all()) if len(df) else True
    if not regret_known or (compiled and not has_oracle(u)):
        warnings.warn(f"{type(u).__name__} reports no expected rewards: the results hold the rewards the agent "
                      "earned, and regret only where the env gives expected rewards (NaN elsewhere)", stacklevel=2)
    df.attrs["regret"] = regret_known
    df.attrs["timing"] = {label: timing}
    df.attrs["mode"] = timing["mode"]
    return df


def compare(
    agents: dict | Sequence,
    env,
    steps: int,
    seeds: int | Sequence[int] = 1,
    **kwargs,
) -> pd.DataFrame:
    """Run several agents on the same environment and seeds; one DataFrame (``agent`` column = the dict keys).

    ``agents``: ``{name: agent_or_spec}`` or a list of spec strings (names = the specs).  Other keyword arguments
    go to :func:`run` (``compiled``, ``progress``, ``csv_path``, ``save_every``, env kwargs, ...);
    ``checkpoint_dir`` gives each agent the ``checkpoint`` file :func:`agent_checkpoint` names in it.
    """
    checkpoint_dir = kwargs.pop("checkpoint_dir", None)
    if "checkpoint" in kwargs:
        raise ValueError("compare runs several agents: pass checkpoint_dir= (one checkpoint file per agent)")
    if isinstance(agents, dict):
        items = list(agents.items())
    else:
        items = [(agent_label(a), a) for a in agents]
    if not items:
        raise ValueError("compare needs at least one agent")
    env_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k not in _RUN_KEYS}
    env_obj = make_env(env, steps=steps, **env_kwargs)
    frames, timing = [], {}
    for label, agent in items:
        if checkpoint_dir is not None:
            kwargs["checkpoint"] = agent_checkpoint(checkpoint_dir, label)
        df = run(env_obj, agent, steps, seeds, name=label, **kwargs)
        frames.append(df)
        timing.update(df.attrs.get("timing", {}))
    out = pd.concat(frames, ignore_index=True)
    out.attrs["timing"] = timing
    return out


_RUN_KEYS = {"compiled", "progress", "chunk_size", "on_chunk", "csv_path", "checkpoint", "save_every", "record",
             "propensities"}
