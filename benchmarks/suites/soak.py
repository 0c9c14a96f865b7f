"""Numerical soak: every posterior backend, float32, a long drifting nonlinear stream, one ``lax.scan`` each.

Stream (2 inputs; the target rotates by one full turn every ``period`` steps, so the drift speed does not depend on
the run length)::

    x_t ~ N(0, I_2),   a_t = 2π t / period,   w_t = 2 (cos a_t, sin a_t)
    f_t(x) = sin(w_t · x) + 0.5 tanh(x_0 x_1)
    regression:      y_t = f_t(x_t) + 0.1 ε_t                 (Gaussian likelihood, obs_noise 0.01)
    classification:  y_t ~ Bernoulli(σ(4 f_t(x_t)))           (Bernoulli likelihood)

Model: ``MLP(features=(8,), out=1)`` (33 parameters).  Per step, inside the scan: ``predict`` → predictive moments at
``x_t`` (recorded: one-step mean and variance) → ``update``; plus one flag "every state leaf finite".  Error of the
one-step prediction: squared error (regression) or Brier score ``(y − p)²`` (classification), averaged over windows
of ``window`` steps at the start, the middle and the end of the run, next to two baselines on the same windows:

    prior    the initial parameters, never updated (the "no-update" baseline);
    frozen   the backend's own point estimate frozen after the first ``window`` steps (shows that the drift matters:
             a model that stops learning falls behind).

Checks (the test ``tests/benchmarks/test_soak.py`` asserts them at 20,000 steps): predictive variances > 0 and finite at
every step, means finite, the state finite at every step, and the end-window error below the no-update baseline.

Run::

    python -m benchmarks soak --steps 100000             # all backends, both tasks
    python -m benchmarks soak --steps 20000 --backends ekf,lofi --tasks regression

Writes ``benchmarks/results/soak.csv`` and ``soak.md`` (``--out`` to change the stem).
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import banditkit as bk
from banditkit.likelihoods import Bernoulli, Gaussian
from banditkit.models.nets import MLP
from benchmarks.harness import options, provenance

D_IN = 2
PERIOD = 10_000
NOISE = 0.1
FEATURES = (8,)
DYNAMICS_COV = 1e-5  # small random-walk variance for backends that have one, so they can follow the drift

# Sizes for the soak: passed to a factory only if its signature has the argument.  Kept small so every backend
# runs 20k steps in seconds on a CPU; ``SMALL`` is what the test uses, the bench uses the same.
SMALL: dict[str, Any] = dict(
    rank=2,
    rank_last=2,
    buffer_size=16,
    train_every=50,
    n_train_steps=5,
    n_inner=2,
    batch_size=None,
    n_samples=8,
    num_samples=8,
    n_probes=2,
    example_x=jnp.zeros(D_IN),
    dynamics_cov=DYNAMICS_COV,
)
# Per-backend overrides on top of SMALL (documented reasons).
OVERRIDES: dict[str, dict[str, Any]] = {
    # the buffer-trained backends learn with optax; the default lr 1e-4 barely moves in a few inner steps
    "vbll": dict(learning_rate=1e-2, buffer_size=64),
    "online_vbll": dict(learning_rate=1e-2),
    "last_layer_laplace": dict(learning_rate=1e-2),
    # hilofi's dynamics_cov applies to both blocks; keep the same q
    "lolofi": dict(rank=2, rank_last=2),
    # kalman_last_layer has its own variance-preserving drift with a learned forgetting factor
    "kalman_last_layer": dict(dynamics_cov=0.0),
}
# Grid cells a registered factory's defaults do not reach: name -> (registered factory, fixed arguments).  bong_diag:
# BONG's diagonal family (seed 004 eq. 213/215, VD-EKF).  Its natural mean step moves the prediction by
# κ ≈ Σ_j σ0² H_j² / (R + σ0² H_j²) times the residual and overshoots for κ > 2 (bk.posteriors.bong.check_step): on
# this regression stream κ0 = 30 at σ0² = 1 (non-finite by step 15), 0.57 at σ0² = 1e-3.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {"bong_diag": ("bong", dict(family="diag", init_cov=1e-3))}
# Backends whose factory documents "regression only" (Gaussian likelihood).
GAUSSIAN_ONLY = {"neural_linear", "vbll", "online_vbll"}


def backend_names() -> list[str]:
    """Every registered backend, ``subspace_ekf`` included (it needs a basis; older registries lacked it), and the
    ``VARIANTS``, once each."""
    return sorted(set(bk.posteriors.REGISTRY) | {"subspace_ekf"} | set(VARIANTS))


def _target(name: str) -> Callable:
    if name in VARIANTS:
        return bk.posteriors.REGISTRY[VARIANTS[name][0]]
    return bk.posteriors.subspace_ekf if name == "subspace_ekf" else bk.posteriors.REGISTRY[name]


def backend_kwargs(name: str, **extra) -> dict[str, Any]:
    """The soak's keyword arguments for ``name``: SMALL filtered by its signature, then overrides, then ``extra``."""
    params = inspect.signature(_target(name)).parameters
    kw = {k: v for k, v in SMALL.items() if k in params}
    kw.update(VARIANTS.get(name, ("", {}))[1])
    kw.update({k: v for k, v in OVERRIDES.get(name, {}).items() if k in params})
    kw.update({k: v for k, v in extra.items() if k in params})
    return kw


def make_posterior(name: str, apply_fn, likelihood, params, **extra):
    """Build backend ``name`` for the soak model (``subspace_ekf`` gets a random 8-dimensional subspace)."""
    kw = backend_kwargs(name, **extra)
    if name == "subspace_ekf":
        basis, _ = bk.posteriors.subspace_random(jax.random.PRNGKey(7), params, 8)
        kw["basis"] = basis
    return _target(name)(apply_fn, likelihood, **kw)


# ------------------------------------------------------------------------------------------------------------------
# stream
# ------------------------------------------------------------------------------------------------------------------
def target_fn(x: jax.Array, t: jax.Array, period: int = PERIOD) -> jax.Array:
    """``f_t(x)`` for inputs ``x (..., 2)`` and steps ``t (...)``."""
    a = 2 * jnp.pi * t / period
    w = 2.0 * jnp.stack([jnp.cos(a), jnp.sin(a)], -1)
    return jnp.sin(jnp.sum(w * x, -1)) + 0.5 * jnp.tanh(x[..., 0] * x[..., 1])


def drifting_stream(key: jax.Array, steps: int, task: str, period: int = PERIOD, dtype=jnp.float32):
    """``(xs (T, 2), ys (T, 1))`` of the drifting stream (see module docstring)."""
    kx, ky = jax.random.split(key)
    xs = jax.random.normal(kx, (steps, D_IN), dtype)
    f = target_fn(xs, jnp.arange(steps, dtype=dtype), period)
    if task == "regression":
        ys = f + NOISE * jax.random.normal(ky, (steps,), dtype)
    elif task == "classification":
        ys = jax.random.bernoulli(ky, jax.nn.sigmoid(4.0 * f)).astype(dtype)
    else:
        raise ValueError(f"unknown task {task!r}; choose 'regression' or 'classification'")
    return xs, ys[:, None]


HUGE = 1e3  # input scale of the "huge" stress segment (1e4 breaks several float32 backends: see the soak report)
TINY = 1e-6


def edge_stream(
    key: jax.Array,
    each: int,
    task: str,
    t0: int = 0,
    period: int = PERIOD,
    dtype=jnp.float32,
    classes: int = 1,
    huge: float = HUGE,
):
    """Three stress segments of ``each`` steps, labelled like the stream at steps ``t0, t0+1, ...``:

    tiny inputs ``x · 1e-6``, huge inputs ``x · huge`` (default 1e3), and one input repeated ``each`` times (same
    label every time).
    ``classes > 1`` gives one-hot labels of ``argmax`` over ``classes`` rotated copies of ``f_t`` (Categorical).
    """
    kx, ky, kr = jax.random.split(key, 3)
    base = jax.random.normal(kx, (each, D_IN), dtype)
    rep = jnp.broadcast_to(jax.random.normal(kr, (1, D_IN), dtype), (each, D_IN))
    xs = jnp.concatenate([base * TINY, base * huge, rep])
    t = jnp.arange(t0, t0 + 3 * each, dtype=dtype)
    if classes > 1:
        scores = jnp.stack([target_fn(xs, t + k * period / classes, period) for k in range(classes)], -1)
        ys = jax.nn.one_hot(jnp.argmax(scores, -1), classes, dtype=dtype)
        ys = ys.at[2 * each :].set(ys[2 * each])  # the repeated input keeps one label
        return xs, ys
    f = target_fn(xs, t, period)
    if task == "regression":
        ys = f + NOISE * jax.random.normal(ky, f.shape, dtype)
    else:
        ys = (f > 0).astype(dtype)
    ys = ys.at[2 * each :].set(ys[2 * each])
    return xs, ys[:, None]


def soak_stream(key: jax.Array, steps: int, task: str, edge_each: int = 0):
    """The drifting stream followed (if ``edge_each``) by the three :func:`edge_stream` segments."""
    k1, k2 = jax.random.split(key)
    xs, ys = drifting_stream(k1, steps, task)
    if edge_each:
        ex, ey = edge_stream(k2, edge_each, task, t0=steps)
        xs, ys = jnp.concatenate([xs, ex]), jnp.concatenate([ys, ey])
    return xs, ys


def likelihood_for(task: str):
    return Gaussian(NOISE**2) if task == "regression" else Bernoulli()


def scale_head(params, factor: float):
    """``params`` with the ``head`` leaves multiplied by ``factor`` (huge logits → near-certain predictions)."""
    return jax.tree_util.tree_map_with_path(lambda p, v: v * factor if "head" in jax.tree_util.keystr(p) else v, params)


# ------------------------------------------------------------------------------------------------------------------
# runner
# ------------------------------------------------------------------------------------------------------------------
def _all_finite(tree) -> jax.Array:
    flags = [
        jnp.all(jnp.isfinite(leaf))
        for leaf in jax.tree_util.tree_leaves(tree)
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact)
    ]
    return jnp.all(jnp.stack(flags)) if flags else jnp.asarray(True)


def make_runner(post, freeze_at: int | None = None):
    """Jitted ``run(state, xs, ys) -> (final_state, means (T, C), variances (T, C), state_finite (T,), frozen_means)``.

    Per step: ``predict`` → ``predictive(x_t)`` (recorded) → ``update(x_t, y_t)``.  With ``freeze_at``, a copy of the
    state taken after ``freeze_at`` updates is carried along and its predictive mean recorded (``frozen_means``).
    """

    def body(carry, inp):
        s, frozen, t = carry
        x, y = inp
        s = post.predict(s)
        m, c = post.predictive(s, x)
        var = jnp.diagonal(c)
        fm = post.predictive(frozen, x)[0] if freeze_at is not None else m
        s = post.update(s, x, y)
        if freeze_at is not None:
            take = t + 1 == freeze_at
            frozen = jax.tree_util.tree_map(lambda a, b: jnp.where(take, a, b), s, frozen)
        return (s, frozen, t + 1), (m, var, _all_finite(s), fm)

    @jax.jit
    def run(state, xs, ys):
        (s, _, _), (m, v, fin, fm) = jax.lax.scan(body, (state, state, jnp.asarray(0)), (xs, ys))
        return s, m, v, fin, fm

    return run


def step_error(task: str, means: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Per-step error ``(T,)``: squared error (regression) or Brier score (classification; ``means`` = p)."""
    return np.mean((np.asarray(ys, np.float64) - np.asarray(means, np.float64)) ** 2, axis=-1)


def windows(steps: int, window: int) -> dict[str, slice]:
    mid = steps // 2
    return {
        "start": slice(0, window),
        "middle": slice(mid - window // 2, mid - window // 2 + window),
        "end": slice(steps - window, steps),
    }


def _first_bad(m: np.ndarray, v: np.ndarray, fin: np.ndarray) -> int:
    """First step whose mean/variance is non-finite, variance not positive, or state non-finite; -1 if none."""
    ok = np.isfinite(m).all(-1) & np.isfinite(v).all(-1) & (v > 0).all(-1) & fin
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if bad.size else -1


def oracle_error(task: str, xs: jax.Array, period: int = PERIOD) -> np.ndarray:
    """Per-step expected error of the true model: ``NOISE²`` (regression) or ``p(1 − p)`` (Brier, classification)."""
    f = np.asarray(target_fn(xs, jnp.arange(xs.shape[0], dtype=xs.dtype), period), np.float64)
    if task == "regression":
        return np.full(f.shape, NOISE**2)
    p = 1.0 / (1.0 + np.exp(-4.0 * f))
    return p * (1.0 - p)


def soak_one(
    name: str,
    task: str,
    steps: int,
    *,
    seed: int = 0,
    window: int | None = None,
    freeze: bool = True,
    edge_each: int = 0,
):
    """Run one backend on one task; returns a dict of summary figures (and the per-step arrays under ``_``).

    ``edge_each > 0`` appends the three :func:`edge_stream` segments after the ``steps`` drifting steps: they count
    for the finiteness / positivity checks, not for the error windows.
    """
    window = window or max(steps // 20, 1)
    model = MLP(features=FEATURES, out=1)
    params = model.init(jax.random.PRNGKey(seed), jnp.zeros(D_IN))
    lik = likelihood_for(task)
    post = make_posterior(name, model.apply, lik, params)
    xs, ys = soak_stream(jax.random.PRNGKey(1000 + seed), steps, task, edge_each)
    run = make_runner(post, freeze_at=window if freeze else None)
    state0 = post.init(params)
    t0 = time.perf_counter()
    compiled = run.lower(state0, xs, ys).compile()
    t1 = time.perf_counter()
    state, m, v, fin, fm = jax.block_until_ready(compiled(state0, xs, ys))
    t2 = time.perf_counter()
    m, v, fin, fm = (np.asarray(a) for a in (m, v, fin, fm))
    ys_np = np.asarray(ys)
    prior_m = np.asarray(jax.jit(jax.vmap(lambda x: lik.mean(model.apply(params, x))))(xs))
    err, err_prior, err_frozen = (step_error(task, a, ys_np) for a in (m, prior_m, fm))
    oracle = oracle_error(task, xs)
    row: dict[str, Any] = dict(
        backend=name,
        task=task,
        steps=steps,
        edge_steps=3 * edge_each,
        dtype=str(m.dtype),
        means_finite=bool(np.all(np.isfinite(m))),
        var_finite=bool(np.all(np.isfinite(v))),
        var_positive=bool(np.all(v > 0)),
        state_finite=bool(np.all(fin)),
        first_bad_step=_first_bad(m, v, fin),
        first_bad_drift=_first_bad(m[:steps], v[:steps], fin[:steps]),
        first_bad_stress=(lambda k: k + steps if k >= 0 else -1)(_first_bad(m[steps:], v[steps:], fin[steps:]))
        if edge_each
        else -1,
        var_min=float(np.nanmin(v)) if np.isfinite(v).any() else math.nan,
        var_max=float(np.nanmax(v)) if np.isfinite(v).any() else math.nan,
        compile_s=t1 - t0,
        run_s=t2 - t1,
        us_per_step=1e6 * (t2 - t1) / len(m),
    )
    for wname, sl in windows(steps, window).items():
        row[f"err_{wname}"] = float(np.mean(err[sl]))
        row[f"prior_{wname}"] = float(np.mean(err_prior[sl]))
        row[f"oracle_{wname}"] = float(np.mean(oracle[sl]))
        if freeze:
            row[f"frozen_{wname}"] = float(np.mean(err_frozen[sl]))
    row["_"] = dict(err=err, var=v, finite=fin, state=state)
    return row


# ------------------------------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------------------------------
COLUMNS = [
    "backend", "task", "steps", "edge_steps", "dtype", "means_finite", "var_finite", "var_positive", "state_finite",
    "first_bad_step", "first_bad_drift", "first_bad_stress", "var_min", "var_max", "err_start", "err_middle",
    "err_end", "prior_start", "prior_middle", "prior_end", "oracle_end", "frozen_start", "frozen_middle",
    "frozen_end", "compile_s", "run_s", "us_per_step",
]  # fmt: skip


def _markdown(rows: list[dict], steps: int, seconds: float) -> str:
    lines = [
        f"# Soak: {steps:,} steps per backend, float32, drifting nonlinear stream",
        "",
        f"Produced by `{provenance.PROG} soak --steps {steps}` (total {seconds:.0f} s; "
        f"{provenance.machine(load=False)}).  Model MLP{FEATURES} on 2 inputs (33 parameters); "
        f"target rotates once every {PERIOD:,} steps.  Error = mean squared one-step error (regression) or Brier "
        f"score (classification) over a window of {max(steps // 20, 1):,} steps; `prior` = the initial network "
        "never updated; `frozen` = the backend's own state frozen after the first window; `oracle` = the expected "
        "error of the true model (noise floor).",
        "",
        "`drift ok`: means finite, variances finite and > 0, state finite at every drifting step; `stress ok`: the "
        f"same over the {HUGE:g}-scaled / {TINY:g}-scaled / repeated-input segments appended after the drift "
        "(first bad step otherwise).",
        "",
        "| backend | task | drift ok | stress ok | var min | var max | err start | err mid | err end | prior end "
        "| frozen end | oracle end | µs/step |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['backend']} | {r['task']} | ERROR: {r['error']} | | | | | | | | | | |")
            continue
        status = "yes" if r["first_bad_drift"] < 0 else f"**NO** (step {r['first_bad_drift']})"
        stress = "yes" if r["first_bad_stress"] < 0 else f"**NO** (step {r['first_bad_stress']})"
        lines.append(
            f"| {r['backend']} | {r['task']} | {status} | {stress} | {r['var_min']:.3g} | {r['var_max']:.3g} | "
            f"{r['err_start']:.4f} | {r['err_middle']:.4f} | {r['err_end']:.4f} | {r['prior_end']:.4f} | "
            f"{r['frozen_end']:.4f} | {r['oracle_end']:.4f} | {r['us_per_step']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def _write(rows: list[dict], out: str, steps: int, seconds: float) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    df = df[[c for c in COLUMNS if c in df.columns] + [c for c in df.columns if c not in COLUMNS]]
    df.to_csv(out + ".csv", index=False)
    with open(out + ".md", "w") as fh:
        fh.write(_markdown(rows, steps, seconds))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--backends", default="all", help="comma-separated names, or 'all'")
    ap.add_argument("--tasks", default="regression,classification")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--edge", type=int, default=200, help="steps per stress segment appended (tiny/huge/repeated x)")
    ap.add_argument("--out", default=os.path.join(options.RESULTS, "soak"), help="output stem: OUT.csv, OUT.md")
    options.add_blas_threads(ap)
    args = ap.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    names = backend_names() if args.backends == "all" else args.backends.split(",")
    tasks = args.tasks.split(",")
    rows = []
    t_start = time.perf_counter()
    for name in names:
        for task in tasks:
            if task == "classification" and name in GAUSSIAN_ONLY:
                continue
            try:
                row = soak_one(name, task, args.steps, seed=args.seed, edge_each=args.edge)
                row.pop("_")
            except Exception as e:  # noqa: BLE001 - a failing backend is a result, not a crash of the bench
                row = dict(backend=name, task=task, steps=args.steps, error=f"{type(e).__name__}: {e}"[:200])
            rows.append(row)
            print({k: (round(v, 5) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
            _write(rows, args.out, args.steps, time.perf_counter() - t_start)  # after every row: partial runs count
    seconds = time.perf_counter() - t_start
    _write(rows, args.out, args.steps, seconds)
    print(f"wrote {args.out}.csv and {args.out}.md in {seconds:.0f} s")
    bad = [r for r in rows if "error" in r or not (r["means_finite"] and r["var_positive"] and r["state_finite"])]
    return 1 if bad else 0
