"""Rank study (seed 003 §11.2(a), Fig. 6): online MNIST classification, accuracy against run time as the rank grows.

What a user choosing a rank wants to know: how much accuracy each extra rank buys and what it costs per step.  The
protocol follows seed 003's "complete information" task: a LeNet5 (ELU) sees each MNIST training image once, in a
random order, predicts its class with the current mean (plug-in, one step ahead) and then updates on the true
label through the moment-matched categorical likelihood (``bk.likelihoods.Categorical``, ``R = diag(p) − ppᵀ + εI``).
Filters and settings are the authors' notebook 04 (``shared/research/seed-003-hilofi.md`` §11.2(a)): HiLoFi (hidden
rank = the rank, dense 850 × 850 last layer, ``q_h = 0.01``, prior variance 1, ε = 1e-4), LoLoFi (hidden rank = the
rank, last-layer rank 50 as the paper's ablation, ``q_h = q_ℓ = 0.01``), LRKF (``q = 0.01``, prior variance 1,
ε = 0.1), LoFi (``q = 0``, prior variance e⁻⁸, ε = 0.01) — with one change: HiLoFi's last layer runs with
``q_ℓ = 0``.  The notebook's ``q_ℓ = 0.01`` (method ``hilofi_nb``, run only when named) diverges here: accuracy
falls to chance within 2,000 images and the NLPD to ~25, in float32 and float64, with the dense and the square-root
last layer and with the authors' coordinate initial factor alike, while ``q_h`` or ``q_ℓ`` alone is stable.
banditkit adds ``q_ℓ I`` to the last-layer covariance every step, as the paper's Algorithm 1 does; the authors'
code uses ``q_ℓ`` in that step's gain but leaves it out of the full-rank last layer's covariance recursion
(``experiments/methods/low_rank_last_layer.py``, ``_update_last``), so their last-layer covariance evolves as with
``q_ℓ = 0`` (their hidden projection likewise adds ``q_h`` to the Gram's eigenvalues and divides it out again,
so their carried covariance has no ``q`` in either block: ``q`` only raises each step's gain).  ``q_h`` is kept:
without it a low-rank factor never leaves its initial row space (digest §14.2.3), and
the rank would not matter.

The authors' semantics are available as ``dynamics_mode="gain"`` (``bk.posteriors.hilofi`` / ``lolofi`` / ``lrkf``):
``q`` in each step's predictive, Thompson draw and gain, the Joseph form applied to the covariance without it.  The
methods ``hilofi_ref`` (the notebook's ``q_h = q_ℓ = 0.01``), ``lolofi_ref`` and ``lrkf_ref`` (their notebook ``q``)
run the notebook's settings that way; like ``hilofi_nb`` they run only when named.

Protocol run (stated in the table; the paper's is 60,000 images, accuracy over the last 10,000, one run): the first
``--steps`` images of a fresh permutation of the 60,000 per seed (``bk.datasets.streams.stationary``; pixels / 255),
each seed with its own initial network (``PRNGKey(seed)``) and random initial factors (``seed``); ranks ``--ranks``.
Every (method, rank, seed) runs alone, one stream compiled into one ``lax.scan``, so ``ms / step`` is the cost of one
filter on one stream (compile time apart).

Metrics, mean ± standard error over seeds: one-step-ahead accuracy over all steps and over the last ``--last`` steps;
NLPD (−log of the plug-in probability of the true class) over the last ``--last`` steps; ms per step (run time of
the stream / steps).  The Pareto front is taken over all (method, rank) points: a point is on it when no other
point is both faster and more accurate.

Run (one process per core; each appends its rows to ``OUT/TAG.csv``, skipping (method, rank, seed) already there with
the same ``--steps`` and ``--last``; ``--render`` rewrites ``TAG.md`` and ``TAG.png`` from the CSV)::

    taskset -c 0 python -m benchmarks rank --methods lofi --seeds 3
    taskset -c 1 python -m benchmarks rank --methods hilofi,lolofi,lrkf --seeds 3
    python -m benchmarks rank --render
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import jax.numpy as jnp
import numpy as np
import pandas as pd

import banditkit as bk
from banditkit.datasets import streams as S
from banditkit.experiments.prequential import StreamLearner, run_stream
from banditkit.likelihoods import Categorical
from banditkit.models import LeNet5
from benchmarks.harness import options, provenance, tables

KEY_COLS = ["method", "rank", "seed", "steps", "last"]
LABELS = {"hilofi": "HiLoFi", "lolofi": "LoLoFi (last-layer rank 50)", "lrkf": "LRKF", "lofi": "LoFi",
          "hilofi_nb": "HiLoFi, notebook q_ℓ = 0.01",
          "hilofi_ref": "HiLoFi, notebook q_ℓ = 0.01, q in the gain only",
          "lolofi_ref": "LoLoFi (last-layer rank 50), q in the gain only",
          "lrkf_ref": "LRKF, q in the gain only"}
DEFAULT_METHODS = "hilofi,lolofi,lrkf,lofi"
# one colour per filter in every table's plot; its reference-code-dynamics variant (``_ref``) dashed in the same colour
COLOURS = {m: f"C{i}" for i, m in enumerate(m for m in LABELS if not m.endswith("_ref"))}
COLOURS |= {m: COLOURS[m.removesuffix("_ref")] for m in LABELS if m.endswith("_ref")}


def style(method: str) -> dict:
    """Matplotlib line style of ``method``: its colour, dashed with square markers for the ``_ref`` variants."""
    ref = method.endswith("_ref")
    return dict(color=COLOURS.get(method), ls="--" if ref else "-", marker="s" if ref else "o")


def posterior(method: str, apply_fn, rank: int, seed: int):
    """The authors' notebook-04 filter at hidden (or full-network) rank ``rank`` (HiLoFi with ``q_ℓ = 0``: see the
    module docstring; ``hilofi_nb`` is the notebook's ``q_ℓ = 0.01``)."""
    P = bk.posteriors
    mode = "gain" if method.endswith("_ref") else "carry"
    if method in ("hilofi", "hilofi_nb", "hilofi_ref"):
        return P.hilofi(apply_fn, Categorical(1e-4), rank=rank, init_cov_hidden=1.0, init_cov_last=1.0,
                        dynamics_cov_hidden=0.01, dynamics_cov_last=0.0 if method == "hilofi" else 0.01,
                        dynamics_mode=mode, seed=seed)
    if method in ("lolofi", "lolofi_ref"):
        return P.lolofi(apply_fn, Categorical(1e-4), rank=rank, rank_last=50, init_cov_hidden=1.0,
                        init_cov_last=1.0, dynamics_cov=0.01, dynamics_mode=mode, seed=seed)
    if method in ("lrkf", "lrkf_ref"):
        return P.lrkf(apply_fn, Categorical(0.1), rank=rank, init_cov=1.0, dynamics_cov=0.01, dynamics_mode=mode,
                      seed=seed)
    if method == "lofi":
        return P.lofi(apply_fn, Categorical(0.01), rank=rank, init_cov=float(np.exp(-8.0)), dynamics_cov=0.0)
    raise SystemExit(f"unknown method {method!r}; choose from {', '.join(LABELS)}")


def run_one(method: str, rank: int, seed: int, x: np.ndarray, y: np.ndarray, steps: int, last: int) -> dict:
    model = LeNet5(out=10)
    learner = StreamLearner(posterior(method, model.apply, rank, seed), lambda k: model.init(k, jnp.zeros(784)))
    df = run_stream(lambda s: S.stationary(x, y, steps, seed=s), learner, seeds=[seed], name=method)
    t = df.attrs["timing"][method]
    acc, nlpd = df.accuracy.to_numpy(), df.nlpd.to_numpy()
    return dict(method=method, rank=rank, seed=seed, steps=steps, last=last, accuracy=float(acc.mean()),
                accuracy_last=float(acc[-last:].mean()), nlpd_last=float(nlpd[-last:].mean()),
                compile_s=t["compile_s"], run_s=t["run_s"], ms_per_step=1e3 * t["run_s"] / steps,
                nonfinite=int((~np.isfinite(nlpd)).sum()), **provenance.row_provenance())


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    g = rows.groupby(["method", "rank", "steps", "last"], sort=False)
    out = g.agg(seeds=("seed", "nunique"), accuracy=("accuracy", "mean"), accuracy_se=("accuracy", tables.se),
                accuracy_last=("accuracy_last", "mean"), accuracy_last_se=("accuracy_last", tables.se),
                nlpd_last=("nlpd_last", "mean"), nlpd_last_se=("nlpd_last", tables.se),
                ms_per_step=("ms_per_step", "mean"), ms_per_step_se=("ms_per_step", tables.se),
                compile_s=("compile_s", "mean")).reset_index()
    order = {m: i for i, m in enumerate(LABELS)}
    out = out.sort_values(["method", "rank"], key=lambda c: c.map(order) if c.name == "method" else c)
    out["pareto"] = pareto(out.ms_per_step.to_numpy(), out.accuracy_last.to_numpy())
    return out.reset_index(drop=True)


def pareto(cost: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """``True`` where no other point has ``cost <= `` and ``quality >=`` with one of them strict
    (:func:`benchmarks.harness.tables.pareto_mask` with the loss ``-quality``)."""
    return tables.pareto_mask(cost, -np.asarray(quality, np.float64))


CHANCE = 0.2  # a (method, rank) whose mean accuracy is below this is off the accuracy panels' scale, named instead


def plot(s: pd.DataFrame, path: str) -> None:
    """Accuracy against ms per step (with the Pareto front), accuracy against rank, ms per step against rank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(16, 5.6))
    off = []
    for method, g in s.groupby("method", sort=False):
        lab = LABELS.get(method, method)
        ok = g[g.accuracy_last >= CHANCE]
        below = g[g.accuracy_last < CHANCE]
        off += [f"{lab} rank {int(r['rank'])}: {r.accuracy_last:.2f}" for _, r in below.iterrows()]
        st = style(method)
        colour = st["color"]
        ax2.errorbar(g["rank"], g.ms_per_step, yerr=g.ms_per_step_se, capsize=2, label=lab, **st)
        if ok.empty:
            continue
        ax0.errorbar(ok.ms_per_step, ok.accuracy_last, xerr=ok.ms_per_step_se, yerr=ok.accuracy_last_se,
                     capsize=2, label=lab, **st)
        for _, r in ok.iterrows():
            ax0.annotate(str(int(r["rank"])), (r.ms_per_step, r.accuracy_last), textcoords="offset points",
                         xytext=(3, 5), fontsize=7, color=colour)
        ax1.errorbar(ok["rank"], ok.accuracy_last, yerr=ok.accuracy_last_se, capsize=2, label=lab, **st)
    front = s[s.pareto & (s.accuracy_last >= CHANCE)].sort_values("ms_per_step")
    ax0.step(front.ms_per_step, front.accuracy_last, where="post", color="k", ls="--", lw=1, label="Pareto front")
    last, steps = int(s["last"].iloc[0]), int(s.steps.iloc[0])
    ax0.set_xlabel("ms per step (one stream, one core)")
    ax0.set_ylabel(f"accuracy over the last {last:,} of {steps:,} images")
    ax0.set_title("accuracy against cost (labels: rank)")
    ax1.set_xlabel("rank (hidden rank for HiLoFi / LoLoFi)")
    ax1.set_title("accuracy against rank")
    ax2.set_xlabel("rank (hidden rank for HiLoFi / LoLoFi)")
    ax2.set_ylabel("ms per step")
    ax2.set_title("cost against rank")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ranks = sorted(int(r) for r in s["rank"].unique())
    ax2.set_yscale("log")
    for ax in (ax0, ax1, ax2):
        ax.set_xscale("log")
        ax.grid(alpha=0.3, which="both")
    ax0.legend(handles=[h for h, lab in zip(*ax0.get_legend_handles_labels(), strict=True) if lab == "Pareto front"],
               fontsize=7, loc="lower right")
    handles, labels = ax2.get_legend_handles_labels()  # every method (ax2 draws them all): one legend below
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    for axis in (ax0.xaxis, ax2.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(plain)
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(FixedLocator(ranks))
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
    legend_h = 0.01 + 0.045 * (1 + (len(labels) - 1) // 4)  # the shared legend's rows
    if off:
        fig.text(0.01, legend_h + 0.01,
                 "Not drawn on the accuracy panels (mean accuracy below the scale): " + "; ".join(off), fontsize=8)
    lo, hi = int(s.seeds.min()), int(s.seeds.max())
    fig.suptitle(f"Online MNIST classification, LeNet5 (seed 003 rank study), mean ± s.e. over "
                 f"{lo if lo == hi else f'{lo}–{hi}'} seeds", fontsize=10)
    fig.tight_layout(rect=(0, legend_h + (0.04 if off else 0.01), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def short_label(method: str) -> str:
    """``method``'s label without its parenthesised detail ("LoLoFi, q in the gain only")."""
    return re.sub(r" \(.*?\)", "", LABELS.get(method, method))


def point_label(method: str, rank: int) -> str:
    """``"LRKF rank 1"``; a variant's label holds a comma, so ``"LoLoFi, q in the gain only, rank 1"``."""
    name = short_label(method)
    return f"{name}{',' if ',' in name else ''} rank {rank}"


def fmt(m: float, e: float, digits: int = 3) -> str:
    return f"{m:.{digits}f} ± {e:.{digits}f}" if np.isfinite(e) else f"{m:.{digits}f}"


def facts(s: pd.DataFrame) -> list[str]:
    """The paper's claims about Fig. 6, each with the numbers measured here (no verdict where the s.e. decide)."""
    out = []
    for method, g in s.groupby("method", sort=False):
        lo, hi = g.iloc[0], g.iloc[-1]
        if len(g) == 1:
            out.append(f"- {LABELS.get(method, method)}: rank {int(lo['rank'])} only: accuracy (last "
                       f"{int(lo['last']):,}) {fmt(lo.accuracy_last, lo.accuracy_last_se)}, ms per step "
                       f"{lo.ms_per_step:.2f}.")
            continue
        out.append(f"- {LABELS.get(method, method)}: rank {int(lo['rank'])} → {int(hi['rank'])}: accuracy (last "
                   f"{int(lo['last']):,}) {fmt(lo.accuracy_last, lo.accuracy_last_se)} → "
                   f"{fmt(hi.accuracy_last, hi.accuracy_last_se)}, ms per step {lo.ms_per_step:.2f} → "
                   f"{hi.ms_per_step:.2f} (×{hi.ms_per_step / lo.ms_per_step:.1f}).")
    front = s[s.pareto].sort_values("ms_per_step")
    out.append("- Pareto front (fastest first): " + ", ".join(
        f"{point_label(r.method, int(r['rank']))} ({r.ms_per_step:.1f} ms, {r.accuracy_last:.3f})"
        for _, r in front.iterrows()) + ".")
    return out


def render(rows: pd.DataFrame, out: str, tag: str) -> None:
    s = summary(rows)
    steps, last = sorted(rows.steps.unique()), sorted(rows["last"].unique())
    lines = ["# Rank study: online MNIST classification, accuracy against run time (seed 003 §11.2(a), Fig. 6)", "",
             "**Protocol run:** " + ", ".join(map(str, steps)) + " images per seed (the paper: 60,000), accuracy over "
             "the last " + ", ".join(f"{v:,}" for v in last) + " (the paper: 10,000); LeNet5 (ELU), moment-matched "
             "categorical likelihood, the authors' notebook-04 settings except HiLoFi's last layer at q_ℓ = 0 "
             "(why: the docstring of `benchmarks/suites/rank.py`); rows marked \"q in the gain only\" run the "
             "notebook's q with the authors' code's dynamics (`dynamics_mode=\"gain\"`: q enters each step's gain, "
             "not the carried covariance); every "
             "(method, rank, seed) alone, one stream per run.  Mean ± standard error over seeds.", "",
             *provenance.csv_provenance(rows)]
    lines += ["", "| method | rank | seeds | accuracy (all steps) | accuracy (last) | NLPD (last) | ms / step | "
              "compile s | Pareto |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in s.iterrows():
        lines.append(f"| {LABELS.get(r.method, r.method)} | {int(r['rank'])} | {int(r.seeds)} | "
                     f"{fmt(r.accuracy, r.accuracy_se)} | {fmt(r.accuracy_last, r.accuracy_last_se)} | "
                     f"{fmt(r.nlpd_last, r.nlpd_last_se)} | {fmt(r.ms_per_step, r.ms_per_step_se, 2)} | "
                     f"{r.compile_s:.1f} | {'yes' if r.pareto else ''} |")
    bad = rows[rows.nonfinite > 0]
    if len(bad):
        lines += ["", "**Non-finite NLPD:** " + ", ".join(f"{r.method} rank {r['rank']} seed {r.seed} "
                                                          f"({r.nonfinite} steps)" for _, r in bad.iterrows())]
    lines += ["", "**Measured (the paper's Fig. 6 claims are in the notes below):**", "", *facts(s), "",
              f"Figure: [{tag}.png]({tag}.png).", ""]
    lines += tables.hand_notes(os.path.join(out, f"{tag}.md"))
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(lines).rstrip() + "\n")
    plot(s, os.path.join(out, f"{tag}.png"))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--methods", default=DEFAULT_METHODS,
                   help=f"comma list of {', '.join(LABELS)} (default {DEFAULT_METHODS}; hilofi_nb and the _ref "
                   "ones only when named)")
    p.add_argument("--ranks", default="1,5,10,20,50", type=lambda v: [int(r) for r in v.split(",")])
    p.add_argument("--steps", type=int, default=15000, help="images per seed (the paper: 60,000)")
    p.add_argument("--last", type=int, default=5000, help="accuracy window at the end (the paper: 10,000)")
    p.add_argument("--seeds", type=int, default=3)
    options.add_csv_study_options(p, "rank_study", writes="TAG.md / TAG.png")
    args = p.parse_args(argv)
    csv = options.start_csv_study(args, render)
    if csv is None:
        return
    if not 1 <= args.last <= args.steps:
        raise SystemExit(f"--last must be between 1 and --steps ({args.steps}), got {args.last}")
    if any(r < 1 for r in args.ranks):
        raise SystemExit(f"--ranks must be positive integers, got {args.ranks}")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in LABELS:
            raise SystemExit(f"unknown method {m!r} in --methods; choose from {', '.join(LABELS)}")
    if args.seeds < 3:
        print(f"warning: --seeds {args.seeds} < 3; standard errors will be unreliable", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    x, y = S.load_xy("mnist")
    rows = pd.read_csv(csv) if os.path.exists(csv) else pd.DataFrame(columns=KEY_COLS)
    done = set(rows[KEY_COLS].itertuples(index=False, name=None))  # (method, rank, seed, steps, last) already run
    for method in methods:
        for rank in args.ranks:
            for seed in range(args.seeds):
                if (method, rank, seed, args.steps, args.last) in done:
                    continue
                tic = time.perf_counter()
                row = run_one(method, rank, seed, x, y, args.steps, args.last)
                print(f"{method:7s} rank {rank:3d} seed {seed}: accuracy last {row['accuracy_last']:.3f} "
                      f"{row['ms_per_step']:.2f} ms/step ({time.perf_counter() - tic:.0f} s)", flush=True)
                rows = tables.append_rows(csv, pd.DataFrame([row]))
    render(rows, args.out, args.tag)
    print(f"wrote {csv}, {args.tag}.md and .png")
