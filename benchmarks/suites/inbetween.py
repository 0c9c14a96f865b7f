"""Seed 003's 1-D "in-between" uncertainty figure (§11.1): HiLoFi, LRKF and an exact GP, mean ± 2 sd vs data.

Data: ``bk.datasets.toy.in_between`` (128 points in two clusters near ±0.5, a gap in between; no noise).
Networks: MLP with 4 hidden layers of 128 ELU units and a linear ``head`` (seed 003's model), one pass through
the data in the generated order, one ``predict`` + ``update`` per point, compiled with ``lax.scan``.
Settings as seed 003 (``q = 0``, prior variance ½ for every block, initial weights re-drawn as ``0.5 · N(0, 1)``
as in the authors' notebook) except the observation noise: the paper's
``R = 0`` is refused by ``Gaussian`` (a variance must be > 0), so ``R = 1e-3`` (sd 0.03, small against the
targets' spread).  HiLoFi rank ``--rank`` (default 50), LRKF rank ``--lrkf-rank`` (default 100).  The GP is
``bk.bo.gp.fit`` (Matérn-5/2 ARD, MAP hyper-parameters) on the standardised targets.

Reported (``inbetween.md``): mean predictive sd in the gap (``|x| < 0.2``) over the mean sd where there is data
(``0.3 < |x| < 0.7``) — above 1 means "more uncertain between the clusters", the behaviour the figure shows — and
wall time.  Figure: ``inbetween.png``.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import banditkit as bk
from banditkit.datasets.toy import in_between
from benchmarks.harness import options, provenance


def run_filter(name: str, post, params, x: np.ndarray, y: np.ndarray, grid: np.ndarray):
    """One pass of ``post`` over ``(x, y)``; predictive mean and sd on ``grid`` (seconds, incl. compilation)."""

    def step(state, xy):
        xi, yi = xy
        return post.update(post.predict(state), xi, yi[None]), None

    @jax.jit
    def fit_and_predict(params, x, y, grid):
        state, _ = jax.lax.scan(step, post.init(params), (x, y))
        m, c = jax.vmap(lambda g: post.predictive(state, g))(grid)
        return m[:, 0], jnp.sqrt(c[:, 0, 0])

    t0 = time.perf_counter()
    m, s = jax.block_until_ready(fit_and_predict(params, jnp.asarray(x), jnp.asarray(y), jnp.asarray(grid)))
    return np.asarray(m), np.asarray(s), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rank", type=int, default=50, help="HiLoFi hidden-block rank")
    p.add_argument("--lrkf-rank", type=int, default=100)
    p.add_argument("--n", type=int, default=128, help="number of data points")
    p.add_argument("--obs-noise", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--init-scale", type=float, default=0.5,
                   help="initial weights ~ scale · N(0, 1) as in seed 003's notebook (0: Flax's default init)")
    p.add_argument("--out", default=options.RESULTS)
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    os.makedirs(args.out, exist_ok=True)
    data = in_between(n=args.n, seed=args.seed)
    x, y, grid = data["x"], data["y"], data["x_grid"]
    y_mu, y_sd = float(y.mean()), float(y.std())
    z = (y - y_mu) / y_sd  # every method sees standardised targets; plots are in the original units

    model = bk.models.MLP(features=(128, 128, 128, 128), out=1)
    params = model.init(jax.random.PRNGKey(args.seed), jnp.zeros(1))
    if args.init_scale > 0:  # seed 003's notebook re-draws every initial weight as 0.5 · N(0, 1)
        leaves, tree = jax.tree_util.tree_flatten(params)
        keys = jax.random.split(jax.random.PRNGKey(args.seed + 1), len(leaves))
        params = jax.tree_util.tree_unflatten(
            tree, [args.init_scale * jax.random.normal(k, leaf.shape, leaf.dtype) for k, leaf in zip(keys, leaves,
                                                                                                    strict=True)])
    lik = bk.likelihoods.Gaussian(args.obs_noise)
    results = {}
    hilofi = bk.posteriors.hilofi(model.apply, lik, rank=args.rank, last_layer="head", init_cov_hidden=0.5,
                                  init_cov_last=0.5)
    results[f"HiLoFi (rank {args.rank})"] = run_filter("hilofi", hilofi, params, x, z, grid)
    lrkf = bk.posteriors.lrkf(model.apply, lik, rank=args.lrkf_rank, init_cov=0.5)
    results[f"LRKF (rank {args.lrkf_rank})"] = run_filter("lrkf", lrkf, params, x, z, grid)
    t0 = time.perf_counter()
    with jax.enable_x64(True):
        st = bk.bo.gp.fit(x.astype(np.float64), z.astype(np.float64))
        gm, gv = bk.bo.gp.predict(st, jnp.asarray(grid, jnp.float64), include_noise=True)
        gm, gs = np.asarray(gm), np.sqrt(np.asarray(gv))
    results["GP (Matérn-5/2, MAP)"] = (gm, gs, time.perf_counter() - t0)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = grid[:, 0]
    gap, near = np.abs(g) < 0.2, (np.abs(g) > 0.3) & (np.abs(g) < 0.7)
    fig, axes = plt.subplots(1, len(results), figsize=(4.5 * len(results), 3.6), sharey=True)
    rows = []
    for ax, (label, (m, s, secs)) in zip(axes, results.items(), strict=True):
        m, s = y_mu + y_sd * m, y_sd * s
        ax.fill_between(g, m - 2 * s, m + 2 * s, alpha=0.3, label="mean ± 2 sd")
        ax.plot(g, m, lw=1.5, label="predictive mean")
        ax.scatter(x[:, 0], y, s=6, c="k", label="data", zorder=3)
        ax.set_title(label)
        ax.set_xlabel("x")
        ax.set_ylim(float(y.min()) - 4 * y_sd, float(y.max()) + 4 * y_sd)
        ratio = float(s[gap].mean() / s[near].mean())
        rows.append(f"| {label} | {s[gap].mean():.3f} | {s[near].mean():.3f} | {ratio:.2f} | {secs:.1f} |")
        print(f"{label}: sd gap {s[gap].mean():.3f}, sd data {s[near].mean():.3f}, ratio {ratio:.2f}, {secs:.1f}s")
    axes[0].set_ylabel("y")
    axes[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "inbetween.png"), dpi=110)
    plt.close(fig)

    md = ["# In-between uncertainty (seed 003 §11.1)", "",
          f"**Command:** `{provenance.command_line()}`", "",
          f"**Machine:** {provenance.machine()}", "",
          f"{args.n} points (`bk.datasets.toy.in_between`, seed {args.seed}), one pass, MLP 4×128 ELU, q = 0, "
          f"prior variance ½, initial weights {args.init_scale:g}·N(0,1), R = {args.obs_noise:g} "
          "(the paper's R = 0 is not a valid Gaussian variance).  "
          "sd = predictive standard deviation (original units) averaged over the grid points in the gap "
          "(|x| < 0.2) and where there is data (0.3 < |x| < 0.7).  Figure: `inbetween.png`.", "",
          "| method | mean sd in the gap | mean sd at the data | ratio gap / data | seconds (incl. compile) |",
          "|---|---|---|---|---|", *rows]
    with open(os.path.join(args.out, "inbetween.md"), "w") as fh:
        fh.write("\n".join(md) + "\n")
