"""LoFi-TS with its observation variance capped at 10⁻³ (issue 55): make_agent's rule against the cap, paired by seed.

The rule ``lofi_cap`` (pre-registered in the README) sets LoFi's Gaussian observation variance to::

    R = min(R_rule, R_CAP),      R_rule = scales.default_obs_noise(env),  R_CAP = 10⁻³

in observed units ``y = r / s`` (``s = max |E r|``) — a tempering of LoFi's predictive spread, which its diagonal keeps
wide where the data have made a dense direction certain (README), not an estimate of the reward's noise.

Variants, each a ``make_agent`` call on the headline suite's runner and seeds (``run_agents``, seeds 0..n−1):

``rule``:      ``make_agent("lofi-thompson", env, obs_noise=R_rule)`` — make_agent's LoFi-TS before this study;
``lofi_cap``:  ``make_agent("lofi-thompson", env, obs_noise=min(R_rule, R_CAP))``;
``linear``:    ``make_agent("linear-thompson", env)``, the issue's reference.

``lofi_cap`` is paired by seed against ``rule`` (per-seed difference of the cumulative rewards and its z); the
pre-registered acceptance (:func:`verdict`): no environment with ``z < −1`` and at least :data:`MIN_BETTER` of the
headline sets with ``z > +1``.  Writes ``TAG.csv`` / ``TAG.md`` in this study's ``results/``; a re-run appends,
skipping rows already there.

Usage::

    python -m benchmarks study lofi_noise --envs Shuttle,Adult,Mushroom,MovieLens,Wheel --seeds 20
    python -m benchmarks study lofi_noise --envs FashionMNIST --steps 2000 --seeds 20   # the same CSV, 2000 rounds
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

from benchmarks.harness import options
from benchmarks.harness import oracle_units as scales
from benchmarks.harness import variants as paired_runs
from benchmarks.harness.oracle_units import make_agent_as_before
from benchmarks.studies import hilofi_gap

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs
SPEC = "lofi-thompson"
#: the cap on LoFi's observation variance the rule pre-registered (observed units)
R_CAP = 1e-3
#: the four headline sets, an environment outside every suite (Wheel, synthetic) and Fashion-MNIST (real, LeNet-5)
ENVS = ("Shuttle", "Adult", "Mushroom", "MovieLens", "Wheel", "FashionMNIST")
#: the sets where the acceptance asks for gains (z > Z on at least MIN_BETTER of them)
HEADLINE = ("Shuttle", "Adult", "Mushroom", "MovieLens")
MIN_BETTER = 2
VARIANTS = ("rule", "lofi_cap", "linear")
RULE = "lofi_cap"
BASE = "rule"
#: the pre-registered acceptance (README): no environment with z below ``-Z``, MIN_BETTER headline sets above ``+Z``
Z = 1.0


def capped_noise(env) -> float:
    """``min(R_rule, R_CAP)``: make_agent's observation variance for ``env`` capped at :data:`R_CAP`."""
    return min(scales.default_obs_noise(env), R_CAP)


def agent_factory(variant: str):
    """``env -> agent`` of a variant (module docstring)."""
    if variant == "rule":  # make_agent's rule, passed explicitly: the variant stays what it was if make_agent changes
        return lambda env: make_agent_as_before(SPEC, env, obs_noise=scales.default_obs_noise(env))
    if variant == RULE:
        return lambda env: make_agent_as_before(SPEC, env, obs_noise=capped_noise(env))
    if variant == "linear":
        return lambda env: make_agent_as_before("linear-thompson", env)
    raise ValueError(f"unknown variant {variant!r}: use {', '.join(VARIANTS)}")


def _settings(agent) -> dict:
    """The observation variance, LoFi prior variance and rank an agent was built with (NaN where it has none)."""
    hyper = agent.posterior.hyper
    return dict(obs_noise=float(getattr(agent.likelihood, "obs_noise", np.nan)),
                init_cov=float(hyper.get("init_cov", np.nan)), rank=hyper.get("rank", np.nan),
                reward_scale=agent.reward_scale)


def paired(rows: pd.DataFrame, env: str, variant: str = RULE, base: str = BASE
           ) -> tuple[float, float, float, int]:
    """``(mean, s.e., z, n)`` of the per-seed difference ``variant − base`` of the cumulative rewards on ``env``."""
    return paired_runs.paired(rows, env, variant, base)


def verdict(rows: pd.DataFrame, envs=ENVS, headline=HEADLINE, min_better: int = MIN_BETTER) -> str:
    """The pre-registered acceptance of ``lofi_cap − rule``: no environment of ``envs`` with paired ``z < −Z`` and
    at least ``min_better`` of ``headline`` with ``z > +Z``; "not decided" while an environment has no paired seeds."""
    zs = {e: paired(rows, e)[2] for e in envs}
    missing = [e for e in envs if not np.isfinite(zs[e])]
    if missing:
        return f"`{RULE}` − `{BASE}`: not decided (no paired seeds yet on {missing})"
    worse = [e for e in envs if zs[e] < -Z]
    better = [e for e in headline if zs[e] > Z]
    ok = not worse and len(better) >= min_better
    return (f"`{RULE}` − `{BASE}`: z = " + ", ".join(f"{e} {zs[e]:+.2f}" for e in envs)
            + f"; worse (z < −{Z:g}): {worse or 'none'}; headline sets better (z > {Z:g}): {better or 'none'} "
            + f"({len(better)}, {min_better} needed) → " + ("**ACCEPTED**" if ok else "**REJECTED**"))


def render(rows: pd.DataFrame, out: str, tag: str) -> None:
    """``TAG.md``: per env and variant the settings, cumulative reward, the paired difference against ``rule``, the
    unpaired z against ``linear``, the late reward; the pre-registered verdict."""
    envs = [e for e in ENVS if e in set(rows.env)]
    variants = list(dict.fromkeys([*VARIANTS, *rows.variant]))
    lines = paired_runs.paired_table(
        rows, envs, variants, base=BASE, settings=[("obs_noise", "R"), ("init_cov", "init_cov"), ("rank", "rank")],
        title="LoFi-TS: make_agent's observation variance (`rule`) against the same capped at 10⁻³ (`lofi_cap`), "
              "paired by seed",
        settings_note="the observation variance R (observed units r / s), LoFi's prior variance init_cov and rank "
                      "(– for linear-TS, whose R is its learned noise's starting value).")
    if RULE in variants and BASE in variants:
        lines += ["", "**Pre-registered acceptance** (README: no environment with z < −1, at least two of Shuttle, "
                  "Adult, Mushroom, MovieLens with z > 1): " + verdict(rows)]
    paired_runs.write_table(lines, out, tag)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks study lofi_noise", description=__doc__.split("\n")[0])
    paired_runs.add_arguments(p, ENVS, "rule,lofi_cap,linear", "comma list: rule (make_agent's LoFi-TS), lofi_cap (R "
                              "capped at 1e-3), linear (make_agent's linear-TS, a reference)", seeds=20)
    options.add_csv_study_options(p, "lofi_noise", out=HERE)
    args = p.parse_args(argv)
    csv = options.start_csv_study(args, render)
    if csv is None:
        return
    # the rule is paired against make_agent's default
    paired_runs.read_arguments(args, ENVS, VARIANTS.__contains__, ", ".join(VARIANTS),
                               base=BASE, when=RULE)
    for name in args.envs:
        env = hilofi_gap.make_env(name, 8)
        print(f"{name}: R_rule {scales.default_obs_noise(env):.4g}, lofi_cap {capped_noise(env):.4g}", flush=True)
    rows = paired_runs.run(csv, args.envs, args.variants, args.seeds, args.steps, agent_factory, _settings,
                           hilofi_gap.make_env)
    render(rows, args.out, args.tag)
    print(f"wrote {csv} and {args.tag}.md")
