"""LRKF-TS with the unit low-rank prior rule (issue 55): make_agent's former constant against the rule, paired by seed.

LRKF's prior ``Σ_0 = σ² QᵀQ`` (``C_0 = σ Q``, ``Q (d, P)`` random orthonormal rows, ``d = 10``) moves an output
``f_k(x)`` by a prior variance ``σ² ‖Q h_k(x)‖²``, ``h_k(x) = ∂f_k(x) / ∂θ (P,)`` at the initial weights.  The rule
``lrkf_unit`` (pre-registered in the README; :func:`banditkit.agents.priors.unit_lowrank_prior`, a measured
candidate: rejected by the 20-seed confirmation, so make_agent keeps the constant) sets::

    σ² = init_cov = 1 / E_{x,k}[‖Q h_k(x)‖²]      (x over the env's first 256 contexts, k over the K outputs)

so a prior draw moves an output by about the largest expected reward (observed units ``r / s``,
``s = max |E r|``).

Variants, each a ``make_agent`` call on the headline suite's runner and seeds (``run_agents``, seeds 0..n−1):

``const``:     ``make_agent("lrkf-thompson", env, posterior_kwargs=dict(init_cov=0.1))`` — make_agent's constant
               (:data:`CONST`, its default);
``lrkf_unit``: ``make_agent("lrkf-thompson", env, posterior_kwargs=dict(init_cov=σ²))`` with ``σ²`` the rule's
               value for that env (``unit_lowrank_prior(env, make_agent_as_before("lrkf-thompson", env))``);
``linear``:  ``make_agent("linear-thompson", env)``, the issue's reference.

``lrkf_unit`` is paired by seed against ``const``: per-seed difference ``d_s = R_unit,s − R_const,s`` of the
cumulative rewards and ``z = mean(d) / (sd(d) / √n)``; the pre-registered acceptance (:func:`verdict`) reads those z.
Against ``linear`` the headline's unpaired ``z = (m − m_linear) / √(se² + se_linear²)`` is shown for information.

Writes ``TAG.csv`` / ``TAG.md`` in this study's ``results/``; each process appends, skipping rows already there.

Usage::

    python -m benchmarks study lrkf_prior --envs Shuttle,Adult,Mushroom,MovieLens,Wheel \
        --variants const,lrkf_unit,linear
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

from banditkit.agents import priors
from benchmarks.harness import options
from benchmarks.harness import variants as paired_runs
from benchmarks.harness.oracle_units import make_agent_as_before
from benchmarks.studies import hilofi_gap

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs
SPEC = "lrkf-thompson"
#: make_agent's LRKF prior variance (``DEFAULT_HYPER["lrkf"]["init_cov"]``)
CONST = 0.1
#: the headline's data sets and an environment outside every suite (Wheel, synthetic); Fashion-MNIST for information
ENVS = ("Shuttle", "Adult", "Mushroom", "MovieLens", "Wheel", "FashionMNIST")
#: the sets the pre-registered acceptance reads: the paired z on each of ``ACCEPT``, and ``OUTSIDE`` not worse
ACCEPT = ("Shuttle", "Adult", "Mushroom", "MovieLens")
OUTSIDE = ("Wheel",)
VARIANTS = ("const", "lrkf_unit", "linear")
RULE = "lrkf_unit"
BASE = "const"
KEY_COLS = paired_runs.KEY_COLS
#: the pre-registered acceptance (README): no set with z below ``-Z``, at least one above ``+Z``
Z = 1.0


def agent_factory(variant: str):
    """``env -> agent`` of a variant (module docstring)."""
    if variant == "const":
        return lambda env: make_agent_as_before(SPEC, env, posterior_kwargs=dict(init_cov=CONST))
    if variant == RULE:
        return lambda env: make_agent_as_before(SPEC, env, posterior_kwargs=dict(init_cov=rule_value(env)))
    if variant == "linear":
        return lambda env: make_agent_as_before("linear-thompson", env)
    raise ValueError(f"unknown variant {variant!r}: use {', '.join(VARIANTS)}")


def rule_value(env) -> float:
    """The rule's ``init_cov`` on ``env``: :func:`~banditkit.agents.priors.unit_lowrank_prior` of make_agent's
    LRKF-TS (its default model, weights and prior rows at ``PRNGKey(0)``); raises where the env has no contexts."""
    value = priors.unit_lowrank_prior(env, make_agent_as_before(SPEC, env))
    if value is None:
        raise ValueError(f"{env}: the unit low-rank rule needs the env's functional form")
    return value


def _settings(agent) -> dict:
    """The LRKF prior variance ``init_cov``, rank and observation variance an agent was built with (NaN where
    none: linear-TS has no ``init_cov`` or rank)."""
    hyper = agent.posterior.hyper
    return dict(init_cov=float(hyper.get("init_cov", np.nan)), rank=hyper.get("rank", np.nan),
                obs_noise=float(getattr(agent.likelihood, "obs_noise", np.nan)), reward_scale=agent.reward_scale)


def run_variants(args, csv: str) -> pd.DataFrame:
    return paired_runs.run(csv, args.envs, args.variants, args.seeds, args.steps, agent_factory, _settings,
                        hilofi_gap.make_env)


def paired(rows: pd.DataFrame, env: str, variant: str = RULE, base: str = BASE
           ) -> tuple[float, float, float, int]:
    """``(mean, s.e., z, n)`` of the per-seed difference ``variant − base`` of the cumulative rewards on ``env``."""
    return paired_runs.paired(rows, env, variant, base)


unpaired_z = paired_runs.unpaired_z  # the headline's unpaired z (benchmarks.harness.variants)


def verdict(rows: pd.DataFrame, variant: str = RULE, accept=ACCEPT, outside=OUTSIDE) -> str:
    """The pre-registered acceptance (README) of ``variant − const``: on ``accept`` no paired z below ``−Z`` and one
    above ``+Z``; on ``outside`` no paired z below ``−Z``.  "not decided" while a set has no paired seeds."""
    zs = {e: paired(rows, e, variant)[2] for e in (*accept, *outside)}
    return paired_runs.verdict(zs, accept, outside, f"`{variant}` − `{BASE}`", Z)


def render(rows: pd.DataFrame, out: str, tag: str) -> None:
    """``TAG.md``: per env and variant the settings, cumulative reward, the paired difference against ``const``,
    the unpaired z against ``linear``, the late reward; the pre-registered verdict."""
    envs = [e for e in ENVS if e in set(rows.env)]
    variants = list(dict.fromkeys([*VARIANTS, *rows.variant]))
    lines = paired_runs.paired_table(
        rows, envs, variants, base=BASE, settings=[("init_cov", "init_cov"), ("rank", "rank"), ("obs_noise", "R")],
        title="LRKF-TS: make_agent's constant prior (`const`, init_cov 0.1) against the unit low-rank rule "
              "(`lrkf_unit`), paired by seed",
        settings_note="LRKF's prior variance init_cov (for `lrkf_unit` the value the rule chose on that env; for "
                      "`linear` linear-TS's own prior variance), the rank and the observation variance R (observed "
                      "units r / s) the agent was built with.")
    if RULE in variants and BASE in variants:
        lines += ["", "**Pre-registered acceptance of the rule** (README: `lrkf_unit` − `const` on Shuttle, Adult, "
                  "Mushroom, MovieLens no z < −1 and one z > 1; Wheel z ≥ −1): " + verdict(rows)]
    paired_runs.write_table(lines, out, tag)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks study lrkf_prior", description=__doc__.split("\n")[0])
    paired_runs.add_arguments(p, ENVS, "const,lrkf_unit,linear", "comma list: const (init_cov 0.1, make_agent's "
                              "constant), lrkf_unit (the unit low-rank rule's init_cov), linear (make_agent's "
                              "linear-TS, a reference)")
    options.add_csv_study_options(p, "lrkf_prior", out=HERE)
    args = p.parse_args(argv)
    csv = options.start_csv_study(args, render)
    if csv is None:
        return
    # the rule is paired against the constant
    paired_runs.read_arguments(args, ENVS, VARIANTS.__contains__, ", ".join(VARIANTS),
                               base=BASE, when=RULE)
    if RULE in args.variants:
        for name in args.envs:
            env = hilofi_gap.make_env(name, 8)
            print(f"rule on {name}: init_cov {rule_value(env):.4g} "
                  f"(const {CONST:g})", flush=True)
    rows = run_variants(args, csv)
    render(rows, args.out, args.tag)
    print(f"wrote {csv} and {args.tag}.md")
