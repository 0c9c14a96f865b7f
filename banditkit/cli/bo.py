"""``banditkit bo``: Bayesian optimisation of a test function on its box, several seeds, into a resumable results
folder (:class:`~banditkit.experiments.results_folder.ResultsFolder` ``bo``: ``bo.csv``, ``bo_run.json``,
``bo_state/seed<N>.bk`` for each unfinished seed).  With ``--space FILE --objective MODULE:FUNCTION`` the user's
function over a typed space instead (:mod:`banditkit.cli.bo_space`).  The first Ctrl-C stops after the current
evaluation and saves it.  ``--debug`` prints the full traceback of any error (else one line, or for an error in the
user's objective its own frames)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator

from banditkit.cli import args as cli_args
from banditkit.cli.errors import CLIError
from banditkit.cli.folder import results_folder
from banditkit.cli.report import report


@contextlib.contextmanager
def stop_between_evaluations(prog: str) -> Iterator[dict]:
    """The first Ctrl-C asks the BO loop to stop at its next safe point (after an evaluation is told, the state
    then saved); a second one interrupts at once.  Yields ``{"stop": bool}``."""
    flag = {"stop": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag["stop"]:
            raise KeyboardInterrupt
        flag["stop"] = True
        print(f"\n{prog}: stopping after this evaluation and saving it (Ctrl-C again stops at once, keeping the "
              "last save)", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def features_arg(text: str) -> tuple[int, ...]:
    """``--features 180,180,180`` -> ``(180, 180, 180)``."""
    return tuple(int(w) for w in text.split(",") if w.strip())


def surrogate_kwargs(args: argparse.Namespace) -> dict:
    """``--rank`` and ``--set`` as the surrogate's keyword arguments (the rank given once)."""
    sets = dict(args.set or [])
    if args.rank is not None and "rank" in sets:
        raise CLIError("give the surrogate's rank once: --rank or --set rank=..., not both")
    return ({} if args.rank is None else {"rank": args.rank}) | sets


def acquisition_arg(args: argparse.Namespace) -> str | None:
    """``--acquisition``: ``thompson`` when not given; none with ``--surrogate auto``, which picks its own (EI with the
    GP, Thompson sampling with HiLoFi), so giving one there is an error."""
    from banditkit.bo.auto import is_auto

    if is_auto(args.surrogate):
        if args.acquisition is not None:
            raise CLIError(f"--surrogate auto chooses its acquisition (EI with the GP up to 100 evaluations, Thompson "
                           f"sampling with HiLoFi after); drop --acquisition {args.acquisition}")
        return None
    return args.acquisition or "thompson"


def run_name(surrogate: str, acquisition: str | None) -> str:
    """The runs' label: ``surrogate-acquisition`` (``auto`` alone: it has no one acquisition)."""
    return surrogate if acquisition is None else f"{surrogate}-{acquisition}"


def cmd_bo(args: argparse.Namespace) -> int:
    """``banditkit bo``; with ``--debug`` an error's full traceback is printed before ``banditkit``'s one line."""
    try:
        return run_bo(args)
    except Exception:
        if getattr(args, "debug", False):
            traceback.print_exc(file=sys.stderr)
        raise


def run_bo(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from banditkit.bo import optimize
    from banditkit.environments.bo_functions import make_function
    from banditkit.experiments.results_folder import whole_seeds

    args.acquisition = acquisition_arg(args)
    if args.space is not None or args.objective is not None:
        from banditkit.cli.bo_space import cmd_bo_space

        return cmd_bo_space(args)

    try:
        fn = make_function(args.function, args.dim)
    except ValueError as e:
        raise CLIError(f"banditkit bo: error: {e}") from e
    features = features_arg(args.features)
    sets = dict(args.set or [])
    kwargs = surrogate_kwargs(args)
    noise = {} if args.obs_noise is None else {"obs_noise": args.obs_noise}
    from banditkit.posteriors import SUFFIX, split_suffix

    base, learns = split_suffix(args.surrogate)  # --surrogate hilofi-adaptive_noise is --adaptive-noise
    learns = learns or args.adaptive_noise
    flag = "--adaptive-noise" if args.adaptive_noise else f"--surrogate {args.surrogate}"
    if learns and base.strip().lower() == "gp":
        raise CLIError(f"{flag}: the gp surrogate fits its noise variance by marginal likelihood already; learning "
                       "the variance online is for the network surrogates (hilofi, lofi, lrkf, ...)")
    surrogate = f"{base}-{SUFFIX}" if learns else base
    if learns:
        from banditkit.posteriors import get

        try:
            get(surrogate)
        except ValueError as e:
            raise CLIError(f"{flag}: {e}") from None
    if sets or learns:  # the surrogate built once before the folder is touched: nothing is lost
        from banditkit.bo import BayesOpt

        try:
            BayesOpt([(0.0, 1.0)] * fn.dim, surrogate=surrogate, acquisition=args.acquisition, direction="minimize",
                     surrogate_kwargs=kwargs, features=features, n_candidates=args.candidates, **noise)
        except (TypeError, ValueError) as e:
            raise CLIError(f"--set: {str(e).strip().splitlines()[0]}") from None
    run = dict(function=fn.name, dim=fn.dim, surrogate=base, acquisition=args.acquisition,
               evals=args.evals, features=list(features), rank=args.rank, candidates=args.candidates,
               maximizer=args.maximizer, trust_region=args.trust_region, set=sets, obs_noise=args.obs_noise,
               adaptive_noise=learns)
    name = (run_name(base, args.acquisition) + {None: "", True: "-tr", False: "-global"}[args.trust_region]
            + (f"-{SUFFIX}" if learns else ""))
    prog = "banditkit bo"
    with results_folder(args, "bo", prog, run, may_change=" (only --seeds may change)",
                        absent=dict(set={}, obs_noise=None, adaptive_noise=False)) as folder:
        done = whole_seeds(folder, args.seeds, args.evals) if args.resume else {}
        from tqdm.auto import tqdm

        bar = tqdm(total=args.evals * args.seeds, desc=f"bo {fn.name}", disable=args.quiet,
                   initial=args.evals * len(done))
        frames = dict(done)
        try:
            with stop_between_evaluations(prog) as stop:

                def after_each(opt, x, y):
                    bar.update()
                    if stop["stop"]:
                        raise KeyboardInterrupt  # optimize saves the checkpoint (a safe point) and re-raises

                for seed in range(args.seeds):
                    if seed in done:
                        continue
                    ck = os.path.join(folder.state_dir, f"seed{seed}.bk")
                    res = optimize(fn.value, [(0.0, 1.0)] * fn.dim, n_evals=args.evals, surrogate=surrogate,
                                   acquisition=args.acquisition, direction="minimize", seed=seed,
                                   callback=after_each, checkpoint=ck, save_every=args.save_every,
                                   features=features, n_candidates=args.candidates, maximizer=args.maximizer,
                                   trust_region=args.trust_region, surrogate_kwargs=kwargs, **noise)
                    h = res.history
                    frame = pd.DataFrame(dict(agent=name, seed=seed, step=h.trial + 1, y=h.y, best_y=h.best_y,
                                              simple_regret=h.best_y - fn.minimum))
                    csv = folder.csv
                    frame.to_csv(csv, mode="a", header=not os.path.exists(csv) or os.path.getsize(csv) == 0,
                                 index=False)  # finished seeds are kept whatever happens next
                    os.remove(ck)
                    frames[seed] = frame
                    bar.n = args.evals * len(frames)
                    bar.refresh()
        except KeyboardInterrupt:
            bar.close()
            kept = f"finished seeds ({', '.join(map(str, sorted(frames)))}) are in {folder.csv}; " if frames else ""
            print(f"{prog}: interrupted; {kept}the seed in progress is saved in {folder.state_dir}/ (after its last "
                  "evaluation, or up to --save-every s earlier after a second Ctrl-C). Run the same command with "
                  "--resume to continue", file=sys.stderr)
            return 130
        bar.close()
        folder.finish(clear=False)  # a checkpoint of a seed beyond --seeds stays for a later --resume
        df = pd.concat([frames[s] for s in sorted(frames)], ignore_index=True)
        if not args.quiet:
            print(
                f"{fn.name} (dim {fn.dim}, minimum {fn.minimum:.6g}): {name}, {args.seeds} seed(s) x {args.evals} "
                f"evals; final simple regret {np.mean(df.groupby('seed').simple_regret.last()):.4g}\n"
            )
        report(df, folder, args.quiet, bo=True)
    return 0


def register(sub) -> None:
    """Add ``bo`` to ``banditkit``'s sub-parsers."""
    b = sub.add_parser(
        "bo",
        help="Bayesian optimisation of a test function",
        description="Minimise a test function on its box with BayesOpt, several seeds; writes "
        "bo.csv (agent, seed, step, y, best_y, simple_regret), bo_summary.md, bo_simple_regret.png.",
    )
    b.add_argument("--function", default="branin", help="branin, hartmann6, ackley, drawnn (default branin)")
    b.add_argument("--dim", type=cli_args.positive, default=None, help="dimension for ackley / drawnn")
    b.add_argument("--surrogate", default="hilofi",
                   help="posterior backend of the surrogate (default hilofi), or gp, or auto (the GP with EI up to 100 "
                   "evaluations, HiLoFi with Thompson sampling after); a name ending in -adaptive_noise "
                   "(hilofi-adaptive_noise) learns its observation variance, as --adaptive-noise does")
    b.add_argument("--acquisition", default=None, choices=["thompson", "ei", "pi", "ucb"],
                   help="default thompson; --surrogate auto picks its own")
    b.add_argument("--evals", type=cli_args.positive, default=40, help="evaluations per seed (default 40)")
    b.add_argument("--seeds", type=cli_args.positive, default=3, help="number of seeds (default 3)")
    b.add_argument("--features", default="180,180,180", help="hidden widths of the surrogate MLP (default 180,180,180)")
    b.add_argument("--rank", type=cli_args.positive, default=None, help="rank of low-rank surrogates (default 50)")
    b.add_argument("--candidates", type=cli_args.positive, default=1024, help="Sobol candidates per ask (default 1024)")
    cli_args.set_arg(b)
    cli_args.noise_args(b, "0.01", "of the standardised objective")
    b.add_argument("--maximizer", default=None, choices=["ascent", "lbfgs"],
                   help="refinement of the best candidates: short projected gradient ascent or L-BFGS-B on the log "
                   "acquisition (default: ascent for thompson with a network, lbfgs otherwise)")
    b.add_argument("--trust-region", action=argparse.BooleanOptionalAction, default=None,
                   help="search only a TuRBO-style box around the best point, resized by success / failure, or "
                   "(--no-trust-region) the whole box (default: on for thompson and the gp surrogate)")
    b.add_argument("--space", default=None, metavar="FILE",
                   help="a typed search space (JSON, or YAML as .yaml / .yml): {name: {type: float|int|categorical, "
                   "low, high, log, step | choices}}; with --objective instead of --function")
    b.add_argument("--objective", default=None, metavar="MODULE:FUNCTION",
                   help="with --space: the function to optimise, called with a dict of the space's typed values and "
                   "returning a number (MODULE importable from the current folder)")
    b.add_argument("--direction", default="minimize", choices=["minimize", "maximize"],
                   help="with --objective: minimise (default) or maximise it (test functions are always minimised)")
    b.add_argument("--on-error", default="stop", choices=["stop", "skip"],
                   help="with --objective, when it raises (or returns no finite number): stop (default; every "
                   "finished evaluation is in bo.csv and the state saved; exit status 1; --resume evaluates the point "
                   "again) or skip the point and go on (at most 10 failures in a row)")
    b.add_argument("--debug", action="store_true", help="print the full traceback of any error")
    b.add_argument("--out", default="results", help="output folder (default results)")
    b.add_argument("--resume", action="store_true",
                   help="continue the run saved in --out (same options; --seeds may grow), with --function or with "
                   "--space: finished seeds are kept from bo.csv, an interrupted seed resumes from its checkpoint "
                   "exactly where it stopped")
    b.add_argument("--save-every", type=cli_args.seconds, default=10.0, metavar="SECONDS",
                   help="checkpoint the seed in progress to --out/bo_state/ at most this often (default 10; 0: after "
                   "every evaluation); Ctrl-C stops after the current evaluation and saves it")
    cli_args.force_unlock_arg(b)
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.set_defaults(func=cmd_bo)
