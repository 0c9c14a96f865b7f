"""XLA:CPU compile time of banditkit's random draws: ``jax.random`` on the N-d shape against ``bk.rng`` (one 1-d draw
of the same values, reshaped).

Each case is a draw banditkit makes at one of its shapes: the low-rank factors' orthonormal start (``hilofi`` /
``lrkf`` / ``lofi`` ``init``), a Thompson draw of per-arm head blocks (``arms=K``, one seed and 3 vmapped seeds as
in the runner), the trust region's candidate mask, a Flax kernel's default initialiser (``bk.models``).  For each,
both functions are jitted, lowered and compiled ``--reps`` times (a fresh function each time, so nothing is cached
in memory), the two alternating so that a change in the machine's load falls on both; the median compile time
is reported, and the two outputs are checked equal bit for bit (the run stops if they are not).  Run time is not
compared: the arrays and their arithmetic are the same.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import flax.linen as nn
import jax
import numpy as np
import pandas as pd

from banditkit._xla import flat_random
from benchmarks.harness import options, tables


def _seeds(draw, n):
    return lambda key: jax.vmap(draw)(jax.random.split(key, n))


# (case, what it is in banditkit, jax.random draw, flat draw: banditkit._xla.flat_random, the tables' "bk.rng")
CASES = [
    ("normal (301, 10)", "orthonormal start of HiLoFi's hidden factor, README quick tour (MLP 4-50-1, rank 10)",
     lambda k: jax.random.normal(k, (301, 10)), lambda k: flat_random.normal(k, (301, 10))),
    ("normal (60857, 50)", "orthonormal start of HiLoFi rank 50 on LeNet5's hidden layers",
     lambda k: jax.random.normal(k, (60857, 50)), lambda k: flat_random.normal(k, (60857, 50))),
    ("normal (10, 85)", "Thompson draw of 10 per-arm head blocks (LeNet5 features + bias)",
     lambda k: jax.random.normal(k, (10, 85)), lambda k: flat_random.normal(k, (10, 85))),
    ("normal (10, 85) x 3 seeds", "the same draw under the runner's vmap over 3 seeds",
     _seeds(lambda k: jax.random.normal(k, (10, 85)), 3), _seeds(lambda k: flat_random.normal(k, (10, 85)), 3)),
    ("uniform (1000, 6)", "trust-region candidate mask, Hartmann6",
     lambda k: jax.random.uniform(k, (1000, 6)), lambda k: flat_random.uniform(k, (1000, 6))),
    ("lecun_normal (784, 50)", "Flax's default Dense kernel initialiser (bk.models: bk.rng.lecun_normal)",
     lambda k: nn.initializers.lecun_normal()(k, (784, 50)), lambda k: flat_random.lecun_normal()(k, (784, 50))),
    ("lecun_normal (5, 5, 6, 16)", "LeNet5's second convolution kernel",
     lambda k: nn.initializers.lecun_normal()(k, (5, 5, 6, 16)),
     lambda k: flat_random.lecun_normal()(k, (5, 5, 6, 16))),
]


def compile_seconds(draw, key) -> float:
    fn = jax.jit(lambda k: draw(k))  # a new function object: no in-memory cache hit
    lowered = fn.lower(key)
    t0 = time.perf_counter()
    lowered.compile()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=5, help="compilations per function (median reported)")
    p.add_argument("--out", default=options.RESULTS)
    p.add_argument("--tag", default="compile")
    p.add_argument("--only", default="", help="run only the cases whose name contains this text (e.g. 'uniform')")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    key = jax.random.PRNGKey(0)
    rows = []
    cases = [c for c in CASES if args.only in c[0]]
    if not cases:
        raise SystemExit(f"no case name contains {args.only!r}; the cases: {[c[0] for c in CASES]}")
    for name, what, theirs, ours in cases:
        a, b = np.asarray(jax.jit(theirs)(key)), np.asarray(jax.jit(ours)(key))
        if not np.array_equal(a, b):
            raise SystemExit(f"{name}: bk.rng differs from jax.random — the compile times would not be comparable")
        times = [(compile_seconds(theirs, key), compile_seconds(ours, key)) for _ in range(args.reps)]  # interleaved
        t_jax, t_bk = (statistics.median(t) for t in zip(*times, strict=True))
        rows.append(dict(case=name, where=what, jax_random_s=t_jax, bk_rng_s=t_bk, ratio=t_jax / t_bk,
                         bit_identical=True))
        print(f"{name:28s} jax.random {t_jax:6.3f} s   bk.rng {t_bk:6.3f} s   ({t_jax / t_bk:4.1f}x)", flush=True)
    df = pd.DataFrame(rows)
    lines = tables.preamble("Compile time of random draws: jax.random vs bk.rng", __doc__)
    lines += ["| draw | where in banditkit | jax.random (s) | bk.rng (s) | ratio | same values |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r.case} | {r.where} | {r.jax_random_s:.3f} | {r.bk_rng_s:.3f} | {r.ratio:.1f}× | yes |"
              for r in df.itertuples()]
    lines += ["", f"Median of {args.reps} compilations each (`jit(...).lower(key).compile()`, one XLA:CPU compile "
              "of the draw alone; inside a larger program the draw's share is what it adds to that program's compile)."]
    tables.save_table(df, lines, args.out, args.tag)
    print(f"wrote {os.path.join(args.out, args.tag)}.md / .csv")
