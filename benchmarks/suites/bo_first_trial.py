"""The first model-based trial of a fresh process, with a cold and a warm compilation cache (issue 71, item 2).

A worker process of a parallel study (:mod:`benchmarks.suites.bo_parallel`) pays its imports, the sampler's set-up
and, at its first model-based trial, JAX's tracing and XLA's compilation of the surrogate's programs.  BayesOpt
keeps compiled programs in a persistent cache (:mod:`banditkit.bo.compile_cache`), so only the first process on a
machine compiles them.  Each repeat here: a fresh, empty cache folder; one process (*cold*) then ``warm_runs``
processes (*warm*) on it, each ``python -m benchmarks.suites.bo_first_trial CHILD_JSON``: an in-memory Optuna study
of ``ackley_mixed`` (:mod:`benchmarks.suites.bo_mixed`) with ``BanditkitSampler(seed, n_startup_trials=startup)``
(the defaults: HiLoFi on a 3×180 MLP, Thompson sampling, its warm-up on), ``startup`` random trials — each
evaluation the function plus a ``sleep_s`` sleep (0 by default: nothing for the sampler's warm-up thread to overlap)
— then ``bo_trials`` model-based ones.  Timed in the child: the imports (Optuna, banditkit), the sampler's
construction, the first model-based trial's ``suggest`` calls (the sampler works there, after waiting for its
warm-up), the mean of the following ones, and the process's seconds from its start to the first model-based
answer.  Rows go to ``bo_first_trial.csv``; the table is a section of
``bo_parallel.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

T0 = time.perf_counter()  # the child's clock starts with the module (its interpreter start is not included)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.harness import provenance  # noqa: E402
from benchmarks.harness.tables import append_csv, se  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMNS = ["import_s", "sampler_s", "first_bo_s", "next_bo_s", "to_first_answer_s"]


def child(spec: dict) -> dict:
    """One fresh process's timings (see the module docstring)."""
    t = time.perf_counter()
    import optuna

    from banditkit.integrations.optuna import BanditkitSampler
    from benchmarks.suites.bo_mixed import make_task

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    imported = time.perf_counter() - t
    t = time.perf_counter()
    sampler = BanditkitSampler(seed=spec["seed"], n_startup_trials=spec["startup"], warn_independent_sampling=False)
    made = time.perf_counter() - t
    task = make_task("ackley_mixed")
    study = optuna.create_study(direction="minimize", sampler=sampler)
    seconds, first_answer = [], None
    for _ in range(spec["startup"] + spec["bo_trials"]):
        trial = study.ask()
        t = time.perf_counter()
        params = task.suggest(trial)
        seconds.append(time.perf_counter() - t)
        if first_answer is None and len(seconds) == spec["startup"] + 1:
            first_answer = time.perf_counter() - T0
        if len(seconds) <= spec["startup"]:
            time.sleep(spec.get("sleep_s", 0.0))  # a startup trial's objective
        study.tell(trial, task.value(params))
    bo = seconds[spec["startup"]:]
    return dict(import_s=imported, sampler_s=made, first_bo_s=bo[0], next_bo_s=float(np.mean(bo[1:])),
                to_first_answer_s=first_answer)


def _run_child(spec: dict, cache: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, [env.get("PYTHONPATH", "")])])
    for k in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        env.pop(k, None)  # the cache as a user gets it: banditkit's own rule, pointed at this repeat's folder
    env["BANDITKIT_COMPILE_CACHE"] = cache
    out = subprocess.run([sys.executable, "-m", "benchmarks.suites.bo_first_trial", json.dumps(spec)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"bo_first_trial child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(csv: str, repeats: int, warm_runs: int = 2, startup: int = 10, bo_trials: int = 4,
            command: str = "", sleep_s: float = 0.0) -> None:
    """``repeats`` × (one cold process, ``warm_runs`` warm ones), rows appended to ``csv`` as they finish."""
    for r in range(repeats):
        with tempfile.TemporaryDirectory(prefix="bo_first_trial-cache-") as cache:
            for k in range(1 + warm_runs):
                load_before = os.getloadavg()[0]
                spec = dict(seed=r, startup=startup, bo_trials=bo_trials, sleep_s=sleep_s)
                row = dict(repeat=r, cache="cold" if k == 0 else "warm", run=k, startup=startup, bo_trials=bo_trials,
                           sleep_s=sleep_s,
                           **_run_child(spec, cache), load_before=load_before,
                           cache_files=len(os.listdir(cache)) if os.path.isdir(cache) else 0,
                           **{**provenance.row_provenance(), **({"command": command} if command else {})})
                append_csv(csv, pd.DataFrame([row]))
                print(f"first trial repeat {r} {row['cache']}: first BO trial {row['first_bo_s']:.2f} s, next "
                      f"{row['next_bo_s']:.3f} s, to first answer {row['to_first_answer_s']:.1f} s (load "
                      f"{load_before:.1f})", flush=True)


def markdown(csv: str) -> list[str]:
    """The cold / warm table of ``csv`` (mean ± s.e. over the processes)."""
    if not os.path.exists(csv):
        return []
    df = pd.read_csv(csv)
    lines = ["## The first model-based trial of a fresh process: cold vs warm compilation cache", "",
             " ".join(__doc__.split("\n\n")[1].split()), "",
             "| startup trials' sleep s | cache | processes | imports s | sampler set-up s | first model-based trial "
             "s | later trials s | process start → first model-based answer s | load (1 min, before) |",
             "|---|---|---|---|---|---|---|---|---|"]
    df = df.assign(sleep_s=df["sleep_s"].fillna(0.0) if "sleep_s" in df else 0.0)
    for sleep_s, by in df.groupby("sleep_s", sort=True):
        for cache in ("cold", "warm"):
            g = by[by.cache == cache]
            if len(g):
                cells = " | ".join(f"{g[c].mean():.2f} ± {se(g[c]):.2f}" if c != "next_bo_s"
                                   else f"{g[c].mean():.3f}" for c in COLUMNS)
                lines.append(f"| {sleep_s:g} | {cache} | {len(g)} | {cells} | {g.load_before.mean():.1f} |")
    lines += ["", f"Rows: `{os.path.basename(csv)}`.", ""]
    return lines


if __name__ == "__main__":  # a child process: python -m benchmarks.suites.bo_first_trial SPEC_JSON
    print(json.dumps(child(json.loads(sys.argv[1]))))
