"""Runs that survive an interruption: an optimiser checkpointed to one file while it runs, picked up from there.

:func:`banditkit.bo.optimize` with ``checkpoint=path`` uses the two pieces here:

- :func:`open_or_create` — the optimiser saved at ``path`` if the file exists (after checking that it was made
  with the settings asked for now), else a fresh one;
- :class:`Autosave` — writes the optimiser to ``path`` (atomically, :meth:`BayesOpt.save`) when at least
  ``every_s`` seconds have passed since the last write, and on demand.

A checkpoint written between two evaluations resumes *exactly*: the resumed run makes the same suggestions as one
that was never stopped (the saved state holds the PRNG key, the Sobol position, the trust region and any
suggestion not yet evaluated, which the resumed run evaluates first).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from banditkit.bo.optimizer import BayesOpt


def settings(opt: BayesOpt) -> dict[str, Any]:
    """The settings that make two optimisers the same run (everything :meth:`BayesOpt.save` records except the
    data and the random state), as plain JSON values."""
    s = opt._settings()
    s.update(s.pop("config"))  # one entry per option, so that a difference names the option
    return json.loads(json.dumps(s, sort_keys=True, default=repr))


def open_or_create(
    path: str | os.PathLike, make: Callable[[], BayesOpt], model: Any = None, surrogate: Callable | None = None
) -> tuple[BayesOpt, bool]:
    """``(optimiser, resumed)``: the one saved at ``path`` when the file exists, else ``make()``.

    ``model`` / ``surrogate`` are passed to :meth:`BayesOpt.load` (code is not stored in a checkpoint).

    Raises:
      ValueError: the saved optimiser was made with other settings than ``make()`` (each difference is named), or
        the file is not a saved BayesOpt.
    """
    fresh = make()
    target = os.fspath(path)
    if not os.path.exists(target):
        return fresh, False
    saved = BayesOpt.load(target, model=model, surrogate=surrogate)
    old, new = settings(saved), settings(fresh)
    diff = [f"{k}: saved {old.get(k)!r}, now {new.get(k)!r}" for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k)]
    if diff:
        raise ValueError(
            f"checkpoint {target!r} was made with other settings ({'; '.join(diff)}); pass the same settings to "
            "resume it, or another checkpoint path (or delete the file) to start a new run"
        )
    return saved, True


class Autosave:
    """Save ``opt`` to ``path`` at most every ``every_s`` seconds (:meth:`tick`) and when asked (:meth:`now`).

    ``every_s = 0`` saves at every tick.  A save of the default surrogate takes ~0.1 s (a 13–22 MB file for the
    default HiLoFi MLP), against ~0.02 s for a Thompson-sampling ask + tell, hence the interval.
    """

    def __init__(self, opt: BayesOpt, path: str | os.PathLike, every_s: float = 10.0):
        if not every_s >= 0:
            raise ValueError(f"save_every must be a number of seconds >= 0, got {every_s!r}")
        self.opt, self.path, self.every_s = opt, os.fspath(path), float(every_s)
        self._last = time.monotonic()
        self.saved_evals = -1  # n_evals at the last save (-1: not saved by this object yet)

    def tick(self) -> bool:
        """Save if ``every_s`` seconds have passed since the last save; returns whether it saved."""
        if time.monotonic() - self._last >= self.every_s:
            self.now()
            return True
        return False

    def now(self) -> None:
        """Save now (atomically: an interruption during the write leaves the previous file)."""
        self.opt.save(self.path)
        self._last = time.monotonic()
        self.saved_evals = self.opt.n_evals
