"""Where a HiLoFi / LoLoFi / LRKF step's time goes on the 100k–1M-parameter MLPs, against the machine's floor
(issue 58).

Two parts (``--parts``), each written to ``results/TAG_PART.md`` / ``.csv``:

``profile``: per configuration (the speed suite's ``mlp100k`` / ``mlp300k`` / ``mlp1m`` at rank ``--rank``; float32,
scalar Gaussian output ``R = 0.1``, one observation per step) and backend (the speed suite's ``hilofi``,
``hilofi_q1e-6``, ``lolofi``, ``lrkf``, built by ``benchmarks.suites.speed.make_backend``), the step and its pieces,
each its own ``jax.jit`` on a state after one update: ``linearize`` (forward + VJP: ``ŷ``, the Jacobian blocks,
``R``), per covariance block ``project`` (``A = CJᵀ`` or ``UJᵀ`` / ``ΣJᵀ`` and ``S_b``) and ``update`` (the block's
Kalman step from the shared innovation; :mod:`banditkit.posteriors.covblocks`), ``predict`` (the time update, as
its own call: it copies the state), ``sample`` (one Thompson draw of all parameters) and ``step`` (``predict`` +
``update`` under one ``jit``, the speed suite's protocol).  For each: XLA's cost analysis of the compiled call
(``flops``, ``bytes accessed``) and the time, measured interleaved with the machine's floor in the same rounds:

* ``grad``: the speed suite's jitted ``jax.grad`` of the model; ``gemm``: a jitted ``1024² @ 1024²`` float32 product
  (the GEMM rate); ``read``: the row sums of a ``(rank + 1, P)`` float32 array (the memory bandwidth, ``4 (rank + 1)
  P`` bytes read); ``copy``: ``1.0001 · X`` of the same array into a fresh output (``2 · 4 (rank + 1) P`` bytes,
  including what allocating the output costs: the allocator's share, reported, not part of a floor);
* per piece ``flop floor = flops / GEMM rate`` and ``byte floor = bytes / read bandwidth``;
* ``suite floor`` = ``grad + 2·P·(r+1)² / GEMM rate`` (``benchmarks.suites.speed.Floor``), and ``traffic floor`` =
  ``grad + B_min / read bandwidth`` with ``B_min = 4·(3·r·D_low + 2·P + 3·D_full²)`` bytes: every low-rank factor
  ``(r, D_low)`` read twice (the projection ``A = CJᵀ``, then the update, which needs ``A``) and written once, the
  mean read and written, a full last-layer block (``D_full²``) read twice and written once.

Timing protocol: every call compiled first; ``--rounds`` rounds, each running every call ``--reps`` times back to back
and keeping its fastest; ``ms`` is the median over rounds.  ``ratio`` columns divide a time by a floor measured in the
same rounds.  BLAS / LAPACK on one thread (``--blas-threads``).

``scaling``: the step alone for each backend on the three MLPs, interleaved (every configuration and backend in each
round), and the exponent ``b`` of ``time ∝ P^b`` fitted by least squares on ``log t`` against ``log P`` over the three
sizes, for the time and for XLA's ``bytes accessed``.  ``--keep-freed-memory`` runs the whole part with
:func:`banditkit.runtime.keep_freed_memory` (glibc keeps freed blocks above 32 MiB for reuse instead of an
``mmap`` / ``munmap`` per call): run the part once with and once without, alternating, to compare the allocators.

``qterm``: the hidden block's last pass with ``q̄ > 0`` in isolation, ``C⁺ = W C + w_h ⊗ h`` and ``μ⁺ = μ + Cᵀu +
a h`` (``W (r, r)``, ``w_h (r,)``, ``u (r,)``, ``C (r, P)``, ``h (P,)`` the Jacobian row; random values), four ways:
``current`` (the GEMM then a broadcast add, as :func:`banditkit.posteriors.linalg.lowrank_kalman_update` does),
``two_dots`` (``W C + w_h h`` as two products), ``stacked`` (one GEMM over ``[C; h]``, which copies ``C``) and
``rows`` (an elementwise sum over the ``r`` rows of ``C``, which XLA fuses into one loop).  Reported per ``P``: XLA's
bytes, the time and the ratio to ``current`` in the same rounds, and the largest difference from ``current``.

Usage::

    python -m benchmarks study scale_1m
    python -m benchmarks study scale_1m --parts scaling --keep-freed-memory --tag scale_1m_kept
    python -m benchmarks study scale_1m --parts profile --configs mlp1m --backends hilofi,lrkf --rounds 5
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import banditkit.runtime
from banditkit.likelihoods import Gaussian
from banditkit.posteriors import covblocks
from banditkit.posteriors.base import ParamSpace, linearize, linearize_blocks
from banditkit.posteriors.hilofi import HiLoFiState, _hidden, _join, _last, _leaf_blocks
from benchmarks.harness import options, tables
from benchmarks.harness.timing import interleaved
from benchmarks.suites.speed import MLP_SIZES, Floor, make_backend, make_config

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
CONFIGS = ("mlp100k", "mlp300k", "mlp1m")
BACKENDS = ("hilofi", "hilofi_q1e-6", "lolofi", "lrkf")
PARTS = ("profile", "scaling", "qterm")
LIK = Gaussian(0.1)


# ------------------------------------------------------------------------------------------------------ timing
def cost(fn: Callable, args: tuple) -> tuple[float, float]:
    """``(flops, bytes accessed)`` of the compiled ``jax.jit(fn)(*args)`` (XLA's cost analysis)."""
    c = jax.jit(fn).lower(*args).compile().cost_analysis()
    c = c[0] if isinstance(c, list) else c
    return float(c.get("flops", 0.0)), float(c.get("bytes accessed", 0.0))


# ------------------------------------------------------------------------------------------------------ pieces
def _blocks(post) -> tuple:
    """The covariance blocks the factory chose, rebuilt from its ``hyper`` (HiLoFi / LoLoFi: hidden, last; LRKF:
    the one block)."""
    h = post.hyper
    carry = h["dynamics_mode"] == "carry"
    if post.name == "lrkf":
        return (covblocks.lowrank(h["rank"], h["init_cov"], h["dynamics_cov"], h["forgetting"], carry),)
    hidden = covblocks.lowrank(h["rank"], h["init_cov_hidden"], h["dynamics_cov_hidden"], h["forgetting"], carry)
    if h["rank_last"] is not None:
        return hidden, covblocks.lowrank(h["rank_last"], h["init_cov_last"], h["dynamics_cov_last"], h["forgetting"],
                                         carry)
    form = covblocks.dense_form if h["last_cov"] == "dense" else covblocks.sqrt_form
    return hidden, covblocks.full(form(h["init_cov_last"], h["dynamics_cov_last"], h["forgetting"], carry))


def pieces(model, post, state, x, y) -> dict[str, tuple[Callable, tuple]]:
    """``name -> (fn, args)`` for the step and its pieces on ``state`` (see the module docstring)."""
    out = {"step": (lambda s, x, y: post.update(post.predict(s), x, y), (state, x, y))}
    key = jax.random.PRNGKey(1)
    if isinstance(state, HiLoFiState):
        hidden, last = _blocks(post)
        space = state.space

        def lin(s, x):
            return linearize_blocks(lambda hl, ll: model.apply(_join(space, hl, ll), x),
                                    *_leaf_blocks(space, s.mean_hidden, s.mean_last), LIK)

        yhat, jh, jl, r = jax.jit(lin)(state, x)
        ph = jax.jit(lambda s, j: hidden.project(_hidden(s), j, space))(state, jh)
        pl = jax.jit(lambda s, j: last.project(_last(s), j, space))(state, jl)
        inn = covblocks.innovation(y - yhat, ph.s + pl.s, r)
        out.update({
            "linearize": (lin, (state, x)),
            "hidden_project": (lambda s, j: hidden.project(_hidden(s), j, space), (state, jh)),
            "hidden_update": (lambda s, p, i, o: hidden.update(_hidden(s), p, i, o, space), (state, ph, inn, pl.s)),
            "last_project": (lambda s, j: last.project(_last(s), j, space), (state, jl)),
            "last_update": (lambda s, p, i, o: last.update(_last(s), p, i, o, space), (state, pl, inn, ph.s)),
        })
    else:
        (block,) = _blocks(post)
        space: ParamSpace = state.space

        def lin(s, x):
            return linearize(lambda p: model.apply(p, x), space.unravel(s.mean), LIK)

        yhat, jac, r = jax.jit(lin)(state, x)
        b = covblocks.BlockState(state.mean, state.cov, state.gram, state.q)
        p = jax.jit(lambda bb, j: block.project(bb, j, space))(b, jac)
        inn = covblocks.innovation(y - yhat, p.s, r)
        out.update({
            "linearize": (lin, (state, x)),
            "project": (lambda bb, j: block.project(bb, j, space), (b, jac)),
            "update": (lambda bb, pp, i: block.update(bb, pp, i, None, space), (b, p, inn)),
        })
    out["predict"] = (post.predict, (state,))
    out["sample"] = (post.sample, (key, state))
    return out


def _min_bytes(state) -> float:
    """``B_min`` of the module docstring: low-rank factors read twice and written once, means read and written,
    a full last-layer block read twice and written once (float32)."""
    if isinstance(state, HiLoFiState):
        low = [state.cov_hidden] + ([state.cov_last] if state.gram_last.size else [])
        full = [] if state.gram_last.size else [state.cov_last]
        p = state.mean_hidden.size + state.mean_last.size
    else:
        low, full, p = [state.cov], [], state.mean.size
    return 4.0 * (3 * sum(c.basis.size for c in low) + 2 * p + 3 * sum(c.size for c in full))


def _setup(cname: str, backend: str, rank: int):
    """``(model, params, din, post, state after one step, x, y)``."""
    model, params, din = make_config(cname)
    x0 = jnp.zeros(din, jnp.float32)
    post = make_backend(backend, model, params, rank, x0, sum(np.size(v) for v in jax.tree_util.tree_leaves(params)))
    x, y = jnp.full((din,), 0.1, jnp.float32), jnp.ones(1, jnp.float32)
    state = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))(post.init(params), x, y)
    return model, params, din, post, state, x, y


def _machine(model, params, din: int, rank: int, p: int, reps: int) -> dict[str, tuple[Callable, tuple]]:
    fl = Floor(model, params, jnp.full((din,), 0.1, jnp.float32), reps)
    big = jnp.ones((rank + 1, p), jnp.float32)
    return {"grad": (fl.grad, (params, fl.x)), "gemm": (fl.mm, (fl.mat,)),
            "read": (jax.jit(lambda a: jnp.sum(a, axis=1)), (big,)), "copy": (jax.jit(lambda a: 1.0001 * a), (big,))}


def _rates(best: dict[str, list[float]], rank: int, p: int) -> tuple[np.ndarray, ...]:
    """Per round: grad seconds, GEMM flop/s, read bytes/s, copy bytes/s (read + write of a fresh output)."""
    grad = np.asarray(best["grad"])
    gemm = 2 * 1024**3 / np.asarray(best["gemm"])
    read = 4 * (rank + 1) * p / np.asarray(best["read"])
    copy = 2 * 4 * (rank + 1) * p / np.asarray(best["copy"])
    return grad, gemm, read, copy


def profile(cname: str, backend: str, rank: int, rounds: int, reps: int) -> list[dict]:
    model, params, din, post, state, x, y = _setup(cname, backend, rank)
    p = int(sum(np.size(v) for v in jax.tree_util.tree_leaves(params)))
    calls = pieces(model, post, state, x, y)
    costs = {name: cost(fn, args) for name, (fn, args) in calls.items()}
    calls.update(_machine(model, params, din, rank, p, reps))
    best = interleaved({k: (jax.jit(f), a) for k, (f, a) in calls.items()}, rounds, reps)
    grad, gemm, bw, copy = _rates(best, rank, p)
    suite = grad + 2 * p * (rank + 1) ** 2 / gemm
    traffic = grad + _min_bytes(state) / bw
    rows = []
    for name, (flops, nbytes) in costs.items():
        t = np.asarray(best[name])
        rows.append(dict(config=cname, params=p, rank=rank, backend=backend, piece=name, ms=1e3 * np.median(t),
                         mflop=flops / 1e6, mbytes=nbytes / 1e6, flop_floor_ms=1e3 * np.median(flops / gemm),
                         byte_floor_ms=1e3 * np.median(nbytes / bw), ratio_bytes=np.median(t * bw / max(nbytes, 1.0)),
                         ratio_suite_floor=np.median(t / suite), ratio_traffic_floor=np.median(t / traffic),
                         suite_floor_ms=1e3 * np.median(suite), traffic_floor_ms=1e3 * np.median(traffic),
                         min_mbytes=_min_bytes(state) / 1e6, grad_ms=1e3 * np.median(grad),
                         gemm_gflops=np.median(gemm) / 1e9, read_gbs=np.median(bw) / 1e9,
                         copy_gbs=np.median(copy) / 1e9))
    return rows


def render_profile(df: pd.DataFrame) -> list[str]:
    lines = ["| config | P | backend | piece | ms (median) | MFLOP | MB moved (XLA) | flop floor ms | byte floor ms "
             "| ms / byte floor | step / suite floor | step / traffic floor |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in df.to_dict("records"):
        step = r["piece"] == "step"
        lines.append(f"| {r['config']} | {r['params']:,} | {r['backend']} | {r['piece']} | {r['ms']:.2f} | "
                     f"{r['mflop']:.1f} | {r['mbytes']:.1f} | {r['flop_floor_ms']:.2f} | {r['byte_floor_ms']:.2f} | "
                     f"{r['ratio_bytes']:.2f} | {r['ratio_suite_floor']:.2f}{'' if step else ' (piece)'} | "
                     f"{r['ratio_traffic_floor']:.2f}{'' if step else ' (piece)'} |")
    floors = df[df["piece"] == "step"].drop_duplicates("config")
    lines += ["", "Machine, per configuration (medians over the rounds): "
              + "; ".join(f"{r['config']}: grad {r['grad_ms']:.2f} ms, GEMM {r['gemm_gflops']:.1f} GFLOP/s, read "
                          f"{r['read_gbs']:.2f} GB/s, copy to a fresh array {r['copy_gbs']:.2f} GB/s, suite floor "
                          f"{r['suite_floor_ms']:.2f} ms, traffic floor {r['traffic_floor_ms']:.2f} ms"
                          for r in floors.to_dict("records"))]
    return lines


# ----------------------------------------------------------------------------------------------------- scaling
def scaling(configs, backends, rank: int, rounds: int, reps: int) -> list[dict]:
    calls, meta = {}, {}
    for cname in configs:
        for b in backends:
            model, params, din, post, state, x, y = _setup(cname, b, rank)
            fn, args = pieces(model, post, state, x, y)["step"]
            calls[(cname, b)] = (jax.jit(fn), args)
            meta[(cname, b)] = dict(params=int(sum(np.size(v) for v in jax.tree_util.tree_leaves(params))),
                                    mbytes=cost(fn, args)[1] / 1e6)
    best = interleaved(calls, rounds, reps)
    rows = [dict(config=c, backend=b, rank=rank, ms=1e3 * float(np.median(best[(c, b)])),
                 ms_min=1e3 * float(np.min(best[(c, b)])), **meta[(c, b)]) for c, b in calls]
    df = pd.DataFrame(rows)
    df["exponent_time"] = df["exponent_bytes"] = np.nan
    for _, g in df.groupby("backend"):
        if g["params"].nunique() < 2:
            continue  # one size: no exponent
        lp = np.log(g["params"].to_numpy(float))
        df.loc[g.index, "exponent_time"] = np.polyfit(lp, np.log(g["ms"].to_numpy()), 1)[0]
        df.loc[g.index, "exponent_bytes"] = np.polyfit(lp, np.log(g["mbytes"].to_numpy()), 1)[0]
    return df.to_dict("records")


def render_scaling(df: pd.DataFrame) -> list[str]:
    lines = ["| backend | config | P | step ms (median) | step ms (min) | MB moved (XLA) | exponent (time) | "
             "exponent (bytes) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in df.sort_values(["backend", "params"]).to_dict("records"):
        lines.append(f"| {r['backend']} | {r['config']} | {r['params']:,} | {r['ms']:.2f} | {r['ms_min']:.2f} | "
                     f"{r['mbytes']:.1f} | {r['exponent_time']:.2f} | {r['exponent_bytes']:.2f} |")
    return lines


# ------------------------------------------------------------------------------------------------------- qterm
def _qterm_variants() -> dict[str, Callable]:
    """``name -> fn(C, h, W, w_h, u, μ) -> (C⁺, μ⁺)``: the same pass, four ways (see the module docstring)."""

    def current(c, h, w, wh, u, mu):
        return w @ c + wh[:, None] * h[None, :], mu + u @ c + 0.5 * h

    def two_dots(c, h, w, wh, u, mu):
        return w @ c + wh[:, None] @ h[None, :], mu + u @ c + 0.5 * h

    def stacked(c, h, w, wh, u, mu):
        return jnp.concatenate([w, wh[:, None]], 1) @ jnp.concatenate([c, h[None, :]], 0), mu + u @ c + 0.5 * h

    def rows(c, h, w, wh, u, mu):
        out = wh[:, None] * h[None, :]
        for k in range(c.shape[0]):
            out = out + w[:, k, None] * c[k][None, :]
        return out, mu + u @ c + 0.5 * h

    return dict(current=current, two_dots=two_dots, stacked=stacked, rows=rows)


def qterm(p: int, rank: int, rounds: int, reps: int) -> list[dict]:
    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    args = (jax.random.normal(keys[0], (rank, p)), jax.random.normal(keys[1], (p,)),
            jax.random.normal(keys[2], (rank, rank)), jax.random.normal(keys[3], (rank,)),
            jax.random.normal(keys[4], (rank,)), jnp.ones(p))
    variants = _qterm_variants()
    calls = {name: (jax.jit(fn), args) for name, fn in variants.items()}
    ref = calls["current"][0](*args)
    best = interleaved(calls, rounds, reps)
    base = np.asarray(best["current"])
    rows = []
    for name, fn in variants.items():
        out = calls[name][0](*args)
        diff = max(float(jnp.max(jnp.abs(o - r))) for o, r in zip(out, ref, strict=True))
        rows.append(dict(params=p, rank=rank, variant=name, ms=1e3 * float(np.median(best[name])),
                         ratio=float(np.median(np.asarray(best[name]) / base)), mbytes=cost(fn, args)[1] / 1e6,
                         max_abs_diff=diff))
    return rows


def render_qterm(df: pd.DataFrame) -> list[str]:
    lines = ["| P | variant | ms (median) | / current (same rounds) | MB moved (XLA) | max abs diff from current |",
             "|---:|---|---:|---:|---:|---:|"]
    for r in df.to_dict("records"):
        lines.append(f"| {r['params']:,} | {r['variant']} | {r['ms']:.2f} | {r['ratio']:.2f} | {r['mbytes']:.1f} | "
                     f"{r['max_abs_diff']:.1e} |")
    return lines


# -------------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep-freed-memory", action="store_true",
                    help="banditkit.runtime.keep_freed_memory() first (large freed blocks kept for reuse)")
    ap.add_argument("--tag", default="scale_1m")
    ap.add_argument("--out", default=HERE)
    options.add_blas_threads(ap)
    args = ap.parse_args(argv)
    parts = args.parts.split(",")
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"unknown part(s) {bad}; choose from {list(PARTS)}")
    unknown = [c for c in args.configs.split(",") if c not in MLP_SIZES]
    if unknown:
        ap.error(f"unknown config(s) {unknown}; choose from the speed suite's MLPs {list(MLP_SIZES)}")
    options.apply_blas_threads(args.blas_threads)
    kept = banditkit.runtime.keep_freed_memory() if args.keep_freed_memory else False
    allocator = "freed blocks kept (banditkit.runtime.keep_freed_memory)" if kept else "glibc defaults"
    configs, backends = args.configs.split(","), args.backends.split(",")
    head = (f"Allocator: {allocator}; rank {args.rank}; {args.rounds} rounds x {args.reps} reps (fastest per round, "
            f"median over rounds); jax {jax.__version__} on {jax.default_backend()}, float32.")
    if "profile" in parts:
        rows = [r for c in configs for b in backends for r in profile(c, b, args.rank, args.rounds, args.reps)]
        df = pd.DataFrame(rows)
        tables.save_table(df, [f"# Per-piece profile ({args.tag})", "", head, "", *render_profile(df)], args.out,
                          f"{args.tag}_profile")
        print("\n".join(render_profile(df)))
    if "scaling" in parts:
        df = pd.DataFrame(scaling(configs, backends, args.rank, args.rounds, args.reps))
        tables.save_table(df, [f"# Step time against P ({args.tag})", "", head, "", *render_scaling(df)], args.out,
                          f"{args.tag}_scaling")
        print("\n".join(render_scaling(df)))
    if "qterm" in parts:
        sizes = sorted({int(sum(np.size(v) for v in jax.tree_util.tree_leaves(make_config(c)[1]))) for c in configs})
        df = pd.DataFrame([r for p in sizes for r in qterm(p, args.rank, args.rounds, args.reps)])
        tables.save_table(df, [f"# The q-term pass, four ways ({args.tag})", "", head, "", *render_qterm(df)],
                          args.out, f"{args.tag}_qterm")
        print("\n".join(render_qterm(df)))
    return 0
