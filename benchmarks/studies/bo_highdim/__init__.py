"""Where do the BO methods look?  A diagnostic for the stalls of issue 5, item 6 (any task of the BO suite).

Written for Ackley50 (``--task ackley``, ``--dim 50``: the defaults); ``--task branin`` shows where HiLoFi-TS's
poor Branin seeds end (``diag_bo_branin.md``).  On Ackley50 (box ``[-4, 5]^50``, minimum 0 at ``u* = 4/9`` in
every coordinate of the unit cube) every banditkit method with the default maximiser, and the neural surrogates
even with ``maximizer="lbfgs"``, end within 0.5 of the warm-up's best value, while the exact GP with L-BFGS-B on
log EI and BoTorch improve by 2–4.
This script reruns a method on the bench's protocol (``d`` uniform warm-up points from
``numpy.random.default_rng(seed)``, then ``budget`` asks) and records, for every query ``u``:

* ``at_face``: the fraction of its coordinates within 0.001 of a face of the cube (a maximiser that runs to the
  boundary puts most coordinates there),
* ``dist``: its L2 distance to the nearest known minimiser ``u*`` (Ackley50: uniform random points lie ≈ 2.08 from
  it; the warm-up's best point: printed),
* ``gain``: the warm-up's best value minus the query's value (> 0: the query improves on the warm-up),
* ``mean_z``: the surrogate's predicted mean at the query on its standardised scale (maximised, ``−f``), against
  ``true_z``, the same map applied to the query's true value — a surrogate that expects improvement where there is
  none shows ``mean_z ≫ true_z``.

* ``regret``: the best value so far (warm-up and queries) minus the minimum, after the query.

After the last query the final surrogate is probed at the incumbent ``b`` (best of the warm-up and the queries)
and at the known minimiser ``u*`` nearest to it (``TAG_final.csv``, the second table): predictive mean and
standard deviation (network: epistemic + observation noise; GP: of the latent ``f``) on the standardised scale
against the true standardised values, and, for a network surrogate, the share of ``--draws`` parameter draws
``θ̃ ~ q(θ)`` with ``f(θ̃, u*) > f(θ̃, b)``: how often Thompson sampling would prefer the minimiser to the
incumbent (the GP's joint draw is not probed).

Writes ``TAG.csv`` (one row per query) and ``TAG.md`` (medians per method and seed, the final regret and the
best query's distance and face fraction).

Usage::

    python -m benchmarks study bo_highdim --methods gp_ei,gp_ei_lbfgs,hilofi_ei_lbfgs,hilofi_ts --seeds 2
    python -m benchmarks study bo_highdim --task branin --methods hilofi_ts_tr,gp_ts_tr --seeds 5 --tag diag_bo_branin
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import banditkit as bk
from banditkit.environments.bo_functions import make_function
from benchmarks.harness import options, tables
from benchmarks.harness.provenance import PROG
from benchmarks.suites.bo import REFINE, TASKS, bayesopt_args

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs


def predictive(opt: bk.BayesOpt, u: np.ndarray) -> tuple[float, float]:
    """The surrogate's predictive mean and variance at ``u`` on its standardised, maximised scale (a network:
    epistemic + observation noise; the GP: of the latent ``f``)."""
    sur = opt.snapshot().surrogate
    with sur.precision():
        m, sd = sur.moments(opt.fit.state, jnp.asarray(u, sur.dtype))
    return float(m), float(sd) ** 2


def task_function(task: str, dim: int | None = None):
    """``(f, budget, refine)`` of a BO-suite task name (``ackley`` with ``dim`` for any dimension)."""
    if task == "ackley":
        return make_function("ackley", dim or 50), 100, None
    if task not in TASKS:
        raise SystemExit(f"unknown task {task!r}; choose ackley (with --dim) or one of {sorted(TASKS)}")
    fname, d, budget = TASKS[task]
    return make_function(fname, d), budget, REFINE.get(fname)


def on_face(u: np.ndarray) -> np.ndarray:
    """The fraction of each row's coordinates within 0.001 of a face of the unit cube."""
    return np.mean((u < 1e-3) | (u > 1 - 1e-3), axis=-1)


def probe(opt: bk.BayesOpt, f, best_u: np.ndarray, draws: int) -> dict:
    """The final surrogate at the incumbent ``b`` and at the known minimiser ``u*`` nearest to it (module docstring)."""
    u_star = f.minimizers[np.argmin(np.linalg.norm(f.minimizers - best_u, axis=1))]
    out = dict(opt_u=" ".join(f"{v:.3f}" for v in u_star[:4]), best_u=" ".join(f"{v:.3f}" for v in best_u[:4]))
    for tag, u in (("best", best_u), ("opt", u_star)):
        m, v = predictive(opt, u)
        out |= {f"mean_z_{tag}": m, f"sd_{tag}": float(np.sqrt(max(v, 0.0))),
                f"true_z_{tag}": float((-f.value(u) - opt.fit.shift) / opt.fit.scale)}
    share = float("nan")
    sur = opt.snapshot().surrogate
    if sur.function_draws:  # a draw is a function (a network); the GP's draws are joint on finite sets
        pts = jnp.asarray(np.stack([u_star, best_u]), sur.dtype)
        keys = jax.random.split(jax.random.PRNGKey(12345), draws)
        vals = jax.vmap(lambda k: jax.vmap(lambda x: sur.draw_value(sur.draw(opt.fit.state, k), x))(pts))(keys)
        share = float(np.mean(np.asarray(vals[:, 0] > vals[:, 1])))
    return out | dict(draws_prefer_opt=share)


def run(method: str, seed: int, task: str, budget: int | None = None, dim: int | None = None,
        draws: int = 50, extra: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """One run on the BO suite's protocol (its warm-up, maximiser settings and budget unless ``budget`` is given):
    the per-query rows and the final surrogate's :func:`probe`.  ``extra``: more ``BayesOpt`` keywords (they win)."""
    f, task_budget, refine = task_function(task, dim)
    budget, d = budget or task_budget, f.dim
    sur, acq, kw = bayesopt_args(method, d, refine)
    kw.update(extra or {})
    opt = bk.BayesOpt([(0.0, 1.0)] * d, surrogate=sur, acquisition=acq, direction="minimize", seed=seed,
                      n_initial=d, **kw)
    warm = np.random.default_rng(seed).random((d, d))
    fw = f.value(warm)
    opt.tell(warm, [float(v) for v in fw])
    u_star = f.minimizers

    def dist(u: np.ndarray) -> float:
        return float(np.min(np.linalg.norm(u_star - u, axis=1)))

    warm_best, warm_best_dist = float(np.min(fw)), dist(warm[np.argmin(fw)])
    best = warm_best
    rows = []
    for it in range(budget):
        u = opt.ask()
        y = float(f.value(u))
        mean_z, _ = predictive(opt, u)
        true_z = (-y - opt.fit.shift) / opt.fit.scale
        best = min(best, y)
        rows.append(dict(task=task, method=method, seed=seed, iter=it + 1, at_face=float(on_face(u)), dist=dist(u),
                         gain=warm_best - y, mean_z=mean_z, true_z=true_z, value=y, regret=best - f.minimum,
                         warm_best_dist=warm_best_dist) | {f"u{j}": float(u[j]) for j in range(d)})
        opt.tell(u, y)
    df = pd.DataFrame(rows)
    points, values = np.vstack([warm, df[[f"u{j}" for j in range(d)]].to_numpy()]), np.concatenate([fw, df.value])
    return df, dict(method=method, seed=seed) | probe(opt, f, points[int(np.argmin(values))], draws)


def report(df: pd.DataFrame, a: argparse.Namespace, seconds: float) -> list[str]:
    """The Markdown table: per method and seed, medians over the queries and where the best query lies."""
    best = df.loc[df.groupby(["method", "seed"]).value.idxmin()].set_index(["method", "seed"])
    agg = df.assign(over=df.mean_z - df.true_z).groupby(["method", "seed"]).agg(
        at_face=("at_face", "median"), dist=("dist", "median"), warm_best_dist=("warm_best_dist", "first"),
        best_gain=("gain", "max"), improving=("gain", lambda g: int(np.sum(g > 0))), mean_z=("mean_z", "median"),
        true_z=("true_z", "median"), over=("over", "median"), regret=("regret", "last"))
    name = f"Ackley{a.dim}" if a.task == "ackley" else a.task
    budget = df.iter.max()
    command = (f"{PROG} study bo_highdim --task {a.task} --methods {a.methods} --seeds {a.seeds}"
               + (f" --budget {a.budget}" if a.budget else "") + (f" --dim {a.dim}" if a.task == "ackley" else "")
               + "".join(f" --kwargs '{json.dumps(kw)}'" for kw in a.kwargs or [])
               + (f" --tag {a.tag}" if a.tag != "diag_bo_highdim" else ""))
    rand = (f"  Uniform random points lie ≈ {np.sqrt(a.dim * (1 / 12 + (0.5 - 4 / 9) ** 2)):.2f} from the optimum."
            if a.task == "ackley" else "")
    lines = [f"# Where the BO methods look on {name}", "",
             f"`{command}` ({seconds:.0f} s).  Medians over the {budget} queries of each run; `dist` = L2 distance to "
             "the nearest known minimiser in the unit cube; `at_face` = share of a query's coordinates on a face of "
             "the cube; `improving` = queries better than the warm-up's best; `over` = predicted minus true "
             "standardised value (maximised scale); `final regret` = best value minus the minimum after the last "
             "query; `best at` = the best query's distance to a minimiser and its share of coordinates on a face."
             + rand]
    last = agg.regret.groupby(level="method", sort=False)
    lines += ["", "| method | final regret, mean ± s.e. | per seed |", "|---|---|---|"]
    for m, g in last:
        se = g.std(ddof=1) / np.sqrt(len(g)) if len(g) > 1 else float("nan")
        lines.append(f"| {m} | {g.mean():.4g} ± {se:.2g} | {', '.join(f'{v:.3g}' for v in g)} |")
    lines += ["", "| method | seed | at_face | dist | warm best's dist | best gain | improving | mean_z | true_z | "
              "over | final regret | best at (dist, face) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (m, s), r in agg.iterrows():
        b = best.loc[(m, s)]
        lines.append(f"| {m} | {s} | {r.at_face:.2f} | {r.dist:.2f} | {r.warm_best_dist:.2f} | {r.best_gain:.3f} | "
                     f"{int(r.improving)} | {r.mean_z:.2f} | {r.true_z:.2f} | {r.over:.2f} | {r.regret:.4g} | "
                     f"{b.dist:.3f}, {b.at_face:.2f} |")
    return lines


def final_table(final: pd.DataFrame, draws: int) -> list[str]:
    """The second table: the final surrogate at the incumbent and at the nearest minimiser (:func:`probe`)."""
    lines = ["", "## The final surrogate at the incumbent `b` and at the nearest minimiser `u*`", "",
             "Standardised, maximised scale; `sd` = predictive standard deviation (network: epistemic + observation "
             "noise; GP: latent f); "
             f"`draws prefer u*` = share of {draws} parameter draws with a higher value at `u*` than at `b` (network "
             "surrogates).", "",
             "| method | seed | b | u* | mean_z(b) | true_z(b) | sd(b) | mean_z(u*) | true_z(u*) | sd(u*) | "
             "draws prefer u* |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in final.sort_values(["method", "seed"]).itertuples():
        share = "—" if np.isnan(r.draws_prefer_opt) else f"{r.draws_prefer_opt:.2f}"
        lines.append(f"| {r.method} | {r.seed} | ({r.best_u}) | ({r.opt_u}) | {r.mean_z_best:.2f} | "
                     f"{r.true_z_best:.2f} | {r.sd_best:.3f} | {r.mean_z_opt:.2f} | {r.true_z_opt:.2f} | "
                     f"{r.sd_opt:.3f} | {share} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--methods", default="gp_ei,gp_ei_lbfgs,hilofi_ei_lbfgs,hilofi_ts")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--task", default="ackley",
                   help="a BO-suite task (branin, hartmann6, ackley2, …, drawnn200) or ackley with --dim")
    p.add_argument("--budget", type=int, default=None, help="queries per run (default: the task's budget)")
    p.add_argument("--dim", type=int, default=50, help="the dimension of --task ackley")
    p.add_argument("--draws", type=int, default=50, help="parameter draws of the final network surrogate's probe")
    p.add_argument("--kwargs", type=json.loads, action="append",
                   help="more BayesOpt keywords as JSON (a variant of each method, labelled with them), e.g. "
                        "'{\"obs_noise\": 1e-3}'; repeat for several variants; '{}' = the bench's method")
    p.add_argument("--out", default=HERE)
    p.add_argument("--tag", default="diag_bo_highdim")
    options.add_blas_threads(p)
    a = p.parse_args(argv)
    options.apply_blas_threads(a.blas_threads)
    t0 = time.perf_counter()
    frames, finals = [], []
    variants = [(m, kw) for m in a.methods.split(",") for kw in (a.kwargs or [{}])]
    for m, kw in variants:
        for s in range(a.seeds):
            g, final = run(m, s, a.task, a.budget, a.dim, a.draws, kw)
            if kw:
                g["method"] = final["method"] = f"{m} {json.dumps(kw)}"
            frames.append(g)
            finals.append(final)
            print(f"{g.method.iloc[0]} seed {s}: median at_face {g.at_face.median():.2f}, dist "
                  f"{g.dist.median():.2f}, best gain {g.gain.max():.3f}, median mean_z − true_z "
                  f"{(g.mean_z - g.true_z).median():.2f}, final regret {g.regret.iloc[-1]:.4g}", flush=True)
    df = pd.concat(frames, ignore_index=True)
    final = pd.DataFrame(finals)
    lines = report(df, a, time.perf_counter() - t0) + final_table(final, a.draws)
    tables.save_table(df, lines, a.out, a.tag)
    final.to_csv(os.path.join(a.out, f"{a.tag}_final.csv"), index=False)
    print("\n".join(lines))
