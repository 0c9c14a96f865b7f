"""Where a LoFi step's time goes, and which rank truncation of its ``(P, L+1)`` factor is fastest in float32 (issue 58).

Four parts (``--parts``), each written to ``results/TAG_PART.md`` / ``.csv``.  ``profile``: per configuration of the
speed suite (LeNet5 at ranks 50 and 10, the MLPs at rank 10; float32, scalar Gaussian output, one observation per
step), the compiled predict + update step's XLA cost analysis (flops, bytes accessed), the suite's floor (jitted
``grad`` + ``2·P·(L+1)²`` flops at the 1024² GEMM rate) with a copy's bandwidth, and the step's pieces timed
interleaved with the step itself: the Jacobian, the covariance root (``Wᵀ Υ⁻¹ W`` plus the ``(L, L)`` eigh), the Gram
alone, the truncation (``(L+1)²`` Gram eigh plus the rotation ``Ñ Vᵀ``).  ``methods``: the truncation of
``Ñ = [W, c]`` to rank ``L`` by five methods, timed interleaved on the same inputs (``gram_eig``: banditkit's
``dlr.truncate``; ``gram_eig_cutoff``: the same with ``linalg.project_weights``' cut-off of eigenvalues below
``m·ε·λ_max``, ``dlr.truncate`` before this study; ``qr_svd``: thin QR of ``Ñ`` and the SVD of the ``(L+1)²``
``R``; ``svd``: thin SVD of ``Ñ``; ``randomized``: a range finder ``Q`` of ``Ñ Ω`` with a Gaussian
``Ω (L+1, L+1)`` and the SVD of ``QᵀÑ``).  ``accuracy``: each method in float32 against the float64 SVD on a random
and on ill-conditioned ``Ñ (P, L+1)``: the relative reconstruction error ``‖ÑÑᵀ − WWᵀ‖_F / ‖ÑÑᵀ‖_F`` (the optimum is
``σ²_{L+1}/‖ÑÑᵀ‖_F``; ``rounded_input`` is the float64 SVD truncation of ``Ñ`` rounded to float32, the best a
float32 input allows) and the diagonal kept in ``υ`` (``max |diag(WWᵀ) + Δυ − diag(ÑÑᵀ)| / max diag(ÑÑᵀ)``, zero
in exact arithmetic).  ``layout``: the step's four kinds of pass over the factor, each in LoFi's column layout
``W (P, L)`` and in the row layout ``Wᵀ (L, P)`` (the one BONG keeps), timed interleaved on the same numbers: the
weighted Gram ``WᵀΥ⁻¹W`` (``linalg.inv_weighted_gram`` / ``(Υ^{-1/2}Wᵀ)(Υ^{-1/2}Wᵀ)ᵀ``), the rotation ``W V``
(``V (L, L)``), the projection ``Wᵀz`` (``linalg.tall_t_matmul`` / ``Wᵀ z`` as ``(L, P) @ (P,)``; in the column
layout also its two forms, the fused multiply-reduce ``Σ_p W_p z_p`` and the product ``zᵀW``, which
``tall_t_matmul`` picks between by the row length) and the mat-vec ``W v``, with a copy of the factor
(``2·4·P·L`` bytes) as the memory reference.

Timing protocol: every variant is compiled first; then ``--rounds`` rounds, each running every variant ``--reps``
times back to back and keeping its fastest call; ``ms`` is the median over rounds of those fastest calls and ``ratio``
the median over rounds of the variant's time divided by the reference's time in the same round (so slow drift of a
shared machine cancels).  The profile reports each piece's fastest call over all rounds (the least disturbed one, so
that the pieces of one configuration are comparable with each other and with its step).  BLAS / LAPACK on one thread
(``--blas-threads``).

Usage::

    python -m benchmarks study lofi_svd
    python -m benchmarks study lofi_svd --parts methods,accuracy --configs lenet:50 --rounds 5
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import banditkit as bk
from banditkit.likelihoods import Gaussian
from banditkit.posteriors import dlr, linalg
from banditkit.posteriors.base import linearize
from benchmarks.harness import options, tables, timing
from benchmarks.suites.speed import make_config

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
CONFIGS = "lenet:50,lenet:10,mlp10k:10,mlp100k:10,mlp300k:10,mlp1m:10"
PARTS = ("profile", "methods", "accuracy", "layout")


# ------------------------------------------------------------------------------------------------------ timing
def interleaved(variants: dict[str, tuple[Callable, tuple]], rounds: int, reps: int) -> dict[str, dict]:
    """``name -> {ms, best, ratio}`` for jitted ``(fn, args)`` pairs timed in interleaved rounds (see the module
    docstring): ``best`` is the fastest call of all rounds; ``ratio`` is against the first variant."""
    best = timing.interleaved(variants, rounds, reps)
    ref = np.asarray(best[next(iter(variants))])
    return {name: dict(ms=1e3 * float(np.median(v)), best=1e3 * float(np.min(v)),
                       ratio=float(np.median(np.asarray(v) / ref))) for name, v in best.items()}


# ------------------------------------------------------------------------------------------------- truncations
def truncate_gram_eig(ups: jax.Array, w: jax.Array, c: jax.Array, rank: int) -> tuple[jax.Array, jax.Array]:
    """banditkit's truncation: the ``(m, m)`` Gram ``ÑᵀÑ`` from its blocks, its eigenvectors, ``Ñ Vᵀ``."""
    gram = jnp.block([[linalg.weighted_gram(w), w.T @ c], [c.T @ w, c.T @ c]])
    return dlr.truncate(ups, (w, c), gram, rank)


def truncate_gram_eig_cutoff(ups, w, c, rank):
    """``gram_eig`` as banditkit had it before this study: the weights of :func:`linalg.project_weights`, whose rows
    are zero where ``λ_k < m·ε·λ_max`` (those directions leave both ``W`` and ``υ``)."""
    gram = jnp.block([[linalg.weighted_gram(w), w.T @ c], [c.T @ w, c.T @ c]])
    wts, _ = linalg.project_weights(gram, gram.shape[0])
    dropped = w @ wts[rank:, :rank].T + c @ wts[rank:, rank:].T  # the same two products as dlr.truncate
    return ups + jnp.sum(dropped**2, axis=1), w @ wts[:rank, :rank].T + c @ wts[:rank, rank:].T


def _from_left(ups, u, s, rank):
    """``(υ + rowsum((U s)[:, L:]²), (U s)[:, :L])`` from left singular vectors ``u (P, m)`` and values ``s (m,)``."""
    us = u * s[None, :]
    return ups + jnp.sum(us[:, rank:] ** 2, axis=1), us[:, :rank]


def truncate_qr_svd(ups, w, c, rank):
    """Thin QR ``Ñ = QR`` then the SVD of the small ``R = U s Vᵀ``: ``Ñ``'s left singular vectors are ``QU``."""
    q, r = jnp.linalg.qr(jnp.concatenate([w, c], axis=1))
    u, s, _ = jnp.linalg.svd(r)
    return _from_left(ups, q @ u, s, rank)


def truncate_svd(ups, w, c, rank):
    """The thin SVD of ``Ñ (P, m)`` (LAPACK ``gesdd``)."""
    u, s, _ = jnp.linalg.svd(jnp.concatenate([w, c], axis=1), full_matrices=False)
    return _from_left(ups, u, s, rank)


def truncate_randomized(ups, w, c, rank):
    """Range finder: ``Q`` of ``Ñ Ω`` (``Ω (m, m)`` Gaussian, so no oversampling is possible), SVD of ``QᵀÑ``."""
    n = jnp.concatenate([w, c], axis=1)
    omega = jax.random.normal(jax.random.PRNGKey(0), (n.shape[1], n.shape[1]), n.dtype)
    q, _ = jnp.linalg.qr(n @ omega)
    u, s, _ = jnp.linalg.svd(q.T @ n)
    return _from_left(ups, q @ u, s, rank)


METHODS = {"gram_eig": truncate_gram_eig, "gram_eig_cutoff": truncate_gram_eig_cutoff, "qr_svd": truncate_qr_svd,
           "svd": truncate_svd, "randomized": truncate_randomized}


# ----------------------------------------------------------------------------------------------------- profile
def _warm_state(cname: str, rank: int):
    """``(model, params, din, post, state)``: LoFi after ``rank + 3`` updates (``W`` full rank, orthogonal)."""
    model, params, din = make_config(cname)
    post = bk.posteriors.get("lofi")(model.apply, Gaussian(0.1), rank=rank)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    state = post.init(params)
    for i in range(rank + 3):
        state = step(state, jax.random.normal(jax.random.PRNGKey(i), (din,), jnp.float32), jnp.ones(1, jnp.float32))
    return model, params, din, post, state


def profile(cname: str, rank: int, rounds: int, reps: int) -> dict:
    """One configuration's cost analysis, floor and interleaved pieces (see the module docstring)."""
    model, params, din, post, state = _warm_state(cname, rank)
    x, y = jnp.full((din,), 0.1, jnp.float32), jnp.ones(1, jnp.float32)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y)).lower(state, x, y).compile()
    cost = step.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    p = int(state.mean.size)
    ups, w = state.prec_diag, state.prec_lr
    obs = jax.jit(lambda t, xx: linearize(lambda th: model.apply(state.space.unravel(th), xx), t, Gaussian(0.1))[1])
    c = obs(state.mean, x).T / jnp.sqrt(0.1)  # the update's new precision column Jᵀ R^{-1/2} (P, 1)
    gram_big = jnp.block([[linalg.weighted_gram(w), w.T @ c], [c.T @ w, c.T @ c]])
    a1024 = jax.random.normal(jax.random.PRNGKey(7), (1024, 1024), jnp.float32)
    variants = {
        "step": (step, (state, x, y)),
        "grad": (jax.jit(jax.grad(lambda q, xx: model.apply(q, xx)[0])), (params, x)),
        "gemm1024": (jax.jit(lambda a: a @ a), (a1024,)),
        "copy_w": (jax.jit(lambda a: 2.0 * a), (w,)),
        "jacobian": (obs, (state.mean, x)),
        "cov_root": (jax.jit(dlr.cov_root), (ups, w)),
        "gram_root": (jax.jit(lambda u, a: linalg.weighted_gram(a, 1.0 / u)), (ups, w)),
        "eigh_trunc": (jax.jit(lambda g: linalg.project_weights(g, g.shape[0])), (gram_big,)),
        "truncate": (jax.jit(lambda u, a, cc, g: dlr.truncate(u, (a, cc), g, rank)), (ups, w, c, gram_big)),
    }
    t = interleaved(variants, rounds, reps)
    ms = {k: v["best"] for k, v in t.items()}  # the least disturbed call of each: the pieces add up on a shared machine
    gflops = 2 * 1024**3 / ms["gemm1024"] / 1e6
    gbs = 2 * w.size * 4 / ms["copy_w"] / 1e6  # one read + one write of W
    floor = ms["grad"] + 2 * p * (rank + 1) ** 2 / gflops / 1e6
    flops, nbytes = float(cost.get("flops", np.nan)), float(cost.get("bytes accessed", np.nan))
    return dict(config=cname, params=p, rank=rank, step_ms=ms["step"], floor_ms=floor, ratio=ms["step"] / floor,
                grad_ms=ms["grad"], gemm_gflops=gflops, copy_gbs=gbs, hlo_mflops=flops / 1e6, hlo_mbytes=nbytes / 1e6,
                hlo_flops_ms=flops / gflops / 1e6, hlo_bytes_ms=nbytes / gbs / 1e6, floor_mflops=2 * p * (rank + 1) ** 2
                / 1e6, jacobian_ms=ms["jacobian"], cov_root_ms=ms["cov_root"], gram_root_ms=ms["gram_root"],
                eigh_trunc_ms=ms["eigh_trunc"], truncate_ms=ms["truncate"],
                rest_ms=ms["step"] - ms["jacobian"] - ms["cov_root"] - ms["truncate"])


def render_profile(df: pd.DataFrame) -> list[str]:
    lines = tables.preamble("Where a LoFi step's time goes (predict + update, float32; fastest call of each piece)",
                            __doc__)
    lines += ["| config | P | rank | step ms | floor ms | step / floor | grad ms | GEMM GF/s | copy GB/s | HLO MFLOP "
              "(at GEMM rate, ms) | HLO MB (at copy rate, ms) | floor MFLOP | Jacobian ms | root ms (Gram ms) | "
              "truncate ms (eigh ms) | rest ms |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in df.to_dict("records"):
        lines.append(
            f"| {r['config']} | {r['params']:,} | {r['rank']} | {r['step_ms']:.2f} | {r['floor_ms']:.2f} | "
            f"{r['ratio']:.2f} | {r['grad_ms']:.2f} | {r['gemm_gflops']:.0f} | {r['copy_gbs']:.1f} | "
            f"{r['hlo_mflops']:.0f} ({r['hlo_flops_ms']:.2f}) | {r['hlo_mbytes']:.0f} ({r['hlo_bytes_ms']:.2f}) | "
            f"{r['floor_mflops']:.0f} | {r['jacobian_ms']:.2f} | {r['cov_root_ms']:.2f} ({r['gram_root_ms']:.2f}) | "
            f"{r['truncate_ms']:.2f} ({r['eigh_trunc_ms']:.3f}) | {r['rest_ms']:.2f} |")
    return lines


# ----------------------------------------------------------------------------------------------------- methods
def _inputs(p: int, rank: int, dtype=jnp.float32, seed: int = 0):
    """``(υ (P,), W (P, L), c (P, 1))`` Gaussian."""
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    return (jax.random.uniform(k1, (p,), dtype) + 0.5, jax.random.normal(k2, (p, rank), dtype),
            jax.random.normal(k3, (p, 1), dtype))


def methods(cname: str, rank: int, rounds: int, reps: int) -> list[dict]:
    """The truncations timed interleaved on one ``(P, L+1)`` shape (the configuration's ``P``)."""
    _, params, _ = make_config(cname)
    p = int(sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(params)))
    args = _inputs(p, rank)
    fns = {name: (jax.jit(lambda u, w, c, f=f: f(u, w, c, rank)), args) for name, f in METHODS.items()}
    t = interleaved(fns, rounds, reps)
    return [dict(config=cname, params=p, rank=rank, method=name, ms=v["ms"], ratio=v["ratio"]) for name, v in t.items()]


def render_methods(df: pd.DataFrame) -> list[str]:
    lines = tables.preamble("Rank truncation of the (P, L+1) factor: five methods, float32", __doc__)
    lines += ["| config | P | rank | method | ms (median of round minima) | ratio to gram_eig (paired) |",
              "|---|---:|---:|---|---:|---:|"]
    for r in df.to_dict("records"):
        lines.append(f"| {r['config']} | {r['params']:,} | {r['rank']} | {r['method']} | {r['ms']:.2f} | "
                     f"{r['ratio']:.2f} |")
    return lines


# ------------------------------------------------------------------------------------------------------ layout
def layout_passes(ups: jax.Array, w: jax.Array, z: jax.Array, v: jax.Array) -> dict[str, tuple]:
    """``name -> (column fn, its args, row fn, its args)``: each pass over the factor ``W (P, L)`` in the column layout
    and over ``Wᵀ (L, P)`` in the row layout, on the same numbers (``υ (P,)``, ``z (P,)``, ``V (L, L)``); a row
    form's result is its column twin's, transposed where it is a matrix."""
    wt = jnp.asarray(np.ascontiguousarray(np.asarray(w).T))

    def row_gram(wt, u):
        b = wt * jax.lax.rsqrt(u)
        return b @ b.T

    return {
        "copy": ((lambda w: w * 1.0001), (w,), (lambda wt: wt * 1.0001), (wt,)),
        "gram W'U^-1W": (linalg.inv_weighted_gram, (w, ups), row_gram, (wt, ups)),
        "rotation W V": ((lambda w, v: w @ v), (w, v), (lambda wt, v: v.T @ wt), (wt, v)),
        "projection W'z": (linalg.tall_t_matmul, (w, z), (lambda wt, z: wt @ z), (wt, z)),
        "projection W'z, reduce form": ((lambda w, z: jnp.sum(w * z[:, None], axis=0)), (w, z),
                                        (lambda wt, z: wt @ z), (wt, z)),
        "projection W'z, product form": ((lambda w, z: z @ w), (w, z), (lambda wt, z: wt @ z), (wt, z)),
        "mat-vec W v": ((lambda w, v: w @ v[:, 0]), (w, v), (lambda wt, v: v[:, 0] @ wt), (wt, v)),
    }


def layout(cname: str, rank: int, rounds: int, reps: int) -> list[dict]:
    """Each pass of :func:`layout_passes` in the column and the row layout, timed interleaved."""
    _, params, _ = make_config(cname)
    p = int(sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(params)))
    ups, w, c = _inputs(p, rank)
    v = jax.random.normal(jax.random.PRNGKey(9), (rank, rank), jnp.float32)
    rows = []
    for name, (col_fn, col_args, row_fn, row_args) in layout_passes(ups, w, c[:, 0], v).items():
        t = interleaved({"column": (jax.jit(col_fn), col_args), "row": (jax.jit(row_fn), row_args)}, rounds, reps)
        rows.append(dict(config=cname, params=p, rank=rank, op=name, column_ms=t["column"]["ms"],
                         row_ms=t["row"]["ms"], row_over_column=t["row"]["ratio"]))
    return rows


def render_layout(df: pd.DataFrame) -> list[str]:
    lines = tables.preamble("LoFi's passes over its factor: column (P, L) against row (L, P) layout, float32", __doc__)
    lines += ["| config | P | rank | pass | column (P, L) ms | row (L, P) ms | row / column (paired) |",
              "|---|---:|---:|---|---:|---:|---:|"]
    for r in df.to_dict("records"):
        lines.append(f"| {r['config']} | {r['params']:,} | {r['rank']} | {r['op']} | {r['column_ms']:.2f} | "
                     f"{r['row_ms']:.2f} | {r['row_over_column']:.2f} |")
    return lines


# ---------------------------------------------------------------------------------------------------- accuracy
def ill_conditioned(p: int, m: int, cond: float, seed: int = 0) -> np.ndarray:
    """``Ñ = U diag(σ) Vᵀ (P, m)`` (float64, orthonormal ``U`` and ``V``), ``σ`` log-spaced from 1 to ``1/cond``."""
    rs = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rs.standard_normal((p, m)))
    v, _ = np.linalg.qr(rs.standard_normal((m, m)))
    return (u * np.logspace(0.0, -np.log10(cond), m)[None, :]) @ v.T


def accuracy_case(n64: np.ndarray, rank: int, label: str) -> list[dict]:
    """Each method on ``Ñ`` rounded to float32, errors measured in float64 against ``Ñ`` itself."""
    p, m = n64.shape
    nn = n64 @ n64.T
    s = np.linalg.svd(n64, compute_uv=False)
    norm = np.linalg.norm(nn)
    rows = []
    w32, c32 = jnp.asarray(n64[:, :rank], jnp.float32), jnp.asarray(n64[:, rank:], jnp.float32)
    zero = jnp.zeros(p, jnp.float32)
    u, sv, _ = np.linalg.svd(np.asarray(jnp.concatenate([w32, c32], axis=1), np.float64), full_matrices=False)
    exact = (np.sum((u[:, rank:] * sv[rank:]) ** 2, axis=1), u[:, :rank] * sv[:rank])  # of the rounded input
    for name, f in {**METHODS, "rounded_input": None}.items():
        ups, w = exact if f is None else jax.jit(lambda u, a, c, f=f: f(u, a, c, rank))(zero, w32, c32)
        w, ups = np.asarray(w, np.float64), np.asarray(ups, np.float64)
        rows.append(dict(case=label, p=p, m=m, cond=s[0] / s[-1], method=name, optimal=s[rank] ** 2 / norm,
                         error=np.linalg.norm(nn - w @ w.T) / norm,
                         diag_error=np.max(np.abs(np.sum(w * w, axis=1) + ups - np.diag(nn))) / np.max(np.diag(nn))))
    return rows


def accuracy(p: int, rank: int) -> list[dict]:
    rs = np.random.default_rng(1)
    rows = accuracy_case(rs.standard_normal((p, rank + 1)), rank, "random")
    for cond in (1e3, 1e6):
        rows += accuracy_case(ill_conditioned(p, rank + 1, cond), rank, f"ill-conditioned {cond:.0e}")
    return rows


def render_accuracy(df: pd.DataFrame) -> list[str]:
    lines = tables.preamble("Rank truncation in float32: reconstruction error against the float64 SVD", __doc__)
    lines += ["float32 ε = 1.2e-7 (its rounding of ÑÑᵀ alone is of order ε).", "",
              "| case | P | L + 1 | cond(Ñ) | method | optimal ‖ÑÑᵀ − WWᵀ‖/‖ÑÑᵀ‖ | float32 result | diagonal error |",
              "|---|---:|---:|---:|---|---:|---:|---:|"]
    for r in df.to_dict("records"):
        lines.append(f"| {r['case']} | {r['p']:,} | {r['m']} | {r['cond']:.1e} | {r['method']} | {r['optimal']:.2e} | "
                     f"{r['error']:.2e} | {r['diag_error']:.1e} |")
    return lines


# -------------------------------------------------------------------------------------------------------- main
def _configs(text: str) -> list[tuple[str, int]]:
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, _, rank = item.partition(":")
        if name != "lenet" and not name.startswith("mlp") or not rank.isdigit():
            raise SystemExit(f"--configs: {item!r} is not NAME:RANK with NAME lenet or one of the speed suite's MLPs "
                             f"(e.g. {CONFIGS})")
        out.append((name, int(rank)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {PARTS}")
    ap.add_argument("--configs", default=CONFIGS, help="comma list of NAME:RANK (the speed suite's models)")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    ap.add_argument("--reps", type=int, default=3, help="calls per variant per round (the fastest is kept)")
    ap.add_argument("--accuracy-p", type=int, default=2000, help="rows of Ñ in the accuracy part (ÑÑᵀ is formed)")
    ap.add_argument("--accuracy-rank", type=int, default=50)
    ap.add_argument("--tag", default="lofi_svd")
    ap.add_argument("--out", default=HERE)
    options.add_blas_threads(ap)
    args = ap.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    parts = [s.strip() for s in args.parts.split(",") if s.strip()]
    if not parts or any(s not in PARTS for s in parts):
        raise SystemExit(f"--parts: {parts} must be a non-empty comma list of {PARTS}")
    configs = _configs(args.configs)
    if "profile" in parts:
        rows = []
        for cname, rank in configs:
            rows.append(profile(cname, rank, args.rounds, args.reps))
            print(f"profile {cname} r={rank}: step {rows[-1]['step_ms']:.2f} ms, {rows[-1]['ratio']:.2f}x the floor",
                  flush=True)
        df = pd.DataFrame(rows)
        tables.save_table(df, render_profile(df), args.out, f"{args.tag}_profile")
    if "methods" in parts:
        rows = []
        for cname, rank in configs:
            rows += methods(cname, rank, args.rounds, args.reps)
            print("methods " + ", ".join(f"{r['method']} {r['ratio']:.2f}" for r in rows[-len(METHODS):]), flush=True)
        df = pd.DataFrame(rows)
        tables.save_table(df, render_methods(df), args.out, f"{args.tag}_methods")
    if "layout" in parts:
        rows = []
        for cname, rank in configs:
            rows += layout(cname, rank, args.rounds, args.reps)
            print("layout " + ", ".join(f"{r['op']} {r['row_over_column']:.2f}" for r in rows[-7:]), flush=True)
        df = pd.DataFrame(rows)
        tables.save_table(df, render_layout(df), args.out, f"{args.tag}_layout")
    if "accuracy" in parts:
        df = pd.DataFrame(accuracy(args.accuracy_p, args.accuracy_rank))
        tables.save_table(df, render_accuracy(df), args.out, f"{args.tag}_accuracy")
    print(f"wrote {args.out}/{args.tag}_{{{','.join(parts)}}}.md and .csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
