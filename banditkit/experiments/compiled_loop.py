"""The compiled loop of :func:`banditkit.run` (``compiled=True``; needs ``env.unwrapped.stream(seed, steps)``)::

    per seed s:  fb_s = env.unwrapped.stream(s, steps)         # contexts, index, rewards (pre-drawn)
                 e_s = env.unwrapped.oracle(s, steps)          # expected rewards: regret only, NaN without an oracle
                 k_init, k_act = split(PRNGKey(s));  state = agent.init(k_init, fb_s.contexts[fb_s.index[0]])
    round t:     key_t = fold_in(k_act, t);  x_t = contexts[index[t]]
                 a_t, state = act(key_t, state, x_t);  r_t = rewards[t, a_t];  state = observe(state, x_t, a_t, r_t)

``lax.scan`` over rounds (in segments, so a progress bar can advance and finished segments can be saved), ``vmap``
over seeds, and the seed axis sharded over all local devices with ``jax.sharding`` when there is more than one (seeds
are padded to a multiple of the device count; the padding is dropped).  After every segment one jitted reduction
tells, per seed, whether the agent state is still finite (:mod:`banditkit.experiments.health`).  The lane functions
(:func:`seed_inputs`, :func:`init_lane`, :func:`round_scan`, :func:`warm_lane`) are shared with
:func:`banditkit.sweep`.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from banditkit._xla.conv import canonical_convs
from banditkit.experiments.checkpoints import _resume_state, _save_state
from banditkit.experiments.frames import PROPENSITY, _frame, _progress, _recorded, is_synthetic
from banditkit.experiments.health import _diagnostics, _recorded_diagnostics, _warn_diagnostics, state_is_finite


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



def has_play_stream(u) -> bool:
    """Whether ``u`` can be played by the compiled loop (``stream(seed, steps)`` or the older ``functional``)."""
    return hasattr(u, "stream") or hasattr(u, "functional")


def has_oracle(u) -> bool:
    """Whether the env offers expected rewards for regret: ``has_oracle`` when it says, else an ``oracle`` or
    ``functional`` method."""
    declared = getattr(u, "has_oracle", None)
    if declared is not None:
        return bool(declared)
    return hasattr(u, "oracle") or hasattr(u, "functional")


def _play_part(fb):
    """The play part of a functional form: its ``stream``, or the object itself (an env's own tuple with
    ``contexts``, ``index``, ``rewards``)."""
    return fb.stream if hasattr(fb, "stream") else fb


def episode_arrays(u, seed: int, steps: int):
    """``(play, expected)`` of seed ``seed``: what the agent plays (a stream: contexts, index, realised rewards) and
    the expected rewards ``(steps, K)`` for regret — NaN when the env has none (:func:`has_oracle`).  An env with a
    functional form and an oracle builds its episode once (``functional``), split here; otherwise ``stream`` (or the
    play part of ``functional``) and ``oracle``."""
    if has_oracle(u) and hasattr(u, "functional"):
        fb = u.functional(seed, steps)
        return _play_part(fb), np.asarray(fb.expected)
    play = u.stream(seed, steps) if hasattr(u, "stream") else _play_part(u.functional(seed, steps))
    if not has_oracle(u):
        return play, np.full(np.shape(play.rewards), np.nan, np.float32)
    return play, np.asarray(u.oracle(seed, steps))


def seed_inputs(u, seeds: Sequence[int], steps: int, total: int, rows: Sequence[int]) -> tuple[dict, np.ndarray, bool]:
    """Host arrays of the compiled loop, one row per lane: lane ``i`` runs seed ``seeds[rows[i]]`` (a seed may fill
    several lanes: padding lanes, or :func:`banditkit.sweep`'s configurations).

    Returns ``(data, contexts, shared)``: ``data = {index (L, total) int32, rewards (L, total, K) float32, expected
    (L, total, K) float32, keys (L, 2, 2)}`` with ``keys[i] = split(PRNGKey(seed))`` and the round axis padded from
    ``steps`` to ``total`` by repeating the last round; ``contexts`` is the env's pool ``(N, ...)`` when every seed
    shares it (``shared``), else the per-seed pools zero-padded to a common size, ``(L, N_max, ...)``.
    """
    # what the agent plays (contexts, realised rewards) and, for regret only, the simulator's expected rewards (NaN
    # where the env has none): the expected rewards never enter the agent's program
    plays, oracles = zip(*(episode_arrays(u, s, steps) for s in seeds), strict=True)
    for s, fb in zip(seeds, plays, strict=True):
        if np.shape(fb.index)[0] < steps or np.shape(fb.rewards)[0] < steps:
            raise ValueError(f"env.stream({s}, {steps}) returned fewer than {steps} rounds")
    shared = _same_pool([fb.contexts for fb in plays])
    pick = lambda xs: [xs[i] for i in rows]

    def per_step(a):  # pad the round axis to the end of the last segment
        a = np.asarray(a)[:steps]
        return np.concatenate([a, np.repeat(a[-1:], total - steps, axis=0)]) if total > steps else a

    index = np.stack(pick([per_step(fb.index) for fb in plays])).astype(np.int32)
    rewards = np.stack(pick([per_step(fb.rewards) for fb in plays])).astype(np.float32)
    expected = np.stack(pick([per_step(e) for e in oracles])).astype(np.float32)
    keys = np.stack(pick([np.asarray(jax.random.split(jax.random.PRNGKey(s))) for s in seeds]))
    if shared:
        contexts = np.asarray(plays[0].contexts)
    else:  # per-seed pools, zero-padded to a common size (the index never points into the padding)
        pools = [np.asarray(fb.contexts) for fb in plays]
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
        a = agent.choose(key_t, st, ctx)  # the warm-up fit runs between segments (warm_lane), not in the scan
        p = agent.propensity(agent.propensity_key(key_t), st, ctx, a, num_draws=draws) if draws else ()
        r = d["rewards"][t, a]
        st = agent.update(st, ctx, a, r)
        return st, (a, r, d["expected"][t, a], jnp.max(d["expected"][t]), _recorded(record, st), p)

    # unroll=2: with one round per loop iteration XLA copies the loop-carried state before an update whose product
    # reads the factor it replaces (HiLoFi's 50 × 60,856 hidden factor on MNIST: 12 MB per round); two rounds per
    # iteration let it update in place (benchmarks/results/round_mnist.md).  The rounds and their results are the same.
    return jax.lax.scan(step, state, t0 + jnp.arange(length), unroll=2)



def warm_lane(agent, state, d: dict, tau: int):
    """The warm-up fit at round ``τ`` with the key ``BanditAgent.act`` derives there, so both loops fit the same."""
    return agent.warmup(agent.warmup_key(jax.random.fold_in(d["keys"][1], tau)), state)



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



class Compiled(NamedTuple):
    """The compiled programs of one run: ``segments[length](state, data, contexts, t0)`` scans ``length`` rounds from
    ``t0``; ``warm(state, data)`` is the warm-up fit at round ``tau`` (None when ``τ`` is not inside the run)."""

    segments: dict[int, Callable]
    warm: Callable | None
    tau: int

    def advance(self, state, data, contexts, t0: int, length: int):
        """The warm-up fit when ``t0 = τ``, then the segment ``[t0, t0 + length)``: ``(state, outputs)``."""
        if self.warm is not None and t0 == self.tau:  # the warm-up fit: once, between two segments
            state = self.warm(state, data)
        return self.segments[length](state, data, contexts, jnp.int32(t0))


def compile_lanes(init_one: Callable, segment_one: Callable, warm_one: Callable, data: dict, contexts, ctx_axis,
                  segments: Sequence[tuple[int, int]], steps: int, tau: int, lanes) -> tuple[Any, Compiled]:
    """Initial state and compiled programs of lanes run with ``vmap``: ``init_one(d, pool)``,
    ``segment_one(state, d, pool, t0, length)`` (one compilation per distinct length of ``segments``) and
    ``warm_one(state, d)`` (only when ``0 < τ < steps``); ``ctx_axis`` is ``None`` for one shared pool, else 0.
    ``lanes``: the lane-axis sharding every lane array keeps (None on one device)."""
    out = {} if lanes is None else dict(out_shardings=lanes)  # keep every lane-axis array sharded
    state = jax.jit(jax.vmap(init_one, in_axes=(0, ctx_axis)), **out)(data, contexts)
    jax.block_until_ready(state)

    # The rounds run inside lax.scan: canonical_convs keeps the (batched) convolutions of any SGD the agent does
    # there in XLA:CPU's fast layout, which XLA only does by itself outside loops (banditkit._xla.conv).
    def segment_v(length):
        fn = lambda st, d, pool, t0: segment_one(st, d, pool, t0, length)
        return jax.jit(canonical_convs(jax.vmap(fn, in_axes=(0, 0, ctx_axis, None))), donate_argnums=(0,), **out)

    compiled = {length: segment_v(length).lower(state, data, contexts, jnp.int32(0)).compile()
                for length in sorted({length for _, length in segments})}
    warm = None
    if 0 < tau < steps:
        warm_v = jax.jit(canonical_convs(jax.vmap(warm_one)), donate_argnums=(0,), **out)
        warm = warm_v.lower(state, data).compile()
    return state, Compiled(compiled, warm, tau)


class ChunkHooks(NamedTuple):
    """How :func:`drive_chunks` reaches arrays and checkpoints: one process's (:func:`local_hooks`) or, in
    :func:`banditkit.sweep`, collectives every process joins.

    fetch(tree) -> NumPy tree     a segment's outputs / the health flags, all lanes, on this host
    agree(flag) -> bool           one decision (save a checkpoint now?) taken alike by every process
    resume(path, state, run_key)  -> (state, t_next, offsets, nonfinite, run_s) of an existing checkpoint
    save(path, state, run_key, t_next, offsets, nonfinite, run_s)   write a checkpoint (called in every process)
    writer                        whether this process draws the progress bar
    """

    fetch: Callable[[Any], Any]
    agree: Callable[[bool], bool]
    resume: Callable[[str, Any, dict], tuple]
    save: Callable[..., None]
    writer: bool


def local_hooks(per_seed) -> ChunkHooks:
    """:class:`ChunkHooks` of one process whose lanes lie on its own devices (``per_seed``: their sharding, or None)."""
    return ChunkHooks(fetch=jax.device_get, agree=bool,
                      resume=lambda path, state, run_key: _resume_state(path, state, run_key, per_seed),
                      save=_save_state, writer=True)


def drive_chunks(program: Compiled, state, data: dict, contexts, segments: Sequence[tuple[int, int]], steps: int, *,
                 name: str, lane_keys: Sequence[int], emit: Callable, sink, checkpoint: str | None, run_key: dict,
                 save_every: float, progress: bool, hooks: ChunkHooks) -> tuple[Any, float, dict[int, int]]:
    """Run ``segments`` (from a checkpoint's next round when ``checkpoint`` exists) and hand each chunk's rows to
    ``sink``; returns ``(state, run seconds, nonfinite)``.

    Lane ``i`` of ``n = len(lane_keys)`` is reported as ``lane_keys[i]``: ``nonfinite[lane_keys[i]]`` is the round by
    which its state first went NaN/inf.  Per chunk ``[t0, t0 + keep)`` (``keep`` stops at ``steps``),
    ``emit(t0, keep, outputs, offsets, nonfinite) -> (frame, offsets)`` turns the fetched outputs of
    :func:`round_scan` into rows, given each lane's cumulative regret before ``t0`` (``offsets (n,)``) and returning
    it after the chunk.  A checkpoint is saved after the last chunk and after any chunk ending ``save_every`` seconds
    or more after the last save."""
    n = len(lane_keys)
    total = segments[-1][0] + segments[-1][1]
    finite_v = jax.jit(jax.vmap(state_is_finite))
    offsets = np.zeros(n)
    run_s = 0.0
    nonfinite: dict[int, int] = {}
    t_next = 0  # the first round not run yet (a resumed run starts at its checkpoint's)
    if checkpoint is not None and os.path.exists(checkpoint):
        state, t_next, offsets, nonfinite, run_s = hooks.resume(checkpoint, state, run_key)
    last_save = time.monotonic()
    bar = _progress(steps, name, progress and hooks.writer)
    if bar is not None and t_next:
        bar.update(min(t_next, steps))
    try:
        for t0, length in segments:
            if t0 < t_next:
                continue
            tic = time.perf_counter()
            state, out = program.advance(state, data, contexts, t0, length)
            out = hooks.fetch(out)
            run_s += time.perf_counter() - tic
            keep = min(length, steps - t0)
            healthy = np.asarray(hooks.fetch(finite_v(state)))[:n]
            for key, ok in zip(lane_keys, healthy, strict=True):
                if not ok:
                    nonfinite.setdefault(int(key), t0 + keep)
            df, offsets = emit(t0, keep, out, offsets, nonfinite)
            sink.add(df)
            if checkpoint is not None and hooks.agree(t0 + length >= total or
                                                      time.monotonic() - last_save >= save_every):
                hooks.save(checkpoint, state, run_key, t0 + length, offsets, nonfinite, run_s)
                last_save = time.monotonic()
            if bar is not None:
                bar.update(keep)
    finally:
        if bar is not None:
            bar.close()
    return state, run_s, nonfinite


def _run_compiled(agent, u, name, seeds, steps, chunk, progress, sink, checkpoint, save_every, record, draws=0):
    n = len(seeds)
    synthetic = is_synthetic(u)
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

    t_start = time.perf_counter()
    if progress:  # compiling takes seconds to minutes: say so before the progress bar appears
        print(f"compiling {name}…", end="", file=sys.stderr, flush=True)
    state, program = compile_lanes(init_one, segment_one, warm_one, data, contexts, ctx_axis, segments, steps, tau,
                                   per_seed)
    compile_s = time.perf_counter() - t_start
    if progress:
        print(f" {compile_s:.1f} s", file=sys.stderr, flush=True)

    def emit(t0, keep, out, offsets, nonfinite):
        a, r, e, o = (np.asarray(x)[:n, :keep] for x in out[:4])
        rec = {k: np.asarray(v)[:n, :keep] for k, v in zip(record, out[4], strict=True)}
        if draws:
            rec = {PROPENSITY: np.asarray(out[5])[:n, :keep]} | rec
        df = _frame(name, seeds, a, r, e, o, offsets, start=t0, recorded=rec, synthetic=synthetic)
        df.attrs["nonfinite"] = dict(nonfinite)  # so far: seed -> the round by which its state went NaN/inf
        return df, df.groupby("seed", sort=False)["cumulative_regret"].last().reindex(seeds).to_numpy()

    run_key = dict(agent=name, seeds=[int(s) for s in seeds], steps=steps, segments=[list(g) for g in segments])
    if record:
        run_key["record"] = list(record)
    if draws:
        run_key["propensities"] = draws
    state, run_s, nonfinite = drive_chunks(program, state, data, contexts, segments, steps, name=name,
                                           lane_keys=[int(s) for s in seeds], emit=emit, sink=sink,
                                           checkpoint=checkpoint, run_key=run_key, save_every=save_every,
                                           progress=progress, hooks=local_hooks(per_seed))
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
