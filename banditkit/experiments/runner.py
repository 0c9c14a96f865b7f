"""Run agents on bandit environments over several seeds: a compiled loop and a Gymnasium loop, same numbers.

Compiled loop (``compiled=True``; needs ``env.unwrapped.functional(seed, steps)``)::

    per seed s:  fb_s = env.unwrapped.functional(s, steps)     # contexts, index, rewards (pre-drawn), expected
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
expected_reward, optimal_reward, regret, cumulative_regret`` with ``regret = optimal_reward − expected_reward`` (the
pseudo-regret of the chosen arm).  Timing is kept out of the rows: ``df.attrs["timing"][agent]`` holds
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
(:mod:`banditkit.experiments.gym_checkpoint`).

Diagnostics (both loops): a backend that declares ``diagnostics`` (:class:`~banditkit.posteriors.base.Posterior`)
reports numbers about each seed's final posterior state, ``{key: value}``; the runner records each key as
``timing[key] = {seed: value}`` (e.g. a neural-linear posterior's ``discarded_retrainings = {seed: [rejected,
retrainings]}``: body retrainings that diverged and were discarded, so a bad optimiser leaves finite but untrained
features rather than NaNs) and shows the message under ``"warning"`` as a ``RuntimeWarning`` naming the seeds.

Warm-up: an agent whose posterior refits to warm-up data (``agent.warmup_rounds = τ > 0``) has ``agent.warmup`` called
once at round ``τ`` with the key ``agent.warmup_key(round key)``, in both loops.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from banditkit.convs import canonical_convs
from banditkit.debug import _finite_flags
from banditkit.experiments.prequential import seed_list as _seeds
from banditkit.posteriors.base import Posterior

COLUMNS = [
    "agent",
    "seed",
    "step",
    "action",
    "reward",
    "expected_reward",
    "optimal_reward",
    "regret",
    "cumulative_regret",
]


# ------------------------------------------------------------------------------------------------------ inputs
def _make_env(env, env_kwargs: dict, steps: int | None = None):
    if isinstance(env, str):
        import gymnasium

        import banditkit.environments  # noqa: F401  (registers the ids)

        try:
            if steps is not None and "max_steps" not in env_kwargs:
                try:  # an episode long enough for the requested rounds
                    return gymnasium.make(env, max_steps=steps, **env_kwargs)
                except TypeError:
                    pass
            return gymnasium.make(env, **env_kwargs)
        except gymnasium.error.Error as e:
            ids = sorted(k for k in gymnasium.registry if k.startswith("banditkit/"))
            raise ValueError(f"cannot make environment {env!r} ({e}); banditkit ids: {ids}") from e
    if env_kwargs:
        raise ValueError(f"env keyword arguments {sorted(env_kwargs)} need an env id string, not an env object")
    return env


def _make_agent(agent, env):
    if isinstance(agent, str):
        from banditkit.agents import make_agent

        return make_agent(agent, env)
    if not (hasattr(agent, "init") and hasattr(agent, "act") and hasattr(agent, "observe")):
        raise TypeError(f"agent must be a BanditAgent or a spec string like 'hilofi-thompson', got {agent!r}")
    return agent


def _agent_name(agent, name):
    if name is not None:
        return str(name)
    return str(getattr(agent, "spec", None) or getattr(agent, "name", None) or type(agent).__name__)


def _frame(name, seeds, actions, rewards, expected, optimal, offsets=None, start=0, recorded=None) -> pd.DataFrame:
    """Long frame from ``(S, T)`` arrays; ``offsets (S,)`` = cumulative regret before ``start``; ``recorded``:
    ``{column: (S, T)}`` appended after the standard columns (``run(record=...)``)."""
    actions, rewards, expected, optimal = (np.asarray(a) for a in (actions, rewards, expected, optimal))
    s, t = actions.shape
    regret = optimal.astype(np.float64) - expected.astype(np.float64)
    cum = np.cumsum(regret, axis=1) + (0.0 if offsets is None else np.asarray(offsets)[:, None])
    extra = {k: np.asarray(v, np.float64).reshape(s * t) for k, v in (recorded or {}).items()}
    return pd.DataFrame(
        {
            "agent": np.repeat(np.array([name], dtype=object), s * t),
            "seed": np.repeat(np.asarray(seeds, np.int64), t),
            "step": np.tile(np.arange(start, start + t, dtype=np.int64), s),
            "action": actions.astype(np.int64).ravel(),
            "reward": rewards.astype(np.float64).ravel(),
            "expected_reward": expected.astype(np.float64).ravel(),
            "optimal_reward": optimal.astype(np.float64).ravel(),
            "regret": regret.ravel(),
            "cumulative_regret": cum.ravel(),
        }
        | extra
    )


def _check_record(record) -> dict[str, Callable]:
    """``run(record=...)``: ``{column: fn(agent_state) -> scalar}``, checked; ``{}`` for ``None``."""
    if record is None:
        return {}
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict {{column: fn(agent_state) -> number}}, got {type(record).__name__}")
    for k, fn in record.items():
        if not isinstance(k, str) or not k or k in COLUMNS:
            raise ValueError(f"record: column name {k!r} must be a non-empty string other than {COLUMNS}")
        if not callable(fn):
            raise TypeError(f"record[{k!r}] must be a function of the agent state, got {type(fn).__name__}")
    return dict(record)


PROPENSITY = "propensity"  # the column of run(propensities=...)
DEFAULT_PROPENSITY_DRAWS = 256


def _propensity_draws(propensities, agent, record: dict) -> int:
    """``run(propensities=...)`` as a number of Monte-Carlo draws (0: off; ``True``: 256), checked."""
    if propensities is False or propensities is None or propensities == 0:
        return 0
    draws = DEFAULT_PROPENSITY_DRAWS if propensities is True else propensities
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise ValueError(f"propensities must be True/False or a number of Monte-Carlo draws >= 1, got {propensities!r}")
    if not hasattr(agent, "propensity"):
        raise TypeError(f"propensities=True needs an agent with a propensity method (a BanditAgent), got {agent!r}")
    if PROPENSITY in record:
        raise ValueError(f"record has a column {PROPENSITY!r}, which propensities=True writes; rename it")
    return int(draws)


def _recorded(record: dict[str, Callable], state) -> tuple:
    """The ``record`` functions of the agent state after a round's ``observe``: one scalar each (NaN where a function
    returns ``None``: it does not apply to this agent)."""
    out = []
    for k, fn in record.items():
        v = fn(state)
        v = jnp.asarray(jnp.nan if v is None else v)
        if v.size != 1:
            raise ValueError(f"record[{k!r}] must return one number per round, got an array of shape {v.shape}")
        out.append(v.reshape(()))
    return tuple(out)


class _Sink:
    """Collects chunk frames; appends them to ``csv_path`` and calls ``on_chunk`` as they finish."""

    def __init__(self, csv_path, on_chunk):
        self.frames: list[pd.DataFrame] = []
        self.csv_path = os.fspath(csv_path) if csv_path is not None else None
        self.on_chunk = on_chunk
        self._header = self.csv_path is None or not os.path.exists(self.csv_path)

    def add(self, df: pd.DataFrame):
        self.frames.append(df)
        if self.csv_path is not None:
            df.to_csv(self.csv_path, mode="a", header=self._header, index=False)
            self._header = False
        if self.on_chunk is not None:
            self.on_chunk(df)

    def frame(self) -> pd.DataFrame:
        if not self.frames:
            return pd.DataFrame(columns=COLUMNS)
        df = pd.concat(self.frames, ignore_index=True)
        return df.sort_values(["seed", "step"], kind="stable").reset_index(drop=True)


def _progress(total, desc, enabled):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", leave=False)


# ------------------------------------------------------------------------------------------------ compiled loop
def _stack(items: Sequence[Any]):
    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *items)


def _same_pool(pools) -> bool:
    first = pools[0]
    for p in pools[1:]:
        if p is first:
            continue
        if np.shape(p) != np.shape(first) or not np.array_equal(np.asarray(p), np.asarray(first)):
            return False
    return True


def _shardings(n_seeds: int):
    """``(padded seed count, per-seed sharding, replicated sharding)``; shardings are None on one device."""
    devices = jax.local_devices()
    if len(devices) <= 1:
        return n_seeds, None, None
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    n_dev = len(devices)
    mesh = Mesh(np.array(devices), ("seeds",))
    padded = int(math.ceil(n_seeds / n_dev) * n_dev)
    return padded, NamedSharding(mesh, PartitionSpec("seeds")), NamedSharding(mesh, PartitionSpec())


def seed_inputs(u, seeds: Sequence[int], steps: int, total: int, rows: Sequence[int]) -> tuple[dict, np.ndarray, bool]:
    """Host arrays of the compiled loop, one row per lane: lane ``i`` runs seed ``seeds[rows[i]]`` (a seed may fill
    several lanes: padding lanes, or :func:`banditkit.sweep`'s configurations).

    Returns ``(data, contexts, shared)``: ``data = {index (L, total) int32, rewards (L, total, K) float32, expected
    (L, total, K) float32, keys (L, 2, 2)}`` with ``keys[i] = split(PRNGKey(seed))`` and the round axis padded from
    ``steps`` to ``total`` by repeating the last round; ``contexts`` is the env's pool ``(N, ...)`` when every seed
    shares it (``shared``), else the per-seed pools zero-padded to a common size, ``(L, N_max, ...)``.
    """
    fbs = [u.functional(s, steps) for s in seeds]
    for s, fb in zip(seeds, fbs, strict=True):
        if np.shape(fb.index)[0] < steps or np.shape(fb.rewards)[0] < steps:
            raise ValueError(f"env.functional({s}, {steps}) returned fewer than {steps} rounds")
    shared = _same_pool([fb.contexts for fb in fbs])
    pick = lambda xs: [xs[i] for i in rows]

    def per_step(a):  # pad the round axis to the end of the last segment
        a = np.asarray(a)[:steps]
        return np.concatenate([a, np.repeat(a[-1:], total - steps, axis=0)]) if total > steps else a

    index = np.stack(pick([per_step(fb.index) for fb in fbs])).astype(np.int32)
    rewards = np.stack(pick([per_step(fb.rewards) for fb in fbs])).astype(np.float32)
    expected = np.stack(pick([per_step(fb.expected) for fb in fbs])).astype(np.float32)
    keys = np.stack(pick([np.asarray(jax.random.split(jax.random.PRNGKey(s))) for s in seeds]))
    if shared:
        contexts = np.asarray(fbs[0].contexts)
    else:  # per-seed pools, zero-padded to a common size (the index never points into the padding)
        pools = [np.asarray(fb.contexts) for fb in fbs]
        size = max(p.shape[0] for p in pools)
        pools = [np.concatenate([p, np.zeros((size - p.shape[0], *p.shape[1:]), p.dtype)]) for p in pools]
        contexts = np.stack(pick(pools))
    return dict(index=index, rewards=rewards, expected=expected, keys=keys), contexts, shared


def init_lane(agent, d: dict, pool):
    """One lane's initial agent state: ``agent.init(k_init, contexts[index[0]])``."""
    return agent.init(d["keys"][0], pool[d["index"][0]])


def round_scan(agent, state, d: dict, pool, t0, length: int, record: dict | None = None, draws: int = 0):
    """``lax.scan`` of rounds ``t0 .. t0 + length − 1`` of one lane (the module docstring's round); returns
    ``(state, (actions, rewards, expected, optimal, recorded, propensities))``, each ``(length,)``."""
    record = record or {}

    def step(st, t):
        key_t = jax.random.fold_in(d["keys"][1], t)
        ctx = pool[d["index"][t]]
        a = agent._act(key_t, st, ctx)
        p = agent._propensity(agent.propensity_key(key_t), st, ctx, a, None, draws) if draws else ()
        r = d["rewards"][t, a]
        st = agent._observe(st, ctx, a, r)
        return st, (a, r, d["expected"][t, a], jnp.max(d["expected"][t]), _recorded(record, st), p)

    return jax.lax.scan(step, state, t0 + jnp.arange(length))


def warm_lane(agent, state, d: dict, tau: int):
    """The warm-up fit at round ``τ`` with the key ``BanditAgent.act`` derives there, so both loops fit the same."""
    return agent.warmup(agent.warmup_key(jax.random.fold_in(d["keys"][1], tau)), state)


def _run_compiled(agent, u, name, seeds, steps, chunk, progress, sink, checkpoint, save_every, record, draws=0):
    n = len(seeds)
    padded, per_seed, replicated = _shardings(n)
    tau = int(getattr(agent, "warmup_rounds", 0))
    segments = _segments(steps, chunk, tau)
    total = segments[-1][0] + segments[-1][1]
    data, contexts, shared = seed_inputs(u, seeds, steps, total, list(range(n)) + [n - 1] * (padded - n))
    ctx_axis = None if shared else 0
    if per_seed is not None:
        data = jax.device_put(data, per_seed)
        contexts = jax.device_put(contexts, replicated if shared else per_seed)

    def init_one(d, pool):
        return init_lane(agent, d, pool)

    def segment_one(state, d, pool, t0, length):
        return round_scan(agent, state, d, pool, t0, length, record, draws)

    def warm_one(state, d):
        return warm_lane(agent, state, d, tau)

    out = {} if per_seed is None else dict(out_shardings=per_seed)  # keep every seed-axis array sharded
    init_v = jax.jit(jax.vmap(init_one, in_axes=(0, ctx_axis)), **out)
    finite_v = jax.jit(jax.vmap(state_is_finite))

    # The rounds run inside lax.scan: canonical_convs keeps the (batched) convolutions of any SGD the agent does
    # there in XLA:CPU's fast layout, which XLA only does by itself outside loops (banditkit.convs).
    def segment_v(length):
        fn = lambda st, d, pool, t0: segment_one(st, d, pool, t0, length)
        return jax.jit(canonical_convs(jax.vmap(fn, in_axes=(0, 0, ctx_axis, None))), donate_argnums=(0,), **out)

    t_start = time.perf_counter()
    state = init_v(data, contexts)
    jax.block_until_ready(state)
    compiled = {
        length: segment_v(length).lower(state, data, contexts, jnp.int32(0)).compile()
        for length in sorted({length for _, length in segments})
    }
    compiled_warm = None
    if 0 < tau < steps:
        warm_v = jax.jit(canonical_convs(jax.vmap(warm_one)), donate_argnums=(0,), **out)
        compiled_warm = warm_v.lower(state, data).compile()
    compile_s = time.perf_counter() - t_start

    offsets = np.zeros(n)
    run_s = 0.0
    nonfinite: dict[int, int] = {}
    t_next = 0  # the first round not run yet (a resumed run starts at its checkpoint's)
    run_key = dict(agent=name, seeds=[int(s) for s in seeds], steps=steps, segments=[list(g) for g in segments])
    if record:
        run_key["record"] = list(record)
    if draws:
        run_key["propensities"] = draws
    if checkpoint is not None and os.path.exists(checkpoint):
        state, t_next, offsets, nonfinite, run_s = _resume_state(checkpoint, state, run_key, per_seed)
    last_save = time.monotonic()
    bar = _progress(steps, name, progress)
    if bar is not None and t_next:
        bar.update(min(t_next, steps))
    try:
        for t0, length in segments:
            if t0 < t_next:
                continue
            tic = time.perf_counter()
            if compiled_warm is not None and t0 == tau:  # the warm-up fit: once, between two segments
                state = compiled_warm(state, data)
            state, out = compiled[length](state, data, contexts, jnp.int32(t0))
            out = jax.device_get(out)
            run_s += time.perf_counter() - tic
            keep = min(length, steps - t0)
            healthy = np.asarray(finite_v(state))[:n]
            for s, ok in zip(seeds, healthy, strict=True):
                if not ok and int(s) not in nonfinite:
                    nonfinite[int(s)] = t0 + keep
            a, r, e, o = (np.asarray(x)[:n, :keep] for x in out[:4])
            rec = {k: np.asarray(v)[:n, :keep] for k, v in zip(record, out[4], strict=True)}
            if draws:
                rec = {PROPENSITY: np.asarray(out[5])[:n, :keep]} | rec
            df = _frame(name, seeds, a, r, e, o, offsets, start=t0, recorded=rec)
            df.attrs["nonfinite"] = dict(nonfinite)  # so far: seed -> the round by which its state went NaN/inf
            offsets = df.groupby("seed", sort=False)["cumulative_regret"].last().reindex(seeds).to_numpy()
            sink.add(df)
            if checkpoint is not None and (t0 + length >= total or time.monotonic() - last_save >= save_every):
                _save_state(checkpoint, state, run_key, t0 + length, offsets, nonfinite, run_s)
                last_save = time.monotonic()
            if bar is not None:
                bar.update(keep)
    finally:
        if bar is not None:
            bar.close()
    devices = len(jax.tree_util.tree_leaves(state)[0].sharding.device_set)  # where the seeds ran
    diagnostics = _diagnostics(agent, getattr(state, "posterior", None), seeds)
    _warn_diagnostics(name, diagnostics, stacklevel=4)
    if nonfinite:
        warnings.warn(
            f"{name}: the agent state went non-finite (NaN/inf) for seed(s) {sorted(nonfinite)} (by round "
            f"{min(nonfinite.values())}); its actions after that are meaningless.  Find the step and field with "
            "bk.debug.first_nonfinite, and lower the learning rate / raise the observation noise or the jitter.",
            RuntimeWarning,
            stacklevel=3,
        )
    return dict(
        compile_s=compile_s,
        run_s=run_s,
        per_step_s=run_s / steps,
        steps=steps,
        seeds=n,
        mode="compiled",
        devices=devices,
        nonfinite=nonfinite,
    ) | _recorded_diagnostics(diagnostics)


def _save_state(path, state, run_key: dict, t_next: int, offsets, nonfinite: dict, run_s: float) -> None:
    """Write the vmapped agent state after round ``t_next − 1`` and what the loop needs to go on from there."""
    from banditkit import checkpoint
    from banditkit.experiments.gym_checkpoint import FORMAT

    meta = dict(format=FORMAT, run=run_key, t_next=int(t_next), offsets=np.asarray(offsets).tolist(),
                nonfinite={str(k): int(v) for k, v in nonfinite.items()}, run_s=float(run_s))
    checkpoint.save(path, state, meta=meta)


def _resume_state(path, template, run_key: dict, per_seed):
    """``(state, t_next, offsets, nonfinite, run_s)`` from a checkpoint of the same run (``run_key`` equal)."""
    from banditkit import checkpoint
    from banditkit.experiments.gym_checkpoint import run_meta

    meta = run_meta(os.fspath(path), run_key, "compiled")
    state, _ = checkpoint.load(path, template=template)
    state = jax.device_put(state, per_seed) if per_seed is not None else state
    nonfinite = {int(k): int(v) for k, v in meta["nonfinite"].items()}
    return state, int(meta["t_next"]), np.asarray(meta["offsets"], np.float64), nonfinite, float(meta["run_s"])


def _diagnostics(agent, posterior_state, seeds, batched: bool = True) -> dict[str, dict[int, Any]]:
    """``{key: {seed: value}}`` from the posterior's ``diagnostics`` hook on each seed's final state (``{}`` when the
    backend has none).  ``batched``: the state's leading axis is the seed axis (padded seeds past ``len(seeds)``
    ignored); else it is one seed's state and ``seeds`` names that seed."""
    post = getattr(agent, "posterior", None)
    if not isinstance(post, Posterior) or post.diagnostics is None or posterior_state is None:
        return {}
    host = jax.device_get(posterior_state)
    out: dict[str, dict[int, Any]] = {}
    for i, s in enumerate(seeds):
        one = jax.tree_util.tree_map(lambda a, i=i: a[i], host) if batched else host
        for key, value in (post.diagnostics(one) or {}).items():
            out.setdefault(str(key), {})[int(s)] = _plain(value)
    return out


def _plain(value):
    """A diagnostics value as plain Python (numbers, strings, lists): arrays and tuples of arrays become lists."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    arr = np.asarray(value)
    return arr.item() if arr.ndim == 0 else arr.tolist()


def _recorded_diagnostics(diagnostics: dict[str, dict[int, Any]]) -> dict[str, dict[int, Any]]:
    """The timing entries of the diagnostics: every key but the ``"warning"`` messages (shown, not stored)."""
    return {k: v for k, v in diagnostics.items() if k != "warning"}


def _warn_diagnostics(name: str, diagnostics: dict[str, dict[int, Any]], stacklevel: int = 3) -> None:
    """One ``RuntimeWarning`` per distinct ``"warning"`` message of the diagnostics, naming the seeds that gave it."""
    by_message: dict[str, list[int]] = {}
    for s, message in (diagnostics.get("warning") or {}).items():
        if message:
            by_message.setdefault(str(message), []).append(s)
    for message, seeds in by_message.items():
        warnings.warn(f"{name}: seed(s) {sorted(seeds)}: {message}", RuntimeWarning, stacklevel=stacklevel)


def state_is_finite(state) -> jax.Array:
    """``True`` iff every floating-point leaf of ``state`` is finite (integer and key leaves are skipped)."""
    flags = _finite_flags(state)
    return jnp.all(jnp.stack(flags)) if flags else jnp.asarray(True)


def _segments(steps: int, chunk: int, tau: int) -> list[tuple[int, int]]:
    """``(t0, length)`` of the compiled scans covering ``[0, steps)``: ``chunk``-long, except that a segment ends at
    the warm-up round ``τ`` (``0 < τ < steps``) so the warm-up fit can run between two scans.  At most two distinct
    lengths (``chunk`` and ``τ mod chunk``), so at most two compilations."""
    out: list[tuple[int, int]] = []
    t0 = 0
    if 0 < tau < steps:
        while t0 + chunk <= tau:
            out.append((t0, chunk))
            t0 += chunk
        if t0 < tau:
            out.append((t0, tau - t0))
            t0 = tau
    while t0 < steps:
        out.append((t0, chunk))
        t0 += chunk
    return out


# ----------------------------------------------------------------------------------------------- Gymnasium loop
def _info_value(info, key, action=None):
    if key not in info:
        raise KeyError(f"the env's info dict has no {key!r}; banditkit envs report expected_rewards/optimal_reward")
    v = np.asarray(info[key])
    return float(v[action]) if action is not None else float(v)


def _run_gym(agent, env, name, seeds, steps, chunk, progress, sink, checkpoint, save_every, record, draws=0):
    from banditkit.experiments import gym_checkpoint as gck

    recorded = jax.jit(lambda st: _recorded(record, st))
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
                    pg.first_call_s += dt  # includes tracing/compilation of act and observe
                else:
                    pg.run_s += dt
                    pg.timed_steps += 1
                expected = np.asarray(info["expected_rewards"], np.float64)
                rows["a"].append(a)
                rows["r"].append(float(reward))
                rows["e"].append(float(expected[a]))
                rows["o"].append(_info_value(info, "optimal_reward"))
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
                    df = _frame(name, [s], *arr, offsets=np.array([pg.offset]), start=t0, recorded=rec)
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


# ------------------------------------------------------------------------------------------------- public API
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
      compiled: ``True``: ``lax.scan`` + ``vmap`` over seeds (needs ``env.unwrapped.functional``); ``False``: the
        Gymnasium step loop; ``None``: compiled when the env has a functional form.
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
        replay is a ``ValueError``; :mod:`banditkit.experiments.gym_checkpoint`).  Rows of an interrupted run that
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
      cumulative_regret`` (then the ``record`` columns); ``df.attrs["timing"] = {agent: {compile_s, run_s,
      per_step_s, steps, seeds, mode}}``.
    """
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    steps = int(steps)
    from banditkit.datasets.streams import Stream

    if isinstance(env, Stream):  # a prequential stream: predict-then-update metrics (experiments/prequential.py)
        from banditkit.experiments.prequential import run_stream

        return run_stream(env, agent, steps, seeds, name=name)
    seed_list = _seeds(seeds)
    env = _make_env(env, env_kwargs, steps)
    u = getattr(env, "unwrapped", env)
    if getattr(u, "task", "bandit") == "bo":
        raise ValueError("this is a Bayesian-optimisation env: use bk.bo.optimize / banditkit bo, not run()")
    agent = _make_agent(agent, env)
    label = _agent_name(agent, name)
    has_functional = hasattr(u, "functional")
    if compiled is None:
        compiled = has_functional
    if compiled and not has_functional:
        raise ValueError(f"{type(u).__name__} has no functional form (env.unwrapped.functional); use compiled=False")
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
        items = [(a if isinstance(a, str) else _agent_name(a, None), a) for a in agents]
    if not items:
        raise ValueError("compare needs at least one agent")
    env_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k not in _RUN_KEYS}
    env_obj = _make_env(env, env_kwargs, steps)
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


def agent_checkpoint(folder: str | os.PathLike, name: str) -> str:
    """The checkpoint file of agent ``name`` in ``folder`` (the name with characters other than letters, digits,
    ``-``, ``_`` and ``.`` replaced by ``_``, then ``.bk``)."""
    import re

    return os.path.join(os.fspath(folder), re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)) + ".bk")


def checkpoint_rounds(path: str | os.PathLike) -> dict[int, int]:
    """``{seed: rounds run}`` of a :func:`run` checkpoint (``{}`` when the file does not exist): every seed at the
    same round in the compiled loop; in the Gymnasium loop the finished seeds, the one in progress, and 0 for the
    seeds not started."""
    from banditkit import checkpoint
    from banditkit.experiments import gym_checkpoint

    if not os.path.exists(path):
        return {}
    meta = checkpoint.header(path).get("meta") or {}
    if meta.get("format") != gym_checkpoint.FORMAT:
        raise ValueError(f"{os.fspath(path)!r} is not a checkpoint of a bandit run ({gym_checkpoint.FORMAT})")
    if meta.get("loop") == gym_checkpoint.LOOP:
        return gym_checkpoint.rounds(meta)
    return {int(s): int(meta["t_next"]) for s in meta["run"]["seeds"]}


def checkpoint_round(path: str | os.PathLike) -> int:
    """The first round a :func:`run` checkpoint has not run for every seed (0 when the file does not exist; the
    least over seeds for the Gymnasium loop, :func:`checkpoint_rounds` has each seed's)."""
    return min(checkpoint_rounds(path).values(), default=0)


_RUN_KEYS = {"compiled", "progress", "chunk_size", "on_chunk", "csv_path", "checkpoint", "save_every", "record",
             "propensities"}
