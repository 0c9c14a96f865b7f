"""The subspace EKF's warm-up under bandit feedback (issue 55): make_agent's default against one-change variants.

``make_agent("subspace_ekf-thompson")`` fitted its subspace to τ = 10·K round-robin warm-up rounds (20·K since this
study, 2026-12-02; ``sub_default`` keeps 10·K pinned) (the pulled arms'
rewards only): 500 full-batch steps of ``sgd(0.05, momentum 0.9)`` on ``Σ_i ½ (f_{a_i}(θ, x_i) − r_i)²``, the
offset ``θ*`` = the last iterate and the basis ``A (P, 20)`` = the top right singular vectors of the centred iterates
(every 2nd kept); then an EKF over ``z`` with ``θ = A z + θ*``, ``z ~ N(0, I)``.  The variants
(:func:`benchmarks.agents.subspace_warmup_variants`) each change one thing: the warm-up length (``sub_tau20``,
``sub_tau50``), the optimiser (``sub_clip1``: the gradient clipped to global norm 1; ``sub_adam``: ``adam(1e-3)`` on
the clipped gradient) or the basis (``sub_rnd``: random orthonormal through the same ``θ*``).  None reads a label.

``--dataset mnist`` (default) is the ``mnist`` suite's seed-002 protocol (LeNet5, 5000 rounds over a permutation of
the training images) with this study's defaults for the flags not given: ``--protocol seed002 --models lenet5 --tag
subspace_bandit_warmup --out benchmarks/studies/subspace_bandit_warmup/results --agents <the variants>``.
``--dataset fashion_mnist`` plays the same agents on ``banditkit/FashionMNIST-v0`` (the env's default LeNet5, a
permutation of the training images, no replacement) and writes ``TAG_fmnist.*`` — the second data set of the
adoption rule (README.md).

``--ceiling`` (MNIST, a diagnostic that reads labels, not a bandit protocol): per variant and seed, the warm-up fit
exactly as the runner does it (:func:`benchmarks.studies.subspace_warmup.warmup_rounds`), then (i) the greedy accuracy
of ``θ*`` and (ii) the accuracy of the best point of the fixed subspace, ``θ* + A z*`` with ``z*`` fitted on the
labels of the ``--train`` images after the warm-up (``adam(0.01)``, minibatches of 250, ``½‖f − onehot‖²``: the
reward regression every agent runs, given every arm's reward), both on the ``--test`` images after those.  (ii) is what
no filter inside that subspace can beat by much; it writes ``TAG_ceiling.md`` / ``.csv``.

Usage (the commands of the committed tables are at their tops)::

    python -m benchmarks study subspace_bandit_warmup --steps 5000 --seeds 5 --agents sub_default,sub_tau20
    python -m benchmarks study subspace_bandit_warmup --dataset fashion_mnist --steps 2000 --seeds 3
    python -m benchmarks study subspace_bandit_warmup --ceiling --seeds 3 --agents sub_default,sub_tau50
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd

from benchmarks import agents as A
from benchmarks.harness import options, provenance, report, run, tables
from benchmarks.harness.provenance import PROG
from benchmarks.suites import mnist

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs
TAG = "subspace_bandit_warmup"
DEFAULTS = {"--protocol": "seed002", "--models": "lenet5", "--tag": TAG, "--out": HERE,
            "--agents": ",".join(A.SUBSPACE_WARMUP_VARIANTS)}
#: the data sets besides MNIST (the mnist suite's protocol): name -> (Gymnasium id, tag suffix, title)
OTHER_DATASETS = {"fashion_mnist": ("banditkit/FashionMNIST-v0", "fmnist", "Fashion-MNIST"),
                  "shuttle": ("banditkit/Shuttle-v0", "shuttle", "Shuttle"),
                  "adult": ("banditkit/Adult-v0", "adult", "Adult")}
DATASETS = ("mnist", *OTHER_DATASETS)
NOTE = ("Agents (`benchmarks.agents.subspace_warmup_variants`): `sub_default` = make_agent(subspace_ekf-thompson) "
        "with nothing set but the warm-up, pinned at its default before this study (τ = 10·K; now 20·K), 500 "
        "full-batch steps of sgd(0.05, 0.9), d = 20, Σ_z = I; `sub_tau20` / "
        "`sub_tau50`: τ = 20·K / 50·K; `sub_clip1`: the gradient clipped to global norm 1; `sub_adam`: adam(1e-3) on "
        "the clipped gradient; `sub_rnd`: a random orthonormal basis through the same θ*.  Bandit feedback only.")


def _split_dataset(argv: list[str]) -> tuple[str, list[str]]:
    """``(--dataset value, the other arguments)``; ``mnist`` when not given."""
    rest, ds, i = [], "mnist", 0
    while i < len(argv):
        a = argv[i]
        if a == "--dataset" and i + 1 < len(argv):
            ds, i = argv[i + 1], i + 2
            continue
        if a.startswith("--dataset="):
            ds = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    if ds not in DATASETS:
        raise SystemExit(f"--dataset must be one of {list(DATASETS)}, got {ds!r}")
    return ds, rest


def _other_dataset(ds: str, argv: list[str]) -> None:
    """The variants on a data set other than MNIST (:data:`OTHER_DATASETS`): the env's default model, a random
    permutation of its rows (images / table rows, no replacement), Thompson sampling; writes ``TAG_<suffix>.*``."""
    env_id, suffix, title = OTHER_DATASETS[ds]
    p = options.parser(f"subspace_bandit_warmup on {title}", steps=2000, seeds=3)
    p.add_argument("--dataset", default=ds, help=f"one of {list(DATASETS)}")
    p.add_argument("--tag", default=f"{TAG}_{suffix}")
    p.set_defaults(out=HERE, agents=DEFAULTS["--agents"])
    args = p.parse_args(argv)
    options.check_args(args)
    env = gym.make(env_id, max_steps=args.steps, replace=False)
    agents = options.select(A.subspace_warmup_variants(int(env.unwrapped.num_actions)), args.agents)
    print(f"== {title} {list(agents)}, {args.steps} steps, {options.seeds_text(args)}", flush=True)

    def write(res) -> None:
        report.write_outputs(
            res, args.out, args.tag, merge=args.merge, add_seeds=args.add_seeds,
            title=f"Subspace EKF warm-up variants on {title} (bandit feedback)",
            protocol=f"{args.steps} steps × {{seeds}}, a random permutation of the data set's rows, the env's "
                     "default model, Thompson sampling",
            full_command=f"{PROG} study {TAG} --dataset {ds} --steps {args.steps} --seeds {args.seeds}",
            extra_md=lambda seeds: tables.references(env, args.steps, seeds),
            notes=[NOTE])

    write(run.run_or_render(args, env, agents, on_agent=write))


def subspace_ceiling(agent, state, xs, labels, *, iters: int, batch: int = 250, seed: int = 0) -> np.ndarray:
    """``z* (d,)`` ≈ argmin_z mean_i ½‖f(θ* + A z, x_i) − onehot(label_i)‖² over the images ``xs (n, ...)`` (Adam at
    0.01 from ``z = 0``, ``iters`` minibatches of ``batch``): the best point of the warm-up's fixed subspace for the
    reward regression with every arm's reward revealed."""
    post = state.posterior
    off, rows, space, apply = post.offset, post.basis_rows, post.space, agent.model.apply
    onehot = jax.nn.one_hot(jnp.asarray(labels), agent.num_actions_of(state))
    xs = jnp.asarray(xs)
    opt = optax.adam(0.01)

    def loss(z, idx):
        theta = space.unravel(off + z @ rows)
        f = jax.vmap(lambda x: apply(theta, x))(xs[idx])
        return 0.5 * jnp.mean(jnp.sum((f - onehot[idx]) ** 2, axis=1))

    def step(carry, key):
        z, s = carry
        idx = jax.random.choice(key, xs.shape[0], (batch,), replace=False)
        upd, s = opt.update(jax.grad(loss)(z, idx), s, z)
        return (optax.apply_updates(z, upd), s), None

    z0 = jnp.zeros(rows.shape[0], off.dtype)
    keys = jax.random.split(jax.random.PRNGKey(seed), iters)
    (z, _), _ = jax.jit(lambda c, k: jax.lax.scan(step, c, k))((z0, opt.init(z0)), keys)
    return np.asarray(z)


def _accuracy(agent, post, z, xs, labels) -> float:
    """Greedy accuracy of ``θ = θ* + A z`` on the images ``xs`` with true digits ``labels``."""
    theta = post.space.unravel(post.offset + jnp.asarray(z, post.offset.dtype) @ post.basis_rows)
    f = np.asarray(jax.vmap(lambda x: agent.model.apply(theta, x))(jnp.asarray(xs)))
    return float(np.mean(np.argmax(f, 1) == labels))


def _mean_se(values: pd.Series) -> str:
    return f"{values.mean():.3f} ± {tables.se(values):.3f}" if len(values) else "—"


def _ceiling(argv: list[str]) -> None:
    from banditkit.models import LeNet5
    from benchmarks.studies.subspace_warmup import STEPS, warmup_rounds

    p = argparse.ArgumentParser(description="the fixed subspace's ceiling (MNIST; reads labels: a diagnostic)")
    p.add_argument("--ceiling", action="store_true")
    p.add_argument("--agents", default="sub_default,sub_tau50")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--train", type=int, default=2000, help="labelled images after the warm-up that z* is fitted on")
    p.add_argument("--test", type=int, default=1000, help="the images after those, where accuracy is measured")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--out", default=HERE)
    p.add_argument("--tag", default=f"{TAG}_ceiling")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    env = gym.make("banditkit/MNIST-v0", max_steps=STEPS, replace=False)
    u = env.unwrapped
    variants = options.select(A.seed002_agents(num_actions=10, warmup_per_arm=20, sgd_lr=0.8, model=LeNet5(out=10)),
                              args.agents)
    rows = []
    for name, factory in variants.items():
        agent = factory(env)
        for seed in range(args.seeds):
            tic = time.perf_counter()
            fb = u.functional(seed, STEPS)
            ctx = np.asarray(fb.contexts)[np.asarray(fb.index)]
            labels = np.argmax(np.asarray(fb.rewards), axis=1)
            state, key = warmup_rounds(agent, fb, seed)
            state = jax.block_until_ready(jax.jit(agent.warmup)(key, state))
            tau, post = agent.warmup_steps, state.posterior
            train, test = slice(tau, tau + args.train), slice(tau + args.train, tau + args.train + args.test)
            finite = bool(np.all(np.isfinite(np.asarray(post.offset))))

            d = int(post.basis_rows.shape[0])
            z = subspace_ceiling(agent, state, ctx[train], labels[train], iters=args.iters, seed=seed) if finite \
                else None
            at_star = _accuracy(agent, post, np.zeros(d), ctx[test], labels[test]) if finite else np.nan
            at_best = _accuracy(agent, post, z, ctx[test], labels[test]) if finite else np.nan
            rows.append(dict(agent=name, seed=seed, tau=tau, dim=d, finite=finite,
                             theta_star_accuracy=at_star, ceiling_accuracy=at_best,
                             secs=time.perf_counter() - tic))
            print(rows[-1], flush=True)
            _write_ceiling(pd.DataFrame(rows), args)


def _write_ceiling(df: pd.DataFrame, args) -> None:
    lines = ["# Subspace EKF warm-up: θ*'s accuracy and the fixed subspace's ceiling (MNIST, LeNet5)", "",
             f"**Command:** `{provenance.command_line()}`", "", f"**Machine:** {provenance.machine()}", "",
             "Per seed: the bandit-feedback warm-up fit exactly as the benchmark runner does it (τ round-robin rounds "
             "of the seed-002 protocol's image order), then on the images of rounds τ + "
             f"{args.train} … τ + {args.train + args.test}: the greedy accuracy of θ* and of θ* + A z*, where z* is "
             f"fitted on the one-hot labels of rounds τ … τ + {args.train} ({args.iters} Adam steps, minibatches of "
             "250, squared error on all 10 outputs).  The second reads labels a bandit never sees: a diagnostic, the "
             "best the fixed subspace allows, not a bandit result.", "",
             "| agent | τ | d | seeds | finite fits | accuracy of θ* | ceiling: accuracy of θ* + A z* | per seed (θ* → "
             "ceiling) |", "|---|---|---|---|---|---|---|---|"]
    for name, g in df.groupby("agent", sort=False):
        ok = g[g.finite]
        per = ", ".join("NaN" if not r.finite else f"{r.theta_star_accuracy:.3f} → {r.ceiling_accuracy:.3f}"
                        for r in g.itertuples())
        lines.append(f"| {name} | {int(g.tau.iloc[0])} | {int(g.dim.iloc[0])} | {len(g)} | {int(g.finite.sum())} | "
                     f"{_mean_se(ok.theta_star_accuracy)} | {_mean_se(ok.ceiling_accuracy)} | {per} |")
    tables.save_table(df, lines, args.out, args.tag)


def main(argv=None):
    """The mnist suite with this study's defaults (``--dataset mnist``), or the Fashion-MNIST runner."""
    ds, argv = _split_dataset(list(argv or []))
    if "--ceiling" in argv:
        return _ceiling(argv)
    if ds in OTHER_DATASETS:
        return _other_dataset(ds, argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
    given = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    for flag, value in DEFAULTS.items():
        if flag not in given:
            argv += [flag, value]
    return mnist.main(argv)
