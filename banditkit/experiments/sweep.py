"""``sweep``: an agent over a hyper-parameter × seed grid, one compiled program per structural configuration.

For an agent spec, a scalar grid ``G = {axis: [values]}`` (:data:`~banditkit.experiments.grid.SCALAR_AXES`) and
seeds ``s_1..s_S``, the ``C = Π |values|`` configurations and the seeds form ``L = C · S`` *lanes*, configuration
major (lane ``c · S + j`` runs configuration ``c`` on seed ``s_j``).  One program runs them all::

    per lane (c, s):  agent_c = make_agent(spec, env, **hyper_c)      # hyper_c: traced scalars, not constants
                      the compiled loop of bk.run for seed s           # same data, keys and rounds as bk.run
    program:          vmap over lanes, lax.scan over rounds, the lane axis sharded over every device of every
                      process (banditkit.experiments.placement), padded to a multiple of the device count

The scalar hyper-parameters are the lanes' *arguments*: the agent is built inside the traced function from the
lane's values, so every configuration shares one compilation.  A structural axis (``structural={"rank": [5, 10]}``)
and every agent spec are separate programs, each compiled once.

A lane computes what ``bk.run`` computes for that configuration and seed: the same PRNG stream, reward table and
rounds.  The numbers are identical where XLA's arithmetic does not depend on how it was compiled (the tests' EKF);
otherwise they agree to float rounding: a traced hyper-parameter is not folded as a constant, and some batched
kernels round differently with the batch size — ``bk.run`` itself gives seed 0 of HiLoFi-TS on Shuttle different
last bits alone and beside seed 1 — and a bandit's action can branch at a near-tie, after which that lane's
trajectory differs while its statistics do not.

Multi-process: call :func:`banditkit.experiments.placement.initialize` (``jax.distributed``) first in every process,
then the same ``sweep`` in every process; each runs the lanes on its devices, every process gets the whole frame
and process 0 writes the files (``csv_path``, checkpoints).

Output: the frame of :func:`banditkit.compare` with one column per axis (scalar and structural) after ``agent``;
``df.attrs["sweep_axes"]`` lists them (``bk.summarize`` groups by them), ``df.attrs["timing"][program]`` the
compile / run times of each program (``program`` = the agent label, then ``[axis=value ...]`` of its structural
configuration).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from banditkit.experiments import grid as _grid
from banditkit.experiments import placement as _place
from banditkit.experiments.checkpoints import _resume_state, _save_state, agent_checkpoint
from banditkit.experiments.compiled_loop import (
    ChunkHooks,
    _segments,
    compile_lanes,
    drive_chunks,
    init_lane,
    round_scan,
    seed_inputs,
    warm_lane,
)
from banditkit.experiments.frames import _frame, _Sink, is_synthetic
from banditkit.experiments.prequential import seed_list as _seeds
from banditkit.experiments.resolve import make_env

AgentSpec = str | Sequence[str] | Mapping[str, str]


def _specs(agent_spec: AgentSpec) -> list[tuple[str, str]]:
    """``[(label, spec)]`` from one spec, a list of specs or ``{label: spec}``."""
    if isinstance(agent_spec, str):
        items = [(agent_spec, agent_spec)]
    elif isinstance(agent_spec, Mapping):
        items = [(str(k), v) for k, v in agent_spec.items()]
    else:
        items = [(s, s) for s in agent_spec]
    if not items:
        raise ValueError("sweep needs at least one agent spec")
    for label, spec in items:
        if not isinstance(spec, str):
            raise TypeError(f"sweep builds its agents from spec strings ('hilofi-thompson'); got {spec!r} for "
                            f"{label!r} (an agent object's hyper-parameters are fixed constants and cannot be swept)")
    return items


class _Recipe:
    """How to build the agent of one program for a configuration of its scalar axes (concrete or traced)."""

    def __init__(self, spec: str, env, point: dict, model, posterior_kwargs, policy_kwargs, agent_kwargs):
        from banditkit.agents import parse_spec
        from banditkit.agents.bandit import BanditAgent, backends
        from banditkit.posteriors.registry import accepts_keyword

        self.spec, self.env, self.point, self.model = spec, env, dict(point), model
        self.post_name, self.pol_name = parse_spec(spec)
        factory = backends()[self.post_name]
        self.post_accepts = lambda k: accepts_keyword(factory, k)
        self.agent_accepts = lambda k: accepts_keyword(BanditAgent.__init__, k) and k not in ("posterior", "policy")
        self.fixed = (dict(posterior_kwargs or {}), dict(policy_kwargs or {}), dict(agent_kwargs or {}))

    def __call__(self, hyper: Mapping[str, Any]):
        from banditkit.agents import make_agent

        agent_kw, post_kw, pol_kw = _grid.split_kwargs({**self.point, **hyper}, self.post_accepts, self.pol_name,
                                                       self.agent_accepts)
        post, pol, agent = self.fixed
        a = make_agent(self.spec, self.env, model=self.model, posterior_kwargs={**post, **post_kw},
                       policy_kwargs={**pol, **pol_kw}, **{**agent, **agent_kw})
        return a  # K and the context shapes come with the state agent.init returns (AgentState.shapes)


def _check_points(recipe: _Recipe, configs: list[dict]):
    """Build every configuration's agent with its real values (the factories' and policies' own checks, nothing
    compiled); the last agent built.  A bad value is a ``ValueError`` / ``TypeError`` naming the grid point."""
    agent = None
    for c in configs:
        try:
            agent = recipe(c)
        except (ValueError, TypeError) as e:
            raise type(e)(f"sweep: {recipe.spec!r} at grid point {recipe.point | c}: {e}") from e
    return agent


def check(agent_spec: AgentSpec, env, grid: Mapping[str, Sequence[float]] | None = None, *,
          structural: Mapping[str, Sequence[Any]] | None = None, model=None, posterior_kwargs: dict | None = None,
          policy_kwargs: dict | None = None, agent_kwargs: dict | None = None, **env_kwargs) -> None:
    """Check a :func:`sweep`'s arguments without running it: the axes, and every configuration's agent built with
    its real values (so a command line can refuse a bad value before it touches any file)."""
    scalar = _grid.check_scalar_grid(grid)
    struct = _grid.check_structural(structural, scalar)
    _grid.check_names(list(scalar) + list(struct))
    env_obj = make_env(env, **env_kwargs)
    for _, spec in _specs(agent_spec):
        for point in _grid.points(struct):
            recipe = _Recipe(spec, env_obj, point, model, posterior_kwargs, policy_kwargs, agent_kwargs)
            _check_points(recipe, _grid.points(scalar))


def _untraceable(recipe: _Recipe, configs: list[dict], d0: dict, pool, error: Exception) -> ValueError:
    """The clear error for a scalar axis this agent cannot take as a traced value: which axes, and what to do."""
    d0, pool = jax.tree_util.tree_map(jnp.asarray, (d0, pool))
    bad = []
    for axis in configs[0]:
        def probe(v, axis=axis):
            agent = recipe({**configs[0], axis: v})
            state = init_lane(agent, d0, pool)
            return round_scan(agent, state, d0, pool, 0, 1)

        try:
            jax.eval_shape(probe, jnp.float32(configs[0][axis]))
        except jax.errors.JAXTypeError:
            bad.append(axis)
    names = bad or list(configs[0])
    return ValueError(
        f"sweep: {recipe.spec!r} cannot batch the axis(es) {names} in one program: its backend or policy needs a "
        f"concrete value there ({type(error).__name__}).  Pass them as structural={{axis: [...]}} instead (one "
        "program per value)."
    )


def _run_program(recipe: _Recipe, u, name: str, seeds: list[int], configs: list[dict], steps: int, chunk: int,
                 progress: bool, sink: _Sink, checkpoint: str | None, save_every: float) -> dict:
    """Run the lanes ``configs × seeds`` of one program; the rows go to ``sink`` (one frame per chunk)."""
    n_cfg, n_seed = len(configs), len(seeds)
    n = n_cfg * n_seed
    place = _place.Placement(n)
    cfg_rows = [c for c in range(n_cfg) for _ in range(n_seed)]
    seed_rows = [j for _ in range(n_cfg) for j in range(n_seed)]
    cfg_rows += [cfg_rows[-1]] * (place.padded - n)  # padding lanes repeat the last one; their rows are dropped
    seed_rows += [seed_rows[-1]] * (place.padded - n)
    tau = int(getattr(_check_points(recipe, configs), "warmup_rounds", 0))
    segments = _segments(steps, chunk, tau)
    total = segments[-1][0] + segments[-1][1]
    data, contexts, shared = seed_inputs(u, seeds, steps, total, seed_rows)
    dtype = jnp.result_type(float)
    data["hyper"] = {k: np.asarray([configs[c][k] for c in cfg_rows], dtype) for k in configs[0]}
    first = jax.tree_util.tree_map(lambda a: a[0], {k: v for k, v in data.items() if k != "hyper"})
    pool0 = contexts if shared else contexts[0]
    data = place.put(data)
    contexts = place.put(contexts, replicate=shared)
    ctx_axis = None if shared else 0

    def init_one(d, pool):
        return init_lane(recipe(d["hyper"]), d, pool)

    def segment_one(state, d, pool, t0, length):
        return round_scan(recipe(d["hyper"]), state, d, pool, t0, length)

    def warm_one(state, d):
        return warm_lane(recipe(d["hyper"]), state, d, tau)

    t_start = time.perf_counter()
    try:
        state, program = compile_lanes(init_one, segment_one, warm_one, data, contexts, ctx_axis, segments, steps,
                                       tau, place.lanes)
    except jax.errors.JAXTypeError as e:
        raise _untraceable(recipe, configs, first, pool0, e) from e
    compile_s = time.perf_counter() - t_start

    lane_seeds = np.asarray([seeds[j] for j in seed_rows[:n]], np.int64)
    synthetic = is_synthetic(u)

    def emit(t0, keep, res, offsets, nonfinite):
        a, r, e, o = (np.asarray(x)[:n, :keep] for x in res[:4])
        df = _frame(name, lane_seeds, a, r, e, o, offsets, start=t0, synthetic=synthetic)
        offsets = df["cumulative_regret"].to_numpy().reshape(n, keep)[:, -1].copy()
        for k in reversed(list(configs[0])):
            df.insert(1, k, np.repeat(np.asarray([configs[c][k] for c in cfg_rows[:n]], np.float64), keep))
        return df, offsets

    run_key = dict(agent=name, grid=[dict(c) for c in configs], seeds=list(seeds), steps=steps,
                   segments=[list(g) for g in segments])
    _, run_s, nonfinite = drive_chunks(program, state, data, contexts, segments, steps, name=name,
                                       lane_keys=range(n), emit=emit, sink=sink, checkpoint=checkpoint,
                                       run_key=run_key, save_every=save_every, progress=progress,
                                       hooks=_hooks(place))
    if nonfinite:
        where = [(configs[cfg_rows[lane]], int(lane_seeds[lane])) for lane in sorted(nonfinite)]
        warnings.warn(f"{name}: the agent state went non-finite (NaN/inf) in {len(where)} lane(s) (configuration, "
                      f"seed): {where[:8]}; their actions after that are meaningless.", RuntimeWarning, stacklevel=3)
    return dict(compile_s=compile_s, run_s=run_s, per_step_s=run_s / steps, steps=steps, seeds=n_seed,
                configs=n_cfg, lanes=n, padded_lanes=place.padded, devices=place.devices, processes=place.processes,
                mode="compiled-sweep", nonfinite={int(k): int(v) for k, v in nonfinite.items()})


def _hooks(place: _place.Placement) -> ChunkHooks:
    """The chunk loop's hooks for lanes on every process's devices: outputs and states gathered by collectives
    that every process joins, checkpoint decisions taken by process 0, files written by process 0."""
    writer = _place.is_writer()

    def resume(path, state, run_key):
        host, *rest = _resume_state(path, _place.gather(state), run_key, None)
        return (place.put(jax.tree_util.tree_map(np.asarray, host)), *rest)

    def save(path, state, *position):
        host = _place.gather(state)  # every process takes part; process 0 writes
        if writer:
            _save_state(path, host, *position)

    return ChunkHooks(fetch=_place.gather, agree=_agree, resume=resume, save=save, writer=writer)


def _agree(flag: bool) -> bool:
    """Process 0's ``flag`` on every process (a collective only when there are several), so a checkpoint's gather
    happens in all of them or in none."""
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    return bool(multihost_utils.broadcast_one_to_all(np.asarray(bool(flag))))


def idle_axes(df: pd.DataFrame, scalar: Mapping[str, Sequence[float]]) -> list[str]:
    """The scalar axes (of more than one value) whose values all gave the same actions and rewards, lane for lane
    (every seed, every value of the other axes): the agent does not use them, or not within these rounds."""
    idle = []
    for axis in (a for a, v in scalar.items() if len(v) > 1):
        others = [a for a in scalar if a != axis] + ["seed", "step"]
        runs = [g[others + ["action", "reward"]].reset_index(drop=True) for _, g in df.groupby(axis, sort=False)]
        if len(runs) > 1 and all(r.equals(runs[0]) for r in runs[1:]):
            idle.append(axis)
    return idle


def _warn_idle_axes(df: pd.DataFrame, name: str, scalar: Mapping[str, Sequence[float]]) -> None:
    idle = idle_axes(df, scalar)
    if idle:
        warnings.warn(f"{name}: every value of {idle} gave the same actions and rewards on every seed: this agent "
                      "may not use that hyper-parameter (e.g. a backend that learns its observation noise ignores "
                      "obs_noise), or it made no difference within these rounds", RuntimeWarning, stacklevel=3)


def program_name(label: str, point: Mapping[str, Any]) -> str:
    """The name of the program that runs agent ``label`` at the structural grid point ``point`` (its rows' ``agent``
    and its checkpoint's name): ``"label [k=v ...]"``, or ``label`` alone for no structural axis."""
    return label if not point else label + " [" + " ".join(f"{k}={v}" for k, v in point.items()) + "]"


def sweep(
    agent_spec: AgentSpec,
    env,
    grid: Mapping[str, Sequence[float]] | None = None,
    *,
    seeds: int | Sequence[int] = 1,
    steps: int,
    structural: Mapping[str, Sequence[Any]] | None = None,
    model=None,
    posterior_kwargs: dict | None = None,
    policy_kwargs: dict | None = None,
    agent_kwargs: dict | None = None,
    chunk_size: int | None = None,
    progress: bool = True,
    csv_path: str | os.PathLike | None = None,
    on_chunk: Callable[[pd.DataFrame], None] | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    save_every: float = 60.0,
    **env_kwargs,
) -> pd.DataFrame:
    """Run agents over a hyper-parameter grid and seeds (module docstring); a tidy DataFrame.

    Args:
      agent_spec: a spec string (``"hilofi-thompson"``), a list of them, or ``{label: spec}``.
      env: a Gymnasium id or env object with a functional form (``env.unwrapped.functional``).
      grid: scalar axes ``{axis: [values]}`` (``obs_noise``, ``init_cov*``, ``dynamics_cov*``, ``forgetting``,
        ``epsilon``, ``beta``, ``xi``), batched in one program; any other axis is refused with a pointer to
        ``structural``.
      seeds: a count ``n`` (seeds ``0..n-1``) or a list of seeds; every configuration runs every seed.
      steps: rounds per lane.
      structural: ``{axis: [values]}`` that change the program (``rank``, ``rank_last``, ``last_cov``,
        ``warmup_steps``, ...): one program per combination, compiled once each.
      model, posterior_kwargs, policy_kwargs, agent_kwargs: as :func:`banditkit.agents.make_agent`, for every
        configuration (an axis overrides them).
      chunk_size: rounds per compiled chunk (progress / checkpoint granularity; default ``ceil(steps / 20)``, at
        least 100).
      progress: a progress bar per program (process 0 only).
      csv_path: process 0 appends every finished chunk's rows to this CSV.
      on_chunk: called with each finished chunk's rows (in every process).
      checkpoint_dir: one checkpoint per program in this folder (:func:`banditkit.experiments.checkpoints.
        agent_checkpoint` of the program's name), saved as ``bk.run`` saves them (``save_every`` seconds, and after
        the last chunk); a sweep given the folder of an interrupted one resumes each program where it stopped.
        With several processes it must be a folder every process reads (process 0 writes it).
      env_kwargs: passed to ``gymnasium.make``.

    Returns:
      The columns of :func:`banditkit.compare` with one column per axis after ``agent``;
      ``df.attrs["sweep_axes"]``, ``df.attrs["timing"]``.
    """
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    steps = int(steps)
    specs = _specs(agent_spec)
    scalar = _grid.check_scalar_grid(grid)
    struct = _grid.check_structural(structural, scalar)
    axes = list(scalar) + list(struct)
    _grid.check_names(axes)
    seed_list = _seeds(seeds)
    env_obj = make_env(env, steps=steps, **env_kwargs)
    u = getattr(env_obj, "unwrapped", env_obj)
    if not hasattr(u, "functional"):
        raise ValueError(f"{type(u).__name__} has no functional form (env.unwrapped.functional): a sweep runs the "
                         "compiled loop only; use bk.run(..., compiled=False) per configuration")
    chunk = int(chunk_size) if chunk_size else max(100, int(math.ceil(steps / 20)))
    chunk = max(1, min(chunk, steps))
    if checkpoint_dir is not None:
        if not save_every >= 0:
            raise ValueError(f"save_every must be a number of seconds >= 0, got {save_every!r}")
        os.makedirs(os.fspath(checkpoint_dir), exist_ok=True)
    configs = _grid.points(scalar)
    writer = _place.is_writer()
    frames, timing = [], {}
    sink_csv = os.fspath(csv_path) if csv_path is not None and writer else None
    for label, spec in specs:
        for point in _grid.points(struct):
            recipe = _Recipe(spec, env_obj, point, model, posterior_kwargs, policy_kwargs, agent_kwargs)
            name = program_name(label, point)
            ckpt = agent_checkpoint(checkpoint_dir, name) if checkpoint_dir is not None else None
            sink = _Sink(sink_csv, on_chunk)
            timing[name] = _run_program(recipe, u, label, seed_list, configs, steps, chunk, progress, sink, ckpt,
                                        save_every)
            if not sink.frames:
                continue
            df = pd.concat(sink.frames, ignore_index=True)
            for k in reversed(list(struct)):
                df.insert(1 + len(scalar), k, pd.Series([point[k]] * len(df), dtype=object))
            df = df.sort_values(list(scalar) + ["seed", "step"], kind="stable")
            _warn_idle_axes(df, name, scalar)
            frames.append(df)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["agent", *axes])
    out.attrs["timing"] = timing
    out.attrs["sweep_axes"] = axes
    out.attrs["mode"] = "compiled-sweep"
    return out
