"""Playing a peer on an environment's episodes, with the compiled runner's data and columns.

Per seed ``s`` the episode is ``fb = env.unwrapped.functional(s, steps)``, the arrays banditkit's compiled runner
scans over, in the dtype its agents get (float32 contexts and rewards).  Round ``t``::

    x_t = contexts[index[t]];  a_t = learner.choose(x_t);  r_t = rewards[t, a_t];  learner.update(x_t, a_t, r_t)

and the row's ``expected_reward = expected[t, a_t]``, ``optimal_reward = max_k expected[t, k]``, ``regret`` their
difference — the columns of ``bk.run``'s frame, made by the runner's own frame builder, so a peer's rows and an
agent's are alike.  Seeds run one after another in this process (a peer is a Python loop, not vmapped): ``run_s`` is
the sum of the seeds' loop times, ``compile_s`` 0 (nothing is compiled; the library's setup is in ``wall_s``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from banditkit.experiments.frames import _frame
from benchmarks.harness.run import Result, _result
from benchmarks.harness.tables import se
from benchmarks.peers import PEERS, Learner


def episode(env, seed: int, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(contexts (T, *obs), rewards (T, K), expected (T, K))`` of seed ``seed``'s episode, as the runner feeds
    them (float32)."""
    u = env.unwrapped
    fb = u.functional(int(seed), int(steps))
    index = np.asarray(fb.index)[:steps]
    if index.shape[0] < steps:
        raise ValueError(f"env.functional({seed}, {steps}) returned fewer than {steps} rounds")
    contexts = np.asarray(fb.contexts, np.float32)[index]
    return contexts, np.asarray(fb.rewards, np.float32)[:steps], np.asarray(fb.expected, np.float32)[:steps]


def play(learner: Learner, contexts: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    """The arms ``learner`` pulls over one episode (``(T,)`` int64), fed ``rewards[t, a_t]`` each round."""
    steps, k = rewards.shape
    actions = np.empty(steps, np.int64)
    for t in range(steps):
        a = learner.choose(contexts[t])
        if not 0 <= a < k:
            raise ValueError(f"{type(learner).__name__} chose arm {a} at round {t}; the env has arms 0..{k - 1}")
        learner.update(contexts[t], a, float(rewards[t, a]))
        actions[t] = a
    return actions


def run_peer(env, name: str, steps: int, seeds: Sequence[int], *, rounds: int | None = None,
             make: Callable[..., Learner] | None = None) -> tuple[pd.DataFrame, dict]:
    """One peer over ``seeds``: the runner-format frame (agent column ``name``) and its timing entry.  ``rounds``:
    play only the first ``rounds`` rounds of the ``steps``-round episodes (``--check``); ``make`` overrides the
    registry's factory (tests)."""
    make = PEERS[name].make if make is None else make
    k = int(env.unwrapped.num_actions)
    n = steps if rounds is None else max(1, min(int(rounds), steps))
    tic = time.perf_counter()
    run_s = 0.0
    acts, rews, exps, opts = [], [], [], []
    for s in seeds:
        ctx, rew, exp = (v[:n] for v in episode(env, s, steps))
        learner = make(num_actions=k, seed=int(s))
        t0 = time.perf_counter()
        a = play(learner, ctx, rew)
        run_s += time.perf_counter() - t0
        rows = np.arange(n)
        acts.append(a)
        rews.append(rew[rows, a])
        exps.append(exp[rows, a])
        opts.append(exp.max(axis=1))
    df = _frame(name, list(seeds), *(np.stack(v) for v in (acts, rews, exps, opts)))
    timing = dict(compile_s=0.0, run_s=run_s, per_step_s=run_s / n, steps=n, seeds=len(seeds),
                  mode="peer (Python loop, seeds in turn)", truncated=False, nonfinite={},
                  wall_s=time.perf_counter() - tic)
    return df, timing


def run_peers(env, names: Sequence[str], steps: int, seeds: Sequence[int], *, rounds: int | None = None,
              log: Callable[[str], None] = print, on_peer: Callable[[Result], None] | None = None) -> Result:
    """Every peer in ``names`` over the same seeds (``rounds``: see :func:`run_peer`); a peer that raises is recorded
    in ``failures`` and the others go on.  ``on_peer(partial)`` after each, as
    :func:`benchmarks.harness.run.run_agents`'s ``on_agent``."""
    frames, timing, failures = [], {}, {}
    run_id = f"{time.strftime('%Y-%m-%dT%H:%M:%S')}/{os.getpid()}/peers"
    for name in names:
        try:
            df, t = run_peer(env, name, steps, seeds, rounds=rounds)
        except Exception as e:  # noqa: BLE001 - reported in the table
            failures[name] = f"{type(e).__name__}: {e}"
            log(f"[{name}] FAILED: {failures[name][:300]}")
        else:
            t["run_id"] = run_id
            frames.append(df)
            timing[name] = t
            per_seed = df.groupby("seed")["reward"].sum()
            log(f"[{name}] cum. reward {per_seed.mean():.1f} ± {se(per_seed):.1f}  run {t['run_s']:.1f}s "
                f"({1e3 * t['per_step_s']:.2f} ms/step, seeds in turn)")
        if on_peer is not None:
            pending = {n: "pending: not finished when this table was written" for n in names
                       if n not in timing and n not in failures}
            on_peer(_result(frames, dict(timing), {**failures, **pending}))
    return _result(frames, timing, failures)


def combine(*results: Result) -> Result:
    """One :class:`Result` of several (agents' and peers'), in the order given."""
    frames = [r.frame for r in results if not r.frame.empty]
    timing: dict = {}
    failures: dict = {}
    for r in results:
        timing.update(r.timing)
        failures.update(r.failures)
    return _result(frames, timing, {k: v for k, v in failures.items() if k not in timing})
