"""Why default HiLoFi-TS trails on Mushroom, Adult and MovieLens (issue 55): a per-round diagnosis and one rule.

``make_agent("hilofi-thompson", env)`` with nothing set trails linear-TS on Mushroom and the peers on Adult and
MovieLens in ``benchmarks/results/headline.md``.  Two parts (``--part``):

``trace``: each seed's run replayed round by round on the headline's streams (``env.unwrapped.functional(seed, T)``,
the compiled runner's keys: init ``split(PRNGKey(seed))[0]``, round ``t`` ``fold_in(split(PRNGKey(seed))[1], t)``, so
the actions are the runner's), recording per round the arm played, the arm with the highest expected reward, the
predictive mean ``μ_k`` of every arm and the spread of its Thompson draws (the s.d. of ``--draws`` draws of the
policy's score, in observed units ``r / s``).  Per window of rounds (``WINDOWS``) it reports the rounds on a worse
arm split by kind (on a two-arm env: "took arm 1 when arm 0 was better", Mushroom's *eat a poisonous one*, and the
reverse, *skip an edible one*), the median draw spread of the best arm and ``rms z``, ``z = (μ_k − E r_k / s) / σ_k``
over arms and rounds (``≈ 1`` for a calibrated posterior).

``variants``: HiLoFi-TS with one setting changed (:func:`variant_kwargs`: ``make_agent`` keyword overrides only) on
the headline suite's runner and seeds (``run_agents``, seeds 0..n−1), paired by seed against the default: cumulative
reward, the per-seed difference and ``z = mean difference / its s.e.``.  The variant ``head_m2`` is the rule this
study pre-registered (README): the head's prior variance from the observed reward's second moment,

    σ_ℓ² = max(E[y²] − R, R) / E[‖φ(x)‖² + 1]                                         (:func:`head_prior`)

``y = r / s`` over 256 rounds a uniform-random policy logs (``priors.logged_rounds``), ``R`` make_agent's observation
variance (``scales.units``), ``φ(x) (H,)`` the head's input (the last hidden layer at the initial weights
``model.init(PRNGKey(0))``; ``+ 1``: the bias).  Under ``w ~ N(w₀, σ_ℓ² I)`` the head moves an output by
``σ_ℓ² (‖φ‖² + 1)`` in variance: the rule sets that to the share of ``E[y²]`` the likelihood's ``R`` does not hold.
``head_unit`` (the second pre-registered rule) sets it to 1, the largest expected reward in observed units
(``s = max |E r|``): ``σ_ℓ² = 1 / E[‖φ(x)‖² + 1]``.  ``head_range`` (a screen, not pre-registered) centres the
head on the range of the expected reward: the head's bias starts at the midpoint ``(max + min) / 2`` of ``E y`` over
``functional(0, 256)`` and ``σ_ℓ² = ((max − min) / 2)² / E[‖φ(x)‖² + 1]`` (:func:`reward_range`).

Writes ``TAG.csv`` / ``TAG.md`` (variants; each process appends, skipping rows already there) and
``TAG_trace.csv`` / ``TAG_trace.md`` (trace) in this study's ``results/``.

Usage::

    python -m benchmarks study hilofi_gap --part trace --envs Mushroom --variants default,last=0.1 --seeds 5
    python -m benchmarks study hilofi_gap --envs Mushroom --variants default,last=0.1,last=0.3,R=0.45
    python -m benchmarks study hilofi_gap --envs Shuttle,Adult,Mushroom,MovieLens --variants default,head_m2
    python -m benchmarks study hilofi_gap --render
"""

from __future__ import annotations

import argparse
import os

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from banditkit.agents import priors
from banditkit.agents.factory import default_model
from benchmarks.harness import options, provenance, tables
from benchmarks.harness import oracle_units as scales
from benchmarks.harness import variants as paired_runs
from benchmarks.harness.oracle_units import make_agent_as_before

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs
SPEC = "hilofi-thompson"
#: the headline's data sets, two environments outside every suite (Wheel, synthetic; Fashion-MNIST, real, LeNet-5) and
#: the MNIST bandit (LeNet-5, images drawn with replacement as in the mnist suite)
ENVS = ("Shuttle", "Adult", "Mushroom", "MovieLens", "Wheel", "FashionMNIST", "MNIST")
#: the trace's windows of rounds ``[lo, hi)`` (``None``: to the end)
WINDOWS = ((0, 500), (500, 2000), (2000, None))
#: rounds of the uniform-random log :func:`head_prior` reads (the same read as ``scales.ROUNDS``)
ROUNDS = 256
KEY_COLS = paired_runs.KEY_COLS
#: the pre-registered acceptance (README): no set with z below ``-Z``, at least one above ``+Z``
Z = 1.0


def make_env(name: str, steps: int):
    """``banditkit/NAME-v0`` (the headline suite's environments, MovieLens at its defaults; MNIST with replacement)."""
    if name not in ENVS:
        raise SystemExit(f"unknown env {name!r}; choose from {ENVS}")
    extra = dict(replace=True) if name == "MNIST" else {}
    return gym.make(f"banditkit/{name}-v0", max_steps=steps, **extra)


def head_features(model, params, contexts) -> np.ndarray:
    """``φ(x) (n, H)``: the head's input (``model.apply(..., return_features=True)``) for each context."""
    return np.asarray(jax.vmap(lambda x: model.apply(params, x, return_features=True))(jnp.asarray(contexts)),
                      np.float64).reshape(len(contexts), -1)


def head_prior(env, rounds: int = ROUNDS, seed: int = 0) -> dict[str, float]:
    """The rules ``head_m2`` and ``head_unit`` (module docstring) for ``env``'s default HiLoFi model:
    ``{"init_cov_last": σ_ℓ² of head_m2, "unit": 1 / E[‖φ‖² + 1] (head_unit), "m2": E[y²], "obs_noise": R,
    "phi2": E[‖φ‖² + 1]}``, all in observed units ``r / s``."""
    u = getattr(env, "unwrapped", env)
    scale, obs_noise = scales.units(u)
    contexts, _, targets = priors.logged_rounds(u, rounds, seed, scale)
    model, per_arm = default_model(u, "hilofi")
    if per_arm:
        raise ValueError("head_prior reads a multi-output model's head input; this env's default model is per-arm")
    params = model.init(jax.random.PRNGKey(0), contexts[0])
    phi2 = float(np.mean(np.sum(head_features(model, params, contexts) ** 2, axis=1)) + 1.0)
    m2 = float(np.mean(np.asarray(targets, np.float64) ** 2))
    return dict(init_cov_last=max(m2 - obs_noise, obs_noise) / phi2, m2=m2, obs_noise=obs_noise, phi2=phi2,
                unit=1.0 / phi2)


class ShiftedHead:
    """``model`` whose ``head`` bias starts ``bias`` higher (``init``); ``apply`` is the model's."""

    def __init__(self, model, bias: float):
        self.model, self.bias = model, float(bias)

    def init(self, key, x):
        params = self.model.init(key, x)
        params["params"]["head"]["bias"] = params["params"]["head"]["bias"] + self.bias
        return params

    def apply(self, params, x, **kwargs):
        return self.model.apply(params, x, **kwargs)


def reward_range(env, rounds: int = ROUNDS) -> tuple[float, float]:
    """``(min, max)`` of the expected reward in observed units ``E r / s`` over ``functional(0, rounds)``."""
    u = getattr(env, "unwrapped", env)
    expected = np.asarray(u.functional(0, rounds).expected, np.float64) / scales.reward_scale(u)
    return float(expected.min()), float(expected.max())


def variant_kwargs(name: str, env) -> dict:
    """``make_agent`` keywords of a variant: ``default`` (none), ``head_m2`` / ``head_unit`` (:func:`head_prior`'s
    ``init_cov_last`` / ``unit``), ``last=V`` /
    ``hidden=V`` (``init_cov_last`` / ``init_cov_hidden``), ``rank=N``, ``R=V`` (``obs_noise``), ``spread=C`` (``R``
    and both prior variances times ``C``: on a Kalman filter with ``q = 0`` the same means, draws ``√C`` as wide),
    ``warmup=N`` (``N`` round-robin rounds before Thompson sampling, the filter updating throughout),
    ``adaptive`` (the learned observation variance)."""
    if name == "default":
        return {}
    if name == "head_m2":
        return dict(posterior_kwargs=dict(init_cov_last=head_prior(env)["init_cov_last"]))
    if name == "head_unit":
        return dict(posterior_kwargs=dict(init_cov_last=head_prior(env)["unit"]))
    if name == "head_range":
        u = getattr(env, "unwrapped", env)
        lo, hi = reward_range(u)
        model = default_model(u, "hilofi")[0]
        # a model given to make_agent keeps one dense head block and no affine-head detection: both set as make_agent
        # sets them for its own default model
        return dict(model=ShiftedHead(model, (hi + lo) / 2), affine_head=True,
                    posterior_kwargs=dict(init_cov_last=((hi - lo) / 2) ** 2 * priors.unit_head_prior(u, model),
                                          arms=int(u.num_actions)))
    if name == "adaptive":
        return dict(adaptive_noise=True)
    key, sep, value = name.partition("=")
    if not sep:
        raise ValueError(f"unknown variant {name!r}: use default, head_m2, adaptive, last=V, hidden=V, rank=N, R=V, "
                         "spread=C, warmup=N")
    if key == "last":
        return dict(posterior_kwargs=dict(init_cov_last=float(value)))
    if key == "hidden":
        return dict(posterior_kwargs=dict(init_cov_hidden=float(value)))
    if key == "rank":
        return dict(posterior_kwargs=dict(rank=int(value)))
    if key == "R":
        return dict(obs_noise=float(value))
    if key == "warmup":
        return dict(warmup_steps=int(value))
    if key == "spread":
        c = float(value)
        base = make_agent_as_before(SPEC, env)
        hyper = base.posterior.hyper
        return dict(obs_noise=c * float(base.likelihood.obs_noise),
                    posterior_kwargs=dict(init_cov_hidden=c * hyper["init_cov_hidden"],
                                          init_cov_last=c * hyper["init_cov_last"]))
    raise ValueError(f"unknown variant {name!r}: use default, head_m2, adaptive, last=V, hidden=V, rank=N, R=V, "
                     "spread=C, warmup=N")


def agent_factory(variant: str):
    """``env -> agent``: HiLoFi-TS with the variant's keywords, or for ``linear`` make_agent's linear-TS (the
    reference the trace compares with)."""
    if variant == "linear":
        return lambda env: make_agent_as_before("linear-thompson", env)
    return lambda env: make_agent_as_before(SPEC, env, **variant_kwargs(variant, env))


def _settings(agent) -> dict:
    hyper = agent.posterior.hyper
    return dict(init_cov_last=hyper.get("init_cov_last"), init_cov_hidden=hyper.get("init_cov_hidden"),
                rank=hyper.get("rank"), obs_noise=float(getattr(agent.likelihood, "obs_noise", np.nan)),
                reward_scale=agent.reward_scale)


# ------------------------------------------------------------------------------------------------------- trace
def trace(agent, env, seed: int, steps: int, draws: int = 8) -> dict[str, np.ndarray]:
    """One seed replayed with the compiled runner's keys: ``{"action" (T,), "reward" (T,), "expected" (T, K),
    "mean" (T, K), "spread" (T, K)}`` (``mean``: the predictive mean before the round's update; ``spread``: the s.d.
    of ``draws`` Thompson scores, observed units)."""
    u = getattr(env, "unwrapped", env)
    fb = u.functional(seed, steps)
    contexts, index = jnp.asarray(np.asarray(fb.contexts)), jnp.asarray(np.asarray(fb.index))
    rewards = jnp.asarray(np.asarray(fb.rewards), jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(seed))
    state = agent.init(keys[0], contexts[index[0]])
    post = agent.posterior

    def step(st, t):
        key_t = jax.random.fold_in(keys[1], t)
        ctx = contexts[index[t]]
        a = agent.choose(key_t, st, ctx)
        reward_fn, moments_fn = agent.candidates(post, ctx)
        mean, _ = moments_fn(st.posterior)
        score = jax.vmap(lambda k: agent.policy.score(k, post, st.posterior, reward_fn, moments_fn))(
            jax.random.split(jax.random.fold_in(key_t, 1), draws))
        r = rewards[t, a]
        return agent.update(st, ctx, a, r), (a, r, mean, score.std(0))

    _, (a, r, mean, spread) = jax.jit(lambda s: jax.lax.scan(step, s, jnp.arange(steps)))(state)
    return dict(action=np.asarray(a), reward=np.asarray(r), expected=np.asarray(fb.expected, np.float64),
                mean=np.asarray(mean, np.float64), spread=np.asarray(spread, np.float64))


def trace_rows(tr: dict[str, np.ndarray], scale: float) -> list[dict]:
    """Per window (``WINDOWS``): rounds, reward, rounds on a worse arm (two arms: split by which arm was played),
    regret, the best arm's median draw spread and predictive error, ``rms z`` over arms (module docstring), and
    ``gap_z_worse``: over the rounds on a worse arm, the median of ``(μ_best − μ_played) / √(σ_best² + σ_played²)``
    (σ: the draw spreads) — near 0 a coin flip of the draws, well below 0 a confident wrong belief that the draws
    rarely overturn."""
    a, exp, mean, spread = tr["action"], tr["expected"], tr["mean"], tr["spread"]
    steps = len(a)
    best = np.argmax(exp, axis=1)
    rows_t = np.arange(steps)
    worse = exp[rows_t, a] < exp[rows_t, best]
    out = []
    for lo, hi in WINDOWS:
        hi = steps if hi is None else min(hi, steps)
        if lo >= hi:
            continue
        w = slice(lo, hi)
        z = (mean[w] - exp[w] / scale) / np.maximum(spread[w], 1e-12)
        idx = rows_t[w][worse[w]]  # this window's rounds on a worse arm
        gap = (mean[idx, best[idx]] - mean[idx, a[idx]]) / np.hypot(spread[idx, best[idx]], spread[idx, a[idx]])
        row = dict(window=f"{lo}-{hi}", rounds=hi - lo, reward=float(tr["reward"][w].sum()),
                   worse_arm=int(worse[w].sum()), regret=float((exp[w].max(1) - exp[rows_t[w], a[w]]).sum()),
                   spread_best=float(np.median(spread[w][np.arange(hi - lo), best[w]])),
                   abs_err_best=float(np.median(np.abs(mean[w][np.arange(hi - lo), best[w]]
                                                       - exp[w][np.arange(hi - lo), best[w]] / scale))),
                   rms_z=float(np.sqrt(np.mean(z ** 2))),
                   gap_z_worse=float(np.median(gap)) if len(idx) else np.nan)
        if exp.shape[1] == 2:
            row["played_1_best_0"] = int((worse & (a == 1))[w].sum())  # Mushroom: ate a poisonous one
            row["played_0_best_1"] = int((worse & (a == 0))[w].sum())  # Mushroom: skipped an edible one
        out.append(row)
    return out


def run_trace(args, csv: str) -> pd.DataFrame:
    for name in args.envs:
        env = make_env(name, args.steps)
        for variant in args.variants:
            agent = agent_factory(variant)(env)
            for seed in range(args.seeds):
                tr = trace(agent, env, seed, args.steps, args.draws)
                new = pd.DataFrame([dict(env=name, variant=variant, seed=seed, steps=args.steps,
                                         cum_reward=float(tr["reward"].sum()), **_settings(agent), **row)
                                    for row in trace_rows(tr, agent.reward_scale)])
                rows = tables.append_rows(csv, new.assign(**provenance.row_provenance()))
                print(f"trace {name} {variant} seed {seed}: {tr['reward'].sum():.1f}", flush=True)
    return rows


# ---------------------------------------------------------------------------------------------------- variants
def run_variants(args, csv: str) -> pd.DataFrame:
    return paired_runs.run(csv, args.envs, args.variants, args.seeds, args.steps, agent_factory, _settings, make_env)


def paired(rows: pd.DataFrame, env: str, variant: str) -> tuple[float, float, float, int]:
    """``(mean, s.e., z, n)`` of the per-seed difference ``variant − default`` on ``env``."""
    return paired_runs.paired(rows, env, variant, "default")


def verdict(rows: pd.DataFrame, variant: str, envs) -> str:
    """The pre-registered acceptance for ``variant`` over ``envs`` (each with its paired z against ``default``)."""
    zs = {e: paired(rows, e, variant)[2] for e in envs}
    if any(not np.isfinite(z) for z in zs.values()):
        missing = [e for e, z in zs.items() if not np.isfinite(z)]
        return f"`{variant}`: not decided (a set without paired seeds: {missing})"
    worse = [e for e, z in zs.items() if z < -Z]
    better = [e for e, z in zs.items() if z > Z]
    ok = not worse and bool(better)
    return (f"`{variant}` on {', '.join(zs)}: z = " + ", ".join(f"{e} {z:+.2f}" for e, z in zs.items())
            + f"; worse (z < −{Z:g}): {worse or 'none'}; better (z > {Z:g}): {better or 'none'} → "
            + ("**ACCEPTED**" if ok else "**REJECTED**"))


def _late(rows: pd.DataFrame, env: str, variant: str) -> str:
    """The per-seed difference of the late reward (mean per round over the last quarter), ``variant − default``."""
    if variant == "default":
        return "–"
    m, s, z, n = paired_runs.paired(rows, env, variant, "default", value="late_reward")
    return f"{m:+.4f} ± {s:.4f} (z = {z:+.1f})" if n > 1 and s > 0 else "–"


def render_variants(rows: pd.DataFrame, out: str, tag: str) -> None:
    envs = [e for e in ENVS if e in set(rows.env)]
    rules = [v for v in ("head_m2", "head_unit") if v in set(rows.variant)]  # the pre-registered rules first
    variants = list(dict.fromkeys(["default", *rules, *rows.variant]))
    lines = ["# HiLoFi-TS variants against make_agent's default, paired by seed", "",
             "Cumulative reward over the rounds, mean ± s.e. over seeds; `− default`: mean ± s.e. of the per-seed "
             "difference and its z (the same seeds and streams as `benchmarks/results/headline.md`, its runner).  "
             "Shuttle, Adult, Mushroom, MovieLens: real data; Wheel: synthetic.  Settings: the head / hidden prior "
             "variance, the rank and the observation variance R (observed units r / s) the agent was built with.", "",
             *provenance.csv_provenance(rows, "seed rows"), "",
             "| env | variant | seeds × rounds | init_cov_last | init_cov_hidden | rank | R | cum. reward | "
             "− default (paired) | z | late reward | late − default (paired) |", "|" + "---|" * 12]
    lines += paired_runs.table_rows(rows, envs, variants, ["init_cov_last", "init_cov_hidden", "rank", "obs_noise"],
                                    base="default", extra=lambda env, v: [_late(rows, env, v)])
    # the pre-registered acceptance needs all four headline sets (a table of fewer, e.g. one longer run, has none)
    accept = [e for e in ("Shuttle", "Adult", "Mushroom", "MovieLens") if e in envs]
    accept = accept if len(accept) == 4 else []
    if "head_m2" in variants and accept:
        lines += ["", "**Pre-registered acceptance of `head_m2`** (README): "
                  + verdict(rows, "head_m2", accept)]
    if "head_unit" in variants and accept:
        lines += ["", "**Pre-registered acceptance of `head_unit`** (README: the headline sets as above, and Wheel "
                  "not below z = −1): " + verdict(rows, "head_unit", accept)
                  + ("; Wheel z = {:+.2f} → {}".format(z, "not worse" if z >= -Z else "**worse: REJECTED**")
                     if "Wheel" in envs and np.isfinite(z := paired(rows, "Wheel", "head_unit")[2]) else
                     "; Wheel: not run")]
    paired_runs.write_table(lines, out, tag)


def render_trace(rows: pd.DataFrame, out: str, tag: str) -> None:
    two = "played_1_best_0" in rows
    lines = ["# HiLoFi-TS round by round: where its reward goes", "",
             "Per window of rounds, summed (rounds on a worse arm, reward) or median (spread, error) over the window, "
             "then mean over seeds (± s.e.).  `worse arm`: rounds whose arm had a lower expected reward than the "
             "best; on a two-arm env split into `1 over 0` (played arm 1 when arm 0 was better: Mushroom's *ate a "
             "poisonous one*, expected cost 15) and `0 over 1` (Mushroom's *skipped an edible one*, cost 5).  "
             "`spread`: s.d. of the best arm's Thompson draws; `|err|`: the best arm's |μ − E r / s|; `rms z`: "
             "over arms, (μ − E r / s) / spread (1 for a calibrated posterior); `gap z (worse)`: over the rounds on a "
             "worse arm, the median of (μ_best − μ_played) / √(spread_best² + spread_played²) (well below 0: the "
             "posterior confidently preferred the worse arm); all in observed units r / s.", "",
             *provenance.csv_provenance(rows, "seed × window rows"), "",
             "| env | variant | window | seeds | reward | worse arm | " + ("1 over 0 | 0 over 1 | " if two else "")
             + "spread (best arm) | abs err (best arm) | rms z | gap z (worse) |", "|" + "---|" * (12 if two else 10)]
    keys = ["env", "variant", "window"]
    order = rows.assign(_e=rows.env.map(list(ENVS).index), _w=rows.window.map(lambda w: int(str(w).split("-")[0])))
    for (env, v, w), g in order.sort_values(["_e", "_w"], kind="stable").groupby(keys, sort=False):
        def cell(col, fmt="{:.1f}", g=g):
            x = g[col].dropna()
            return (fmt + " ± " + fmt).format(x.mean(), tables.se(x)) if len(x) else "–"
        extra = f"{cell('played_1_best_0')} | {cell('played_0_best_1')} | " if two else ""
        lines.append(f"| {env} | `{v}` | {w} | {g.seed.nunique()} | {cell('reward')} | {cell('worse_arm')} | {extra}"
                     f"{cell('spread_best', '{:.3f}')} | {cell('abs_err_best', '{:.3f}')} | "
                     f"{cell('rms_z', '{:.2f}')} | {cell('gap_z_worse', '{:.2f}')} |")
    lines += [""] + tables.hand_notes(os.path.join(out, f"{tag}.md"))
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(lines).rstrip() + "\n")


def render(rows: pd.DataFrame, out: str, tag: str) -> None:
    """``TAG.md`` from the variants' rows, or ``TAG.md`` from a trace's rows (``window`` column)."""
    (render_trace if "window" in rows else render_variants)(rows, out, tag)


def _known(variant: str) -> bool:
    return variant in ("default", "head_m2", "head_unit", "head_range", "adaptive", "linear") or (
        variant.partition("=")[0] in ("last", "hidden", "rank", "R", "spread", "warmup"))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks study hilofi_gap", description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("variants", "trace"), default="variants",
                   help="variants: paired runs against the default; trace: per-round replay of each seed")
    paired_runs.add_arguments(p, ENVS, "default,head_m2", "comma list: default, head_m2, head_unit, head_range, "
                              "adaptive, last=V, hidden=V, rank=N, R=V, spread=C, warmup=N; linear (make_agent's "
                              "linear-TS, a reference)")
    p.add_argument("--draws", type=int, default=8, help="trace: Thompson draws per round for the spread")
    options.add_csv_study_options(p, "hilofi_gap", writes="TAG.md (TAG_trace.md with --part trace)", out=HERE)
    args = p.parse_args(argv)
    if args.part == "trace" and args.tag == "hilofi_gap":
        args.tag = "hilofi_gap_trace"
    csv = options.start_csv_study(args, render)
    if csv is None:
        return
    if args.draws < 2:
        raise SystemExit(f"--draws must be >= 2, got {args.draws}")
    # every variant is paired against the default
    paired_runs.read_arguments(args, ENVS, _known, "default, head_m2, head_unit, head_range, adaptive, linear, "
                               "last=V, hidden=V, rank=N, R=V, spread=C, warmup=N",
                               base="default" if args.part == "variants" else None)
    rows = (run_trace if args.part == "trace" else run_variants)(args, csv)
    render(rows, args.out, args.tag)
    print(f"wrote {csv} and {args.tag}.md")
