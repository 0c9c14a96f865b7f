"""Every suite and study: what it reproduces, its module and the files it writes (``python -m benchmarks --list``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """A runnable suite or study: ``python -m benchmarks [study] NAME``; ``module`` has ``main(argv)``."""

    name: str
    module: str
    what: str
    writes: str


SUITES = [
    Entry("mnist", "benchmarks.suites.mnist",
          "issue 5 items 1-2: the MNIST bandit, seed 003 (LeNet5; HiLoFi-TS floor >= 0.78) and seed 002 (subspace "
          "EKF on LeNet5 / MLP1; floor >= 4400 and the ordering)",
          "results/mnist_seed003{,_more}.md, mnist_seed002_{lenet5,mlp1}.md (+ _seeds.csv, _curve.csv, _regret.png)"),
    Entry("showdown", "benchmarks.suites.showdown", "item 3: seed 002's Shuttle / Adult / Mushroom bandits",
          "results/showdown.md (overview), showdown_{shuttle,adult,mushroom}.md (+ CSVs, plots)"),
    Entry("movielens", "benchmarks.suites.movielens", "item 4: seed 002's MovieLens-100k recommender simulator",
          "results/movielens.md (+ CSVs, plot)"),
    Entry("kuairec", "benchmarks.suites.kuairec",
          "item 5: seed 003's KuaiRec bandit (your files with --data-dir, else a synthetic look-alike)",
          "results/kuairec.md, kuairec_daily.csv (+ CSVs, plot)"),
    Entry("bo", "benchmarks.suites.bo",
          "item 6: seed 003's BO suite (8 tasks) against BoTorch / Optuna TPE / random; time per iteration vs n",
          "results/bo.md, bo_runs.csv, bo_iters.csv.gz, bo_time_n.csv, bo_curves.png, bo_time.png, bo_pareto.png"),
    Entry("bo_mixed", "benchmarks.suites.bo_mixed",
          "issue 53: mixed-space BO (HistGradientBoosting on Adult by CV, two synthetic mixed functions) with "
          "banditkit's Optuna sampler against Optuna TPE, GPSampler, BoTorch (optuna-integration) and random",
          "results/bo_mixed.md, bo_mixed_runs.csv, bo_mixed_iters.csv, bo_mixed_curves.png"),
    Entry("inbetween", "benchmarks.suites.inbetween",
          "item 7: seed 003's 1-D in-between uncertainty (HiLoFi, LRKF, GP)", "results/inbetween.md, inbetween.png"),
    Entry("speed", "benchmarks.suites.speed",
          "item 8: per-step time of every backend (LeNet5, MLPs 10k-1M) against the machine's floor",
          "results/speed.md, speed.csv, speed.png"),
    Entry("rank", "benchmarks.suites.rank",
          "item 8 with quality: seed 003's rank study (Fig. 6), online MNIST accuracy against ms per step, ranks 1-50",
          "results/rank_study{,_60k}.md, .csv, .png"),
    Entry("arm_blocks", "benchmarks.suites.arm_blocks",
          "items 1-4: one head-covariance block per arm against one dense block, paired (ms per round, regret)",
          "results/arm_blocks{,_nl,_kll}.md, .csv"),
    Entry("compile", "benchmarks.suites.compile", "first-call cost: XLA:CPU compile time of jax.random vs bk.rng draws",
          "results/compile.md, compile.csv"),
    Entry("nonstationary", "benchmarks.suites.nonstationary",
          "seeds 000/001: permuted / split / rotating Fashion-MNIST ranking and the label-switch forgetting claim",
          "results/nonstationary.md, .csv, .png, nonstationary_curve.csv"),
    Entry("bong", "benchmarks.suites.bong", "seed 004: the BONG grid on MNIST and a regression stream",
          "results/bong.md, bong.csv"),
    Entry("ope", "benchmarks.suites.ope",
          "issue 54: off-policy evaluation accuracy (DM, IPS, SNIPS, DR, SNDR, Switch-DR) against the simulator's true "
          "values on Shuttle / Adult / Mushroom / MovieLens, uniform and eps-greedy logs, three targets",
          "results/ope.md, ope.csv (per cell), ope_reps.csv (per repetition)"),
    Entry("warmstart", "benchmarks.suites.warmstart",
          "issue 54: agents started from a 5k-round uniform log against agents from scratch, regret over the next 5k "
          "online rounds on Shuttle / Adult / Mushroom / MovieLens",
          "results/warmstart.md, warmstart.csv (+ curves, plot)"),
    Entry("serving", "benchmarks.suites.serving",
          "issue 54: a changing-arm stream (MovieLens movies entering and leaving the catalogue) served by "
          "HiLoFi-TS, linear-TS and neural-linear-TS through ServingAgent, regret against the oracle",
          "results/serving.md, serving.csv (+ curve, plot)"),
    Entry("serve", "benchmarks.suites.serve",
          "issue 70: banditkit serve on loopback, HiLoFi-TS with 20 actions of 32 features: rank requests/s and "
          "p50/p99 latency in a closed loop, an open loop at 1000/s, and the open loop with rewards flowing",
          "results/serve.md, serve.csv"),
    Entry("bo_parallel", "benchmarks.suites.bo_parallel",
          "issue 53: 1, 2 and 4 worker processes with BanditkitSampler on one Optuna JournalStorage, same total "
          "budget: wall time and final regret against one worker",
          "results/bo_parallel.md, bo_parallel.csv"),
    Entry("headline", "benchmarks.suites.headline",
          "issue 55: default banditkit agents (make_agent, nothing set) against Vowpal Wabbit, MABWiser and "
          "contextualbandits on Shuttle / Adult / Mushroom / MovieLens, same seeds and rewards",
          "results/headline.md (overview), headline_{shuttle,adult,mushroom,movielens}.md (+ CSVs, plots)"),
    Entry("sweep", "benchmarks.suites.sweep",
          "issue 57: throughput of a 64-lane HiLoFi-TS hyper-parameter x seed sweep on Shuttle (bk.sweep in one "
          "process, in two jax.distributed processes, and the loop of separate bk.run calls)",
          "results/sweep/sweep_throughput.md, .csv"),
    Entry("round", "benchmarks.suites.round",
          "issue 58: a whole HiLoFi-TS bandit round (act + observe, one seed) against its update step on MNIST, "
          "Shuttle and MovieLens: interleaved times, XLA flops and bytes of update / act / observe / round / scan",
          "results/round{,_mnist}.md, .csv"),
    Entry("soak", "benchmarks.suites.soak", "every backend, 100,000 float32 steps of a drifting stream plus stress",
          "results/soak.md, soak.csv"),
]

STUDIES = [
    Entry("lowrank_mnist", "benchmarks.studies.lowrank_mnist",
          "why LRKF-TS / LoLoFi-TS trail the paper on the MNIST bandit: one change each (observation model, initial "
          "factor, Thompson draw, q); the authors' configuration at 40,000 rounds",
          "studies/lowrank_mnist/results/diag_lowrank_mnist{,_40k}.md (mnist suite runs)"),
    Entry("starvation", "benchmarks.studies.starvation",
          "why LRKF-TS / LoLoFi-TS in the authors' configuration are seed-sensitive: starved arms, probed mid-run; "
          "what q does to it",
          "results/diag_starvation{,_q}.md, .csv, _probe.csv, _spectrum.csv (README.md cites them)"),
    Entry("obsnoise", "benchmarks.studies.obsnoise",
          "the observation variance 0.1 / 1e-2 / 1e-4 / learned, across MNIST, Shuttle, Adult, Mushroom, MovieLens",
          "studies/obsnoise/results/diag_obsnoise.md, .csv and its showdown / movielens runs"),
    Entry("noise_estimate", "benchmarks.studies.noise_estimate",
          "where the learned observation variance (adaptive_noise) goes over the rounds",
          "studies/noise_estimate/results/diag_noise_estimate{,_mnist}.md, .csv"),
    Entry("noise_cost", "benchmarks.studies.noise_cost", "what learning the observation variance costs per step",
          "studies/noise_cost/results/noise_cost.md, .csv"),
    Entry("dynamics", "benchmarks.studies.dynamics",
          "the dynamics noise q x {carry, gain} of HiLoFi / LoLoFi / LRKF on the bandits (why make_agent's q)",
          "studies/dynamics/results/diag_dynamics.md, .csv"),
    Entry("subspace_warmup", "benchmarks.studies.subspace_warmup",
          "why the subspace EKF trails the paper on MNIST: its warm-up fit (bandit feedback vs the reference's labels)",
          "results/mnist_seed002_warmup_fit.md (README.md cites it); studies/subspace_warmup/results/ (clip, "
          "full-feedback runs)"),
    Entry("default_noise", "benchmarks.studies.default_noise",
          "the agents' observation variance from the env's own rewards (make_agent's rule) against fixed values",
          "studies/default_noise/results/default_noise{,_fmnist}.md, .csv"),
    Entry("linear_noise", "benchmarks.studies.linear_noise",
          "the linear agent's learned noise variance, one shared vs one per arm",
          "studies/linear_noise/results/diag_linear_noise_{mnist,shuttle}.md, .csv"),
    Entry("nl_guard", "benchmarks.studies.nl_guard",
          "how many of neural-linear's body retrainings its divergence guard discards",
          "studies/nl_guard/results/diag_nl_guard{,_unlim}.md, .csv"),
    Entry("bo_highdim", "benchmarks.studies.bo_highdim",
          "where each BO method's queries land (faces, distance to the minimiser, predicted vs true)",
          "studies/bo_highdim/results/diag_bo_highdim.md, diag_bo_branin{,_variants}.md, .csv"),
    Entry("bo_heldout", "benchmarks.studies.bo_heldout",
          "issue 71: BanditkitSampler(surrogate='auto') against its HiLoFi-TS default, TPE and GPSampler on COCO's "
          "bbob-mixint (6 functions, dimension 5, 10 seeds, 40 trials), with a pre-registered adoption rule",
          "studies/bo_heldout/results/bo_heldout.md, bo_heldout_runs.csv, bo_heldout_iters.csv"),
    Entry("bo_split_check", "benchmarks.studies.bo_split_check",
          "issues 53 / 55: the continuous BO suite re-run after the split of bo/optimizer.py against its committed "
          "rows (z per task x method; the pre-split code's queries on this machine), and BayesOpt(bounds) with "
          "nothing set against Optuna TPE and random",
          "studies/bo_split_check/results/bo_split_check.md, .csv, bo_split_runs{.csv,_iters.csv.gz,_probe.csv}"),
    Entry("prior_scale", "benchmarks.studies.prior_scale",
          "issue 55: HiLoFi-/LoFi-/LRKF-TS prior variances — the constants against the initialiser's 1/fan_in and "
          "empirical Bayes (linearised network, 256 uniform-random rounds) on Shuttle / Adult / Mushroom / MovieLens "
          "/ Wheel (5000 x 5) and Fashion-MNIST (2000 x 2), paired over seeds",
          "studies/prior_scale/results/prior_scale.md, prior_scale.csv, prior_scale_priors.csv"),
    Entry("subspace_bandit_warmup", "benchmarks.studies.subspace_bandit_warmup",
          "issue 55: the subspace EKF's warm-up from bandit feedback only — make_agent's default against one-change "
          "variants (warm-up length 20K / 50K, clipped SGD, clipped Adam, random basis) on MNIST (seed 002 protocol, "
          "LeNet5, 5000 x 5), Fashion-MNIST (2000 x 3), Shuttle and Adult (5000 x 5), with an adoption rule stated in "
          "advance",
          "studies/subspace_bandit_warmup/results/subspace_bandit_warmup{,_screen,_fmnist,_shuttle,_adult,_ceiling}.md "
          "(+ CSVs, plots)"),
    Entry("lofi_svd", "benchmarks.studies.lofi_svd",
          "issue 58: where a LoFi step's time goes, and which rank truncation (Gram eigh, QR + SVD, SVD, randomised) "
          "is fastest in float32 and how accurate",
          "studies/lofi_svd/results/lofi_svd_{profile,methods,accuracy,layout}.md, .csv"),
    Entry("scale_1m", "benchmarks.studies.scale_1m",
          "issue 58: where a HiLoFi / LoLoFi / LRKF step's time goes on the 100k-1M MLPs (pieces, XLA flops and bytes, "
          "GEMM-rate and bandwidth floors), the exponent of step time against P per allocator, the q-term pass 4 ways",
          "studies/scale_1m/results/scale_1m{,_kept}_{profile,scaling,qterm}.md, .csv"),
    Entry("hilofi_gap", "benchmarks.studies.hilofi_gap",
          "issue 55: why default HiLoFi-TS trails on Mushroom / Adult / MovieLens: a per-round trace (arm kinds, "
          "Thompson spread, calibration) and one-change variants paired against make_agent's default, with two "
          "pre-registered rules for the head's prior variance (head_m2, head_unit) on the four headline sets, Wheel, "
          "Fashion-MNIST and MNIST",
          "studies/hilofi_gap/results/hilofi_gap{,_trace,_long}.md, .csv"),
    Entry("lofi_prior", "benchmarks.studies.lofi_prior",
          "issue 55: LoFi-TS with HiLoFi's unit-head rule as a per-layer prior (head 1 / E[|phi|^2 + 1], other "
          "weights 0.01), pre-registered and paired against make_agent's default on the four headline sets, Wheel "
          "and Fashion-MNIST, with linear-TS as the reference and a per-round trace on Mushroom",
          "studies/lofi_prior/results/lofi_prior{,_trace}.md, .csv"),
    Entry("lrkf_prior", "benchmarks.studies.lrkf_prior",
          "issue 55: LRKF-TS's prior variance from the unit low-rank rule (1 / E[|Q h(x)|^2]) against make_agent's "
          "constant 0.1, pre-registered and paired by seed on the four headline sets and Wheel (5 seeds, then a "
          "20-seed confirmation: rejected), with linear-TS as the reference",
          "studies/lrkf_prior/results/lrkf_prior{,_20}.md, .csv"),
    Entry("lofi_noise", "benchmarks.studies.lofi_noise",
          "issue 55: LoFi-TS's observation variance capped at 1e-3 (a tempering of its over-wide predictive spread) "
          "against make_agent's rule, pre-registered and paired by seed (20 seeds) on the four headline sets, Wheel "
          "and Fashion-MNIST, with linear-TS as the reference",
          "studies/lofi_noise/results/lofi_noise{,_fmnist}.md, .csv"),
    Entry("honest_defaults", "benchmarks.studies.honest_defaults",
          "issue 69: make_agent's honest defaults (scale learned from the rewards observed, HiLoFi's head prior from "
          "the first context, its observation variance by an evidence mixture) against the old oracle-read defaults, "
          "pre-registered and paired by seed (20 seeds) on the four headline sets, Wheel and Fashion-MNIST",
          "studies/honest_defaults/results/honest_defaults{,_fmnist}.md, .csv"),
]


def find(name: str, study: bool = False) -> Entry | None:
    """The suite (or study) called ``name``, or None."""
    return next((e for e in (STUDIES if study else SUITES) if e.name == name), None)


def listing() -> str:
    """The text of ``python -m benchmarks --list``."""
    width = max(len(e.name) for e in SUITES + STUDIES) + 2
    lines = ["Suites (python -m benchmarks NAME [options]; --help for each; files under benchmarks/):", ""]
    for e in SUITES:
        lines += [f"  {e.name:<{width}}{e.what}", f"  {'':<{width}}writes {e.writes}"]
    head = "Studies (python -m benchmarks study NAME [options]; write-ups in benchmarks/studies/NAME/README.md):"
    lines += ["", head, ""]
    for e in STUDIES:
        lines += [f"  {e.name:<{width}}{e.what}", f"  {'':<{width}}writes {e.writes}"]
    return "\n".join(lines)
