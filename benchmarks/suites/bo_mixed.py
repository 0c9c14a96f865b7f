"""Mixed-space BO (issue 53): banditkit's Optuna sampler against Optuna's TPE, GPSampler, BoTorch and random search.

Every method is an Optuna sampler driving the same study loop (``study.optimize``), so the objective, the search
space and the bookkeeping are identical; only ``sampler=`` differs.  Tasks (all minimised):

``hgb_adult``       ``HistGradientBoostingClassifier`` on a fixed 2,000-row stratified sample of the shipped Adult
                    table, 3-fold stratified CV log loss: ``learning_rate`` Float(1e-3, 1, log), ``max_leaf_nodes``
                    Int(4, 128, log), ``max_depth`` Int(2, 12), ``min_samples_leaf`` Int(2, 200, log),
                    ``l2_regularization`` Float(1e-6, 10, log), ``max_features`` Float(0.3, 1, step 0.1),
                    ``categories`` Categorical(native, ordinal) (the eight string columns as categories, or as their
                    integer codes); ``max_iter = 50``, one thread.  Optimum unknown: the table reports the value.
``ackley_mixed``    Ackley on 5 coordinates — ``x0..x2`` Float(-5, 5), ``x3, x4`` Int(-5, 5) — and a switch ``c`` of
                    three choices that moves the centre and adds an offset: ``f = ackley(x − s_c) + δ_c``,
                    ``s = (0, 1.5, −2.5)``, ``δ = (0, 0.5, 1)``.  Minimum 0 at ``c = "a"``, ``x = 0``.
``hartmann_mixed``  Hartmann-6 with ``x4, x5`` on the grid ``k/10`` (Int(0, 10), shifted so that the grid holds the
                    optimum's coordinates) and a switch ``c`` among the function, its reflection ``x → 1 − x`` (+0.3)
                    and a permutation of its coordinates (+0.6).  Minimum −3.32237 at ``c = "h"``.

Methods: ``bk_auto`` = ``BanditkitSampler(surrogate="auto")`` (the GP with EI up to 100 evaluations, HiLoFi-TS
after: :mod:`banditkit.bo.auto`), ``bk_hilofi_ts`` = ``BanditkitSampler(surrogate="hilofi",
acquisition="thompson")`` (HiLoFi on a 3×180 MLP, Thompson sampling: the sampler's default until issue 71),
``bk_gp_ei`` = ``BanditkitSampler(surrogate="gp", acquisition="ei")``, ``tpe`` = ``TPESampler``, ``gpsampler`` =
Optuna's ``GPSampler`` (needs torch), ``botorch`` = ``optuna_integration.BoTorchSampler`` (needs
``optuna-integration`` and ``botorch``; see :data:`BOTORCH_NOTE`), ``random`` = ``RandomSampler``; every one seeded
with the run's seed and, where it has one, ``n_startup_trials=10``.  Seconds per trial = the time of the trial's
``suggest_*`` calls (where the sampler works), the objective excluded; JAX compilation falls in
banditkit's first BO trial.

Outputs (``--out``, default ``benchmarks/results``): ``bo_mixed_runs.csv`` (task × method × seed: final best,
seconds per trial), ``bo_mixed_iters.csv`` (best so far after each trial), ``bo_mixed.md``, ``bo_mixed_curves.png``.
Runs are appended as they finish; a re-run skips the (task, method, seed) rows already in ``bo_mixed_runs.csv``.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from benchmarks.harness import options, provenance
from benchmarks.harness.options import RESULTS
from benchmarks.harness.tables import append_csv, se

#: the peers' distributions, whose versions each run's machine line names (their samplers change between releases)
PEER_PACKAGES = ("optuna", "optuna-integration", "botorch", "scikit-learn")
METHODS = ["bk_auto", "bk_hilofi_ts", "bk_gp_ei", "tpe", "gpsampler", "botorch", "random"]
TASKS = ["hgb_adult", "ackley_mixed", "hartmann_mixed"]
N_STARTUP = 10
BOTORCH_NOTE = (
    "`botorch` = `optuna_integration.BoTorchSampler(n_startup_trials=10, seed=seed)` with its default candidates "
    "function (single objective: a `SingleTaskGP` with standardised outcomes, log expected improvement maximised by "
    "`optimize_acqf`, 10 restarts from 512 raw samples).  Int and categorical parameters go through Optuna's own "
    "`_SearchSpaceTransform`: log parameters in log space, integers and stepped floats relaxed to a continuous "
    "interval widened by half a step and rounded to the grid afterwards, each categorical one-hot encoded as "
    "continuous [0, 1] coordinates and decoded by argmax — the GP and the acquisition see a relaxed continuous box.")


# ---------------------------------------------------------------------------------------------------------- tasks
class Task:
    """``suggest(trial) -> params``, ``value(params) -> float`` (minimised), ``optimum`` (``None``: unknown)."""

    optimum: float | None = None

    def suggest(self, trial) -> dict:
        raise NotImplementedError

    def value(self, p: dict) -> float:
        raise NotImplementedError


def ackley(z: np.ndarray) -> float:
    d = z.size
    return float(-20.0 * math.exp(-0.2 * math.sqrt(np.sum(z**2) / d)) - math.exp(np.sum(np.cos(2 * math.pi * z)) / d)
                 + 20.0 + math.e)


class AckleyMixed(Task):
    optimum = 0.0
    SHIFT = {"a": 0.0, "b": 1.5, "c": -2.5}
    OFFSET = {"a": 0.0, "b": 0.5, "c": 1.0}

    def suggest(self, trial) -> dict:
        p = {f"x{j}": trial.suggest_float(f"x{j}", -5.0, 5.0) for j in range(3)}
        p.update({f"x{j}": trial.suggest_int(f"x{j}", -5, 5) for j in (3, 4)})
        p["c"] = trial.suggest_categorical("c", ["a", "b", "c"])
        return p

    def value(self, p: dict) -> float:
        x = np.array([p[f"x{j}"] for j in range(5)], np.float64)
        return ackley(x - self.SHIFT[p["c"]]) + self.OFFSET[p["c"]]


_H6_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8],
                  [17, 8, 0.05, 10, 0.1, 14]], np.float64)
_H6_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                         [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]], np.float64)
_H6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
H6_ARGMIN = np.array([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573])
H6_MIN = -3.32237


def hartmann6(x: np.ndarray) -> float:
    return float(-np.sum(_H6_ALPHA * np.exp(-np.sum(_H6_A * (x - _H6_P) ** 2, axis=1))))


class HartmannMixed(Task):
    optimum = H6_MIN
    GRID_SHIFT = H6_ARGMIN[4:] - np.round(H6_ARGMIN[4:], 1)  # the grid k/10 + shift holds the optimum
    PERM = np.array([5, 0, 4, 1, 3, 2])

    def suggest(self, trial) -> dict:
        p = {f"x{j}": trial.suggest_float(f"x{j}", 0.0, 1.0) for j in range(4)}
        p.update({f"x{j}": trial.suggest_int(f"x{j}", 0, 10) for j in (4, 5)})
        p["c"] = trial.suggest_categorical("c", ["h", "r", "p"])
        return p

    def value(self, p: dict) -> float:
        x = np.array([p[f"x{j}"] for j in range(4)] + [p["x4"] / 10, p["x5"] / 10], np.float64)
        x[4:] += self.GRID_SHIFT
        if p["c"] == "r":
            return hartmann6(1.0 - x) + 0.3
        if p["c"] == "p":
            return hartmann6(x[self.PERM]) + 0.6
        return hartmann6(x)


class HGBAdult(Task):
    """3-fold CV log loss of a HistGradientBoostingClassifier on a 2,000-row sample of Adult (module docstring)."""

    def __init__(self, n_rows: int = 2000):
        import banditkit as bk

        df = bk.datasets.load("adult")
        df = df if isinstance(df, pd.DataFrame) else pd.DataFrame(df)
        y = (df["income"].astype(str).str.strip().str.startswith(">50K")).to_numpy(np.int64)
        rng = np.random.default_rng(0)
        idx = np.concatenate([rng.choice(np.flatnonzero(y == k), size=int(round(n_rows * np.mean(y == k))),
                                         replace=False) for k in (0, 1)])
        X = df.drop(columns=["income"]).iloc[np.sort(idx)].reset_index(drop=True)
        self.y = y[np.sort(idx)]
        self.cat_cols = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
        self.X_native = X.copy()
        for c in self.cat_cols:
            self.X_native[c] = X[c].astype("category")
        self.X_ordinal = X.copy()
        for c in self.cat_cols:
            self.X_ordinal[c] = X[c].astype("category").cat.codes.astype(np.float64)

    def suggest(self, trial) -> dict:
        return dict(
            learning_rate=trial.suggest_float("learning_rate", 1e-3, 1.0, log=True),
            max_leaf_nodes=trial.suggest_int("max_leaf_nodes", 4, 128, log=True),
            max_depth=trial.suggest_int("max_depth", 2, 12),
            min_samples_leaf=trial.suggest_int("min_samples_leaf", 2, 200, log=True),
            l2_regularization=trial.suggest_float("l2_regularization", 1e-6, 10.0, log=True),
            max_features=trial.suggest_float("max_features", 0.3, 1.0, step=0.1),
            categories=trial.suggest_categorical("categories", ["native", "ordinal"]),
        )

    def value(self, p: dict) -> float:
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.model_selection import StratifiedKFold, cross_val_score
        from threadpoolctl import threadpool_limits

        kw = {k: v for k, v in p.items() if k != "categories"}
        native = p["categories"] == "native"
        clf = HistGradientBoostingClassifier(max_iter=50, early_stopping=False, random_state=0,
                                             categorical_features="from_dtype" if native else None, **kw)
        X = self.X_native if native else self.X_ordinal
        with threadpool_limits(1):
            s = cross_val_score(clf, X, self.y, cv=StratifiedKFold(3, shuffle=True, random_state=0),
                                scoring="neg_log_loss")
        return float(-np.mean(s))


def make_task(name: str) -> Task:
    return {"hgb_adult": HGBAdult, "ackley_mixed": AckleyMixed, "hartmann_mixed": HartmannMixed}[name]()


# -------------------------------------------------------------------------------------------------------- methods
def make_sampler(method: str, seed: int):
    import optuna

    if method == "bk_hilofi_ts":
        from banditkit.integrations.optuna import BanditkitSampler

        return BanditkitSampler(surrogate="hilofi", acquisition="thompson", seed=seed, n_startup_trials=N_STARTUP,
                                warn_independent_sampling=False)
    if method == "bk_auto":
        from banditkit.integrations.optuna import BanditkitSampler

        return BanditkitSampler(surrogate="auto", seed=seed, n_startup_trials=N_STARTUP,
                                warn_independent_sampling=False)
    if method == "bk_gp_ei":
        from banditkit.integrations.optuna import BanditkitSampler

        return BanditkitSampler(surrogate="gp", acquisition="ei", seed=seed, n_startup_trials=N_STARTUP,
                                warn_independent_sampling=False)
    if method == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=N_STARTUP)
    if method == "gpsampler":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=N_STARTUP)
    if method == "botorch":
        import warnings

        from optuna_integration import BoTorchSampler

        with warnings.catch_warnings():  # "BoTorchSampler is experimental": said once here, not once per run
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return BoTorchSampler(n_startup_trials=N_STARTUP, seed=seed)
    if method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise SystemExit(f"unknown method {method!r}; choose from {METHODS}")


def unavailable() -> dict[str, str]:
    """``{method: reason}`` for the methods that cannot run here (installed distributions are read from their
    metadata, nothing is imported)."""
    from importlib.metadata import PackageNotFoundError, version

    have: dict[str, str] = {}
    for dist in ("torch", "botorch", "optuna", "optuna-integration"):
        try:
            have[dist] = version(dist)
        except PackageNotFoundError:
            pass
    missing = sorted({"torch", "botorch", "optuna-integration"} - set(have))
    out: dict[str, str] = {}
    if "torch" in missing:
        out["gpsampler"] = "Optuna's GPSampler needs torch (`pip install torch`)"
    if missing:
        out["botorch"] = ("BoTorchSampler needs optuna-integration and botorch (`pip install "
                          "\"optuna-integration==<your optuna's version>\" \"botorch>=0.12\"`; missing: "
                          + ", ".join(missing) + ")")
    elif int(have["optuna-integration"].split(".")[0]) > int(have["optuna"].split(".")[0]):
        # optuna-integration 5's BoTorchSampler raises "requires Optuna v5.0.0 or newer" after the startup trials
        out["botorch"] = (f"optuna-integration {have['optuna-integration']} needs a newer optuna than "
                          f"{have['optuna']} (`pip install \"optuna-integration=={have['optuna']}\"`)")
    return out


def one_run(task: Task, name: str, method: str, seed: int, budget: int) -> tuple[dict, pd.DataFrame]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=make_sampler(method, seed))
    suggest_s: list[float] = []

    def objective(trial):
        t0 = time.perf_counter()
        p = task.suggest(trial)
        suggest_s.append(time.perf_counter() - t0)
        return task.value(p)

    t0 = time.perf_counter()
    study.optimize(objective, n_trials=budget)
    wall = time.perf_counter() - t0
    ys = np.array([t.value for t in study.trials], np.float64)
    best = np.minimum.accumulate(ys)
    opt = task.optimum
    iters = pd.DataFrame(dict(task=name, method=method, seed=seed, trial=np.arange(1, budget + 1), best=best,
                              regret=best - opt if opt is not None else np.nan, suggest_s=suggest_s))
    row = dict(task=name, method=method, seed=seed, budget=budget, final_best=float(best[-1]),
               final_regret=float(best[-1] - opt) if opt is not None else np.nan,
               best_params=repr(study.best_params), s_per_trial=float(np.mean(suggest_s)),
               s_per_bo_trial=float(np.mean(suggest_s[N_STARTUP:])) if budget > N_STARTUP else np.nan,
               median_s_per_trial=float(np.median(suggest_s)), wall_s=wall,
               **provenance.row_provenance(PEER_PACKAGES))
    return row, iters


# --------------------------------------------------------------------------------------------------------- report
def report(out: str, command: str, not_run: dict[str, str]) -> None:
    runs = pd.read_csv(os.path.join(out, "bo_mixed_runs.csv"))
    iters = pd.read_csv(os.path.join(out, "bo_mixed_iters.csv"))
    tasks = [t for t in TASKS if t in set(runs.task)]
    methods = [m for m in METHODS if m in set(runs.method)]
    lines = ["# Mixed-space BO: banditkit's Optuna sampler against TPE, GPSampler, BoTorch and random", "",
             __doc__.split("\n\n")[0].replace("\n", " "), "",
             "Final best value (minimised; mean ± s.e. over seeds; Ackley / Hartmann: simple regret, i.e. best − known "
             "minimum) and seconds per trial spent in the sampler (mean over the BO trials after the 10 startup "
             "trials; banditkit's includes its one-off JAX compilation).  Data: `hgb_adult` is real data (the "
             "shipped Adult table, a fixed 2,000-row sample); `ackley_mixed` and `hartmann_mixed` are synthetic.", ""]
    head = "| method | " + " | ".join(f"{t} ({'regret' if make_optimum(t) is not None else 'CV log loss'})"
                                     for t in tasks) + " | " + " | ".join(f"s/trial {t}" for t in tasks) + " |"
    lines += [head, "|" + "---|" * (1 + 2 * len(tasks))]
    for m in methods:
        cells, times = [], []
        for t in tasks:
            g = runs[(runs.task == t) & (runs.method == m)]
            col = g.final_regret if make_optimum(t) is not None else g.final_best
            best_mean = {mm: runs[(runs.task == t) & (runs.method == mm)][
                "final_regret" if make_optimum(t) is not None else "final_best"].mean() for mm in methods}
            mark = "**" if len(g) and np.isclose(col.mean(), min(best_mean.values())) else ""
            cells.append(f"{mark}{col.mean():.4g} ± {se(col):.2g}{mark} (n={len(g)})" if len(g) else "—")
            times.append(f"{g.s_per_bo_trial.mean():.3g}" if len(g) else "—")
        lines.append(f"| {m} | " + " | ".join(cells) + " | " + " | ".join(times) + " |")
    if "botorch" in methods:
        lines += ["", BOTORCH_NOTE]
    if not_run:
        lines += ["", "Not run here: " + "; ".join(f"`{m}`: {r}" for m, r in not_run.items())]
    lines += ["", "Best so far against trials: `bo_mixed_curves.png`; per run: `bo_mixed_runs.csv` (with the best "
              "parameters); per trial: `bo_mixed_iters.csv`.  A run of the same command skips the runs already in "
              "the CSV, so more seeds are added by re-running it with a larger `--seeds`.", "",
              "## Provenance", "", *provenance.csv_provenance(runs), "", f"This report: `{command}`", ""]
    with open(os.path.join(out, "bo_mixed.md"), "w") as fh:
        fh.write("\n".join(lines))
    _curves(os.path.join(out, "bo_mixed_curves.png"), iters, tasks, methods)


def make_optimum(task: str) -> float | None:
    return {"hgb_adult": None, "ackley_mixed": AckleyMixed.optimum, "hartmann_mixed": HartmannMixed.optimum}[task]


def _curves(path: str, iters: pd.DataFrame, tasks: list[str], methods: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    for ax, t in zip(axes[0], tasks, strict=True):
        col = "regret" if make_optimum(t) is not None else "best"
        for m in methods:
            g = iters[(iters.task == t) & (iters.method == m)]
            if g.empty:
                continue
            piv = g.pivot_table(index="trial", columns="seed", values=col)
            mean = piv.mean(axis=1)
            err = piv.std(axis=1, ddof=1) / np.sqrt(piv.shape[1]) if piv.shape[1] > 1 else 0 * mean
            ax.plot(mean.index, mean, label=m)
            ax.fill_between(mean.index, mean - err, mean + err, alpha=0.2)
        ax.set_title(t)
        ax.set_xlabel("trial")
        ax.set_ylabel("simple regret" if col == "regret" else "best CV log loss")
        if col == "regret":
            ax.set_yscale("log")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_run_arguments(p: argparse.ArgumentParser, methods: Sequence[str], seeds: int, out: str, what: str) -> None:
    """The options a race of Optuna samplers takes (``--methods``, ``--seeds``, ``--budget``, ``--out``,
    ``--report``, the BLAS threads); ``what``: the files ``--report`` rebuilds."""
    p.add_argument("--methods", default=",".join(methods), help=f"comma-separated, from {list(methods)}")
    p.add_argument("--seeds", type=int, default=seeds)
    p.add_argument("--budget", type=int, default=40, help="trials per run, the 10 startup trials included")
    p.add_argument("--out", default=out)
    p.add_argument("--report", action="store_true", help=f"only rebuild {what} from the CSVs")
    options.add_blas_threads(p)


def run_missing(tasks: dict[str, Task], methods: Sequence[str], seeds: int, budget: int, runs_csv: str,
                iters_csv: str, machine: str | None = None) -> None:
    """Run every (task, method, seed) not yet in ``runs_csv`` — seed-major, so a run stopped early has whole seeds
    of every task — appending its row to ``runs_csv`` and its trials to ``iters_csv`` as it finishes (``machine``:
    the machine line to record instead of :func:`one_run`'s)."""
    done = set()
    if os.path.exists(runs_csv):
        old = pd.read_csv(runs_csv)
        done = set(zip(old.task, old.method, old.seed, strict=True))
    for seed in range(seeds):
        for t, task in tasks.items():
            for m in methods:
                if (t, m, seed) in done:
                    continue
                row, it = one_run(task, t, m, seed, budget)
                if machine is not None:
                    row["machine"] = machine
                append_csv(runs_csv, pd.DataFrame([row]))
                append_csv(iters_csv, it)
                regret = "" if task.optimum is None else f", regret {row['final_regret']:.5g}"
                print(f"{t} {m} seed {seed}: best {row['final_best']:.5g}{regret}, {row['s_per_bo_trial']:.3g} "
                      f"s/trial, load {row['load']}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=provenance.PROG + " bo_mixed", description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, from {TASKS}")
    add_run_arguments(p, METHODS, 5, RESULTS, "bo_mixed.md and the plot")
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    tasks = options.names(args.tasks, TASKS, "tasks")
    methods = options.names(args.methods, METHODS, "methods")
    os.makedirs(args.out, exist_ok=True)
    command = provenance.command_line()
    not_run = {m: r for m, r in unavailable().items() if m in methods}
    runs_csv, iters_csv = (os.path.join(args.out, f) for f in ("bo_mixed_runs.csv", "bo_mixed_iters.csv"))
    if not args.report:
        run_missing({t: make_task(t) for t in tasks}, [m for m in methods if m not in not_run], args.seeds,
                    args.budget, runs_csv, iters_csv)
    report(args.out, command, not_run)
    return 0
