"""What learning the observation variance costs per step: predict + update with and without ``adaptive_noise``.

Per model and backend: the fixed-variance step (``Gaussian(0.1)``) and the same backend wrapped by
``bk.posteriors.adaptive_noise`` (the variational-Bayes noise step: one more ``predictive`` per update, whose network
passes XLA shares with the update's), each one ``jax.jit`` of ``update(predict(state), x, y)``, compiled apart;
then ``--rounds`` interleaved windows (fixed, learned, fixed, ...) of ``--window`` steps each, the state carried.
Interleaving puts both under the same drift of a shared machine; ``min`` is the fastest window (the least disturbed),
``median`` the typical one, both per step.  ``ratio`` = learned / fixed of the same statistic.  Models, observed as a
bandit agent observes them (``bk.agents.selected_output``: the pulled arm's output, one per step, on random
contexts and arms): LeNet5 with 10 arms on 28×28 images (the MNIST bandit's) and the 50-50 MLP with 7 arms on 9
inputs (Shuttle's); rank ``--rank`` for the low-rank filters (HiLoFi's head as one dense block, not ``make_agent``'s
per-arm blocks), float32.

Usage::

    python -m benchmarks study noise_cost
    python -m benchmarks study noise_cost --models mlp_shuttle --backends lrkf,lofi --rounds 4
"""

from __future__ import annotations

import argparse
import inspect
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import banditkit as bk
from benchmarks.harness import options, tables

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs

MODELS = {  # name -> (model, one input); the windows are shorter for the slower model
    "lenet5": (lambda: bk.models.LeNet5(out=10), (28, 28, 1)),
    "mlp_shuttle": (lambda: bk.models.MLP(features=(50, 50), out=7), (9,)),
}
BACKENDS = ("hilofi", "lolofi", "lrkf", "lofi", "diag_ekf")


def _factory_kwargs(factory, rank: int) -> dict:
    sig = inspect.signature(factory).parameters
    kw = {k: rank for k in ("rank", "rank_last") if k in sig}
    if "last_layer" in sig:
        kw["last_layer"] = "head"
    return kw


def _at(xs, i: int):
    return jax.tree_util.tree_map(lambda a: a[i], xs)


def _compiled(post, params, x, y):
    """``(compiled step, state, compile seconds)``."""
    state = post.init(params)
    t0 = time.perf_counter()
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y)).lower(state, x, y).compile()
    return step, state, time.perf_counter() - t0


def measure(model_name: str, backend: str, rank: int, window: int, rounds: int, seed: int = 0) -> dict:
    make, shape = MODELS[model_name]
    model = make()
    key_x, key_y = jax.random.split(jax.random.PRNGKey(seed))
    contexts = jax.random.normal(key_x, (window, *shape), jnp.float32)
    params = model.init(jax.random.PRNGKey(seed + 1), contexts[0])
    out = model.apply(params, contexts[0]).shape[0]
    arms = jax.nn.one_hot(jax.random.randint(jax.random.PRNGKey(seed + 2), (window,), 0, out), out)
    xs = (contexts, arms)
    ys = jax.random.normal(key_y, (window, 1), jnp.float32)
    apply_fn = bk.agents.selected_output(model.apply)
    lik = bk.likelihoods.Gaussian(0.1)
    factory = bk.posteriors.get(backend)
    kw = _factory_kwargs(factory, rank)
    variants = {"fixed": factory, "learned": bk.posteriors.adaptive_noise(factory)}
    runs, compile_s = {}, {}
    for name, fac in variants.items():
        step, state, compile_s[name] = _compiled(fac(apply_fn, lik, **kw), params, _at(xs, 0), ys[0])
        for i in range(window):  # warm-up window
            state = step(state, _at(xs, i), ys[i])
        jax.block_until_ready(state)
        runs[name] = [step, state]
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name in variants:
            step, state = runs[name]
            t0 = time.perf_counter()
            for i in range(window):
                state = step(state, _at(xs, i), ys[i])
            jax.block_until_ready(state)
            times[name].append((time.perf_counter() - t0) / window * 1e3)
            runs[name][1] = state
    finite = all(bool(jnp.all(jnp.isfinite(leaf))) for name in variants
                 for leaf in jax.tree_util.tree_leaves(runs[name][1])
                 if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating))  # fmt: skip
    row = dict(model=model_name, params=int(sum(np.size(v) for v in jax.tree_util.tree_leaves(params))), arms=out,
               backend=backend, rank=kw.get("rank", ""), window=window, rounds=rounds, finite=finite)
    for name in variants:
        row[f"{name}_ms_min"] = float(np.min(times[name]))
        row[f"{name}_ms_median"] = float(np.median(times[name]))
        row[f"{name}_compile_s"] = compile_s[name]
    row["ratio_min"] = row["learned_ms_min"] / row["fixed_ms_min"]
    row["ratio_median"] = row["learned_ms_median"] / row["fixed_ms_median"]
    return row


def render(df: pd.DataFrame) -> list[str]:
    lines = tables.preamble("The cost of a learned observation variance (adaptive_noise) per step", __doc__)
    lines += ["| model | P | arms | backend | rank | fixed ms (min / median) | learned ms (min / median) | "
              "ratio (min / median) | compile s (fixed / learned) |",
              "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in df.to_dict("records"):
        note = "" if r["finite"] else " (state not finite)"
        lines.append(
            f"| {r['model']} | {r['params']:,} | {r['arms']} | {r['backend']}{note} | {r['rank']} | "
            f"{r['fixed_ms_min']:.2f} / {r['fixed_ms_median']:.2f} | {r['learned_ms_min']:.2f} / "
            f"{r['learned_ms_median']:.2f} | {r['ratio_min']:.2f} / {r['ratio_median']:.2f} | "
            f"{r['fixed_compile_s']:.1f} / {r['learned_compile_s']:.1f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of {list(MODELS)}")
    ap.add_argument("--backends", default=",".join(BACKENDS), help="comma list of backends adaptive_noise supports")
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--window", type=int, default=0, help="steps per window (default: 20 for LeNet5, 200 for MLPs)")
    ap.add_argument("--rounds", type=int, default=8, help="interleaved windows per variant")
    ap.add_argument("--tag", default="noise_cost")
    ap.add_argument("--out", default=HERE)
    options.add_blas_threads(ap)
    args = ap.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [m for m in models if m not in MODELS]
    unsupported = [b for b in backends if b not in bk.posteriors.noise.SUPPORTED]
    if unknown or unsupported:
        raise SystemExit(f"unknown model(s) {unknown} (choose from {list(MODELS)}) / backend(s) {unsupported} that "
                         f"adaptive_noise does not wrap (choose from {list(bk.posteriors.noise.SUPPORTED)})")
    rows = []
    for m in models:
        window = args.window or (20 if m == "lenet5" else 200)
        for b in backends:
            row = measure(m, b, args.rank, window, args.rounds)
            print(f"{m:12s} {b:9s} fixed {row['fixed_ms_min']:7.3f} ms  learned {row['learned_ms_min']:7.3f} ms  "
                  f"ratio {row['ratio_min']:.2f} (median {row['ratio_median']:.2f})", flush=True)
            rows.append(row)
    df = pd.DataFrame(rows)
    tables.save_table(df, render(df), args.out, args.tag)
    print(f"wrote {args.out}/{args.tag}.csv and {args.tag}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
