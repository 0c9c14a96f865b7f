"""A BO default judged on a held-out family (issue 71, item 1): COCO's ``bbob-mixint`` problems through Optuna.

Pre-registered in the README (candidate rule, family, seeds, budget, metrics, adoption rule).  Each problem is
``bbob-mixint`` function ``f`` in dimension 5, instance 1 (``cocoex``, ``pip install coco-experiment``): its first
``number_of_integer_variables`` variables are ``suggest_int(low, high)``, the others ``suggest_float(low, high)``;
the regret is the best value found minus the optimum, the problem's value at COCO's optimal solution.  The
samplers and the study loop are the ``bo_mixed`` suite's (:func:`benchmarks.suites.bo_mixed.one_run`: the same
``study.optimize``, the time of the trial's ``suggest_*`` calls as the sampler's seconds).

Usage::

    taskset -c 1 python -m benchmarks study bo_heldout --seeds 10 --budget 40
    python -m benchmarks study bo_heldout --report
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

from benchmarks.harness import options, provenance
from benchmarks.harness.tables import se
from benchmarks.suites import bo_mixed

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
FUNCTIONS = (2, 7, 11, 16, 21, 24)  # the second of each BBOB group and the last (README)
DIM, INSTANCE = 5, 1
METHODS = ("bk_auto", "bk_hilofi_ts", "tpe", "gpsampler")
CANDIDATE, BASELINE = "bk_auto", "bk_hilofi_ts"
PACKAGES = (*bo_mixed.PEER_PACKAGES, "coco-experiment")
#: the adoption rule's thresholds (README): share of problems ahead of TPE, level with / ahead of GPSampler, and
#: the largest ratio of seconds per model-based trial to GPSampler's
AHEAD_OF_TPE, LEVEL_WITH_GP, TIME_RATIO = 0.8, 0.5, 0.2


class CocoMixint(bo_mixed.Task):
    """``bbob-mixint`` function ``function`` (dimension ``dim``, instance ``instance``) as a ``bo_mixed`` task."""

    def __init__(self, function: int, dim: int = DIM, instance: int = INSTANCE):
        try:
            import cocoex
        except ImportError as e:  # pragma: no cover - the bench extra installs it
            raise SystemExit("study bo_heldout needs COCO's Python package: pip install 'banditkit[bench]' "
                             "(or pip install coco-experiment)") from e
        self._suite = cocoex.Suite("bbob-mixint", "", f"dimensions: {dim} instance_indices: {instance}")
        self.problem = self._suite.get_problem_by_function_dimension_instance(function, dim, instance)
        self.n_int = int(self.problem.number_of_integer_variables)
        self.lo = np.asarray(self.problem.lower_bounds, np.float64)
        self.hi = np.asarray(self.problem.upper_bounds, np.float64)
        self.optimum = float(self.problem(self.optimal_solution()))
        self.name = f"f{function}"

    def optimal_solution(self) -> np.ndarray:
        """COCO's optimal solution ``(dim,)`` (on the integer grid): cocoex 2.8.2 writes it to a file in the working
        directory (``Problem._best_parameter("print")``), so it is written in a temporary one and read back."""
        import tempfile

        cwd = os.getcwd()
        with tempfile.TemporaryDirectory() as tmp:
            os.chdir(tmp)
            try:
                self.problem._best_parameter("print")
                return np.loadtxt(os.path.join(tmp, "._bbob_problem_best_parameter.txt"), ndmin=1)
            finally:
                os.chdir(cwd)

    def suggest(self, trial) -> dict:
        return {f"x{j}": (trial.suggest_int(f"x{j}", int(self.lo[j]), int(self.hi[j])) if j < self.n_int
                          else trial.suggest_float(f"x{j}", float(self.lo[j]), float(self.hi[j])))
                for j in range(self.lo.size)}

    def value(self, p: dict) -> float:
        return float(self.problem(np.array([p[f"x{j}"] for j in range(self.lo.size)], np.float64)))


def summary(runs: pd.DataFrame, method: str) -> dict:
    """The adoption rule's three counts for ``method`` (README): problems where its mean regret is below TPE's;
    problems where it is at most GPSampler's plus one standard error of the difference; and its mean seconds per
    model-based trial over GPSampler's (mean over all its runs, same runs and core)."""
    ahead = level = n = 0
    for _, g in runs.groupby("task"):
        m = g[g.method == method].final_regret
        t = g[g.method == "tpe"].final_regret
        gp = g[g.method == "gpsampler"].final_regret
        if m.empty or t.empty or gp.empty:
            continue
        n += 1
        ahead += int(m.mean() < t.mean())
        level += int(m.mean() <= gp.mean() + float(np.hypot(se(m), se(gp))))
    t_m = runs[runs.method == method].s_per_bo_trial.mean()
    t_gp = runs[runs.method == "gpsampler"].s_per_bo_trial.mean()
    ratio = float(t_m / t_gp) if t_gp > 0 else float("nan")
    return dict(method=method, problems=n, ahead_of_tpe=ahead, level_with_gp=level, time_ratio=ratio,
                passes=bool(n and ahead >= AHEAD_OF_TPE * n and level >= LEVEL_WITH_GP * n and ratio <= TIME_RATIO))


def report(out: str, command: str) -> str:
    runs = pd.read_csv(os.path.join(out, "bo_heldout_runs.csv"))
    tasks = [f"f{f}" for f in FUNCTIONS if f"f{f}" in set(runs.task)]
    methods = [m for m in METHODS if m in set(runs.method)]
    lines = ["# Held-out BO family: COCO bbob-mixint (dimension 5, instance 1) through Optuna", "",
             "Final simple regret (best value − the problem's optimum; mean ± s.e. over seeds, lower is better) and "
             "seconds per model-based trial spent in the sampler (mean over the trials after the 10 startup trials; "
             "banditkit's includes its one-off JAX compilation).  Pre-registration and write-up: `../README.md`.", "",
             "| problem | " + " | ".join(methods) + " |", "|" + "---|" * (1 + len(methods))]
    for t in tasks:
        g = runs[runs.task == t]
        means = {m: g[g.method == m].final_regret.mean() for m in methods}
        cells = []
        for m in methods:
            r = g[g.method == m].final_regret
            mark = "**" if len(r) and np.isclose(means[m], np.nanmin(list(means.values()))) else ""
            cells.append(f"{mark}{r.mean():.4g} ± {se(r):.2g}{mark} (n={len(r)})" if len(r) else "—")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines.append("| s / model-based trial | " + " | ".join(
        f"{runs[runs.method == m].s_per_bo_trial.mean():.3g}" for m in methods) + " |")
    lines += ["", "Adoption rule (README): ahead of TPE on ≥ 80 % of the problems, level with or ahead of GPSampler "
              "(mean ≤ GPSampler's + 1 s.e. of the difference) on ≥ 50 %, ≤ 1/5 of GPSampler's seconds per trial.",
              "", "| method | problems | ahead of TPE | level with / ahead of GPSampler | s/trial ÷ GPSampler's | "
              "passes |", "|---|---|---|---|---|---|"]
    for m in (CANDIDATE, BASELINE):
        if m in methods and {"tpe", "gpsampler"} <= set(methods):
            s = summary(runs, m)
            lines.append(f"| {m} | {s['problems']} | {s['ahead_of_tpe']} | {s['level_with_gp']} | "
                         f"{s['time_ratio']:.3f} | {'yes' if s['passes'] else 'no'} |")
    lines += ["", "Per run: `bo_heldout_runs.csv` (with the best parameters); per trial: `bo_heldout_iters.csv`.  "
              "A re-run of the same command skips the runs already in the CSV.", "",
              "## Provenance", "", *provenance.csv_provenance(runs), "", f"This report: `{command}`", ""]
    text = "\n".join(lines)
    with open(os.path.join(out, "bo_heldout.md"), "w") as fh:
        fh.write(text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=provenance.PROG + " study bo_heldout", description=__doc__.split("\n\n")[0])
    p.add_argument("--functions", default=",".join(map(str, FUNCTIONS)),
                   help="comma-separated bbob-mixint function numbers (the pre-registered six by default)")
    bo_mixed.add_run_arguments(p, METHODS, 10, HERE, "bo_heldout.md")
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    methods = options.names(args.methods, list(METHODS), "methods")
    functions = [int(f) for f in args.functions.split(",") if f.strip()]
    if not all(1 <= f <= 24 for f in functions):
        raise SystemExit(f"--functions: bbob-mixint has functions 1..24, got {args.functions!r}")
    os.makedirs(args.out, exist_ok=True)
    command = provenance.command_line()
    runs_csv, iters_csv = (os.path.join(args.out, f) for f in ("bo_heldout_runs.csv", "bo_heldout_iters.csv"))
    if not args.report:
        tasks = {f"f{f}": CocoMixint(f) for f in functions}
        bo_mixed.run_missing(tasks, methods, args.seeds, args.budget, runs_csv, iters_csv,
                             machine=provenance.machine(load=False, packages=PACKAGES))
    print(report(args.out, command))
    return 0
