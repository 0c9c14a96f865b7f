"""Argument types and option groups shared by the commands (``--env``, ``--steps`` / ``--seeds`` / ``--out`` /
``--resume``, ``--set KEY=VALUE``, ``--obs-noise`` / ``--adaptive-noise``, ``--overwrite`` / ``--force-unlock``)."""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Callable
from typing import Any


def checked(cast: Callable[[str], Any], ok: Callable[[Any], bool], want: str) -> Callable[[str], Any]:
    """An argparse ``type``: ``cast(text)``, refused with "expected WANT" when it fails or ``ok(value)`` is false."""

    def parse(text: str):
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"expected {want}, got {v}")
        return v

    return parse


positive = checked(int, lambda v: v >= 1, "a positive integer")
seconds = checked(float, lambda v: v >= 0, "a number of seconds >= 0")
variance = checked(float, lambda v: 0 < v < float("inf"), "a finite variance > 0 (e.g. 0.01)")


def setting(text: str) -> tuple[str, object]:
    """``--set KEY=VALUE``: one posterior hyper-parameter; the value read as a Python literal (``20``, ``1e-2``,
    ``True``, ``None``), else kept as text (``gain``)."""
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key.isidentifier() or not raw:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. rank=20 or dynamics_mode=gain; got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return key, raw
    try:  # saved with the run's options: as JSON reads it back (a tuple becomes a list), or not at all
        return key, json.loads(json.dumps(value))
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"--set {key}: {raw!r} is not a number, string, bool, None or list") from None


class _Later:
    """A help-text value computed when the help is shown (``%(name)s`` in an argparse help string reads the action's
    attributes), so that building the parser imports nothing heavy: ``banditkit --help`` answers at once."""

    def __init__(self, text: Callable[[], str]):
        self.text = text

    def __str__(self) -> str:
        return self.text()


def noise_learners() -> tuple[str, ...]:
    """The posterior backends that learn their Gaussian observation variance online (``--adaptive-noise``): the one
    place the command line asks."""
    from banditkit.posteriors.noise import SUPPORTED

    return tuple(SUPPORTED)


def _noise_backends() -> str:
    return ", ".join(noise_learners())


def noise_args(p: argparse.ArgumentParser, default: str, units: str) -> None:
    """``--obs-noise VARIANCE`` and ``--adaptive-noise``; ``default`` says what is used without ``--obs-noise``."""
    p.add_argument("--obs-noise", type=variance, default=None, metavar="VARIANCE",
                   help=f"variance of the Gaussian reward likelihood, {units} (default: {default}); with "
                   "--adaptive-noise its starting value")
    learn = p.add_argument("--adaptive-noise", action="store_true",
                           help="learn the observation variance online (variational Bayes, "
                           "bk.posteriors.adaptive_noise) instead of keeping it fixed; for the backends %(backends)s")
    learn.backends = _Later(_noise_backends)  # type: ignore[attr-defined]


def set_arg(p: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` (repeatable)."""
    p.add_argument("--set", action="append", type=setting, metavar="KEY=VALUE",
                   help="a posterior hyper-parameter, repeatable: --set rank=20 --set dynamics_cov=0.01 --set "
                   "dynamics_mode=gain (run / compare: each agent whose backend takes the key; bo: the surrogate; "
                   "see help(bk.posteriors.NAME))")


def folder_args(p: argparse.ArgumentParser) -> None:
    """The results folder's options: ``--overwrite`` (replace the results already in ``--out``) and
    ``--force-unlock`` (take over a folder whose lock names a process that cannot be checked)."""
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results of an earlier run of this command in --out (without it such a folder "
                   "is refused, untouched: pass --resume to continue that run, or another --out)")
    p.add_argument("--force-unlock", action="store_true",
                   help="take over --out even though its lock names a process this machine cannot check (one on "
                   "another host); only when that process has stopped. A process that has stopped on this host is "
                   "detected and its lock taken over without this flag")


force_unlock_arg = folder_args  # its earlier name (it added --force-unlock alone)


def env_arg(p: argparse.ArgumentParser) -> None:
    """``--env NAME`` (required): the environment of ``run``, ``compare`` and ``sweep``."""
    p.add_argument("--env", required=True, help="environment: mnist, mushroom, shuttle, adult, wheel, ...")


def common(p: argparse.ArgumentParser, steps: int, seeds: int, out: str) -> None:
    """The options of the bandit commands (``demo``, ``run``, ``compare``)."""
    p.add_argument("--steps", type=positive, default=steps, help=f"rounds per seed (default {steps})")
    p.add_argument("--seeds", type=positive, default=seeds, help=f"number of seeds 0..n-1 (default {seeds})")
    p.add_argument("--out", default=out, help=f"output folder (default {out})")
    p.add_argument("--resume", action="store_true",
                   help="continue the run saved in --out (same options): finished agents are kept, the agent in "
                   "progress goes on from its last checkpoint with exactly the actions of an unstopped run")
    p.add_argument("--save-every", type=seconds, default=60.0, metavar="SECONDS",
                   help="checkpoint the agent in progress (all seeds) to --out at most this often (default 60; 0: "
                   "after every chunk)")
    folder_args(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
