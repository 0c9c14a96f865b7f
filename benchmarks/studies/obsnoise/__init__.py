"""Does a smaller observation variance help the low-rank filters beyond MNIST? (issue 5, items 1, 3, 4; diagnostic.)

banditkit's agents observe ``r / reward_scale`` through a Gaussian likelihood of variance ``obs_noise = 0.1`` by
default; ``diag_lowrank_mnist.md`` measured that ``1e-4`` lifts LRKF-TS and LoLoFi-TS on the MNIST bandit.  This
study runs nothing: it collects the paired runs of HiLoFi-TS, LRKF-TS, LoLoFi-TS and LoFi-TS at ``obs_noise`` 0.1 /
1e-2 / 1e-4 (``agents.seed003_agents``' ``_r1e-2`` / ``_r1e-4`` variants; everything else seed 003's MNIST settings)
that the bandit suites wrote, one table per environment, into ``diag_obsnoise.md`` / ``.csv``: per backend and
environment the mean reward per round (mean ± s.e. over seeds) at each variance, the best in bold, and the best's
gain over the default 0.1 paired by seed.  A fourth column, ``learned`` (the ``_vb`` variants), learns the variance
online from the start 0.1 (``banditkit.posteriors.adaptive_noise`` with its defaults), with its own paired gain.
Hand-written ``**Run note`` paragraphs at the end of the file are kept.

Inputs, each from its own command (listed in the output), found in ``FOLDERS`` (this study's ``results/``, the
``lowrank_mnist`` study's, ``benchmarks/results/``) or all in ``--results``:

- ``diag_obsnoise_showdown_{shuttle,adult,mushroom}_seeds.csv``: ``showdown --tag diag_obsnoise_showdown``
- ``diag_obsnoise_movielens_seeds.csv``: ``movielens --tag diag_obsnoise_movielens``
- ``diag_lowrank_mnist_seeds.csv``: ``mnist --protocol seed003 --tag diag_lowrank_mnist`` (study ``lowrank_mnist``)
- MNIST at the protocol's 40,000 rounds, the three variances from three tables: 0.1 from ``mnist_seed003_seeds.csv``
  and ``mnist_seed003_more_seeds.csv`` (item 1's own rows, 5 seeds), 1e-2 from ``diag_lowrank_mnist_40k_seeds.csv``
  and 1e-4 from ``diag_obsnoise_mnist_40k_seeds.csv`` (3 seeds each, seeds 0-2, the first three of the 0.1 rows')

Usage::

    python -m benchmarks study obsnoise
"""

from __future__ import annotations

import argparse
import os
import sys

import pandas as pd

from benchmarks.harness import options, tables

# This study only reads other runs' CSVs: it runs no agent and times nothing, so it has no --blas-threads option
# (tests/core/test_threads.py checks that a module marked so calls no runner).
RENDER_ONLY = True
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
#: where the inputs are, searched in order: this study's runs, the lowrank_mnist study's, the suites' tables
FOLDERS = (HERE, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lowrank_mnist", "results"),
           options.RESULTS)
BACKENDS = ("hilofi_ts", "lrkf_ts", "lolofi_ts", "lofi_ts")
# the ``_vb`` variants learn the variance online from the start 0.1 (``posteriors.adaptive_noise``); their column
# takes part in "best" like the fixed ones, and gets its own paired comparison with the default
LEARNED = "learned"
VARIANCES = {"": 0.1, "_r1e-2": 1e-2, "_r1e-4": 1e-4, "_vb": LEARNED}
# (environment, seeds CSV(s), what one observed reward's noise is: the variance of r / reward_scale given the context
# and arm, from the environment's definition).  A tuple of CSVs is read as one: each agent must be in one of them.
MNIST_NOISE = "0 (the label is known given the image)"
SOURCES = (
    ("MNIST (LeNet5)", "diag_lowrank_mnist_seeds.csv", MNIST_NOISE),
    ("MNIST (LeNet5), 40k rounds", ("mnist_seed003_seeds.csv", "mnist_seed003_more_seeds.csv",
                                    "diag_lowrank_mnist_40k_seeds.csv", "diag_obsnoise_mnist_40k_seeds.csv"),
     MNIST_NOISE),
    ("Shuttle", "diag_obsnoise_showdown_shuttle_seeds.csv", "0"),
    ("Adult", "diag_obsnoise_showdown_adult_seeds.csv", "0 given the row (rows that share features may differ)"),
    ("Mushroom", "diag_obsnoise_showdown_mushroom_seeds.csv",
     "0 for skip or an edible one; eating a poisonous one: (40/15)²/4 = 1.78 (+5 or −35, scale 15)"),
    ("MovieLens (rank 20/20)", "diag_obsnoise_movielens_seeds.csv", "0 (the user's rating; scale 5)"),
)
COMMANDS = (
    "python -m benchmarks mnist --protocol seed003 --steps 5000 --seeds 3 --chunk 1000 --tag diag_lowrank_mnist "
    "--agents AGENTS` (run as several commands, each listed in `diag_lowrank_mnist.md`)",
    "python -m benchmarks showdown --steps 5000 --seeds 10 --tag diag_obsnoise_showdown --agents AGENTS",
    "python -m benchmarks movielens --steps 5000 --seeds 5 --tag diag_obsnoise_movielens --agents AGENTS",
    "python -m benchmarks mnist --protocol seed003 --steps 40000 --seeds 3 --chunk 1000 --tag "
    "diag_obsnoise_mnist_40k --agents lrkf_ts_r1e-4,lofi_ts_r1e-4,lolofi_ts_r1e-4` (the 1e-4 rows at 40,000 rounds, "
    "one command per agent, listed in `diag_obsnoise_mnist_40k.md`; their 0.1 and 1e-2 rows are item 1's tables "
    "`mnist_seed003.md`, `mnist_seed003_more.md` and `diag_lowrank_mnist_40k.md`)",
)


def collect(folders) -> pd.DataFrame:
    """One row per (environment, backend, variance) found in ``folders`` (a folder or a list searched in order):
    seeds, steps, mean reward per round ± s.e."""
    folders = [folders] if isinstance(folders, str) else list(folders)
    rows = []
    for env, fnames, _ in SOURCES:
        df = _read(folders, env, (fnames,) if isinstance(fnames, str) else fnames)
        if df is None:
            continue
        for backend in BACKENDS:
            for suffix, r in VARIANCES.items():
                g = df[df["agent"] == backend + suffix]
                if g.empty:
                    continue
                steps = set(g["steps"])
                if len(steps) != 1:
                    raise SystemExit(f"{env}: {backend + suffix} has rows of different lengths {sorted(steps)}")
                rows.append(dict(env=env, backend=backend, obs_noise=r, seeds=len(g), steps=steps.pop(),
                                 mean_reward=float(g["mean_reward"].mean()), se=tables.se(g["mean_reward"]),
                                 nonfinite_seeds=int(g["nonfinite_by"].notna().sum())
                                 if "nonfinite_by" in g else 0,
                                 per_seed=dict(zip(g["seed"].astype(int), g["mean_reward"].astype(float),
                                                   strict=True))))
    return pd.DataFrame(rows)


def find(folders: list[str], fname: str) -> str | None:
    """The path of ``fname`` in the first of ``folders`` that has it, else None."""
    return next((os.path.join(d, fname) for d in folders if os.path.exists(os.path.join(d, fname))), None)


def _read(folders: list[str], env: str, fnames: tuple[str, ...]) -> pd.DataFrame | None:
    """The seed rows of ``fnames`` (each from the first of ``folders`` that has it) as one frame (``None``, said on
    stderr, where one is missing); an agent found in two of them is an error, not a silent pick."""
    paths = {f: find(folders, f) for f in fnames}
    missing = [f for f, path in paths.items() if path is None]
    if missing:
        print(f"skipping {env}: {', '.join(missing)} not found in {', '.join(folders)} (run its command first)",
              file=sys.stderr)
        return None
    frames = [pd.read_csv(path).assign(_file=f) for f, path in paths.items()]
    df = pd.concat(frames, ignore_index=True)
    twice = df.groupby("agent")["_file"].nunique()
    if (twice > 1).any():
        raise SystemExit(f"{env}: agents {sorted(twice[twice > 1].index)} are in more than one of {list(fnames)}")
    return df


def paired_gain(best: dict, default: dict) -> tuple[float, float]:
    """Mean ± s.e. over the seeds both rows ran of ``best[seed] − default[seed]`` (per-seed mean rewards)."""
    seeds = sorted(set(best) & set(default))
    d = [best[k] - default[k] for k in seeds]
    return float(sum(d) / len(d)), tables.se(d)


def render(df: pd.DataFrame) -> list[str]:
    """The Markdown table: one row per (environment, backend), one column per variance, the best mean in bold."""
    head = " | ".join(f"obs_noise {_label(r)}" for r in VARIANCES.values())
    df = df.assign(obs_noise=df["obs_noise"].astype(object))
    lines = [f"| environment | agent | seeds × rounds | {head} | best | best − 0.1, paired | learned − 0.1, paired |",
             "|---|---|---|" + "---|" * len(VARIANCES) + "---|---|---|"]
    for (env, backend), g in df.groupby(["env", "backend"], sort=False):
        g = g.set_index("obs_noise")
        best = g["mean_reward"].idxmax()
        cells = []
        for r in VARIANCES.values():
            if r not in g.index:
                cells.append("–")
                continue
            x = g.loc[r]
            text = f"{x.mean_reward:.4f} ± {x.se:.4f}" + (" (NaN/inf)" if x.nonfinite_seeds else "")
            cells.append(f"**{text}**" if r == best else text)
        if g["steps"].nunique() != 1:
            raise SystemExit(f"{env}: {backend}'s variances ran different rounds {sorted(set(g['steps']))}")
        seeds = [str(int(g.loc[r, "seeds"])) if r in g.index else "–" for r in VARIANCES.values()]
        counts = set(g["seeds"].astype(int))  # one number where every variance ran as many seeds, else one each
        size = f"{counts.pop() if len(counts) == 1 else ' / '.join(seeds)} × {int(g['steps'].iloc[0])}"
        gains = []
        for other in (best, LEARNED):
            gain = "–"
            if other != 0.1 and other in g.index and 0.1 in g.index:
                m, e = paired_gain(g.loc[other, "per_seed"], g.loc[0.1, "per_seed"])
                gain = f"{m:+.4f} ± {e:.4f}"
            gains.append(gain)
        lines.append(f"| {env} | {backend} | {size} | " + " | ".join(cells) + f" | {_label(best)} | "
                     + " | ".join(gains) + " |")
    return lines


def _label(r: float | str) -> str:
    if r == LEARNED:
        return LEARNED
    return "0.1" if r == 0.1 else f"{r:.0e}".replace("e-0", "e-")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=None,
                   help="one folder with all the runs' *_seeds.csv (default: each where it is committed, FOLDERS)")
    p.add_argument("--out", default=None, help="output folder (default: --results, else this study's results/)")
    args = p.parse_args(argv)
    out = args.out or args.results or HERE
    folders = [args.results] if args.results else list(FOLDERS)
    df = collect(folders)
    if df.empty:
        raise SystemExit(f"no input found in {', '.join(folders)}; run the commands in this study's docstring first")
    os.makedirs(out, exist_ok=True)
    df.drop(columns="per_seed").to_csv(os.path.join(out, "diag_obsnoise.csv"), index=False)
    md_path = os.path.join(out, "diag_obsnoise.md")
    notes = tables.hand_notes(md_path)  # hand-written run notes survive a re-render
    lines = ["# Observation variance of the low-rank filters across environments (diagnostic)", "",
             "Mean reward per round (mean ± standard error over seeds; each environment in its own units) of "
             "HiLoFi-TS, LRKF-TS, LoLoFi-TS and LoFi-TS with the Gaussian likelihood's variance `obs_noise` 0.1 "
             "(make_agent's default), 1e-2 and 1e-4 — the opt-in `_r1e-2` / `_r1e-4` variants of "
             "`agents.seed003_agents` — and learned online from the start 0.1 (`learned`: the `_vb` variants, "
             "`make_agent(..., adaptive_noise=True)`, `banditkit.posteriors.adaptive_noise`'s defaults), otherwise "
             "seed 003's MNIST settings (rank 50; q = 1e-6 and prior variance 0.1, "
             "1.0 for LRKF; LoFi q = 0 and prior variance e⁻⁸).  The variances of a row ran the same rounds, and "
             "on the same seeds where `seeds` is one number; where it is one per variance (the 40,000-round MNIST "
             "rows) each mean is over its own seeds and the paired gain over the seeds both ran.  Rendered by "
             "`python -m benchmarks study obsnoise` from the runs' CSVs; the last two columns are the mean over seeds "
             "of the best (of all four) and the learned variance's reward minus the default's on the same seed.", "",
             "**Commands (inputs):**", ""]
    lines += [f"- `{c}" + ("" if c.endswith(")") else "`") for c in COMMANDS]
    lines += ["", "AGENTS = `" + ",".join(b + s for b in BACKENDS for s in VARIANCES) + "`.  Each input's own table "
              "(`diag_lowrank_mnist.md`, `diag_obsnoise_showdown_*.md`, `diag_obsnoise_movielens.md`) names its "
              "machine and commit.", "", *render(df), "", "**Noise of one observed reward** (variance of r / "
              "reward_scale given context and arm):", ""]
    lines += [f"- {env}: {noise}" for env, _, noise in SOURCES] + ([""] + notes if notes else [])
    with open(md_path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {md_path}")
