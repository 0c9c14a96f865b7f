"""Where do the BO methods look on Ackley50?  A diagnostic for the high-dimensional stall (issue 5, item 6).

On Ackley50 (box ``[-4, 5]^50``, minimum 0 at ``u* = 4/9`` in every coordinate of the unit cube) every
banditkit method with the default maximiser, and the neural surrogates even with ``maximizer="lbfgs"``, end
within 0.5 of the warm-up's best value, while the exact GP with L-BFGS-B on log EI and BoTorch improve by 2–4.
This script reruns a method on the bench's protocol (``d`` uniform warm-up points from
``numpy.random.default_rng(seed)``, then ``budget`` asks) and records, for every query ``u``:

* ``at_face``: the fraction of its coordinates within 0.001 of a face of the cube (a maximiser that runs to the
  boundary puts most coordinates there),
* ``dist``: its L2 distance to ``u*`` (uniform random points: ≈ 2.08 in 50-D; the warm-up's best point: printed),
* ``gain``: the warm-up's best value minus the query's value (> 0: the query improves on the warm-up),
* ``mean_z``: the surrogate's predicted mean at the query on its standardised scale (maximised, ``−f``), against
  ``true_z``, the same map applied to the query's true value — a surrogate that expects improvement where there is
  none shows ``mean_z ≫ true_z``.

Writes ``TAG.csv`` (one row per query) and ``TAG.md`` (medians per method and seed).

Usage::

    python benchmarks/diag_bo_highdim.py --methods gp_ei,gp_ei_lbfgs,hilofi_ei_lbfgs,hilofi_ts --seeds 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's banditkit
import banditkit as bk  # noqa: E402
from banditkit.bo import gp as _gp  # noqa: E402
from banditkit.environments.bo_functions import make_function  # noqa: E402
from benchmarks import common  # noqa: E402
from benchmarks.bench_bo import parse_method  # noqa: E402


def predicted_mean(opt: bk.BayesOpt, u: np.ndarray) -> float:
    """The surrogate's predictive mean at ``u`` on its standardised, maximised scale."""
    if opt._is_gp:
        with jax.enable_x64(True):
            m, _ = _gp.predict(opt._state, jnp.asarray(u, jnp.float64)[None])
        return float(m[0])
    m, _ = opt._post.predictive(opt._state, jnp.asarray(u, opt._dtype))
    return float(m[0])


def run(method: str, seed: int, budget: int, dim: int) -> pd.DataFrame:
    f = make_function("ackley", dim)
    sur, acq, kw, _ = parse_method(method)
    opt = bk.BayesOpt([(0.0, 1.0)] * dim, surrogate=sur, acquisition=acq, direction="minimize", seed=seed,
                      n_initial=dim, **kw)
    warm = np.random.default_rng(seed).random((dim, dim))
    fw = f.value(warm)
    opt.tell(warm, [float(v) for v in fw])
    u_star = np.full(dim, 4.0 / 9.0)
    rows = []
    for it in range(budget):
        u = opt.ask()
        y = float(f.value(u))
        mean_z = predicted_mean(opt, u)
        true_z = (-y - opt._shift) / opt._scale
        rows.append(dict(method=method, seed=seed, iter=it + 1, at_face=float(np.mean((u < 1e-3) | (u > 1 - 1e-3))),
                         dist=float(np.linalg.norm(u - u_star)), gain=float(np.min(fw) - y), mean_z=mean_z,
                         true_z=true_z, warm_best_dist=float(np.linalg.norm(warm[np.argmin(fw)] - u_star))))
        opt.tell(u, y)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--methods", default="gp_ei,gp_ei_lbfgs,hilofi_ei_lbfgs,hilofi_ts")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--dim", type=int, default=50)
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--tag", default="diag_bo_highdim")
    common.add_blas_threads(p)
    a = p.parse_args(argv)
    common.apply_blas_threads(a.blas_threads)
    t0 = time.perf_counter()
    frames = []
    for m in a.methods.split(","):
        for s in range(a.seeds):
            frames.append(run(m, s, a.budget, a.dim))
            g = frames[-1]
            print(f"{m} seed {s}: median at_face {g.at_face.median():.2f}, dist {g.dist.median():.2f}, best gain "
                  f"{g.gain.max():.3f}, median mean_z − true_z {(g.mean_z - g.true_z).median():.2f}", flush=True)
    df = pd.concat(frames, ignore_index=True)
    agg = df.assign(over=df.mean_z - df.true_z).groupby(["method", "seed"]).agg(
        at_face=("at_face", "median"), dist=("dist", "median"), warm_best_dist=("warm_best_dist", "first"),
        best_gain=("gain", "max"), improving=("gain", lambda g: int(np.sum(g > 0))), mean_z=("mean_z", "median"),
        true_z=("true_z", "median"), over=("over", "median"))
    lines = [f"# Where the BO methods look on Ackley{a.dim}", "",
             f"`python benchmarks/diag_bo_highdim.py --methods {a.methods} --seeds {a.seeds} --budget {a.budget} "
             f"--dim {a.dim}` "
             f"({time.perf_counter() - t0:.0f} s).  Medians over the {a.budget} queries of each run; `improving` = "
             "queries better than the warm-up's best; `over` = predicted minus true standardised value "
             "(maximised scale).  Uniform random points lie ≈ "
             f"{np.sqrt(a.dim * (1 / 12 + (0.5 - 4 / 9) ** 2)):.2f} from the optimum.", "",
             "| method | seed | at_face | dist | warm best's dist | best gain | improving | mean_z | true_z | over |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (m, s), r in agg.iterrows():
        lines.append(f"| {m} | {s} | {r.at_face:.2f} | {r.dist:.2f} | {r.warm_best_dist:.2f} | {r.best_gain:.3f} | "
                     f"{int(r.improving)} | {r.mean_z:.2f} | {r.true_z:.2f} | {r.over:.2f} |")
    common.save_table(df, lines, a.out, a.tag)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
