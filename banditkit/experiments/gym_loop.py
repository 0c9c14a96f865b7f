"""The Gymnasium loop of :func:`banditkit.run` (``compiled=False``; any env): per seed ``obs, info =
env.reset(seed=s)``, then the keys of the compiled loop, ``agent.act``, ``env.step``, ``agent.observe``; the seeds
one after another, each checkpointed by replaying its env (:mod:`banditkit.experiments.checkpoints`)."""

from __future__ import annotations

import os
import time
import warnings

import jax
import numpy as np

from banditkit.experiments import checkpoints as gck
from banditkit.experiments.frames import PROPENSITY, _frame, _progress, _recorded, is_synthetic
from banditkit.experiments.health import _diagnostics, _recorded_diagnostics, _warn_diagnostics


def _info_value(info, key, action=None):
    """``info[key]`` as a float (``[action]`` of a per-arm array); NaN when the env does not report it (a plain
    Gymnasium env without oracle ``info`` keys: its run reports rewards, and no regret)."""
    if key not in info:
        return float("nan")
    v = np.asarray(info[key], np.float64)
    return float(v[action]) if action is not None else float(v)


def _oracle_values(info, action: int) -> tuple[float, float]:
    """``(expected reward of action, optimal expected reward)`` from a step's ``info`` for regret: banditkit envs
    report ``expected_rewards (K,)``; an env may instead give ``expected_reward`` and ``optimal_reward``; NaN for
    whatever the env does not report."""
    if "expected_rewards" in info:
        expected = np.asarray(info["expected_rewards"], np.float64)
        return float(expected[action]), float(info.get("optimal_reward", np.max(expected)))
    return _info_value(info, "expected_reward"), _info_value(info, "optimal_reward")



def _run_gym(agent, env, name, seeds, steps, chunk, progress, sink, checkpoint, save_every, record, draws=0):
    recorded = jax.jit(lambda st: _recorded(record, st))
    synthetic = is_synthetic(env)
    run_key = dict(agent=name, seeds=[int(s) for s in seeds], steps=steps, chunk=chunk)
    if record:
        run_key["record"] = list(record)
    if draws:
        run_key["propensities"] = draws
    resuming = checkpoint is not None and os.path.exists(checkpoint)
    pg = gck.read(checkpoint, run_key) if resuming else gck.Progress()
    bar = _progress(steps * len(seeds), name, progress)
    if bar is not None and (pg.done or pg.t_next):
        bar.update(sum(pg.done.values()) + pg.t_next)
    last_save = time.monotonic()
    state = None
    diagnostics = pg.diagnostics  # of every finished seed, a resumed run's earlier ones included (saved with them)
    try:
        for s in seeds:
            if s in pg.done:
                continue
            k_init, k_act = jax.random.split(jax.random.PRNGKey(s))
            obs, info = env.reset(seed=s)
            state = agent.init(k_init, obs)
            if pg.seed == s and pg.t_next:  # the seed in progress: its state saved, its env replayed
                state = gck.load_seed(checkpoint, pg, state)
                obs = gck.replay(env, s, pg.actions, pg.rewards)
            else:
                pg.seed, pg.t_next, pg.offset, pg.actions, pg.rewards = s, 0, 0.0, [], []
            rows = dict(a=[], r=[], e=[], o=[], rec=[], p=[])
            t0 = t_first = pg.t_next
            for t in range(t_first, steps):
                if bar is not None and t == t_first and not pg.first_call_s:  # act / observe compile on first use
                    bar.set_postfix_str(f"compiling {name}…", refresh=True)
                tic = time.perf_counter()
                key_t = jax.random.fold_in(k_act, t)
                action, state = agent.act(key_t, state, obs)
                a = int(action)
                if draws:
                    rows["p"].append(float(agent.propensity(agent.propensity_key(key_t), state, obs, a,
                                                            num_draws=draws)))
                next_obs, reward, terminated, truncated, info = env.step(a)
                state = agent.observe(state, obs, a, reward)
                dt = time.perf_counter() - tic
                if t == t_first:
                    if bar is not None and not pg.first_call_s:
                        bar.set_postfix_str(f"compiled in {dt:.1f} s", refresh=True)
                    pg.first_call_s += dt  # includes tracing/compilation of act and observe
                else:
                    pg.run_s += dt
                    pg.timed_steps += 1
                exp_a, opt = _oracle_values(info, a)  # for regret only, after the agent has observed
                rows["a"].append(a)
                rows["r"].append(float(reward))
                rows["e"].append(exp_a)
                rows["o"].append(opt)
                if record:
                    rows["rec"].append(jax.device_get(recorded(state)))
                pg.actions.append(a)
                pg.rewards.append(float(reward))
                obs = next_obs
                done = terminated or truncated
                if len(rows["a"]) == chunk or t == steps - 1 or done:
                    arr = [np.asarray(rows[k])[None] for k in ("a", "r", "e", "o")]
                    rec = {k: np.asarray([v[i] for v in rows["rec"]])[None] for i, k in enumerate(record)}
                    if draws:
                        rec = {PROPENSITY: np.asarray(rows["p"])[None]} | rec
                    df = _frame(name, [s], *arr, offsets=np.array([pg.offset]), start=t0, recorded=rec,
                                synthetic=synthetic)
                    pg.offset = float(df["cumulative_regret"].iloc[-1])
                    t0 = pg.t_next = t + 1
                    rows = dict(a=[], r=[], e=[], o=[], rec=[], p=[])
                    sink.add(df)  # the rows first: a checkpoint never runs ahead of them
                    last = t == steps - 1 or done
                    if checkpoint is not None and not last and time.monotonic() - last_save >= save_every:
                        gck.save(checkpoint, run_key, pg, state)
                        last_save = time.monotonic()
                if bar is not None:
                    bar.update(1)
                if done and t < steps - 1:
                    warnings.warn(
                        f"seed {s}: the env ended after {t + 1} of {steps} steps; raise its max_steps", stacklevel=3
                    )
                    break
            for key, by_seed in _diagnostics(agent, getattr(state, "posterior", None), [s], batched=False).items():
                diagnostics.setdefault(key, {}).update(by_seed)
            pg.done[s] = pg.t_next
            pg.seed, pg.t_next, pg.actions, pg.rewards = None, 0, [], []
            if checkpoint is not None:
                gck.save(checkpoint, run_key, pg, state)
                last_save = time.monotonic()
    finally:
        if bar is not None:
            bar.close()
    _warn_diagnostics(name, diagnostics, stacklevel=4)
    timed = max(pg.timed_steps, 1)
    return dict(
        compile_s=pg.first_call_s / len(seeds),
        run_s=pg.run_s,
        per_step_s=pg.run_s / timed,
        steps=steps,
        seeds=len(seeds),
        mode="gymnasium",
        devices=1,
    ) | _recorded_diagnostics(diagnostics)
