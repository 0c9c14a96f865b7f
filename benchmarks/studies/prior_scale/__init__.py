"""The neural Kalman agents' prior variances from the model and the data (issue 55): two rules against the constants.

``make_agent`` starts HiLoFi-TS at ``init_cov_hidden = 0.01, init_cov_last = 1.0``, LoFi-TS at ``init_cov = 0.01``
and LRKF-TS at ``init_cov = 0.1`` (``DEFAULT_HYPER``), whatever the network and the data.  This study plays each agent
with ``make_agent(spec, env, posterior_kwargs=...)`` for the prior variances a variant names (``--variants``):

- ``const``: ``DEFAULT_HYPER`` (nothing overridden);
- ``fanin``: the network initialiser's variance ``1 / fan_in`` averaged per block
  (:func:`banditkit.agents.priors.fan_in_variances`: HiLoFi hidden / head, LoFi and LRKF all weights);
- ``eb``: empirical Bayes, the variances maximising the marginal likelihood of 256 rounds logged by a uniform-random
  policy under the network linearised at its initial weights (:func:`banditkit.agents.priors.empirical_bayes_prior`:
  LoFi and LRKF one variance for all weights; HiLoFi one fitted scale on the fan-in profile of its two blocks).

The rules read the model's initial weights at ``PRNGKey(0)`` and the env's ``functional(0, 256)``, once per
environment, the same for every run seed.  Every variant plays the same seeds; the table has the cumulative reward
(mean ± s.e. over seeds), the paired difference of each rule from ``const`` (mean ± s.e. of the per-seed
differences) and its z.  Everything else is make_agent's default.  Writes ``TAG.csv`` and ``TAG.md`` (and
``TAG_priors.csv``: the variances each rule chose, reusable with ``--priors``) in this study's ``results/``, rewritten
after every run so a cut-short grid leaves its finished rows.

Usage::

    python -m benchmarks study prior_scale --envs Shuttle,Adult,Mushroom,MovieLens,Wheel --steps 5000 --seeds 5
    python -m benchmarks study prior_scale --envs FashionMNIST --steps 2000 --seeds 2 --tag prior_scale_fmnist
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import jax
import numpy as np
import pandas as pd

import banditkit as bk
from banditkit.agents import make_agent, priors
from banditkit.agents.factory import DEFAULT_HYPER, default_model
from benchmarks.harness import options, provenance
from benchmarks.harness import oracle_units as scales

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs
SPECS = ("hilofi-thompson", "lofi-thompson", "lrkf-thompson")
VARIANTS = ("const", "fanin", "eb")
#: the share of the last rounds whose mean reward the tables report as ``late`` (lock-in shows there)
LATE_SHARE = 0.2


def rule_values(env) -> dict[str, dict[str, float]]:
    """``{variant: {"hidden", "last", "all", ...}}``: the prior variances each rule gives for ``env``'s default
    model (initial weights at ``PRNGKey(0)``)."""
    u = env.unwrapped
    model, _ = default_model(u)
    fb = u.functional(0, 1)
    params = model.init(jax.random.PRNGKey(0), fb.contexts[fb.index[0]])
    eb = priors.empirical_bayes_prior(u, model, params, scale=scales.reward_scale(u))
    return {"fanin": priors.fan_in_variances(params), "eb": eb}


def _cached(path: str | None, name: str) -> dict[str, dict[str, float]] | None:
    """The rule values of ``name`` from a ``TAG_priors.csv`` an earlier run wrote (``--priors``), else ``None``."""
    if not path or not os.path.exists(path):
        return None
    table = pd.read_csv(path)
    table = table[table["env"] == name]
    if table.empty:
        return None
    return {r["variant"]: {k: float(v) for k, v in r.items() if k not in ("env", "variant") and pd.notna(v)}
            for _, r in table.iterrows()}


def posterior_kwargs(spec: str, variant: str, values: dict[str, dict[str, float]]) -> dict[str, float]:
    """The ``posterior_kwargs`` a variant gives ``spec`` (empty for ``const``)."""
    if variant == "const":
        return {}
    v = values[variant]
    if spec.startswith("hilofi"):
        return dict(init_cov_hidden=v["hidden"], init_cov_last=v["last"])
    return dict(init_cov=v["all"])


def _const(spec: str) -> dict[str, float]:
    hyper = DEFAULT_HYPER[spec.split("-")[0]]
    return {k: v for k, v in hyper.items() if k.startswith("init_cov")}


def run(args, save=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every env × spec × variant on ``args.seeds`` seeds; ``save(rows, chosen)`` after each run (partial tables)."""
    rows, chosen = [], []
    late = max(1, int(round(LATE_SHARE * args.steps)))
    for name in args.envs.split(","):
        env = gym.make(f"banditkit/{name}-v0", max_steps=args.steps)
        tic = time.perf_counter()
        values = _cached(args.priors, name) or rule_values(env)
        for variant, v in values.items():
            chosen.append(dict(env=name, variant=variant, **v))
        print(f"{name}: rules in {time.perf_counter() - tic:.0f}s: {values}", flush=True)
        for spec in [s for s in args.specs.split(",") if s]:
            for variant in args.variants.split(","):
                kw = posterior_kwargs(spec, variant, values)
                tic = time.perf_counter()
                df = bk.run(env, make_agent(spec, env, posterior_kwargs=kw), args.steps, args.seeds, progress=False)
                total = df.groupby("seed")["reward"].sum()
                tail = df[df["step"] >= args.steps - late].groupby("seed")["reward"].mean()
                used = {**_const(spec), **kw}
                for seed, value in total.items():
                    rows.append(dict(env=name, agent=spec, variant=variant, seed=int(seed), steps=args.steps,
                                     cumulative_reward=float(value), late_reward=float(tail[seed]),
                                     prior=";".join(f"{k}={x:.3g}" for k, x in used.items())))
                print(f"{name} {spec} {variant} ({used}): {total.mean():.1f} ± "
                      f"{total.std(ddof=1) / np.sqrt(len(total)):.1f}  {time.perf_counter() - tic:.0f}s", flush=True)
                if save is not None:
                    save(pd.DataFrame(rows), pd.DataFrame(chosen))
        if save is not None:
            save(pd.DataFrame(rows), pd.DataFrame(chosen))
    return pd.DataFrame(rows), pd.DataFrame(chosen)


def _cell(v: pd.Series, z: bool = False) -> str:
    if v.empty:
        return "not run"
    se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
    text = f"{v.mean():.1f} ± {se:.1f}"
    if z:
        text += f" (z = {v.mean() / se:+.1f})" if se > 0 else " (z = –)"
    return text


def render(df: pd.DataFrame, chosen: pd.DataFrame, provenance_lines: list[str]) -> str:
    """The markdown table; ``provenance_lines``: the command and machine lines (each followed by a blank line)."""
    variants = list(dict.fromkeys(df["variant"]))
    others = [v for v in variants if v != "const"]
    head = ["environment", "agent", "seeds × rounds", *variants, *[f"{v} − const, paired" for v in others],
            *[f"late reward {v}" for v in variants]]
    lines = ["# Prior variances of the neural Kalman agents: rules against the constants", "",
             "Cumulative reward, mean ± s.e. over seeds (the same seeds for every variant); paired: mean ± s.e. of "
             "the per-seed difference and its z; late reward: mean reward per round over the last "
             f"{LATE_SHARE:.0%} of the rounds.  `const` = make_agent's DEFAULT_HYPER, `fanin` = the initialiser's "
             "1/fan_in per block, `eb` = empirical Bayes on 256 uniform-random logged rounds under the linearised "
             "network (`banditkit.agents.priors`).  Shuttle, Adult, Mushroom, MovieLens, Fashion-MNIST: real data; "
             "Wheel: synthetic.", "",
             *provenance_lines,
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (env, agent), g in df.groupby(["env", "agent"], sort=False):
        base = g[g["variant"] == "const"].set_index("seed")["cumulative_reward"]
        cells = [env, agent, f"{g['seed'].nunique()} × {int(g['steps'].iloc[0])}"]
        cells += [_cell(g[g["variant"] == v]["cumulative_reward"]) for v in variants]
        for v in others:
            other = g[g["variant"] == v].set_index("seed")["cumulative_reward"]
            cells.append(_cell((other - base).dropna(), z=True) if len(base) else "–")
        late = [g[g["variant"] == v]["late_reward"] for v in variants]
        cells += [f"{x.mean():.3f}" if len(x) else "not run" for x in late]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Prior variances each rule chose (HiLoFi-TS: hidden, last; LoFi-TS and LRKF-TS: all; `eb` also "
              "reports the observation variance it fitted alongside, in observed units, not used by the agents):", ""]
    for _, r in chosen.iterrows():
        extra = (f", fitted R = {r['obs_noise']:.3g} (all) / {r['obs_noise_profile']:.3g} (hidden, last)"
                 if r["variant"] == "eb" else "")
        lines.append(f"- {r['env']} `{r['variant']}`: hidden = {r['hidden']:.3g}, last = {r['last']:.3g}, "
                     f"all = {r['all']:.3g}{extra}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks study prior_scale", description=__doc__.splitlines()[0])
    p.add_argument("--envs", default="Shuttle,Adult,Mushroom,MovieLens,Wheel")
    p.add_argument("--specs", default=",".join(SPECS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--tag", default="prior_scale")
    p.add_argument("--out", default=HERE)
    p.add_argument("--combine", default=None, metavar="TAG,TAG,...",
                   help="run nothing: join the CSVs of these tags (runs split over processes) into TAG.csv / TAG.md")
    p.add_argument("--priors", default=None,
                   help="a TAG_priors.csv of an earlier run: reuse its rule values for the envs it lists")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    unknown = set(args.variants.split(",")) - set(VARIANTS)
    if unknown or "const" not in args.variants.split(","):
        p.error(f"--variants must include const and name only {VARIANTS}, got {args.variants!r}")
    options.apply_blas_threads(args.blas_threads)
    os.makedirs(args.out, exist_ok=True)
    command = "python -m benchmarks study prior_scale " + " ".join(argv if argv is not None else [])

    lines = [f"**Command:** `{command.strip()}`", "", f"**Machine:** {provenance.machine()}", ""]

    def save(df: pd.DataFrame, chosen: pd.DataFrame) -> None:
        chosen.to_csv(os.path.join(args.out, f"{args.tag}_priors.csv"), index=False)
        if df.empty:
            return
        df.to_csv(os.path.join(args.out, f"{args.tag}.csv"), index=False)
        with open(os.path.join(args.out, f"{args.tag}.md"), "w") as f:
            f.write(render(df, chosen, lines))

    if args.combine:
        parts = [os.path.join(args.out, t) for t in args.combine.split(",")]
        df = pd.concat([pd.read_csv(f"{t}.csv") for t in parts], ignore_index=True)
        df = df.drop_duplicates(["env", "agent", "variant", "seed"])  # a cell two processes both ran: keep one
        chosen = pd.concat([pd.read_csv(f"{t}_priors.csv") for t in parts], ignore_index=True)
        chosen = chosen.drop_duplicates(["env", "variant"])
        envs = list(dict.fromkeys(chosen["env"]))
        agents = [a for a in SPECS if a in set(df["agent"])] + sorted(set(df["agent"]) - set(SPECS))
        df = df.assign(_e=df["env"].map(envs.index), _a=df["agent"].map(agents.index))
        df = df.sort_values(["_e", "_a"], kind="stable").drop(columns=["_e", "_a"])
        lines = [f"**Joined by:** `{command.strip()}` from the runs below.", ""]
        for t in parts:
            lines += [line.rstrip("\n") + "\n" for line in _provenance_of(f"{t}.md")]
        save(df, chosen)
    else:
        run(args, save)
    print(f"wrote {args.out}/{args.tag}.md")


def _provenance_of(md: str) -> list[str]:
    """The ``**Command:**`` and ``**Machine:**`` lines of a results ``.md`` of this study, for a joined table."""
    with open(md) as fh:
        return [line for line in fh if line.startswith(("**Command:**", "**Machine:**"))]
