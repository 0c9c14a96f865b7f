"""Seed 003's BO suite: banditkit surrogates (HiLoFi, LRKF, LoFi with TS / EI; exact GP) against peers.

Protocol (``shared/research/seed-003-hilofi.md`` §12, ``anchor-bo-peers.md``): every method minimises ``f`` on
``[0, 1]^d`` (domain rescaled inside ``f``).  Warm-up: ``d`` uniform points from ``numpy.random.default_rng(seed)``,
the same for every method; then ``budget`` evaluations chosen by the method.  Simple regret = ``min f`` over
warm-up + budget − ``f_min`` (DrawNN: the estimated minimum, so a negative regret is possible).

Methods: ``{hilofi,lrkf,lofi}_{ts,ei}`` = ``bk.BayesOpt`` with that surrogate and acquisition (defaults of
``BayesOpt``: 3×180 ELU MLP, rank 50, 1024 Sobol candidates + projected-gradient refinement); ``gp_ei`` / ``gp_ts``
= ``bk.BayesOpt(surrogate="gp")`` (all points), ``gp20_ei`` (20-point FIFO buffer, seed 003's GP baseline but with
fitted hyper-parameters); all of these with ``maximizer="ascent"`` (since 2026-11-26 BayesOpt's default is
"lbfgs" except for Thompson sampling with a network: these rows were run before and keep the ascent);
``*_lbfgs`` = the same with ``maximizer="lbfgs"`` (the 8 best candidates refined by L-BFGS-B on log EI / the
Thompson draw, ≤ 200 iterations, on every task); ``*_tr`` = the same with ``trust_region=True`` (TuRBO's
adaptive box around the incumbent, :mod:`banditkit.bo.trust_region`); ``default`` = ``bk.BayesOpt(bounds,
direction="minimize", seed=seed)`` with nothing else set (the library's defaults, issue 55: HiLoFi-TS, its default
maximiser and trust region, ``n_initial = max(5, 2d)`` Sobol points after the warm-up, no DrawNN refinement);
peers ``botorch`` (SingleTaskGP + LogEI, 0.18 defaults, 1 torch thread, refitted from scratch each iteration,
``optimize_acqf(q=1, num_restarts=8, raw_samples=256)``), ``tpe`` (Optuna ``TPESampler(seed)``, warm-up told as
trials), ``random`` (the same generator after the warm-up).

Time per iteration = one ask + one tell, objective excluded; JAX compilation inside it (measured by
``jax.monitoring`` compile events) is reported apart as ``compile_s`` and removed from ``run_s``.

Outputs (``--out``, default ``benchmarks/results``), written incrementally (a killed run keeps its finished runs):
``bo_runs.csv`` (one row per task × method × seed), ``bo_iters.csv.gz`` (per iteration: best regret so far, seconds,
the queried value ``y`` (since 2026-11-27);
gzip-compressed, appended one gzip member per run — ``pandas.read_csv`` reads it as one table),
``bo_time_n.csv`` (time per iteration against n), ``bo_machine.csv`` (machine and load average per run); at the
end ``bo.md``, ``bo_curves.png`` (the ``HEADLINE`` methods; every method in ``bo_curves_all.png``), ``bo_time.png``,
``bo_pareto.png`` (time per iteration against average rank).
``--report`` rebuilds the report from the CSVs; ``--check ITERS`` re-runs the selected runs' first queries and
compares them with the committed ones, writing nothing (:func:`check_runs`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

from benchmarks.harness import options, plots, provenance
from benchmarks.harness.tables import append_csv, avg_ranks, commands_md, pareto_front, se

TASKS = {  # name: (function, dim, budget)
    "branin": ("branin", None, 40),
    "hartmann6": ("hartmann6", None, 40),
    "ackley2": ("ackley", 2, 40),
    "ackley5": ("ackley", 5, 100),
    "ackley10": ("ackley", 10, 100),
    "ackley50": ("ackley", 50, 100),
    "drawnn50": ("drawnn", 50, 200),
    "drawnn200": ("drawnn", 200, 600),
}
# Seed 003 maximises the Thompson draw on DrawNN by projected gradient (500 iterations from a random start) instead of
# taking the best Sobol candidate.  Here: BayesOpt's refinement from the 4 best candidates, 100 normalised steps of
# L2 length 0.05·√d (decaying), i.e. ≈ 0.05 per coordinate as in low-D, so a draw's maximiser in a corner of the
# 50-/200-D cube is within reach (the default 10 steps of 0.05 move a point by ≤ 0.28 in L2, vs a diagonal of √d).
REFINE = {"drawnn": dict(refine_steps=100, step_per_coordinate=0.05)}
SMALL_TASKS = ["branin", "hartmann6", "ackley2", "ackley5", "ackley10"]
OURS = ["hilofi_ts", "lrkf_ts", "lofi_ts", "hilofi_ei", "lrkf_ei", "lofi_ei", "gp_ei", "gp_ts", "gp20_ei",
        "online_vbll_ts", "last_layer_laplace_ts",  # these two: seed 003's replay-buffer baselines
        "hilofi_ts_grad",  # not seed 003's protocol: HiLoFi-TS with the DrawNN gradient maximisation on every task
        "gp_ei_lbfgs", "hilofi_ei_lbfgs", "hilofi_ts_lbfgs",  # BayesOpt(maximizer="lbfgs"): 8 starts, L-BFGS-B
        "hilofi_ts_tr", "lofi_ts_tr", "hilofi_ei_lbfgs_tr", "gp_ei_lbfgs_tr", "gp_ts_tr"]  # trust_region=True
# bk.BayesOpt(bounds) with nothing set but the task's direction and the run's seed: unlike OURS, whatever the
# library's defaults are at the commit that runs it (issue 55's target)
DEFAULTS = ["default"]
PEERS = ["botorch", "tpe", "random"]
# the methods of bo_curves.png (every method: bo_curves_all.png): the library's defaults and the best of each kind
HEADLINE = ["hilofi_ts", "hilofi_ts_tr", "lofi_ts_tr", "online_vbll_ts", "gp_ei_lbfgs", "gp_ei_lbfgs_tr", "botorch",
            "tpe", "random"]
METHODS = OURS + DEFAULTS + PEERS
FULL_COMMAND = provenance.suite_command("bo", ["--tasks", ",".join(TASKS), "--seeds", "10", "--methods",
                                             ",".join(METHODS)])


# ----------------------------------------------------------------------------------------------- compile timing
class CompileClock:
    """Sums JAX compile-event durations (tracing, lowering, backend compile) since the last :meth:`take`."""

    def __init__(self):
        import jax

        self.total = 0.0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event: str, duration: float, **_) -> None:
        if event.startswith("/jax/core/compile"):
            self.total += float(duration)

    def take(self) -> float:
        t, self.total = self.total, 0.0
        return t


# -------------------------------------------------------------------------------------------------- methods
def parse_method(method: str) -> tuple[str, str, dict, bool]:
    """``(surrogate, acquisition, BayesOpt keywords, grad)`` of one of our method names, e.g. ``gp20_ei`` →
    ``("gp", "ei", {maximizer: "ascent", trust_region: False, surrogate_kwargs: {buffer_size: 20}}, False)``.
    Suffixes, in any order: ``_lbfgs`` (``maximizer="lbfgs"``), ``_tr`` (``trust_region=True``), ``_grad`` (the
    DrawNN refinement on every task).  The maximiser is always explicit (BayesOpt's default is "lbfgs" for EI /
    the GP since 2026-11-26; the rows without ``_lbfgs`` are the ascent's)."""
    flags, name = set(), method
    while name.rsplit("_", 1)[-1] in ("grad", "lbfgs", "tr"):
        name, flag = name.rsplit("_", 1)
        flags.add(flag)
    sur, acq = name.rsplit("_", 1)
    kw: dict = dict(maximizer="lbfgs" if "lbfgs" in flags else "ascent", trust_region="tr" in flags)
    if sur == "gp20":
        sur, kw["surrogate_kwargs"] = "gp", dict(buffer_size=20)
    return sur, {"ts": "thompson", "ei": "ei"}[acq], kw, "grad" in flags


def bayesopt_args(method: str, d: int, refine: dict | None) -> tuple[str, str, dict]:
    """``(surrogate, acquisition, BayesOpt keywords)`` of one of our methods in ``d`` dimensions: :func:`parse_method`
    plus the task's ascent refinement (``refine``, e.g. ``REFINE["drawnn"]``; every task's with ``_grad``)."""
    sur, acq, kw, grad = parse_method(method)
    refine = REFINE["drawnn"] if grad else refine
    if refine and kw["maximizer"] == "ascent":  # the L-BFGS-B variants keep BayesOpt's lbfgs defaults everywhere
        kw.update(refine_steps=refine["refine_steps"], step_size=refine["step_per_coordinate"] * float(np.sqrt(d)))
    return sur, acq, kw


def run_banditkit(method: str, f, warm: np.ndarray, budget: int, seed: int, clock: CompileClock, cfg: dict):
    import banditkit as bk

    d = warm.shape[1]
    clock.take()
    if method == "default":  # the library's defaults: only the task's direction and the run's seed are given
        opt = bk.BayesOpt([(0.0, 1.0)] * d, direction="minimize", seed=seed)
    else:
        sur, acq, kw = bayesopt_args(method, d, cfg.get("refine"))
        opt = bk.BayesOpt([(0.0, 1.0)] * d, surrogate=sur, acquisition=acq, direction="minimize", seed=seed,
                          n_initial=d, n_candidates=cfg["n_candidates"], **kw)
    opt.tell(warm, [float(f.value(w)) for w in warm])
    setup_compile = clock.take()
    ys, times, compiles = [], [], []
    for _ in range(budget):
        t0 = time.perf_counter()
        x = opt.ask()
        t1 = time.perf_counter()
        y = float(f.value(x))
        t2 = time.perf_counter()
        opt.tell(x, y)
        t3 = time.perf_counter()
        c = clock.take()
        ys.append(y)
        compiles.append(c)
        times.append(max((t1 - t0) + (t3 - t2) - c, 0.0))
    compiles[0] += setup_compile
    return ys, times, compiles


def query_loop(propose, f, warm: np.ndarray, budget: int, path: str | None = None, rng=None):
    """``budget`` queries ``x = propose(X, G)`` on the told points (X: (n, d), G = −f: (n,)), resumable.

    ``propose`` returns ``(x, parts)``, ``parts`` a dict of named timings (seconds) inside the ask.  With ``path`` the
    run's state (X, G, per-iteration values, times, parts and ``rng[0]()``, the proposer's RNG state) is written
    atomically after every query, and a run started with an existing ``path`` resumes from it (``rng[1](state)``
    restores the RNG), so a run killed after k queries loses nothing and continues as the uninterrupted run would.
    Returns ``(ys, times, parts)`` of the whole run; the checkpoint is kept (it holds the timing parts).
    """
    get_rng, set_rng = rng if rng is not None else (lambda: np.zeros(0, np.uint8), lambda _: None)
    d = warm.shape[1]
    state = load_checkpoint(path) if path else None
    if state is None:
        X = [np.asarray(w, np.float64) for w in warm]
        G = [-float(f.value(w)) for w in warm]
        ys, times, parts = [], [], {}
    else:
        if state["X"].shape[1] != d or not np.array_equal(state["X"][: len(warm)], np.asarray(warm, np.float64)):
            raise SystemExit(f"checkpoint {path} holds a different run (its warm-up points differ from this seed's); "
                             "delete it to start this run afresh")
        X, G = list(state["X"]), list(state["G"])
        ys, times = list(state["ys"]), list(state["times"])
        parts = {k.removeprefix("part_"): list(v) for k, v in state.items() if k.startswith("part_")}
        set_rng(state["rng"])
    while len(ys) < budget:
        t0 = time.perf_counter()
        x, part = propose(np.array(X), np.array(G))
        times.append(time.perf_counter() - t0)
        y = float(f.value(x))
        X.append(np.asarray(x, np.float64).reshape(-1))
        G.append(-y)
        ys.append(y)
        for k, v in part.items():
            parts.setdefault(k, []).append(v)
        if path:
            if len(ys) % 25 == 0 or len(ys) == budget:
                print(f"  {os.path.basename(path)}: {len(ys)}/{budget} queries, n = {len(X)}, "
                      f"last ask {times[-1]:.1f} s", flush=True)
            save_checkpoint(path, dict(X=np.array(X), G=np.array(G), ys=np.array(ys), times=np.array(times),
                                       budget=np.array(budget), rng=np.asarray(get_rng()),
                                       **{f"part_{k}": np.array(v) for k, v in parts.items()}))
    # a checkpoint longer than this budget: its first ``budget`` queries are this run (propose ignores the budget)
    return ys[:budget], times[:budget], {k: v[:budget] for k, v in parts.items()}


def save_checkpoint(path: str, arrays: dict) -> None:
    """Write ``arrays`` to ``path`` (.npz) atomically: a kill mid-write leaves the previous checkpoint intact."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def load_checkpoint(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def checkpoint_path(ckpt_dir: str | None, task: str, method: str, seed: int) -> str | None:
    return os.path.join(ckpt_dir, f"{task}_{method}_seed{seed}.npz") if ckpt_dir else None


def run_botorch(f, warm: np.ndarray, budget: int, seed: int, path: str | None = None):
    import torch
    from botorch.acquisition import LogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    d = warm.shape[1]
    bounds = torch.stack([torch.zeros(d, dtype=torch.float64), torch.ones(d, dtype=torch.float64)])

    def propose(X: np.ndarray, G: np.ndarray):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            tx = torch.tensor(X, dtype=torch.float64)
            ty = torch.tensor(G, dtype=torch.float64)[:, None]
            model = SingleTaskGP(tx, ty, input_transform=Normalize(d=d, bounds=bounds),
                                 outcome_transform=Standardize(m=1))
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            t1 = time.perf_counter()
            acqf = LogExpectedImprovement(model=model, best_f=ty.max())
            cand, _ = optimize_acqf(acqf, bounds=bounds, q=1, num_restarts=8, raw_samples=256)
        return cand.detach().numpy().reshape(-1), dict(fit_s=t1 - t0, acq_s=time.perf_counter() - t1)

    rng = (lambda: torch.get_rng_state().numpy(), lambda s: torch.set_rng_state(torch.from_numpy(np.asarray(s))))
    ys, times, _ = query_loop(propose, f, warm, budget, path, rng)
    return ys, times, [0.0] * budget


def run_tpe(f, warm: np.ndarray, budget: int, seed: int):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    d = warm.shape[1]
    dists = {f"x{j}": optuna.distributions.FloatDistribution(0.0, 1.0) for j in range(d)}
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for w in warm:
            study.add_trial(optuna.trial.create_trial(params={f"x{j}": float(w[j]) for j in range(d)},
                                                      distributions=dists, value=-float(f.value(w))))
        ys, times = [], []
        for _ in range(budget):
            t0 = time.perf_counter()
            t = study.ask(dists)
            x = np.array([t.params[f"x{j}"] for j in range(d)])
            t1 = time.perf_counter()
            y = float(f.value(x))
            t2 = time.perf_counter()
            study.tell(t, -y)
            times.append((t1 - t0) + (time.perf_counter() - t2))
            ys.append(y)
    return ys, times, [0.0] * budget


def run_random(f, rng: np.random.Generator, d: int, budget: int):
    ys, times = [], []
    for _ in range(budget):
        t0 = time.perf_counter()
        x = rng.random(d)
        times.append(time.perf_counter() - t0)
        ys.append(float(f.value(x)))
    return ys, times, [0.0] * budget


def peers_available() -> dict[str, str]:
    """``{peer: reason}`` for the peers that cannot run here (missing package)."""
    missing = {}
    for name, mod in (("botorch", "botorch"), ("tpe", "optuna")):
        try:
            __import__(mod)
        except ImportError as e:
            missing[name] = f"not installed ({e.name}); `pip install torch==2.13.0` then `pip install -e '.[bench]'`"
    return missing


# ------------------------------------------------------------------------------------------------- one run
def task_budget(task: str, scale: float = 1.0) -> int:
    """The task's evaluation budget times ``--budget-scale`` (at least 1)."""
    return max(1, int(round(TASKS[task][2] * scale)))


def one_run(task: str, method: str, seed: int, budget: int, clock: CompileClock, cfg: dict,
            ckpt_dir: str | None = None) -> dict:
    from banditkit.environments.bo_functions import make_function

    fname, dim, _ = TASKS[task]
    f = make_function(fname, dim)
    d = f.dim
    rng = np.random.default_rng(seed)
    warm = rng.random((d, d))
    warm_best = float(np.min(f.value(warm)))
    if method == "botorch":
        ys, times, comp = run_botorch(f, warm, budget, seed, checkpoint_path(ckpt_dir, task, method, seed))
    elif method == "tpe":
        ys, times, comp = run_tpe(f, warm, budget, seed)
    elif method == "random":
        ys, times, comp = run_random(f, rng, d, budget)
    else:
        ys, times, comp = run_banditkit(method, f, warm, budget, seed, clock, dict(cfg, refine=REFINE.get(fname)))
    regret = best_regret(warm_best, ys, f.minimum)
    iters = pd.DataFrame(dict(task=task, method=method, seed=seed, iter=np.arange(1, budget + 1),
                              n=d + np.arange(budget), regret=regret, time_s=times, compile_s=comp,
                              y=np.asarray(ys, np.float64)))
    row = dict(task=task, method=method, seed=seed, dim=d, budget=budget, final_regret=float(regret[-1]),
               run_s=float(np.sum(times)), compile_s=float(np.sum(comp)), median_iter_s=float(np.median(times)),
               mean_iter_s=float(np.mean(times)))
    return row, iters


def best_regret(warm_best: float, ys, f_min: float) -> np.ndarray:
    """Simple regret after each query: best of the warm-up and the queries so far, minus the known minimum."""
    return np.minimum.accumulate(np.minimum(warm_best, np.asarray(ys))) - f_min


def drop_runs(out: str, keys: set[tuple[str, str, int]]) -> int:
    """Delete the rows of the ``(task, method, seed)`` runs in ``keys`` from ``out``'s ``bo_runs.csv`` and
    ``bo_iters.csv.gz`` (both rewritten; the latter as one gzip member).  Returns how many runs were deleted."""
    runs_path, its_path = os.path.join(out, "bo_runs.csv"), iters_path(out)
    if not os.path.exists(runs_path):
        return 0
    key_set = {(str(t), str(m), int(s)) for t, m, s in keys}

    def keep(df: pd.DataFrame) -> np.ndarray:
        rows = zip(df.task, df.method, df.seed, strict=True)
        return np.array([(str(t), str(m), int(s)) not in key_set for t, m, s in rows], dtype=bool)

    runs = pd.read_csv(runs_path)
    kept = keep(runs)
    runs[kept].to_csv(runs_path, index=False)
    if os.path.exists(its_path):
        iters = pd.read_csv(its_path)
        iters[keep(iters)].to_csv(its_path, index=False, compression="gzip")
    return int((~kept).sum())


def check_runs(out: str, keys: list[tuple[str, str, int, int]], rounds: int, cfg: dict) -> int:
    """``--check ITERS``: re-run each ``(task, method, seed, budget)`` in ``keys`` for its first ``min(ITERS,
    budget)`` queries (a run's first queries do not depend on its budget; no checkpoint is read or written) and
    compare them with the committed rows of ``out/bo_iters.csv.gz``, writing nothing.

    Compared per iteration (to 1e-9 relative): the queried value ``y`` where the table has it (rows written since
    2026-11-27), else the best regret so far, a weaker test (queries that do not improve on the best leave it
    unchanged), so the verdict then says how many times the best improved within the compared iterations.  A
    differing run's verdict gives both values at its first difference and their relative difference: a network
    surrogate's float32 steps round differently with the number of cores XLA:CPU is given (``taskset``; measured
    on Branin LoFi-TS seed 0, query 1: 1e-6 relative between one core and two), so a difference of that size
    alone is rounding, not a change of method.
    Returns the exit status: 1 when a run differs, else 0."""
    path = os.path.join(out, "bo_iters.csv.gz")
    if not os.path.exists(path):
        raise SystemExit(f"--check: no committed {path} to compare with (give the table's folder as --out)")
    table = pd.read_csv(path)
    if "y" not in table:
        table["y"] = np.nan
    clock, differs = CompileClock(), []
    for task, method, seed, budget in keys:
        old = table[(table.task == task) & (table.method == method) & (table.seed == seed)].sort_values("iter")
        label = f"[check bo] {task} {method} seed {seed}:"
        if old.empty:
            print(f"{label} not comparable (not in the table)", flush=True)
            continue
        k = min(rounds, budget, len(old))
        _, new = one_run(task, method, seed, k, clock, cfg, ckpt_dir=None)
        old = old.iloc[:k]
        by_y = bool(old["y"].notna().all())
        col = "y" if by_y else "regret"
        same = np.isclose(new[col].to_numpy(), old[col].to_numpy(), rtol=1e-9, atol=1e-12)
        if same.all():
            ups = int((np.diff(old["regret"].to_numpy()) < 0).sum())
            how = "values" if by_y else f"best regrets (the best improved {ups} time{'' if ups == 1 else 's'} in them)"
            print(f"{label} re-made: {k} queries' {how} equal", flush=True)
        else:
            differs.append(f"{task} {method} seed {seed}")
            i = int(np.flatnonzero(~same)[0])
            a, b = float(new[col].to_numpy()[i]), float(old[col].to_numpy()[i])
            print(f"{label} DIFFERS from query {int(old['iter'].to_numpy()[i])} ({col} {a:.10g} against the table's "
                  f"{b:.10g}, relative {abs(a - b) / max(abs(b), 1e-300):.1e})", flush=True)
    if differs:
        print("--check: runs not re-made by this code: " + "; ".join(differs), flush=True)
    return int(bool(differs))


def iters_path(out: str) -> str:
    """``out/bo_iters.csv.gz``; an uncompressed ``bo_iters.csv`` left by an older version is compressed into it
    first (so ``--append`` and ``--report`` keep working on old output folders)."""
    path, legacy = os.path.join(out, "bo_iters.csv.gz"), os.path.join(out, "bo_iters.csv")
    if os.path.exists(legacy):
        old = pd.read_csv(legacy)
        if os.path.exists(path):
            old = pd.concat([old, pd.read_csv(path)], ignore_index=True)
        old.to_csv(path + ".tmp", index=False, compression="gzip")
        os.replace(path + ".tmp", path)
        os.remove(legacy)
    return path


# ------------------------------------------------------------------------------------------------ time vs n
def time_vs_n(methods: list[str], ns: list[int], out: str, clock: CompileClock, cfg: dict, reps: int = 3) -> None:
    """Seconds for one ask + tell on Hartmann6 after ``n`` uniform points told, for each method and ``n``."""
    import banditkit as bk
    from banditkit.environments.bo_functions import make_function

    f = make_function("hartmann6")
    path = os.path.join(out, "bo_time_n.csv")
    for method in methods:
        if method in ("tpe", "random"):
            continue
        for n in ns:
            rng = np.random.default_rng(n)
            x0 = rng.random((n, 6))
            if method == "botorch":
                times = []
                for r in range(reps + 1):
                    _, t, _ = run_botorch(f, np.vstack([x0, rng.random((1, 6))]), 1, r)
                    times.append(t[0])
                times, comp = times[1:], 0.0
            else:
                sur, acq, kw, _ = parse_method(method)
                opt = bk.BayesOpt([(0.0, 1.0)] * 6, surrogate=sur, acquisition=acq, direction="minimize", seed=0,
                                  n_initial=6, n_candidates=cfg["n_candidates"], **kw)
                opt.tell(x0, [float(f.value(x)) for x in x0])
                times, comp = [], 0.0
                clock.take()
                for _ in range(reps + 1):
                    t0 = time.perf_counter()
                    x = opt.ask()
                    opt.tell(x, float(f.value(x)))
                    c = clock.take()
                    comp += c
                    times.append(time.perf_counter() - t0 - c)
                times = times[1:]
            append_csv(path, pd.DataFrame([dict(method=method, n=n, median_s=float(np.median(times)),
                                             min_s=float(np.min(times)), max_s=float(np.max(times)),
                                             compile_s=comp)]))
            print(f"[time-n] {method} n={n}: {np.median(times):.3f} s/iter", flush=True)


# ------------------------------------------------------------------------------------------------------ report
def _commands_md(command: str) -> str:
    """``command``: the run's command line, or several (one per line: a first run, then its ``--append`` runs)."""
    cmds = [f"`{c}`" for c in command.splitlines() if c.strip()]
    return commands_md(cmds, how="; `--append` runs add rows")


def checkpointed_runs(ckpt_dir: str | None, runs: pd.DataFrame) -> pd.DataFrame:
    """Per-iteration rows (the columns of bo_iters.csv.gz plus ``budget``, ``fit_s``, ``acq_s`` and ``finished``) of the
    checkpointed runs; ``finished`` is False for a run with no row in ``runs`` (interrupted: what it measured so far).
    The checkpoints are the only record of the split of a peer's ask time into fit and acquisition."""
    from banditkit.environments.bo_functions import make_function

    if not ckpt_dir or not os.path.isdir(ckpt_dir):
        return pd.DataFrame()
    done = set(map(tuple, runs[["task", "method", "seed"]].astype(str).to_numpy()))
    frames = []
    for name in sorted(os.listdir(ckpt_dir)):
        stem, ext = os.path.splitext(name)
        task, _, rest = stem.partition("_")
        method, _, seed = rest.rpartition("_seed")
        if ext != ".npz" or task not in TASKS or method not in METHODS or not seed.isdigit():
            continue
        z = load_checkpoint(os.path.join(ckpt_dir, name))
        k = len(z["ys"])
        if k == 0:
            continue
        fname, dim, _ = TASKS[task]
        f = make_function(fname, dim)
        d = len(z["X"]) - k
        warm_best = -float(np.max(z["G"][:d]))
        regret = best_regret(warm_best, z["ys"], f.minimum)
        frames.append(pd.DataFrame(dict(task=task, method=method, seed=int(seed), iter=np.arange(1, k + 1),
                                        n=d + np.arange(k), regret=regret, time_s=z["times"], compile_s=0.0,
                                        budget=int(z["budget"]), fit_s=z.get("part_fit_s", np.full(k, np.nan)),
                                        acq_s=z.get("part_acq_s", np.full(k, np.nan)),
                                        finished=(task, method, seed) in done)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _partials_md(partial: pd.DataFrame, iters: pd.DataFrame, ckpt_dir: str) -> list[str]:
    """The 'Partial runs' section: how far each interrupted run got and its regret against the finished methods'
    regret at the same iteration."""
    lines = ["", "## Partial runs (checkpointed after every query; re-running their command resumes them)", "",
             f"Checkpoints: `{ckpt_dir}`.  Regret at iteration k: this run against the finished methods' mean "
             "over their seeds at the same k.", "",
             "| task | method | seed | queries done | regret at k | others at k (best three) |",
             "|---|---|---|---|---|---|"]
    for (t, m, sd), d in partial.groupby(["task", "method", "seed"]):
        k = int(d.iter.max())
        at_k = iters[(iters.task == t) & (iters.iter == k)].groupby("method").regret.mean().sort_values()
        others = ", ".join(f"{om} {v:.3g}" for om, v in at_k.head(3).items()) or "—"
        lines.append(f"| {t} | {m} | {sd} | {k} / {int(d.budget.iloc[0])} | {d.regret.iloc[-1]:.3g} | {others} |")
    return lines


def _ask_time_md(ck: pd.DataFrame) -> list[str]:
    """How a peer's ask time (fit + acquisition) grows with n, from the checkpoints (finished and partial runs)."""
    timed = ck.dropna(subset=["fit_s"]) if len(ck) else ck  # no checkpoints (peers not run): an empty frame
    if timed.empty:
        return []
    edges = np.array([0, 100, 200, 300, 400, 500, 600, 700, 800, 10**9])
    timed = timed.assign(q=pd.cut(timed.iter, edges, right=True))
    lines = ["", "### Peer ask time as n grows (from the run checkpoints)", "",
             "Median seconds over the queries in each window and over the seeds; fit = marginal-likelihood fit of the "
             "GP, acq = LogEI optimisation (`optimize_acqf`, 8 restarts, 256 raw samples).", "",
             "| task | method | seeds (finished + partial) | queries | n | fit s | acq s | ask s |",
             "|---|---|---|---|---|---|---|---|"]
    for (t, m, _q), d in timed.groupby(["task", "method", "q"], observed=True):
        fin = d.groupby("seed").finished.first()
        lines.append(f"| {t} | {m} | {int(fin.sum())} + {int((~fin).sum())} | {int(d.iter.min())}–{int(d.iter.max())} "
                     f"| {int(d.n.min())}–{int(d.n.max())} | {d.fit_s.median():.1f} | {d.acq_s.median():.1f} "
                     f"| {d.time_s.median():.1f} |")
    return lines


def _machine_md(out: str, machine) -> str:
    """The machine line of the runs (``bo_machine.csv``, one row per run written when it ended: the machine and
    that run's load average, not the report's); without that file, the machine now, marked as such."""
    path = os.path.join(out, "bo_machine.csv")
    if not os.path.exists(path):
        return machine() + " (at report time)"
    rows = pd.read_csv(path)
    loads = ", ".join(f"{x:.1f}" for x in rows.load_average.dropna())
    return rows.machine.iloc[-1] + (f" (load average at the end of each run: {loads})" if loads else "")


def pareto_points(iters: pd.DataFrame, mean: pd.Series, tasks: list[str],
                  methods: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """Time against quality, per group of tasks: (title, frame of s_per_iter / avg_rank / on_front per method).

    Average ranks are comparable only over the same tasks, so each group ranks the methods run on all its tasks:
    every task with the methods run on all of them, and, where some methods skipped tasks, the tasks every
    method ran.  Seconds per iteration: median over those tasks' iterations."""
    groups = []
    everywhere = [m for m in methods if all((t, m) in mean.index for t in tasks)]
    if len(everywhere) > 1:
        where = f"all {len(tasks)} tasks" if len(tasks) > 1 else "the one task"
        groups.append((f"{where}, the {len(everywhere)} methods run on all", tasks, everywhere))
    common = [t for t in tasks if all((t, m) in mean.index for m in methods)]
    if len(everywhere) < len(methods) and common:
        groups.append((f"the {len(common)} tasks every method ran", common, methods))
    out = []
    for title, ts, ms in groups:
        r = avg_ranks(mean, ts, ms)
        it = iters[iters.task.isin(ts)].groupby("method").time_s.median()
        df = pd.DataFrame({"s_per_iter": [it[m] for m in ms], "avg_rank": [float(np.mean(r[m])) for m in ms]},
                          index=ms)
        df["on_front"] = df.index.isin(pareto_front(df.s_per_iter, df.avg_rank))
        out.append((title, df))
    return out


def _pareto_md(points: list[tuple[str, pd.DataFrame]]) -> list[str]:
    if not points:  # fewer than two methods to compare
        return []
    lines = ["", "## Time against quality (Pareto front; plot `bo_pareto.png`)", "",
             "A method is on the front when no other is both faster (median s / iteration) and better (average rank "
             "over the same tasks).", ""]
    for title, df in points:
        front = df[df.on_front].sort_values("s_per_iter")
        lines.append(f"- {title}: " + " → ".join(f"`{m}` ({r.s_per_iter:.3g} s, rank {r.avg_rank:.2f})"
                                                 for m, r in front.iterrows()))
    return lines


def report(out: str, command: str, not_run: dict[str, str], ckpt_dir: str | None = None) -> None:
    """Write bo.md and the plots from the CSVs; ``ckpt_dir``: where the runs' checkpoints are (None: none); an
    unfinished one shows as a partial run, and all give the peer's fit / acquisition time split."""
    runs = pd.read_csv(os.path.join(out, "bo_runs.csv"))
    iters = pd.read_csv(iters_path(out))
    ck = checkpointed_runs(ckpt_dir, runs)
    partial = ck[~ck.finished.astype(bool)] if len(ck) else ck
    tasks = [t for t in TASKS if t in set(runs.task)]
    methods = [m for m in METHODS if m in set(runs.method)]
    g = runs.groupby(["task", "method"])["final_regret"]
    mean, err, cnt = g.mean(), g.agg(se), g.count()
    lines = ["# BO suite (seed 003 §12): final simple regret, mean ± s.e. over seeds (lower is better)", "",
             _commands_md(command), "", f"**Full protocol:** `{FULL_COMMAND}`", "",
             f"**Machine:** {_machine_md(out, provenance.machine)}", "",
             "Protocol: minimise f on [0,1]^d; d uniform warm-up points from `default_rng(seed)` shared by all "
             "methods, then the budget; regret = min f over warm-up + budget − f_min.  banditkit methods use "
             "`bk.BayesOpt` defaults (3×180 ELU MLP, rank 50) with `n_initial = d`.", ""]
    head = "| method | " + " | ".join(f"{t} (d={TASKS[t][1] or (2 if t == 'branin' else 6)}, "
                                      f"{int(runs[runs.task == t].budget.iloc[0])})" for t in tasks) + " | avg rank |"
    lines += [head, "|---" * (len(tasks) + 2) + "|"]
    ranks = avg_ranks(mean, tasks, methods)
    for m in methods:
        cells = []
        for t in tasks:
            part = partial[(partial.task == t) & (partial.method == m)] if len(partial) else partial
            if (t, m) in mean.index:
                spread = f" ± {err[(t, m)]:.2g}" if cnt[(t, m)] > 1 else ""  # one seed: no standard error
                cells.append(f"{mean[(t, m)]:.3g}{spread} ({cnt[(t, m)]})")
            elif len(part):
                k = part.groupby("seed").iter.max()
                cells.append(f"partial: {len(k)} seed(s) at {k.min()}–{k.max()} / {int(part.budget.iloc[0])} it.")
            else:
                cells.append("not run")
        r = ranks.get(m, [])
        rank = f"{np.mean(r):.2f}" + ("" if len(r) == len(tasks) else f" ({len(r)} tasks)") if r else "—"
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {rank} |")
    lines += ["", "Cells: mean ± s.e. (number of seeds).  Average rank: rank of the mean regret among the methods "
              "run on that task (1 = best), averaged over the tasks the method was run on.", ""]
    # timing table
    lines += ["## Time per iteration (ask + tell, objective and JAX compilation excluded)", "",
              "| method | median s / iter (all tasks) | mean s / iter | compile s per run (mean) | runs |",
              "|---|---|---|---|---|"]
    for m in methods:
        r = runs[runs.method == m]
        it = iters[iters.method == m]
        lines.append(f"| {m} | {it.time_s.median():.4f} | {it.time_s.mean():.4f} | {r.compile_s.mean():.1f} | "
                     f"{len(r)} |")
    tn_path = os.path.join(out, "bo_time_n.csv")
    if os.path.exists(tn_path):
        tn = pd.read_csv(tn_path)
        ns = sorted(tn.n.unique())
        lines += ["", "### Time for one ask + tell against n (Hartmann6, n uniform points told first; median of 3)",
                  "", "| method | " + " | ".join(f"n={n}" for n in ns) + " |", "|---" * (len(ns) + 1) + "|"]
        for m in [m for m in METHODS if m in set(tn.method)]:
            cells = [tn[(tn.method == m) & (tn.n == n)].median_s for n in ns]
            lines.append(f"| {m} | " + " | ".join(f"{c.iloc[0]:.3f} s" if len(c) else "—" for c in cells) + " |")
    points = pareto_points(iters, mean, tasks, methods)
    lines += _pareto_md(points)
    lines += _ask_time_md(ck)
    if len(partial):
        lines += _partials_md(partial, iters, os.path.relpath(ckpt_dir))
    absent = {m: "not in this run's --methods" for m in METHODS if m not in set(runs.method) and m not in not_run}
    absent.update({t: "not in this run's --tasks" for t in TASKS if t not in tasks})
    if not_run or absent:
        lines += ["", "**Not run:**", ""] + [f"- `{k}`: {v}" for k, v in {**not_run, **absent}.items()]
    notes_path = os.path.join(out, "bo_notes.md")
    if os.path.exists(notes_path):
        with open(notes_path) as fh:
            lines += ["", fh.read().strip()]
    lines += ["", "Peer numbers measured on the same machine kind by the anchor (5 seeds, less contention): "
              "`shared/research/anchor-bo-peers.md`."]
    with open(os.path.join(out, "bo.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    _plots(out, runs, iters, tasks, methods, partial)
    _pareto_plot(out, points)


def _curves_plot(path: str, iters: pd.DataFrame, tasks: list[str], methods: list[str],
                 partial: pd.DataFrame | None = None) -> None:
    """Best-so-far regret against iteration, one panel per task, mean ± s.e. over seeds for each method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    cols = min(len(tasks), 3)
    rows = int(np.ceil(len(tasks) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    # one colour and line style per method in every panel (peers dashed), and one legend for all methods
    colours = plots.method_colours(len(methods))
    style = {m: dict(color=c, ls="--" if m in PEERS else "-") for m, c in zip(methods, colours, strict=True)}
    for ax, t in zip(axes.ravel(), tasks, strict=False):
        for m in methods:
            d = iters[(iters.task == t) & (iters.method == m)]
            if d.empty:
                continue
            piv = d.pivot_table(index="iter", columns="seed", values="regret")
            mu = piv.mean(axis=1)
            s = piv.std(axis=1, ddof=1) / np.sqrt(piv.shape[1]) if piv.shape[1] > 1 else 0 * mu
            plots.band(ax, mu.index, mu.values, s.values, alpha=0.12, label=m, lw=1.6, **style[m])
        if partial is not None and len(partial):  # interrupted runs: one dotted line per seed, as far as they got
            for (m, _), d in partial[(partial.task == t) & partial.method.isin(methods)].groupby(["method", "seed"]):
                ax.plot(d.iter, d.regret, lw=1.0, color=style[m]["color"], ls=":")
        ax.set_yscale("log")
        ax.set_title(t)
        ax.set_xlabel("iteration (after warm-up)")
        ax.set_ylabel("best simple regret")
    for ax in axes.ravel()[len(tasks):]:
        ax.axis("off")
    handles = [Line2D([], [], lw=1.6, **style[m]) for m in methods]
    labels = list(methods)
    if partial is not None and len(partial):
        handles.append(Line2D([], [], lw=1.0, color="grey", ls=":"))
        labels.append("partial run (one seed, interrupted)")
    fig.legend(handles, labels, loc="lower center", ncol=min(len(methods), 6), fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)



def _plots(out: str, runs: pd.DataFrame, iters: pd.DataFrame, tasks: list[str], methods: list[str],
           partial: pd.DataFrame | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    headline = [m for m in methods if m in HEADLINE]
    _curves_plot(os.path.join(out, "bo_curves.png"), iters, tasks, headline if len(headline) >= 2 else methods,
                 partial)
    _curves_plot(os.path.join(out, "bo_curves_all.png"), iters, tasks, methods, partial)

    fig, ax = plt.subplots(figsize=(6, 4))
    tn_path = os.path.join(out, "bo_time_n.csv")
    if os.path.exists(tn_path):
        tn = pd.read_csv(tn_path)
        for m in [m for m in METHODS if m in set(tn.method)]:
            d = tn[tn.method == m].sort_values("n")
            ax.errorbar(d.n, d.median_s, yerr=[d.median_s - d.min_s, d.max_s - d.median_s], marker="o", label=m,
                        capsize=3, ls="--" if m in PEERS else "-")
        ax.set_title("one ask + tell against n (Hartmann6)")
    else:
        for m in methods:
            d = iters[iters.method == m].groupby("n").time_s.median()
            ax.plot(d.index, d.values, label=m)
        ax.set_title("time per iteration against n (median over tasks, seeds)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if os.path.exists(tn_path):  # tick at each measured n, without the log axis' crowded minor labels
        ax.set_xticks(sorted(tn.n.unique()), [str(n) for n in sorted(tn.n.unique())])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("n (evaluations told)")
    ax.set_ylabel("seconds (compilation excluded)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bo_time.png"), dpi=110)
    plt.close(fig)


def _pareto_plot(out: str, points: list[tuple[str, pd.DataFrame]]) -> None:
    """``bo_pareto.png``: median seconds per iteration (log) against average rank, one panel per task group, the
    Pareto front joined by a step line; a method under 1 ms per iteration (random search) is drawn at 1 ms."""
    panels = [(title, df.rename(columns={"s_per_iter": "cost", "avg_rank": "rank"})) for title, df in points]
    plots.pareto_plot(os.path.join(out, "bo_pareto.png"), panels, peers=PEERS, floor=1e-3,
                      xlabel="median seconds per iteration (ask + tell, compilation excluded)",
                      ylabel="average rank of final regret (1 = best)",
                      title="BO suite: time per iteration against quality (squares: peers; red: on the front)")


# -------------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", default=",".join(SMALL_TASKS), help=f"comma list from {list(TASKS)}")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma list from {METHODS}")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..n-1")
    p.add_argument("--seed-list", default="", help="comma list of seeds to run instead of 0..n-1 (e.g. one long "
                   "run per core: --seed-list 1)")
    p.add_argument("--budget-scale", type=float, default=1.0, help="multiply every task's budget (reduced runs)")
    p.add_argument("--n-candidates", type=int, default=1024, help="Sobol candidates of the banditkit methods")
    p.add_argument("--time-n", default="", help="comma list of n for the time-per-iteration-vs-n measurement")
    p.add_argument("--time-methods", default="gp_ei,hilofi_ts,lrkf_ts,botorch")
    p.add_argument("--quick", action="store_true", help="smoke run: branin only, 2 seeds, budget 8")
    p.add_argument("--out", default=options.RESULTS)
    p.add_argument("--append", action="store_true", help="keep existing CSVs and skip runs already in them")
    p.add_argument("--replace", action="store_true",
                   help="like --append, but first delete the rows of this command's task x method x seed runs from "
                        "bo_runs.csv and bo_iters.csv.gz, so they are run again (e.g. after a library change; a "
                        "BoTorch run resumes from its checkpoint: delete that to run it afresh)")
    p.add_argument("--report", action="store_true", help="only rebuild bo.md and the plots from the CSVs")
    p.add_argument("--checkpoint-dir", default=None,
                   help="where BoTorch runs save their state after every query (default OUT/bo_checkpoints); "
                        "re-running the same command resumes an interrupted run; 'none' disables")
    p.add_argument("--check", type=int, default=None, metavar="ITERS",
                   help="write nothing: run this command's task x method x seed runs for their first ITERS queries "
                        "and compare them with bo_iters.csv.gz in --out (check_runs); exit status 1 where a run "
                        "differs (this code does not re-make it)")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    os.makedirs(args.out, exist_ok=True)
    command = provenance.suite_command("bo", sys.argv[1:] if argv is None else argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [t for t in tasks if t not in TASKS] + [m for m in methods if m not in METHODS]
    if bad:
        raise SystemExit(f"unknown task(s)/method(s) {bad}; tasks {list(TASKS)}, methods {METHODS}")
    seeds, scale = list(range(args.seeds)), args.budget_scale
    if args.seed_list:
        try:
            seeds = [int(s) for s in args.seed_list.split(",") if s.strip()]
        except ValueError:
            raise SystemExit(f"--seed-list takes comma-separated integers, got {args.seed_list!r}") from None
    if args.quick:
        tasks, seeds, scale = ["branin"], [0, 1], 8 / 40
    missing = peers_available()
    not_run = {m: missing[m] for m in methods if m in missing}
    for m in not_run:
        print(f"peer {m} skipped: {not_run[m]}", file=sys.stderr)
    methods = [m for m in methods if m not in not_run]
    if args.check is not None:
        if args.check < 1:
            raise SystemExit(f"--check must be >= 1 queries, got {args.check}")
        if args.append or args.replace or args.report or args.time_n:
            raise SystemExit("--check writes nothing: it cannot be used with --append, --replace, --report or "
                             "--time-n")
        keys = [(t, m, s, task_budget(t, scale)) for t in tasks for m in methods for s in seeds]
        sys.exit(check_runs(args.out, keys, args.check, dict(n_candidates=args.n_candidates)))
    cmd_path = os.path.join(args.out, "bo_command.txt")
    ckpt_dir = None if args.checkpoint_dir == "none" else (args.checkpoint_dir
                                                           or os.path.join(args.out, "bo_checkpoints"))
    if args.report:
        if os.path.exists(cmd_path):
            with open(cmd_path) as fh:
                command = fh.read().strip()
        report(args.out, command, not_run, ckpt_dir)
        return
    args.append = args.append or args.replace
    earlier = []
    if args.append and os.path.exists(cmd_path):
        with open(cmd_path) as fh:
            earlier = [ln.strip() for ln in fh]
    if command not in earlier:  # --append: this run's command joins the earlier ones (a resumed run's is there)
        with open(cmd_path, "a" if args.append else "w") as fh:
            fh.write(command + "\n")
    with open(cmd_path) as fh:
        command = fh.read().strip()
    runs_path, its_path = os.path.join(args.out, "bo_runs.csv"), iters_path(args.out)
    if args.replace:
        dropped = drop_runs(args.out, {(t, m, s) for t in tasks for m in methods for s in seeds})
        print(f"--replace: {dropped} earlier run(s) deleted, to be run again", flush=True)
    done = set()
    if args.append and os.path.exists(runs_path):
        done = set(map(tuple, pd.read_csv(runs_path)[["task", "method", "seed"]].astype(str).to_numpy()))
    else:
        for path in (runs_path, its_path, os.path.join(args.out, "bo_time_n.csv"),
                     os.path.join(args.out, "bo_machine.csv")):
            if os.path.exists(path):
                os.remove(path)
    clock = CompileClock()
    cfg = dict(n_candidates=args.n_candidates)
    for task in tasks:
        budget = task_budget(task, scale)
        for method in methods:
            for seed in seeds:
                if (task, method, str(seed)) in done:
                    continue
                t0 = time.perf_counter()
                row, iters = one_run(task, method, seed, budget, clock, cfg, ckpt_dir)
                row["wall_s"] = time.perf_counter() - t0  # this process's part of a resumed run (run_s: all)
                append_csv(runs_path, pd.DataFrame([row]))
                append_csv(its_path, iters)
                print(f"[{task}] {method} seed {seed}: regret {row['final_regret']:.4g}  "
                      f"{row['median_iter_s']:.3f} s/iter  compile {row['compile_s']:.1f}s  wall {row['wall_s']:.0f}s",
                      flush=True)
    if args.time_n:
        ns = [int(n) for n in args.time_n.split(",") if n.strip()]
        tm = [m for m in args.time_methods.split(",") if m and m not in not_run]
        time_vs_n(tm, ns, args.out, clock, cfg)
    # the machine line names Optuna's version: its TPE rows differ between releases (4.9 and 5.0 on Branin)
    machine = provenance.machine(load=False, packages=("optuna",))
    append_csv(os.path.join(args.out, "bo_machine.csv"),
               pd.DataFrame([dict(machine=machine, load_average=provenance.load_average())]))
    report(args.out, command, not_run, ckpt_dir)
