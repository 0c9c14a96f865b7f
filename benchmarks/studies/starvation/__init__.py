"""Why LRKF-TS and LoLoFi-TS in the authors' configuration are seed-sensitive on the MNIST bandit (issue 5, item 1).

The seed-003 MNIST bandit (LeNet5, 10 arms = digits, reward 1 for the true digit) played by an agent of
``agents.seed003_agents()`` (default: the ``_auth`` ones, the authors' sigmoid mean with fixed observation variance
1e-4 and their coordinate initial factors), one seed per run (the runner's compiled loop, one seed, so the values
differ from the tables' vmapped runs by float rounding only in distribution).  The run is stopped at round
``--probe`` (its checkpoint), probed, and resumed to ``--steps`` exactly.  Per block of ``--block`` rounds it records
the reward per round and how often each arm was played; an arm played in under 1 % of a block's rounds is
*starved* there (each digit is 10 % of the images, so a starved arm costs about 0.1 reward per round).  The probe,
on 20 test images of each digit: how often Thompson sampling picks the true arm (50 draws per image), the
posterior-mean logit of the true arm and the best other arm, and the standard deviation of the true arm's logit
over 200 posterior draws; for LRKF and LoLoFi, that sd linearised and split into the isotropic part of the pending
dynamics noise ``q̄`` and the low-rank factors' part, with the share of the logit's gradient inside the factors' row
space.  Writes ``TAG.csv`` (blocks), ``TAG_probe.csv``, LRKF's factor variances at the probe ``TAG_spectrum.csv`` and
``TAG.md``; processes (one per core) append their rows, ``--render`` rewrites the table.

Usage::

    python -m benchmarks study starvation --agents lrkf_ts_auth --seeds 0,2,4 --steps 40000 --probe 20000
    python -m benchmarks study starvation --render

The outputs stay in ``benchmarks/results/`` (``--out``'s default): README.md cites them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import pandas as pd

from banditkit.posteriors.covblocks import LowRankFactor
from benchmarks import agents as A
from benchmarks.harness import options, provenance, tables

STARVED = 0.01  # an arm played in fewer than this share of a block's rounds


class _Stop(Exception):
    pass


def probe(agent, state, env, seed: int, images: int = 20, draws: int = 50, param_draws: int = 200) -> list[dict]:
    """Per digit: P(TS picks the true arm), the true arm's posterior-mean logit and its sd over parameter draws,
    and the best other arm's mean logit, on ``images`` images of that digit (chosen with ``seed``) from the env's
    data, given to the agent as the env gives them (pixels scaled to [0, 1])."""
    import jax

    post = agent.posterior_for(state)
    act = jax.jit(jax.vmap(agent.choose, in_axes=(0, None, None)))
    thetas = jax.jit(jax.vmap(lambda k: post.sample(k, state.posterior)))(
        jax.random.split(jax.random.PRNGKey(seed + 1000), param_draws))
    mean_params = post.mean(state.posterior)
    f_mean = jax.jit(agent.model.apply)
    f_draws = jax.jit(jax.vmap(agent.model.apply, in_axes=(0, None)))
    lowrank = _lowrank_probe(post, state.posterior, agent.model.apply)
    rng = np.random.default_rng(seed)
    u = env.unwrapped
    X, y = u._X, u._y
    rows = []
    for digit in range(int(y.max()) + 1):
        picked, z_true, z_sd, z_other, lin = [], [], [], [], []
        for i in rng.choice(np.flatnonzero(y == digit), images, replace=False):
            x = u._transform(X[i])  # the context the env gives for this image
            a = np.asarray(act(jax.random.split(jax.random.PRNGKey(int(i)), draws), state, x))
            picked.append(float((a == digit).mean()))
            z = np.asarray(f_mean(mean_params, x))
            z_true.append(float(z[digit]))
            z_other.append(float(np.max(np.delete(z, digit))))
            z_sd.append(float(np.asarray(f_draws(thetas, x))[:, digit].std()))
            if lowrank is not None:
                lin.append(np.asarray(lowrank(x))[:, digit])
        extra = {}
        if lin:
            sd_lin, sd_factor, capture, grad = np.mean(lin, axis=0)
            extra = dict(logit_sd_lin=sd_lin, logit_sd_factor=sd_factor, capture=capture, grad_norm=grad,
                         q_pending=float(_draw_blocks(post, state.posterior)[0][3]))
        rows.append(dict(digit=digit, p_pick=np.mean(picked), logit_true=np.mean(z_true), logit_sd=np.mean(z_sd),
                         logit_other=np.mean(z_other), **extra))
    return rows


def _one_factor(ps) -> bool:
    """Whether a posterior state has one low-rank factor ``cov (d, P)`` over all ``P`` parameters (LRKF)."""
    return hasattr(ps, "cov") and hasattr(ps, "gram") and ps.mean.ndim == 1 and isinstance(ps.cov, LowRankFactor)


def _factor_blocks(ps) -> list[tuple[str, object, object, object]] | None:
    """``(mean field, C (d, D), diag(C Cᵀ) (d,), q̄)`` per block whose covariance is ``CᵀC + q̄I``: LRKF's one block,
    LoLoFi's hidden and last blocks; ``None`` for other posteriors (HiLoFi's full last layer among them)."""
    if _one_factor(ps):
        return [("mean", ps.cov.dense(), ps.gram, ps.q)]
    if hasattr(ps, "cov_hidden") and isinstance(ps.cov_last, LowRankFactor):
        return [("mean_hidden", ps.cov_hidden.dense(), ps.gram_hidden, ps.q_hidden),
                ("mean_last", ps.cov_last.dense(), ps.gram_last, ps.q_last)]
    return None


def _draw_blocks(post, ps) -> list[tuple[str, object, object, object]] | None:
    """:func:`_factor_blocks` with each ``q̄`` as the Thompson draws use it: times ``agents.scaled_draws``' scale."""
    blocks = _factor_blocks(ps)
    if blocks is None:
        return None
    scale = float(post.hyper.get("draw_q_scale", 1.0))
    return [(f, c, g, scale * q) for f, c, g, q in blocks]


def _lowrank_probe(post, ps, apply_fn):
    """For a posterior whose blocks each have covariance ``Σ_i = C_iᵀC_i + q̄_i I`` with a low-rank factor ``C_i (d_i,
    D_i)`` of orthogonal rows (LRKF: one block over all parameters; LoLoFi: hidden and last layer), a jitted ``x -> (4,
    K)``: per output ``k`` with gradient ``h_k = ∂f_k/∂θ`` at the mean (``h_ki`` its part in block ``i``), the
    linearised sd ``√Σ_i(‖C_i h_ki‖² + q̄_i‖h_ki‖²)`` of the logit over posterior draws, the factors' part of it
    ``√Σ_i‖C_i h_ki‖²``, the share ``√Σ_i‖Ĉ_i h_ki‖² / ‖h_k‖`` of the gradient inside the factors' row spaces (``Ĉ_i``
    the rows normalised) and ``‖h_k‖``; ``None`` for other posteriors."""
    import jax
    import jax.numpy as jnp

    blocks = _draw_blocks(post, ps)
    if blocks is None:
        return None
    fields = [b[0] for b in blocks]

    @jax.jit
    def lowrank(x):
        hs = jax.jacrev(lambda ms: apply_fn(post.mean(ps._replace(**dict(zip(fields, ms, strict=True)))), x))(
            tuple(getattr(ps, f) for f in fields))  # per block (K, D_i)
        factor2 = iso2 = cap2 = norm2 = 0.0
        for h, (_, c, gram, q) in zip(hs, blocks, strict=True):
            n2 = jnp.sum(h**2, axis=1)
            c_hat = c / jnp.sqrt(jnp.where(gram > 0, gram, 1.0))[:, None]
            factor2 += jnp.sum((h @ c.T) ** 2, axis=1)
            iso2 += q * n2
            cap2 += jnp.sum((h @ c_hat.T) ** 2, axis=1)
            norm2 += n2
        return jnp.stack([jnp.sqrt(factor2 + iso2), jnp.sqrt(factor2), jnp.sqrt(cap2 / norm2), jnp.sqrt(norm2)])

    return lowrank


def spectrum(ps) -> np.ndarray | None:
    """The factor's variances ``diag(C Cᵀ)`` (the nonzero eigenvalues of ``CᵀC``), largest first, for a posterior with
    one low-rank factor over all parameters; ``None`` for others."""
    if not _one_factor(ps):
        return None
    return np.sort(np.asarray(ps.gram))[::-1]


def run_one(name: str, factory, seed: int, steps: int, probe_at: int, block: int):
    """``(blocks, probe rows, mean reward)`` of one agent and seed: run to ``probe_at``, probe, resume to ``steps``."""
    import gymnasium as gym
    import jax

    import banditkit as bk
    from banditkit import checkpoint

    env = gym.make("banditkit/MNIST-v0", max_steps=steps, replace=True)
    agent = factory(env)
    ck = os.path.join(tempfile.mkdtemp(prefix="diag_starvation_"), f"{name}_s{seed}.bk")
    kw = dict(seeds=[seed], progress=False, name=name, chunk_size=block, checkpoint=ck, save_every=0)
    first: list[pd.DataFrame] = []

    def stop_at_probe(df):
        if int(df.step.min()) >= probe_at:
            raise _Stop
        first.append(df)

    try:
        bk.run(env, agent, steps, on_chunk=stop_at_probe, **kw)
    except _Stop:
        pass
    u = env.unwrapped
    k_init = jax.random.split(jax.random.PRNGKey(seed))[0]
    template = jax.tree_util.tree_map(lambda a: a[None], agent.init(k_init, u._transform(u._X[0])))
    state, _ = checkpoint.load(ck, template=template)  # the run's vmapped state: one seed
    state = jax.tree_util.tree_map(lambda a: a[0], state)
    probed = probe(agent, state, env, seed)
    spec = spectrum(state.posterior)
    rest = bk.run(env, agent, steps, **kw)
    os.remove(ck)
    os.rmdir(os.path.dirname(ck))
    df = pd.concat([*first, rest], ignore_index=True)
    if len(df) != steps or not (df.step.to_numpy() == np.arange(steps)).all():
        raise RuntimeError(f"{name} seed {seed}: the stopped and resumed parts do not cover rounds 0..{steps - 1}")
    k = int(u.num_actions)
    blocks = []
    for b0 in range(0, steps, block):
        part = df[(df.step >= b0) & (df.step < b0 + block)]
        share = np.bincount(part.action.to_numpy(), minlength=k) / len(part)
        blocks.append(dict(block_start=b0, rounds=len(part), reward=float(part.reward.mean()),
                           min_share=float(share.min()),
                           starved="[" + " ".join(str(a) for a in np.flatnonzero(share < STARVED)) + "]"))
    return blocks, probed, spec, float(df.reward.mean())


def _arms(cell: str) -> list[int]:
    """The arms of a ``starved`` cell (``"[3 9]"``; ``"[]"`` for none)."""
    return [int(x) for x in str(cell).strip("[]").split()]


def _runs_of(blocks: pd.DataFrame) -> str:
    """``arm a: rounds r0–r1`` for each arm's maximal stretch of consecutive starved blocks."""
    spans: dict[int, list[list[int]]] = {}
    for _, row in blocks.sort_values("block_start").iterrows():
        end = int(row.block_start + row.rounds)
        for a in _arms(row.starved):
            s = spans.setdefault(a, [])
            if s and s[-1][1] == row.block_start:
                s[-1][1] = end
            else:
                s.append([int(row.block_start), end])
    parts = [f"{a}: {lo / 1000:g}k–{hi / 1000:g}k" for a, ss in sorted(spans.items()) for lo, hi in ss]
    return ", ".join(parts) if parts else "none"


def _spread_table(probe_rows: pd.DataFrame, spectrum_csv: str) -> list[str]:
    """Where a Thompson draw's spread of a logit comes from, for the runs probed with the low-rank probe (LRKF, LoLoFi):
    the isotropic ``q̄`` term ``√q̄ ‖h‖`` against the factor's ``‖C h‖``, medians over the 10 digits; and the factor's
    variances."""
    if "logit_sd_factor" not in probe_rows:
        return []
    p = probe_rows.dropna(subset=["logit_sd_factor"])
    spec = pd.read_csv(spectrum_csv) if os.path.exists(spectrum_csv) else None
    lines = ["", "Where a draw's spread comes from (runs with the low-rank probe).  Per digit, on its images, with "
             "``h = ∂logit/∂θ`` of the true arm at the mean: the linearised draw sd ``√(‖C h‖² + q̄‖h‖²)`` splits "
             "into the isotropic part ``√q̄ ‖h‖`` (``q̄`` the dynamics noise pending at the probe; LoLoFi: summed over "
             "its hidden and last blocks, ``q̄`` of the hidden block shown) and the factor's ``‖C h‖``; *capture* is "
             "``‖Ĉ h‖ / ‖h‖``, the share of the gradient inside the factor's row space.  "
             "Medians over the 10 digits.  LRKF's factor variances ``diag(C Cᵀ)``: largest / median / smallest, and "
             "how many are at least 1 (its initial coordinate rows, variance 1 + q·t, never informed by an "
             "observation).",
             "", "| agent | seed | q̄ | draw sd (sampled) | isotropic √q̄ ‖h‖ | factor ‖C h‖ | factor's share of the "
             "draw variance | capture | ‖h‖ | factor variances | ≥ 1 |", "|---" * 11 + "|"]
    for (agent, seed), g in p.groupby(["agent", "seed"]):
        iso = np.sqrt(np.maximum(g.logit_sd_lin**2 - g.logit_sd_factor**2, 0.0))  # Σ_i q̄_i‖h_i‖²
        share = g.logit_sd_factor**2 / g.logit_sd_lin**2
        v = spec[(spec.agent == agent) & (spec.seed == seed)].variance.to_numpy() if spec is not None else []
        v_txt = f"{v.max():.3g} / {np.median(v):.3g} / {v.min():.3g}" if len(v) else "–"
        lines.append(f"| {agent} | {seed} | {g.q_pending.iloc[0]:.0e} | {g.logit_sd.median():.3f} | "
                     f"{iso.median():.3f} | {g.logit_sd_factor.median():.3f} | {share.median():.1%} | "
                     f"{g.capture.median():.2%} | {g.grad_norm.median():.0f} | {v_txt} | "
                     f"{f'{int((v >= 1).sum())} of {len(v)}' if len(v) else '–'} |")
    return lines


def render(rows: pd.DataFrame, out: str, tag: str) -> None:
    probe_rows = pd.read_csv(os.path.join(out, f"{tag}_probe.csv"))
    lines = [f"# {__doc__.splitlines()[0]}", "", __doc__.split("\n\n")[1].replace("\n", " "), ""]
    lines += provenance.csv_provenance(rows.drop_duplicates(["agent", "seed"]), unit="runs") + [""]
    lines += ["Per run: the mean reward per round over all rounds and over the last quarter, the rounds in which some "
              "arm was starved (the arm-rounds lost, in blocks), and each starved arm's stretches.  At the probe "
              "round, for the digits whose arm Thompson sampling picks in under 5 % of the draws on that digit's "
              "images: the true arm's posterior-mean logit ± its sd over posterior draws; and the median over all "
              "digits of |logit| of the true arm.", "",
              "| agent | seed | reward | last quarter | starved arm-rounds | starved arms (rounds) | probe round | "
              "digits rarely picked at the probe: logit ± draw sd | median abs. true-arm logit |",
              "|---|---|---|---|---|---|---|---|---|"]
    for (agent, seed), g in rows.groupby(["agent", "seed"]):
        steps = int(g.rounds.sum())
        late = g[g.block_start >= 0.75 * steps]
        late_r = float((late.reward * late.rounds).sum() / late.rounds.sum())
        starved_rounds = int(sum(len(_arms(s)) * r for s, r in zip(g.starved, g.rounds, strict=True)))
        p = probe_rows[(probe_rows.agent == agent) & (probe_rows.seed == seed)]
        rare = p[p.p_pick < 0.05]
        rare_txt = ", ".join(f"{int(r.digit)}: {r.logit_true:+.1f} ± {r.logit_sd:.2f}" for r in rare.itertuples())
        lines.append(f"| {agent} | {seed} | {g.mean_reward.iloc[0]:.3f} | {late_r:.3f} | {starved_rounds} | "
                     f"{_runs_of(g)} | {int(p.probe.iloc[0]) if len(p) else ''} | {rare_txt or 'none'} | "
                     f"{p.logit_true.abs().median():.1f} |")
    lines += _spread_table(probe_rows, os.path.join(out, f"{tag}_spectrum.csv"))
    lines += ["", "Probe per digit (all runs): P(TS picks the true arm), true arm's mean logit (draw sd), best other "
              "arm's mean logit.", "", "| agent | seed | " + " | ".join(f"digit {d}" for d in range(10)) + " |",
              "|---|---|" + "---|" * 10]
    for (agent, seed), p in probe_rows.groupby(["agent", "seed"]):
        cells = [f"{r.p_pick:.2f}; {r.logit_true:+.1f} ({r.logit_sd:.2f}); {r.logit_other:+.1f}"
                 for r in p.sort_values("digit").itertuples()]
        lines.append(f"| {agent} | {seed} | " + " | ".join(cells) + " |")
    notes = tables.hand_notes(os.path.join(out, f"{tag}.md"))
    lines += [""] + notes if notes else []
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", default="lrkf_ts_auth", help="comma list of agents.seed003_agents() names")
    p.add_argument("--seeds", default="0,1,2", help="comma list of seeds, run one after another")
    p.add_argument("--steps", type=int, default=40000)
    p.add_argument("--probe", type=int, default=20000, help="the round at which the posterior is probed")
    p.add_argument("--block", type=int, default=2000, help="rounds per block of the action shares")
    options.add_csv_study_options(p, "diag_starvation")
    args = p.parse_args(argv)
    csv = options.start_csv_study(args, render)
    if csv is None:
        return
    if not 0 < args.probe < args.steps or args.probe % args.block or args.steps % args.block:
        raise SystemExit("--probe must lie inside (0, --steps), and both must be multiples of --block")
    agents = options.select(A.seed003_agents(), args.agents)
    os.makedirs(args.out, exist_ok=True)
    for name, factory in agents.items():
        for seed in (int(s) for s in args.seeds.split(",")):
            tic = time.perf_counter()
            blocks, probed, spec, mean = run_one(name, factory, seed, args.steps, args.probe, args.block)
            meta = dict(agent=name, seed=seed, mean_reward=mean, wall_s=time.perf_counter() - tic,
                        command=provenance.command_line(), machine=provenance.machine(load=False),
                        load=provenance.load_average() or float("nan"))
            tables.append_rows(os.path.join(args.out, f"{args.tag}_probe.csv"),
                               pd.DataFrame([dict(agent=name, seed=seed, probe=args.probe, **r) for r in probed]))
            if spec is not None:
                tables.append_rows(os.path.join(args.out, f"{args.tag}_spectrum.csv"), pd.DataFrame(
                    dict(agent=name, seed=seed, probe=args.probe, i=np.arange(len(spec)), variance=spec)))
            rows = tables.append_rows(csv, pd.DataFrame([{**meta, **b} for b in blocks]))
            print(f"{name} seed {seed}: reward {mean:.3f}; starved blocks "
                  f"{sum(1 for b in blocks if b['starved'] != '[]')}/{len(blocks)}", flush=True)
    render(rows, args.out, args.tag)
