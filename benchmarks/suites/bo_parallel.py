"""Parallel BO workers (issue 53): 1, 2 and 4 worker processes on one Optuna ``JournalStorage``, same total budget.

For each task × sampler × number of workers ``w`` × seed: a fresh ``JournalStorage`` file and a study on it (minimised);
``w`` worker processes started at once (``python -m benchmarks.suites.bo_parallel SPEC``, real processes), each
``optuna.load_study(..., sampler=...)`` with its own sampler and ``study.optimize`` until the study holds ``budget``
trials (``MaxTrialsCallback(budget, states=None)``; a trial numbered ``>= budget``, asked by a worker that raced
another past the limit, is pruned before its sampler runs, so every run evaluates exactly the trials ``0..budget-1``).
Each evaluation is the synthetic function plus a fixed ``time.sleep(eval_seconds)`` that stands for an expensive
objective: on the 2 shared cores of this project's machine a CPU-bound objective cannot run faster in parallel, while
a sleep-dominated one shows what the samplers' coordination — reading the storage, pending points, their own compute
competing for the cores — costs against the ideal speed-up ``w``.

Samplers: ``banditkit`` = ``BanditkitSampler(seed=seed, n_startup_trials=startup)`` (its defaults: HiLoFi on a 3×180
MLP, Thompson sampling; ``--small-surrogate``: HiLoFi rank 2 on a 2×16 MLP, 64 candidates), every worker with the
run's seed (its draws depend on ``(seed, trial number)``, so workers never share one); ``tpe`` =
``TPESampler(constant_liar=True, n_startup_trials=startup)``, Optuna's parallel-aware setting, worker ``k`` seeded
by ``(seed, k)`` (TPE draws from one RNG stream per sampler: one seed in every worker repeats the startup points).

Tasks (synthetic functions with known minima, from :mod:`benchmarks.suites.bo_mixed`; no real data): ``ackley_mixed``
(Ackley on 3 float and 2 integer coordinates with a 3-way categorical switch, minimum 0) and ``hartmann_mixed``
(Hartmann-6 with 2 coordinates on a grid and a 3-way switch, minimum −3.32237).

Measured per run: wall time (the first worker's start to the last one's exit: process start, imports, JAX compilation
from the compile cache the untimed warm-up runs filled, and the trials), the trial span (the first trial's start to
the last one's end, from the storage), final simple regret (best − known minimum), the number of distinct points among
the ``budget`` trials (it must equal ``budget``), the trials each worker ran, and the seconds per BO trial spent in
the sampler (its ``suggest_*`` calls).  Outputs (``--out``): ``bo_parallel.csv`` (one row per run, appended as runs
finish; a re-run skips the runs already there) and ``bo_parallel.md`` (rebuilt after every run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

import numpy as np
import pandas as pd

from benchmarks.harness import options, provenance
from benchmarks.harness.options import RESULTS
from benchmarks.harness.tables import append_csv, se
from benchmarks.suites import bo_first_trial

TASKS = ["ackley_mixed", "hartmann_mixed"]
SAMPLERS = ["banditkit", "tpe"]
STUDY = "bo_parallel"
#: ``--small-surrogate``: the small configuration of tests/bo/test_optuna_sampler.py
SMALL = dict(features=(16, 16), surrogate_kwargs=dict(rank=2), n_candidates=64)
#: a run's identity in the CSV: a re-run skips the rows whose key is already there
KEY = ["task", "sampler", "workers", "seed", "budget", "startup", "eval_s", "surrogate"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------------------------------------------- one worker
def make_sampler(spec: dict):
    """The Optuna sampler of worker ``spec["index"]`` (see the module docstring for the seeding)."""
    import optuna

    if spec["sampler"] == "banditkit":
        from banditkit.integrations.optuna import BanditkitSampler

        extra = SMALL if spec["surrogate"] == "small" else {}
        return BanditkitSampler(seed=spec["seed"], n_startup_trials=spec["startup"], warn_independent_sampling=False,
                                **extra)
    if spec["sampler"] == "tpe":
        seed = int(np.random.SeedSequence([spec["seed"], spec["index"]]).generate_state(1)[0])
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=spec["startup"], constant_liar=True)
    raise ValueError(f"unknown sampler {spec['sampler']!r}; choose from {SAMPLERS}")


def worker(spec: dict) -> None:
    """One worker process: load the study from the journal and run trials until it holds ``spec["budget"]``."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from benchmarks.suites.bo_mixed import make_task

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    options.apply_blas_threads(spec["blas_threads"])
    task = make_task(spec["task"])
    storage = JournalStorage(JournalFileBackend(spec["journal"]))
    study = optuna.load_study(study_name=STUDY, storage=storage, sampler=make_sampler(spec))
    budget = int(spec["budget"])

    def objective(trial):
        if trial.number >= budget:  # asked while another worker's trial took the study to its budget
            trial.study.stop()
            raise optuna.TrialPruned(f"trial {trial.number} is past the budget of {budget}")
        trial.set_user_attr("worker", int(spec["index"]))
        t0 = time.perf_counter()
        params = task.suggest(trial)  # the sampler works here (Optuna samples at the first suggest)
        trial.set_user_attr("suggest_s", time.perf_counter() - t0)
        time.sleep(spec["eval_s"])
        return task.value(params)

    study.optimize(objective, callbacks=[optuna.study.MaxTrialsCallback(budget, states=None)])


# ------------------------------------------------------------------------------------------------------- one run
def worker_env(cache_dir: str) -> dict:
    """The workers' environment: this checkout first on the path, and the shared XLA compilation cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [env.get("PYTHONPATH", "")])])
    env["JAX_COMPILATION_CACHE_DIR"] = cache_dir
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    return env


def _start_and_wait(spec: dict, workers: int, logs: list, env: dict, timeout_s: float) -> float:
    """Start the ``workers`` processes at once (worker ``k``'s output to ``logs[k]``), wait for all of them and return
    the seconds from the first start to the last exit; ``RuntimeError`` with a worker's output tail where one failed
    or ran past ``timeout_s`` (all are killed then)."""
    name = f"{spec['task']} {spec['sampler']} workers={workers} seed={spec['seed']}"
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.suites.bo_parallel", json.dumps({**spec, "index": k})],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT) for k, log in enumerate(logs)]
    try:
        for p in procs:
            p.wait(timeout=max(1.0, timeout_s - (time.perf_counter() - t0)))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.wait()
        raise RuntimeError(f"{name}: the workers did not finish in {timeout_s:.0f} s (--run-timeout)") from None
    wall = time.perf_counter() - t0
    for k, p in enumerate(procs):
        if p.returncode != 0:
            logs[k].seek(0)
            raise RuntimeError(f"{name}: worker {k} exited with status {p.returncode}:\n{logs[k].read()[-3000:]}")
    return wall


def one_run(task: str, sampler: str, workers: int, seed: int, *, budget: int, startup: int, eval_s: float,
            surrogate: str, blas_threads: str, cache_dir: str, timeout_s: float, keep: str = "",
            command: str = "") -> dict:
    """Run ``workers`` processes on a fresh journal and return the run's row (see the module docstring); ``keep``: a
    folder to copy the journal into, as ``TASK_SAMPLER_wW_sSEED.log`` (else it is deleted with its temporary folder);
    ``command``: the row's command (default: this process's)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from benchmarks.suites.bo_mixed import make_optimum

    with tempfile.TemporaryDirectory(prefix="bo_parallel-") as tmp:
        journal = os.path.join(tmp, "journal.log")
        optuna.create_study(study_name=STUDY, storage=JournalStorage(JournalFileBackend(journal)),
                            direction="minimize")
        spec = dict(task=task, sampler=sampler, seed=seed, budget=budget, startup=startup, eval_s=eval_s,
                    surrogate=surrogate, blas_threads=blas_threads, journal=journal)
        env = worker_env(cache_dir)
        load_before = os.getloadavg()[0]
        logs = [open(os.path.join(tmp, f"worker{k}.log"), "w+") for k in range(workers)]
        try:
            wall = _start_and_wait(spec, workers, logs, env, timeout_s)
        finally:
            for log in logs:
                log.close()
        trials = optuna.load_study(study_name=STUDY, storage=JournalStorage(JournalFileBackend(journal))).trials
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copyfile(journal, os.path.join(keep, f"{task}_{sampler}_w{workers}_s{seed}.log"))
    state = optuna.trial.TrialState
    done = sorted((t for t in trials if t.state == state.COMPLETE), key=lambda t: t.number)
    if [t.number for t in done] != list(range(budget)):
        raise RuntimeError(f"{task} {sampler} workers={workers} seed={seed}: completed trials "
                           f"{[t.number for t in done]}, expected 0..{budget - 1} (states: "
                           f"{Counter(t.state.name for t in trials)})")
    best = min(t.value for t in done)
    per_worker = Counter(int(t.user_attrs["worker"]) for t in done)
    starts = [t.datetime_start for t in done]
    ends = [t.datetime_complete for t in done]
    bo = [t.user_attrs["suggest_s"] for t in done if t.number >= startup]
    return dict(
        task=task, sampler=sampler, workers=workers, seed=seed, budget=budget, startup=startup, eval_s=eval_s,
        surrogate=surrogate if sampler == "banditkit" else "",
        wall_s=wall, span_s=(max(ends) - min(starts)).total_seconds(),
        final_best=best, final_regret=best - make_optimum(task),
        trials=len(done), distinct=len({tuple(sorted(t.params.items())) for t in done}),
        pruned=sum(t.state == state.PRUNED for t in trials), failed=sum(t.state == state.FAIL for t in trials),
        per_worker="/".join(str(per_worker.get(k, 0)) for k in range(workers)),
        s_per_bo_trial=float(np.mean(bo)) if bo else np.nan,
        evals_per_s=len(done) / wall, load_before=load_before,
        **{**provenance.row_provenance(), **({"command": command} if command else {})},
    )


# --------------------------------------------------------------------------------------------------------- report
def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration × task × sampler × workers: means ± s.e. over seeds, and the ratios against the same
    configuration's 1-worker row (speed-up = mean wall(1) / mean wall(w); regret ratio = mean regret(w) / mean
    regret(1))."""
    runs = runs.assign(surrogate=runs["surrogate"].fillna(""))
    rows = []
    for key, g in runs.groupby(["budget", "startup", "eval_s", "task", "sampler", "surrogate", "workers"], sort=False):
        budget, startup, eval_s, task, sampler, surrogate, w = key
        trials_per_worker = np.array([[int(v) for v in s.split("/")] for s in g["per_worker"].astype(str)])
        rows.append(dict(budget=budget, startup=startup, eval_s=eval_s, task=task, sampler=sampler,
                         surrogate=surrogate, workers=int(w), runs=len(g),
                         wall=g.wall_s.mean(), wall_se=se(g.wall_s), span=g.span_s.mean(), span_se=se(g.span_s),
                         regret=g.final_regret.mean(), regret_se=se(g.final_regret),
                         trials=int(g.trials.sum()), distinct=int(g.distinct.sum()), pruned=int(g.pruned.sum()),
                         per_worker="/".join(f"{v:.3g}" for v in trials_per_worker.mean(axis=0)),
                         s_bo=g.s_per_bo_trial.mean(), load=g["load"].mean(),
                         load_before=g["load_before"].mean() if "load_before" in g else np.nan,
                         evals_wall=budget / g.wall_s.mean(), evals_span=budget / g.span_s.mean()))
    s = pd.DataFrame(rows)
    if s.empty:
        return s
    ref = s[s.workers == 1].set_index(["budget", "startup", "eval_s", "task", "sampler", "surrogate"])
    for col, out, inverse in (("wall", "speedup", True), ("span", "span_speedup", True),
                              ("regret", "regret_ratio", False)):
        vals = []
        for _, r in s.iterrows():
            k = (r.budget, r.startup, r.eval_s, r.task, r.sampler, r.surrogate)
            one = ref[col].get(k, np.nan) if k in ref.index else np.nan
            vals.append(one / r[col] if inverse else r[col] / one)
        s[out] = vals
    order = {t: i for i, t in enumerate(TASKS)} | {m: i for i, m in enumerate(SAMPLERS)}
    return s.sort_values(["budget", "startup", "eval_s", "task", "sampler", "workers"],
                         key=lambda c: c.map(order) if c.name in ("task", "sampler") else c).reset_index(drop=True)


def markdown(s: pd.DataFrame) -> list[str]:
    lines = []
    for (budget, startup, eval_s), c in s.groupby(["budget", "startup", "eval_s"], sort=False):
        lines += [f"### Budget {int(budget)} trials ({int(startup)} startup), each evaluation the function plus a "
                  f"{eval_s:g} s sleep", "",
                  "| task | sampler | workers | runs | wall s (start → last exit) | evaluations per wall s | speed-up "
                  "| trial span s | evaluations per span s | speed-up | sleep floor s | final regret | regret ratio | "
                  "distinct points / trials | trials per worker (mean) | sampler s per BO trial | load before / "
                  "after |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for _, r in c.iterrows():
            name = r.sampler + (f" ({r.surrogate} surrogate)" if r.surrogate else "")
            extra = f" (+{r.pruned} pruned past the budget)" if r.pruned else ""
            before = "–" if pd.isna(r.load_before) else f"{r.load_before:.1f}"
            lines.append(
                f"| {r.task} | {name} | {r.workers} | {r.runs} | {r.wall:.1f} ± {r.wall_se:.1f} | "
                f"{r.evals_wall:.2f} | {r.speedup:.2f} | {r.span:.1f} ± {r.span_se:.1f} | {r.evals_span:.2f} | "
                f"{r.span_speedup:.2f} | {budget * eval_s / r.workers:.0f} | {r.regret:.3g} ± {r.regret_se:.2g} | "
                f"{r.regret_ratio:.2f} | {r.distinct} / {r.trials}{extra} | {r.per_worker} | {r.s_bo:.3g} | "
                f"{before} / {r.load:.1f} |")
        lines.append("")
    return lines


def report(out: str, command: str) -> None:
    runs = pd.read_csv(os.path.join(out, "bo_parallel.csv"))
    paragraphs = __doc__.split("\n\n")
    lines = ["# Parallel BO workers on one Optuna JournalStorage: wall time and final regret against one worker", "",
             *(" ".join(p.split()) + "\n" for p in paragraphs[1:4]),
             "Each row: mean ± s.e. over the runs (seeds).  Speed-up = mean wall time of the same sampler with 1 "
             "worker / mean wall time with w (ideal: w); the trial span's speed-up likewise, without process start and "
             "imports (every worker process, TPE's too, imports Optuna, banditkit and JAX: the worker module is part "
             "of the benchmark harness).  Sleep floor = budget × sleep / w, the wall time of ideal workers with free "
             "samplers.  Regret ratio = mean final regret with w workers / with 1 (1: no loss from working in "
             "parallel).  Both samplers propose random points until `startup` trials have *completed*, so with w "
             "workers up to w − 1 more of the budget are random; banditkit's startup points of one seed are the same "
             "for every w (drawn from the seed and the trial number), TPE's are not (worker k's seed).  Everything "
             "here is synthetic (known minima); the objective's cost is a sleep, not computation.", "",
             "Evaluations per wall s = budget / mean wall time (its ratio to 1 worker's is the speed-up); per span s "
             "likewise over the trial span (the study's throughput once workers run, without process start and "
             "imports, which on 2 cores w processes pay w / 2 times over).", "",
             "Sampler s per BO trial: the mean time of a trial's `suggest_*` calls after the startup trials; it holds "
             "each worker process's one-off JAX tracing and compile-cache load at its first BO trial, which w workers "
             "pay w times on the same cores.  Load: the machine's 1-minute load average (`os.getloadavg()`) before "
             "and after the runs (means); with 2 cores, a load far above 2 means every process waited for a core "
             "most of the time, so the wall times measure contention with other users as much as the samplers.", ""]
    lines += markdown(summary(runs))
    lines += bo_first_trial.markdown(os.path.join(out, "bo_first_trial.csv"))
    lines += ["Per run: `bo_parallel.csv` (wall time, trial span, final best and regret, distinct points, trials per "
              "worker, pruned trials, sampler seconds per BO trial, command, machine and load).", "",
              "## Provenance", "", *provenance.csv_provenance(runs), "", f"This report: `{command}`", ""]
    with open(os.path.join(out, "bo_parallel.md"), "w") as fh:
        fh.write("\n".join(lines))


# ----------------------------------------------------------------------------------------------------------- main

def _workers(text: str) -> list[int]:
    try:
        ws = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        ws = []
    if not ws or min(ws) < 1:
        raise SystemExit(f"--workers must be a comma list of positive integers such as 1,2,4, got {text!r}")
    if 1 not in ws:
        print("warning: --workers without 1: no speed-up or regret ratio can be computed", file=sys.stderr)
    return sorted(set(ws))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=provenance.PROG + " bo_parallel", description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, from {TASKS}")
    p.add_argument("--samplers", default=",".join(SAMPLERS), help=f"comma-separated, from {SAMPLERS}")
    p.add_argument("--workers", default="1,2,4", help="worker process counts, comma-separated (default 1,2,4)")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..n-1 (default 5)")
    p.add_argument("--budget", type=int, default=40, help="total trials per run, over all workers (default 40)")
    p.add_argument("--startup", type=int, default=10, help="startup (random) trials of every sampler (default 10)")
    p.add_argument("--eval-seconds", type=float, default=1.0,
                   help="a sleep added to each evaluation, standing for an expensive objective (default 1.0)")
    p.add_argument("--small-surrogate", action="store_true",
                   help="banditkit with HiLoFi rank 2 on a 2x16 MLP and 64 candidates (test size)")
    p.add_argument("--no-warmup", action="store_true",
                   help="skip the untimed runs (1 and the most workers, no sleep) that fill the compile cache first")
    p.add_argument("--compile-cache", default="",
                   help="the workers' XLA compilation cache (default: JAX_COMPILATION_CACHE_DIR if set, else a "
                        "temporary folder removed at the end)")
    p.add_argument("--first-trial-sleep", type=float, default=0.0, metavar="SECONDS",
                   help="a sleep in each startup trial of the first-trial measurement (default 0), which the sampler's "
                        "warm-up can overlap")
    p.add_argument("--keep-journals", default="", metavar="DIR",
                   help="copy each recorded run's JournalStorage file into DIR (TASK_SAMPLER_wW_sSEED.log)")
    p.add_argument("--run-timeout", type=float, default=1800.0, help="seconds one run's workers may take")
    p.add_argument("--first-trial-repeats", type=int, default=3,
                   help="repeats of the cold / warm compile-cache measurement of a fresh process's first model-based "
                        "trial (benchmarks.suites.bo_first_trial; bo_first_trial.csv; default 3; 0 skips it, and so "
                        "does a bo_first_trial.csv already in --out)")
    p.add_argument("--out", default=RESULTS)
    p.add_argument("--report", action="store_true", help="only rebuild bo_parallel.md from bo_parallel.csv")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tasks = options.names(args.tasks, TASKS, "tasks")
    samplers = options.names(args.samplers, SAMPLERS, "samplers")
    workers = _workers(args.workers)
    if args.seeds < 1 or args.startup < 1 or args.budget <= args.startup or args.eval_seconds < 0:
        raise SystemExit(f"need --seeds >= 1, --startup >= 1, --budget > --startup and --eval-seconds >= 0; got "
                         f"{args.seeds}, {args.startup}, {args.budget}, {args.eval_seconds}")
    os.makedirs(args.out, exist_ok=True)
    # the arguments this main parsed (a test or another module calls main(argv) with its own sys.argv)
    command = provenance.suite_command("bo_parallel", sys.argv[1:] if argv is None else argv)
    csv = os.path.join(args.out, "bo_parallel.csv")
    if args.report:
        if not os.path.exists(csv):
            raise SystemExit(f"--report: {csv} does not exist; run the suite first")
        report(args.out, command)
        return 0
    surrogate = "small" if args.small_surrogate else "default"
    common = dict(budget=args.budget, startup=args.startup, surrogate=surrogate, blas_threads=args.blas_threads,
                  timeout_s=args.run_timeout)
    done = set()
    if os.path.exists(csv):
        old = pd.read_csv(csv).assign(surrogate=lambda d: d["surrogate"].fillna(""))
        done = {tuple(r) for r in old[KEY].itertuples(index=False)}
    first = os.path.join(args.out, "bo_first_trial.csv")
    if args.first_trial_repeats > 0 and "banditkit" in samplers and not os.path.exists(first):
        bo_first_trial.measure(first, args.first_trial_repeats, command=command, sleep_s=args.first_trial_sleep)
        if os.path.exists(csv):
            report(args.out, command)
    own_cache = None
    cache = args.compile_cache or os.environ.get("JAX_COMPILATION_CACHE_DIR", "")
    if not cache:
        cache = own_cache = tempfile.mkdtemp(prefix="bo_parallel-xla-cache-")
    try:
        if "banditkit" in samplers and not args.no_warmup:
            for t in tasks:
                for w in sorted({1, max(workers)}):
                    t0 = time.perf_counter()
                    one_run(t, "banditkit", w, 0, eval_s=0.0, cache_dir=cache, **common)
                    print(f"warm-up {t} banditkit workers={w}: {time.perf_counter() - t0:.1f} s (not recorded)",
                          flush=True)
        for seed in range(args.seeds):  # seed-major: a run stopped early has whole seeds of every cell
            for t in tasks:
                for m in samplers:
                    for w in workers:
                        key = (t, m, w, seed, args.budget, args.startup, args.eval_seconds,
                               surrogate if m == "banditkit" else "")
                        if key in done:
                            continue
                        row = one_run(t, m, w, seed, eval_s=args.eval_seconds, cache_dir=cache,
                                      keep=args.keep_journals, command=command, **common)
                        append_csv(csv, pd.DataFrame([row]))
                        report(args.out, command)
                        print(f"{t} {m} workers={w} seed={seed}: wall {row['wall_s']:.1f} s, span "
                              f"{row['span_s']:.1f} s, regret {row['final_regret']:.4g}, distinct "
                              f"{row['distinct']}/{row['trials']}, per worker {row['per_worker']}", flush=True)
    finally:
        if own_cache is not None:
            shutil.rmtree(own_cache, ignore_errors=True)
    if os.path.exists(csv):
        report(args.out, command)
    return 0


if __name__ == "__main__":  # a worker process: python -m benchmarks.suites.bo_parallel SPEC_JSON
    worker(json.loads(sys.argv[1]))
