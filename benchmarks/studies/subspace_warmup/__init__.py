"""Why the subspace EKF trails the paper on MNIST (issue 5, item 2): the warm-up fit it starts from.

Seed 002's EKF-subspace agent filters in a d-dimensional subspace around ``θ*``, the last iterate of 1000
full-batch SGD steps (``sgd(0.8, momentum 0.9)``) on the τ = 200 round-robin warm-up rounds.  With the prior
``Σ_z = 1e-4 I`` the filter moves the weights little, so the classifier ``θ*`` is most of the agent.  This script
fits the warm-up exactly as the runner does (same seeds, initial weights, data order and key) and reports, per seed:

* whether the SGD trajectory stayed finite (at lr 0.8 it can diverge; the agent's state is then NaN),
* the greedy accuracy of ``θ*`` on the next ``--eval`` rounds' images (no filtering),

for banditkit's bandit-feedback fit (only the pulled arm's reward, as a bandit sees it) and for the reference
code's full-information fit (all 10 outputs regressed on the one-hot labels of the warm-up images: a label leak,
``seed-002-subspace-bandits.md`` §7).  Writes ``TAG.csv`` and ``TAG.md``.

Usage::

    python -m benchmarks study subspace_warmup --models mlp1,lenet5 --seeds 3

The default table, ``mnist_seed002_warmup_fit``, stays in ``benchmarks/results/`` (README.md cites it; ``--out``'s
default); the clipped fit and the mnist suite's full-feedback runs are in this study's ``results/``.
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
from banditkit.models import MLP, LeNet5
from benchmarks import agents as A
from benchmarks.harness import options, provenance, tables

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs

STEPS = 5000  # the protocol's length: the runner draws each seed's image order for this many rounds


def warmup_rounds(agent, fb, seed: int) -> tuple[object, jax.Array]:
    """The agent state after the τ round-robin warm-up rounds of ``fb`` as the compiled runner plays them (init with
    the seed's first key), and the key the runner gives the warm-up fit at round τ."""
    ctx = np.asarray(fb.contexts)[np.asarray(fb.index)]
    rewards = np.asarray(fb.rewards)
    keys = jax.random.split(jax.random.PRNGKey(seed))
    state = agent.init(keys[0], ctx[0])
    tau, k = agent.warmup_steps, agent.num_actions_of(state)  # K: found by init, kept in the state
    for t in range(tau):
        state = agent.observe(state, ctx[t], t % k, rewards[t, t % k])
    return state, agent.warmup_key(jax.random.fold_in(keys[1], tau))


def fit(agent, fb, seed: int, full: bool) -> tuple[object, float]:
    """The warm-up fit as the runner does it, on the pulled arms' rewards or (``full``) on every arm's.  Returns the
    agent state after the fit and the fit's seconds (the first call per agent and loss includes compilation)."""
    state, key = warmup_rounds(agent, fb, seed)
    targets = np.asarray(fb.rewards)[: agent.warmup_steps] if full else None
    tic = time.perf_counter()
    state = jax.block_until_ready(jax.jit(agent.warmup)(key, state, targets))
    return state, time.perf_counter() - tic


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp1,lenet5")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--eval", type=int, default=1000, help="rounds after the warm-up whose images are classified")
    p.add_argument("--out", default=options.RESULTS,
                   help="output folder (default benchmarks/results; other fits: this study's results/, HERE)")
    p.add_argument("--tag", default="mnist_seed002_warmup_fit")
    p.add_argument("--clip-norm", type=float, default=None,
                   help="subspace_from_sgd's clip_norm (gradient-norm bound); default: none, as the protocol")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    env = gym.make("banditkit/MNIST-v0", max_steps=STEPS, replace=False)
    u = env.unwrapped
    rows = []
    for mname in [m.strip() for m in args.models.split(",") if m.strip()]:
        model = MLP(features=(50,), out=10) if mname == "mlp1" else LeNet5(out=10)
        name = "ekf_sub_svd"
        agent = A.seed002_agents(num_actions=10, warmup_per_arm=20, sgd_lr=0.8, model=model)[name](env)
        if args.clip_norm is not None:  # subspace_ekf's own fit option: rebuild the agent with it
            post = dict(A.seed002_agents(num_actions=10, warmup_per_arm=20, sgd_lr=0.8, model=model)[name].hyper)
            post = {k: v for k, v in post.items() if k not in ("warmup_steps", "model")}
            post["sgd"] = dict(post["sgd"], clip_norm=args.clip_norm)
            agent = A.agent_factory("subspace_ekf-thompson", post, warmup_steps=agent.warmup_steps, model=model)(env)
        tau = agent.warmup_steps
        for seed in range(args.seeds):
            fb = u.functional(seed, STEPS)
            ctx = np.asarray(fb.contexts)[np.asarray(fb.index)]
            labels = np.argmax(np.asarray(fb.rewards), axis=1)
            for full in (False, True):
                state, secs = fit(agent, fb, seed, full)
                theta = agent.posterior_for(state).mean(state.posterior)
                finite = not bk.debug.nonfinite_fields(state.posterior.offset)
                sl = slice(tau, tau + args.eval)
                apply = agent.model.apply
                pred = np.argmax(np.asarray(jax.vmap(lambda x, th=theta, f=apply: f(th, x))(ctx[sl])), 1)
                acc = float(np.mean(pred == labels[sl])) if finite else float("nan")
                rows.append(dict(model=mname, seed=seed, warmup="full information (reference)" if full else "bandit",
                                 sgd_finite=finite, greedy_accuracy=acc, fit_s=secs))
                print(rows[-1], flush=True)
    _write_md(pd.DataFrame(rows), args)


def _write_md(df: pd.DataFrame, args) -> None:
    lines = ["# Seed 002 subspace EKF: the warm-up classifier θ* (MNIST)", "",
             f"**Command:** `{provenance.command_line()}`", "", f"**Machine:** {provenance.machine()}", "",
             "Per seed: the warm-up fit exactly as the benchmark runner does it (1000 full-batch SGD steps, "
             "`sgd(0.8, 0.9)`" + (f" with gradients clipped to norm {args.clip_norm}" if args.clip_norm else "")
             + ", 200 round-robin rounds), then θ*'s greedy accuracy on the images of rounds "
             f"200–{200 + args.eval} (no filtering).  'bandit' = banditkit's fit (the pulled arm's reward only); "
             "'full information' = the reference code's fit on the one-hot labels of the warm-up images (a label "
             "leak; diagnostic only).  NaN accuracy = the SGD diverged (non-finite θ*).", "",
             "| model | warm-up fit | seeds | finite fits | greedy accuracy of θ* (mean ± s.e. over finite) "
             "| per seed |",
             "|---|---|---|---|---|---|"]
    for (mname, warm), g in df.groupby(["model", "warmup"], sort=False):
        ok = g[g.sgd_finite]
        acc = f"{ok.greedy_accuracy.mean():.3f} ± {tables.se(ok.greedy_accuracy):.3f}" if len(ok) else "—"
        per = ", ".join("NaN" if not r.sgd_finite else f"{r.greedy_accuracy:.3f}" for r in g.itertuples())
        lines.append(f"| {mname} | {warm} | {len(g)} | {int(g.sgd_finite.sum())} | {acc} | {per} |")
    tables.save_table(df, lines, args.out, args.tag)
