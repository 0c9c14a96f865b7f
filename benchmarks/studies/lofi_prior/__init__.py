"""LoFi-TS with HiLoFi's per-layer prior rule (issue 55): a pre-registered paired test, and a per-round trace.

``make_agent("lofi-thompson", env)`` starts every weight from one prior variance, ``init_cov = 0.01``.  The rule
``lofi_unit`` (pre-registered in the README) gives the head (parameters whose path contains ``"head"``, the split
HiLoFi uses) HiLoFi's unit-head variance and keeps 0.01 elsewhere, through LoFi's per-layer prior
``Υ₀ = diag(1 / init_cov)`` (``init_cov`` a pytree like the parameters)::

    init_cov[leaf] = σ_ℓ² = 1 / E_x[‖φ(x)‖² + 1]   if "head" in the leaf's path       (:func:`unit_tree`)
                   = 0.01                         otherwise

``φ(x) (H,)`` the head's input of make_agent's default model at ``model.init(PRNGKey(0), x0)``, ``x`` over the env's
first 256 contexts (``priors.unit_head_prior``; the ``+ 1`` is the head's bias).  Under the head prior the head moves
an output by ``σ_ℓ² (‖φ‖² + 1)`` in variance: 1 on average, the largest expected reward in observed units
``r / s`` (``s = max |E r|``).

Two parts (``--part``):

``variants``: LoFi-TS with a variant's ``make_agent`` keywords (:func:`variant_kwargs`) on the headline suite's
runner and seeds (``run_agents``, seeds 0..n−1), paired by seed against the default: cumulative reward, per-seed
difference and ``z = mean difference / its s.e.``; ``linear`` is make_agent's linear-TS in the same runner (the
issue's reference, compared unpaired as ``headline.md`` does: ``z = (m₁ − m₂) / √(se₁² + se₂²)``).  The default's
per-seed rewards are checked against ``benchmarks/results/headline_<set>_seeds.csv`` (:func:`headline_check`).

``trace``: ``benchmarks.studies.hilofi_gap``'s per-round replay (the compiled runner's keys and actions) with
LoFi-TS: per window of rounds the rounds on a worse arm by kind (Mushroom: ate a poisonous one / skipped an edible
one), the best arm's Thompson spread, ``rms z`` and the ``gap z`` of the wrong rounds.

Writes ``TAG.csv`` / ``TAG.md`` (variants) and ``TAG_trace.csv`` / ``TAG_trace.md`` (trace) in this study's
``results/``; each process appends, skipping rows already there.

Usage::

    python -m benchmarks study lofi_prior --envs Shuttle,Adult,Mushroom,MovieLens,Wheel --variants default,lofi_unit
    python -m benchmarks study lofi_prior --envs FashionMNIST --variants default,lofi_unit --steps 2000
    python -m benchmarks study lofi_prior --part trace --envs Mushroom --variants default,lofi_unit,linear --seeds 3
"""

from __future__ import annotations

import argparse
import os

import jax
import numpy as np
import pandas as pd

from banditkit.agents import priors
from banditkit.agents.factory import DEFAULT_HYPER, default_model
from benchmarks.harness import options, provenance, tables
from benchmarks.harness import oracle_units as scales
from benchmarks.harness import variants as paired_runs
from benchmarks.harness.oracle_units import make_agent_as_before
from benchmarks.studies import hilofi_gap

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs
SPEC = "lofi-thompson"
#: the headline's data sets and two environments outside every suite (Wheel, synthetic; Fashion-MNIST, real, LeNet-5)
ENVS = ("Shuttle", "Adult", "Mushroom", "MovieLens", "Wheel", "FashionMNIST")
#: the sets the pre-registered acceptance reads: the paired z on each of ``ACCEPT``, and ``OUTSIDE`` not worse
ACCEPT = ("Shuttle", "Adult", "Mushroom", "MovieLens")
OUTSIDE = ("Wheel", "FashionMNIST")
#: the head split (the parameter path's submodule name, as HiLoFi's ``last_layer``)
HEAD = "head"
KEY_COLS = paired_runs.KEY_COLS
#: the pre-registered acceptance (README): no set with z below ``-Z``, at least one above ``+Z``
Z = 1.0
#: the headline suite's per-seed table of each set and its row name for make_agent's LoFi-TS / linear-TS
HEADLINE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "results",
                        "headline_{}_seeds.csv")
HEADLINE_ROWS = dict(default="lofi_ts", linear="linear_ts")


def hidden_variance() -> float:
    """LoFi's current constant prior variance (``DEFAULT_HYPER["lofi"]["init_cov"]``), kept off the head."""
    return float(DEFAULT_HYPER["lofi"]["init_cov"])


def default_params(env):
    """``(model, params)``: make_agent's default LoFi model for ``env`` at ``model.init(PRNGKey(0), x0)``, ``x0`` the
    env's first context (``priors.logged_rounds``).  Raises ``ValueError`` for a per-arm default model (one output:
    no per-arm head to split) or an env without a functional form."""
    u = getattr(env, "unwrapped", env)
    model, per_arm = default_model(u, "lofi")
    if per_arm:
        raise ValueError("lofi_prior's rule reads a multi-output model's head; this env's default model is per-arm")
    x0 = priors.logged_rounds(u, 1)[0][0]
    return model, model.init(jax.random.PRNGKey(0), x0)


def head_tree(params, head_var: float, hidden_var: float):
    """A pytree like ``params`` whose leaves are ``head_var`` where the leaf's path contains :data:`HEAD` and
    ``hidden_var`` elsewhere (scalars: LoFi broadcasts each to its leaf's shape)."""
    tree = jax.tree_util.tree_map_with_path(
        lambda path, leaf: float(head_var) if HEAD in jax.tree_util.keystr(path) else float(hidden_var), params)
    leaves = jax.tree_util.tree_leaves(tree)
    if head_var != hidden_var and (head_var not in leaves or hidden_var not in leaves):
        raise ValueError(f"the split {HEAD!r} must select some but not all of the parameters")
    return tree


def unit_tree(env) -> tuple[dict, float]:
    """``(TREE, σ_ℓ²)``: the rule ``lofi_unit`` (module docstring) for ``env``'s default LoFi model;
    ``σ_ℓ² = priors.unit_head_prior(env, model)``.  Raises ``ValueError`` where that rule has no value (no functional
    form, or no ``return_features``)."""
    model, params = default_params(env)
    value = priors.unit_head_prior(getattr(env, "unwrapped", env), model)
    if value is None:
        raise ValueError("priors.unit_head_prior has no value for this env and model")
    return head_tree(params, value, hidden_variance()), value


def variant_kwargs(name: str, env) -> dict:
    """``make_agent`` keywords of a LoFi-TS variant: ``default`` (none), ``lofi_unit`` (:func:`unit_tree`),
    ``head=V`` (head leaves ``V``, the others at the constant: ``head=0.01`` is the default's prior through the
    per-layer path)."""
    if name == "default":
        return {}
    if name == "lofi_unit":
        return dict(posterior_kwargs=dict(init_cov=unit_tree(env)[0]))
    key, sep, value = name.partition("=")
    if sep and key == "head":
        return dict(posterior_kwargs=dict(init_cov=head_tree(default_params(env)[1], float(value),
                                                             hidden_variance())))
    raise ValueError(f"unknown variant {name!r}: use default, lofi_unit, head=V, linear")


def agent_factory(variant: str):
    """``env -> agent``: LoFi-TS with the variant's keywords, or for ``linear`` make_agent's linear-TS.  Every LoFi
    variant gets the observation variance make_agent gave LoFi when this study ran, ``scales.default_obs_noise(env)``
    (make_agent has since capped LoFi's at 10⁻³: ``benchmarks/studies/lofi_noise``), so a re-run repeats the study."""
    if variant == "linear":
        return lambda env: make_agent_as_before("linear-thompson", env)
    return lambda env: make_agent_as_before(SPEC, env, obs_noise=scales.default_obs_noise(env),
                                            **variant_kwargs(variant, env))


def _settings(agent) -> dict:
    """The head / hidden prior variance, rank and observation variance an agent was built with (NaN where none)."""
    cov = agent.posterior.hyper.get("init_cov", np.nan)
    if isinstance(cov, (int, float)):
        head = hidden = float(cov)
    else:
        flat = jax.tree_util.tree_flatten_with_path(cov)[0]
        head = float(np.mean([v for p, v in flat if HEAD in jax.tree_util.keystr(p)]))
        hidden = float(np.mean([v for p, v in flat if HEAD not in jax.tree_util.keystr(p)]))
    return dict(init_cov_head=head, init_cov_hidden=hidden, rank=agent.posterior.hyper.get("rank", np.nan),
                obs_noise=float(getattr(agent.likelihood, "obs_noise", np.nan)), reward_scale=agent.reward_scale)


# ---------------------------------------------------------------------------------------------------- variants
def run_variants(args, csv: str) -> pd.DataFrame:
    return paired_runs.run(csv, args.envs, args.variants, args.seeds, args.steps, agent_factory, _settings,
                        hilofi_gap.make_env)


def paired(rows: pd.DataFrame, env: str, variant: str, base: str = "default") -> tuple[float, float, float, int]:
    """``(mean, s.e., z, n)`` of the per-seed difference ``variant − base`` on ``env``."""
    return paired_runs.paired(rows, env, variant, base)


unpaired_z = paired_runs.unpaired_z  # the headline's unpaired z (benchmarks.harness.variants)


def verdict(rows: pd.DataFrame, variant: str = "lofi_unit", accept=ACCEPT, outside=OUTSIDE) -> str:
    """The pre-registered acceptance (README): on ``accept`` no paired z below ``−Z`` and one above ``+Z``; on
    ``outside`` no paired z below ``−Z``.  "not decided" while a set has no paired seeds."""
    zs = {e: paired(rows, e, variant)[2] for e in (*accept, *outside)}
    return paired_runs.verdict(zs, accept, outside, f"`{variant}`", Z)


def headline_check(rows: pd.DataFrame, path: str = HEADLINE) -> list[str]:
    """Per set and row of :data:`HEADLINE_ROWS` run here: whether its per-seed cumulative rewards equal the headline
    suite's (``path`` formatted with the set's lower-case name; the headline ran 5000 rounds)."""
    out = []
    for env in [e for e in ACCEPT if e in set(rows.env)]:
        file = path.format(env.lower())
        if not os.path.exists(file):
            continue
        head = pd.read_csv(file)
        for variant, agent in HEADLINE_ROWS.items():
            here = rows[(rows.env == env) & (rows.variant == variant) & (rows.steps == 5000)].set_index("seed")
            there = head[head.agent == agent].set_index("seed").cum_reward
            seeds = sorted(set(here.index) & set(there.index))
            if not seeds:
                continue
            diff = [int(s) for s in seeds if float(here.cum_reward[s]) != float(there[s])]
            out.append(f"{env} `{variant}` against the headline's `{agent}` (seeds {seeds}): "
                       + ("**identical**" if not diff else f"**differs** on seeds {diff} (here "
                          f"{[float(here.cum_reward[s]) for s in diff]}, headline {[float(there[s]) for s in diff]})"))
    return out


def render_variants(rows: pd.DataFrame, out: str, tag: str) -> None:
    envs = [e for e in ENVS if e in set(rows.env)]
    variants = list(dict.fromkeys(["default", "lofi_unit", *rows.variant]))
    lines = ["# LoFi-TS with the unit-head per-layer prior against make_agent's default, paired by seed", "",
             "Cumulative reward over the rounds, mean ± s.e. over seeds; `− default`: mean ± s.e. of the per-seed "
             "difference and its z (the same seeds and streams as `benchmarks/results/headline.md`, its runner); "
             "`vs linear`: the headline's unpaired z = (m − m_linear) / √(se² + se_linear²) against make_agent's "
             "linear-TS in the same run.  Shuttle, Adult, Mushroom, MovieLens, Fashion-MNIST: real data; Wheel: "
             "synthetic.  Settings: the prior variance of the head's and of the other weights, the rank and the "
             "observation variance R (observed units r / s) the agent was built with.", "",
             *provenance.csv_provenance(rows, "seed rows"), "",
             "| env | variant | seeds × rounds | init_cov head | init_cov other | rank | R | cum. reward | "
             "− default (paired) | z | vs linear (z) | late reward |", "|" + "---|" * 12]
    lines += paired_runs.table_rows(rows, envs, variants, ["init_cov_head", "init_cov_hidden", "rank", "obs_noise"],
                                    base="default", reference="linear")
    if "lofi_unit" in variants:
        lines += ["", "**Pre-registered acceptance of `lofi_unit`** (README: Shuttle, Adult, Mushroom, MovieLens no "
                  "z < −1 and one z > 1; Wheel and Fashion-MNIST z ≥ −1): " + verdict(rows)]
    check = headline_check(rows)
    if check:
        lines += ["", "**Reproduction of the headline's per-seed rewards:**", "", *[f"- {c}" for c in check]]
    paired_runs.write_table(lines, out, tag)


# ------------------------------------------------------------------------------------------------------- trace
def run_trace(args, csv: str) -> pd.DataFrame:
    rows = None
    for name in args.envs:
        env = hilofi_gap.make_env(name, args.steps)
        for variant in args.variants:
            agent = agent_factory(variant)(env)
            for seed in range(args.seeds):
                tr = hilofi_gap.trace(agent, env, seed, args.steps, args.draws)
                new = pd.DataFrame([dict(env=name, variant=variant, seed=seed, steps=args.steps,
                                         cum_reward=float(tr["reward"].sum()), **_settings(agent), **row)
                                    for row in hilofi_gap.trace_rows(tr, agent.reward_scale)])
                rows = tables.append_rows(csv, new.assign(**provenance.row_provenance()))
                print(f"trace {name} {variant} seed {seed}: {tr['reward'].sum():.1f}", flush=True)
    return rows if rows is not None else pd.read_csv(csv)


def render_trace(rows: pd.DataFrame, out: str, tag: str) -> None:
    """``hilofi_gap``'s trace table (its columns and definitions), titled for LoFi-TS."""
    hilofi_gap.render_trace(rows, out, tag)
    path = os.path.join(out, f"{tag}.md")
    with open(path) as fh:
        text = fh.read()
    with open(path, "w") as fh:
        fh.write(text.replace("# HiLoFi-TS round by round", "# LoFi-TS round by round", 1))


def render(rows: pd.DataFrame, out: str, tag: str) -> None:
    """``TAG.md`` from the variants' rows, or from a trace's rows (``window`` column)."""
    (render_trace if "window" in rows else render_variants)(rows, out, tag)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks study lofi_prior", description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("variants", "trace"), default="variants",
                   help="variants: paired runs against the default; trace: per-round replay of each seed")
    paired_runs.add_arguments(p, ENVS, "default,lofi_unit", "comma list: default, lofi_unit (the pre-registered rule), "
                              "head=V, linear (make_agent's linear-TS, a reference)")
    p.add_argument("--draws", type=int, default=8, help="trace: Thompson draws per round for the spread")
    options.add_csv_study_options(p, "lofi_prior", writes="TAG.md (TAG_trace.md with --part trace)", out=HERE)
    args = p.parse_args(argv)
    if args.part == "trace" and args.tag == "lofi_prior":
        args.tag = "lofi_prior_trace"
    csv = options.start_csv_study(args, render)
    if csv is None:
        return
    if args.draws < 2:
        raise SystemExit(f"--draws must be >= 2, got {args.draws}")
    # every variant is paired against the default
    known = lambda v: v in ("default", "lofi_unit", "linear") or v.startswith("head=")  # noqa: E731
    paired_runs.read_arguments(args, ENVS, known, "default, lofi_unit, head=V, linear",
                               base="default" if args.part == "variants" else None)
    if "lofi_unit" in args.variants:
        for name in args.envs:
            env = hilofi_gap.make_env(name, 8)
            print(f"lofi_unit on {name}: head prior variance {unit_tree(env)[1]:.4g}, other weights "
                  f"{hidden_variance():g}", flush=True)
    rows = (run_trace if args.part == "trace" else run_variants)(args, csv)
    render(rows, args.out, args.tag)
    print(f"wrote {csv} and {args.tag}.md")
