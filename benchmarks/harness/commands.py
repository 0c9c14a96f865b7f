"""The old script paths and the command each became, and the rewrite of committed result files to the new form.

Until 2026-12-01 every suite and study was its own script, ``python benchmarks/bench_NAME.py`` or
``python benchmarks/diag_NAME.py``; the same code now runs as ``python -m benchmarks NAME`` or ``python -m benchmarks
study NAME`` (:data:`OLD`).  :func:`rewrite` turns the commands and file paths in a result file's text into the new
form and changes nothing else (the numbers stay byte for byte); ``python -m benchmarks.harness.commands FILE...``
rewrites files in place.
"""

from __future__ import annotations

import re
import sys

#: old script stem -> (the words after ``python -m benchmarks``, the module's file now)
OLD = {
    **{f"bench_{s}": (s, f"benchmarks/suites/{s}.py")
       for s in ("mnist", "showdown", "movielens", "kuairec", "bo", "speed", "rank", "soak", "bong", "nonstationary",
                 "inbetween", "arm_blocks", "compile")},
    **{f"diag_{s}": (f"study {s}", f"benchmarks/studies/{s}/__init__.py")
       for s in ("obsnoise", "noise_estimate", "starvation", "dynamics", "nl_guard", "linear_noise", "bo_highdim",
                 "noise_cost", "subspace_warmup")},
}
#: result files moved from ``benchmarks/results/`` to ``benchmarks/studies/STUDY/results/`` (study -> files)
MOVED = {
    "bo_highdim": (
        "diag_bo_branin.csv", "diag_bo_branin.md", "diag_bo_branin_final.csv", "diag_bo_branin_variants.csv",
        "diag_bo_branin_variants.md", "diag_bo_branin_variants_final.csv", "diag_bo_highdim.csv",
        "diag_bo_highdim.md",
    ),
    "dynamics": (
        "diag_dynamics.csv", "diag_dynamics.md",
    ),
    "linear_noise": (
        "diag_linear_noise_mnist.csv", "diag_linear_noise_mnist.md", "diag_linear_noise_shuttle.csv",
        "diag_linear_noise_shuttle.md",
    ),
    "lowrank_mnist": (
        "diag_lowrank_mnist.md", "diag_lowrank_mnist_40k.md", "diag_lowrank_mnist_40k_curve.csv",
        "diag_lowrank_mnist_40k_regret.png", "diag_lowrank_mnist_40k_seeds.csv", "diag_lowrank_mnist_curve.csv",
        "diag_lowrank_mnist_regret.png", "diag_lowrank_mnist_seeds.csv",
    ),
    "nl_guard": (
        "diag_nl_guard.csv", "diag_nl_guard.md", "diag_nl_guard_unlim.csv", "diag_nl_guard_unlim.md",
    ),
    "noise_cost": (
        "noise_cost.csv", "noise_cost.md", "noise_cost_55ac45d.csv", "noise_cost_55ac45d.md",
    ),
    "noise_estimate": (
        "diag_noise_estimate.csv", "diag_noise_estimate.md", "diag_noise_estimate_mnist.csv",
        "diag_noise_estimate_mnist.md",
    ),
    "obsnoise": (
        "diag_obsnoise.csv", "diag_obsnoise.md", "diag_obsnoise_movielens.md", "diag_obsnoise_movielens_curve.csv",
        "diag_obsnoise_movielens_regret.png", "diag_obsnoise_movielens_seeds.csv", "diag_obsnoise_showdown.md",
        "diag_obsnoise_showdown_adult.md", "diag_obsnoise_showdown_adult_curve.csv",
        "diag_obsnoise_showdown_adult_regret.png", "diag_obsnoise_showdown_adult_seeds.csv",
        "diag_obsnoise_showdown_mushroom.md", "diag_obsnoise_showdown_mushroom_curve.csv",
        "diag_obsnoise_showdown_mushroom_regret.png", "diag_obsnoise_showdown_mushroom_seeds.csv",
        "diag_obsnoise_showdown_shuttle.md", "diag_obsnoise_showdown_shuttle_curve.csv",
        "diag_obsnoise_showdown_shuttle_regret.png", "diag_obsnoise_showdown_shuttle_seeds.csv",
    ),
    "subspace_warmup": (
        "mnist_seed002_lenet5_fullwarm.md", "mnist_seed002_lenet5_fullwarm_curve.csv",
        "mnist_seed002_lenet5_fullwarm_regret.png", "mnist_seed002_lenet5_fullwarm_seeds.csv",
        "mnist_seed002_lenet5_r1e-3.md", "mnist_seed002_lenet5_r1e-3_curve.csv",
        "mnist_seed002_lenet5_r1e-3_seeds.csv", "mnist_seed002_mlp1_fullwarm.md",
        "mnist_seed002_mlp1_fullwarm_curve.csv", "mnist_seed002_mlp1_fullwarm_regret.png",
        "mnist_seed002_mlp1_fullwarm_seeds.csv", "mnist_seed002_warmup_fit_clip0.1.csv",
        "mnist_seed002_warmup_fit_clip0.1.md",
    ),
}
_COMMAND = re.compile(r"\bpython (?:\./)?benchmarks/((?:bench|diag)_\w+)\.py")
_PATH = re.compile(r"(?<![\w/.])benchmarks/((?:bench|diag)_\w+)\.py")
_STUDY_OF = {f: study for study, files in MOVED.items() for f in files}
_MOVED = re.compile(r"benchmarks/results/(" + "|".join(map(re.escape, sorted(_STUDY_OF, key=len, reverse=True)))
                    + r")(?![\w.\-])")
#: module paths the code now writes in its notes where it wrote the old ones
_RENAMED = (("`benchmarks/common.py`, `seed003_agents`", "`benchmarks/agents.py`, `seed003_agents`"),
            ("common.seed003_agents", "agents.seed003_agents"))


def rewrite(text: str) -> str:
    """``text`` with ``python benchmarks/bench_X.py`` → ``python -m benchmarks X`` (``diag_X`` → ``study X``), a bare
    ``benchmarks/bench_X.py`` → the module's new path, and ``benchmarks/results/F`` →
    ``benchmarks/studies/S/results/F`` for a file F that moved to study S (:data:`MOVED`); unknown names are left
    alone."""

    def command(m: re.Match) -> str:
        return f"python -m benchmarks {OLD[m.group(1)][0]}" if m.group(1) in OLD else m.group(0)

    def path(m: re.Match) -> str:
        return OLD[m.group(1)][1] if m.group(1) in OLD else m.group(0)

    text = _PATH.sub(path, _COMMAND.sub(command, text))
    for old, new in _RENAMED:
        text = text.replace(old, new)
    return _MOVED.sub(lambda m: f"benchmarks/studies/{_STUDY_OF[m.group(1)]}/results/{m.group(1)}", text)


def rewrite_file(path: str) -> bool:
    """Rewrite ``path`` in place (text files only); True where it changed."""
    with open(path, encoding="utf-8", newline="") as fh:
        old = fh.read()
    new = rewrite(old)
    if new != old:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(new)
    return new != old


if __name__ == "__main__":
    changed = [p for p in sys.argv[1:] if rewrite_file(p)]
    print(f"rewrote {len(changed)} of {len(sys.argv) - 1} files" + "".join(f"\n  {p}" for p in changed))
