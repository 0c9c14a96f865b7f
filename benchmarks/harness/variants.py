"""Variants of one agent paired by seed: the runs and the statistics the pre-registered prior studies share.

A study of a default (``hilofi_gap``, ``lofi_prior``, ``lrkf_prior``) runs each *variant* (a name and an
``env -> agent`` factory) on the headline suite's runner and streams (:func:`benchmarks.harness.run.run_agents`,
seeds ``0..n−1``) and keeps one CSV row per (env, variant, seed, rounds) — :data:`KEY_COLS` — so a re-run skips the
rows already there.  Two readings:

``paired(rows, env, variant, base)``  the per-seed difference ``d_s = R_variant,s − R_base,s`` of the cumulative
                                      rewards: ``(mean d, s.e. d, z = mean / s.e., n)``;
``unpaired_z(rows, env, a, b)``       ``(m_a − m_b) / √(se_a² + se_b²)`` over seeds (the headline's z for issue 55's
                                      targets, between agents whose streams are the same but whose runs are not
                                      paired by construction).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from benchmarks.harness import options, provenance, tables
from benchmarks.harness.run import run_agents

KEY_COLS = ["env", "variant", "seed", "steps"]


def run(csv: str, envs: Sequence[str], variants: Sequence[str], seeds: int, steps: int,
        factory: Callable[[str], Callable], settings: Callable[[object], dict],
        make_env: Callable[[str, int], object]) -> pd.DataFrame:
    """Run every (env, variant) for the seeds ``0..seeds−1`` not yet in ``csv`` and append their rows.

    ``factory(variant)`` gives the ``env -> agent`` factory, ``settings(agent)`` the columns that record what the
    agent was built with, ``make_env(name, steps)`` the environment.  Each row: the keys, ``cum_reward``,
    ``late_reward`` (mean reward per round over the last quarter), the settings, ``nonfinite``, ``run_s`` and the
    provenance columns.  Returns all rows of ``csv``.
    """
    rows = pd.read_csv(csv) if os.path.exists(csv) else pd.DataFrame(columns=KEY_COLS)
    done = set(rows[KEY_COLS].itertuples(index=False, name=None))
    for name in envs:
        env = make_env(name, steps)
        for variant in variants:
            todo = [s for s in range(seeds) if (name, variant, s, steps) not in done]
            if not todo:
                continue
            made = settings(factory(variant)(env))
            res = run_agents(env, {variant: factory(variant)}, steps, todo)
            if variant in res.failures:
                print(f"{name} {variant} FAILED: {res.failures[variant]}", file=sys.stderr, flush=True)
                continue
            ps = tables.per_seed(res)
            new = pd.DataFrame(dict(env=name, variant=variant, seed=ps["seed"].astype(int), steps=steps,
                                    cum_reward=ps["cum_reward"], late_reward=ps["late_reward"], **made,
                                    nonfinite=ps["nonfinite_by"].notna(), run_s=ps["run_s"],
                                    **provenance.row_provenance()))
            rows = tables.append_rows(csv, new)
            print(f"{name} {variant} {made}: {new.cum_reward.mean():.1f} ± {tables.se(new.cum_reward):.1f} "
                  f"(per seed {new.cum_reward.tolist()})", flush=True)
    return rows


def paired(rows: pd.DataFrame, env: str, variant: str, base: str,
           value: str = "cum_reward") -> tuple[float, float, float, int]:
    """``(mean, s.e., z, n)`` of the per-seed difference ``variant − base`` of ``value`` on ``env``."""
    g = rows[rows.env == env].pivot_table(index="seed", columns="variant", values=value)
    if variant not in g or base not in g:
        return np.nan, np.nan, np.nan, 0
    d = (g[variant] - g[base]).dropna()
    s = tables.se(d)
    return float(d.mean()), s, float(d.mean() / s) if s > 0 else np.nan, len(d)


def unpaired_z(rows: pd.DataFrame, env: str, a: str, b: str) -> float:
    """``(m_a − m_b) / √(se_a² + se_b²)`` of the cumulative rewards over seeds on ``env`` (NaN below two seeds)."""
    g = rows[rows.env == env]
    x, y = g[g.variant == a].cum_reward, g[g.variant == b].cum_reward
    if len(x) < 2 or len(y) < 2:
        return np.nan
    s = float(np.hypot(tables.se(x), tables.se(y)))
    return float((x.mean() - y.mean()) / s) if s > 0 else np.nan


def verdict(zs: dict[str, float], accept: Sequence[str], outside: Sequence[str], label: str, z: float = 1.0) -> str:
    """A pre-registered acceptance over paired z values ``zs`` (env -> z): accepted iff no set of ``accept`` has
    ``z < −z`` and one has ``z > z``, and no set of ``outside`` has ``z < −z``; "not decided" while a set has none.
    ``label`` names the comparison in the sentence returned."""
    missing = [e for e in (*accept, *outside) if not np.isfinite(zs.get(e, np.nan))]
    if missing:
        return f"{label}: not decided (no paired seeds yet on {missing})"
    worse = [e for e in accept if zs[e] < -z]
    better = [e for e in accept if zs[e] > z]
    worse_out = [e for e in outside if zs[e] < -z]
    ok = not worse and bool(better) and not worse_out
    return (f"{label}: z = " + ", ".join(f"{e} {zs[e]:+.2f}" for e in (*accept, *outside))
            + f"; headline sets worse (z < −{z:g}): {worse or 'none'}, better (z > {z:g}): {better or 'none'}; "
            + f"outside worse: {worse_out or 'none'} → " + ("**ACCEPTED**" if ok else "**REJECTED**"))


def num(x) -> str:
    """A setting for a table cell: ``–`` where the agent has none (e.g. linear-TS's rank), else 3 significant
    digits."""
    x = pd.to_numeric(x, errors="coerce")
    return "–" if pd.isna(x) else f"{x:.3g}"


def table_row(rows: pd.DataFrame, env: str, variant: str, settings: Sequence[str], *, base: str, pair: bool = True,
              reference: str | None = None, extra: Sequence[str] = ()) -> str | None:
    """One markdown row of a paired-variants table, ``None`` when ``variant`` has no rows on ``env``.

    Cells: env, variant, seeds × rounds, the ``settings`` columns (:func:`num`), the cumulative reward's mean ± s.e.
    (``†`` when a seed's state went non-finite), the paired difference against ``base`` and its z (``–`` when
    ``pair`` is false or there are no paired seeds), with a ``reference`` the unpaired z against it, the late reward,
    then ``extra``."""
    g = rows[rows.env == env]
    h = g[g.variant == variant]
    if h.empty:
        return None
    m, s, z, n = paired(rows, env, variant, base) if pair else (np.nan, np.nan, np.nan, 0)
    bad = " †" if h["nonfinite"].astype(bool).any() else ""
    cells = [env, f"`{variant}`", f"{h.seed.nunique()} × {int(h.steps.iloc[0])}",
             *(num(h[c].iloc[0]) for c in settings),
             f"{h.cum_reward.mean():.1f} ± {tables.se(h.cum_reward):.1f}{bad}",
             *([f"{m:+.1f} ± {s:.1f} ({n} seeds)", f"{z:+.2f}"] if n else ["–", "–"])]
    if reference is not None:
        zl = unpaired_z(rows, env, variant, reference) if variant != reference else np.nan
        cells.append(f"{zl:+.2f}" if np.isfinite(zl) else "–")
    cells += [f"{h.late_reward.mean():.3f}", *extra]
    return "| " + " | ".join(cells) + " |"


def table_rows(rows: pd.DataFrame, envs: Sequence[str], variants: Sequence[str], settings: Sequence[str], *,
               base: str, unpaired: Sequence[str] = (), reference: str | None = None,
               extra: Callable[[str, str], Sequence[str]] | None = None) -> list[str]:
    """:func:`table_row` for every (env, variant) with rows, envs outer: each variant paired against ``base`` except
    ``base`` itself and ``unpaired`` (references such as linear-TS); ``extra(env, variant)`` adds trailing cells."""
    out = []
    for env in envs:
        for v in variants:
            row = table_row(rows, env, v, settings, base=base, pair=v not in (base, *unpaired), reference=reference,
                            extra=extra(env, v) if extra else ())
            if row is not None:
                out.append(row)
    return out


def paired_table(rows: pd.DataFrame, envs: Sequence[str], variants: Sequence[str], *, title: str, base: str,
                 settings: Sequence[tuple[str, str]], settings_note: str) -> list[str]:
    """The lines of a rule's table against ``base`` with linear-TS as the reference: the title, what the columns
    mean (``settings_note`` says what the settings are), the runs' provenance, the header and :func:`table_rows`
    (``settings``: ``(column, header)`` pairs; ``linear`` unpaired)."""
    header = " | ".join(h for _, h in settings)
    return [f"# {title}", "",
            f"Cumulative reward over the rounds, mean ± s.e. over seeds; `− {base}`: mean ± s.e. of the per-seed "
            "difference and its z (the headline suite's runner and streams, seeds 0..n−1); `vs linear`: the "
            "headline's unpaired z = (m − m_linear) / √(se² + se_linear²) against make_agent's linear-TS in the same "
            "run.  Shuttle, Adult, Mushroom, MovieLens, Fashion-MNIST: real data; Wheel: synthetic.  Settings: "
            + settings_note, "",
            *provenance.csv_provenance(rows, "seed rows"), "",
            f"| env | variant | seeds × rounds | {header} | cum. reward | − {base} (paired) | z | vs linear (z) | "
            "late reward |", "|" + "---|" * (8 + len(settings)),
            *table_rows(rows, envs, variants, [c for c, _ in settings], base=base, unpaired=["linear"],
                        reference="linear")]


def add_arguments(p: argparse.ArgumentParser, envs: Sequence[str], variants: str, variants_help: str,
                  seeds: int = 5) -> None:
    """The options every paired-variants study takes: ``--envs`` (default Mushroom), ``--variants``, ``--steps``
    (default 5000) and ``--seeds``."""
    p.add_argument("--envs", default="Mushroom", help=f"comma list from {', '.join(envs)}")
    p.add_argument("--variants", default=variants, help=variants_help)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=seeds)


def read_arguments(args: argparse.Namespace, envs: Sequence[str], known: Callable[[str], bool], names: str,
                   base: str | None = None, when: str | None = None) -> None:
    """Check and normalise :func:`add_arguments`' options in place: ``args.envs`` and ``args.variants`` become lists
    (an unknown env, a variant ``known`` refuses — ``names`` lists the valid ones —, ``--steps`` or ``--seeds`` below 1
    exit with a message); ``base``, when given and missing, is put first (the variants are paired against it) —
    only if variant ``when`` is asked for, when that is given; ``args.out`` is created."""
    args.envs = options.names(args.envs, envs, "envs")
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.steps < 1 or args.seeds < 1:
        raise SystemExit(f"--steps and --seeds must be >= 1, got {args.steps}, {args.seeds}")
    for v in args.variants:
        if not known(v):
            raise SystemExit(f"unknown variant {v!r}: use {names}")
    if base is not None and base not in args.variants and (when is None or when in args.variants):
        args.variants = [base, *args.variants]
    os.makedirs(args.out, exist_ok=True)


def write_table(lines: Sequence[str], out: str, tag: str) -> None:
    """``out/TAG.md``: ``lines``, the † footnote of :func:`table_row`, and the run notes the file already had
    (:func:`benchmarks.harness.tables.hand_notes`: a rewrite keeps them)."""
    path = os.path.join(out, f"{tag}.md")
    body = [*lines, "", "A value marked † had a seed whose agent state went non-finite.", "", *tables.hand_notes(path)]
    with open(path, "w") as fh:
        fh.write("\n".join(body).rstrip() + "\n")
