"""The first ``K`` queries of one BO-suite run made by the ``banditkit`` of another checkout (``TREE``).

Run as a file, not as a module (``python probe.py TREE TASK METHOD SEED K``), so that nothing of this checkout is
imported before ``TREE`` is put first on ``sys.path``: the ``banditkit`` that answers is ``TREE``'s.  ``TREE`` is a
folder holding a ``banditkit/`` package, e.g. the code of the commit before the split unpacked with
``git archive COMMIT banditkit | tar -x -C TREE`` (no change to the repository's state).

The run is the BO suite's (``benchmarks/suites/bo.py``, ``run_banditkit``) for a method ``{surrogate}_{ts|ei}``
with an optional ``_tr`` suffix: ``d`` warm-up points ``numpy.random.default_rng(seed).random((d, d))`` told first,
``n_initial = d``, 1024 candidates, ``maximizer="ascent"``, and on DrawNN the 100-step refinement of length
``0.05·√d``.  BLAS is held at one thread (environment variables, set before NumPy loads).  Prints one line per query:
``i x_1 … x_d y=VALUE`` (17 significant digits).
"""

from __future__ import annotations

import os
import sys

TASKS = {"branin": ("branin", None), "hartmann6": ("hartmann6", None), "ackley2": ("ackley", 2),
         "ackley5": ("ackley", 5), "ackley10": ("ackley", 10), "ackley50": ("ackley", 50), "drawnn50": ("drawnn", 50)}


def main(argv: list[str]) -> None:
    if len(argv) != 5:
        raise SystemExit("usage: python probe.py TREE TASK METHOD SEED K (TREE: a folder holding banditkit/)")
    tree, task, method, seed, k = os.path.abspath(argv[0]), argv[1], argv[2], int(argv[3]), int(argv[4])
    if not os.path.isdir(os.path.join(tree, "banditkit")):
        raise SystemExit(f"{tree} holds no banditkit/ package; unpack one: git archive COMMIT banditkit | tar -x -C "
                         f"{tree}")
    if task not in TASKS:
        raise SystemExit(f"unknown task {task!r}; choose one of {list(TASKS)}")
    parts = method.split("_")
    if len(parts) not in (2, 3) or parts[1] not in ("ts", "ei") or parts[2:] not in ([], ["tr"]):
        raise SystemExit(f"method {method!r}: give SURROGATE_ts or SURROGATE_ei, optionally with _tr")
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = "1"
    sys.path.insert(0, tree)
    import numpy as np

    import banditkit as bk
    from banditkit.environments.bo_functions import make_function

    if not os.path.abspath(bk.__file__).startswith(tree + os.sep):
        raise SystemExit(f"banditkit was imported from {bk.__file__}, not from {tree}")
    fname, dim = TASKS[task]
    f = make_function(fname, dim)
    d = f.dim
    warm = np.random.default_rng(seed).random((d, d))
    kw: dict = dict(maximizer="ascent", trust_region=parts[2:] == ["tr"])
    if fname == "drawnn":
        kw.update(refine_steps=100, step_size=0.05 * float(np.sqrt(d)))
    opt = bk.BayesOpt([(0.0, 1.0)] * d, surrogate=parts[0], acquisition={"ts": "thompson", "ei": "ei"}[parts[1]],
                      direction="minimize", seed=seed, n_initial=d, n_candidates=1024, **kw)
    opt.tell(warm, [float(f.value(w)) for w in warm])
    for i in range(k):
        x = opt.ask()
        y = float(f.value(x))
        opt.tell(x, y)
        print(i + 1, " ".join(f"{v:.17g}" for v in np.ravel(x)), f"y={y:.17g}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
