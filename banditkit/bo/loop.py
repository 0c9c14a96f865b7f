"""Running an optimisation: :func:`optimize` (the whole loop in one call) and runs that survive an interruption.

``optimize(f, bounds_or_space, n_evals, ...)`` asks, evaluates ``f`` and tells until ``n_evals`` evaluations; with
``checkpoint=path`` it uses the two pieces here:

- :func:`open_or_create` — the optimiser saved at ``path`` if the file exists (after checking that it was made
  with the settings asked for now), else a fresh one;
- :class:`Autosave` — writes the optimiser to ``path`` (atomically, :meth:`BayesOpt.save`) when at least
  ``every_s`` seconds have passed since the last write, and on demand.

A checkpoint written between two evaluations resumes *exactly*: the resumed run makes the same suggestions as one
that was never stopped (the saved state holds the PRNG key, the Sobol position, the trust region and any
suggestion not yet evaluated, which the resumed run evaluates first).  (:mod:`banditkit.bo.resume` is the old name
of these pieces.)
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from banditkit.bo.optimizer import BayesOpt, resolve_direction
from banditkit.bo.points import is_typed_space

__all__ = ["Autosave", "BOResult", "open_or_create", "optimize", "settings"]


class BOResult:
    """Result of :func:`banditkit.bo.optimize`: ``x`` / ``y`` (best point and value), ``history``, ``optimizer``."""

    def __init__(self, optimizer: BayesOpt):
        self.optimizer = optimizer
        self.x, self.y = optimizer.best
        self.history = optimizer.history

    def __repr__(self) -> str:
        x = self.x if isinstance(self.x, Mapping) else np.array2string(self.x, precision=4)
        return f"BOResult(x={x}, y={self.y:.6g}, n_evals={len(self.history)})"


def settings(opt: BayesOpt) -> dict[str, Any]:
    """The settings that make two optimisers the same run (everything :meth:`BayesOpt.save` records except the
    data and the random state), as plain JSON values."""
    s = dict(opt.snapshot().settings)
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


def optimize(
    f: Callable[[Any], float],
    bounds: Any = None,
    n_evals: int = 50,
    surrogate: str | Callable = "hilofi",
    acquisition: str | None = None,
    direction: str | None = None,
    seed: int = 0,
    callback: Callable[[BayesOpt, Any, float], None] | None = None,
    checkpoint: str | os.PathLike | None = None,
    save_every: float = 10.0,
    *,
    space: Any = None,
    on_error: str | Callable[[BayesOpt, Any, Exception], bool] = "raise",
    **kwargs,
) -> BOResult:
    """Run ``n_evals`` evaluations of ``f(x) -> float`` with :class:`BayesOpt` (extra keyword arguments go to it)
    and return a :class:`BOResult` with ``x``, ``y``, ``history`` and the ``optimizer``.  ``x`` is an ndarray
    ``(dim,)`` in ``bounds``, or with a typed ``space=`` (also accepted in place of ``bounds``) a dict
    ``{name: value}``.  ``callback(opt, x, y)`` is called after every evaluation.  ``direction``: ``"minimize"``
    (the default; not given, it warns for one release that until 0.2 the default was ``"maximize"``, as
    :class:`BayesOpt` does) or ``"maximize"``.

    ``checkpoint=path`` makes the run resumable: the optimiser is saved there every ``save_every`` seconds, at the
    end, and when the run is interrupted (``KeyboardInterrupt``) while ``f`` or the callback runs — the usual place
    for an expensive objective; an interruption inside ``ask`` / ``tell`` keeps the previous save.  If ``path``
    exists the run continues from it (its settings must match this call's): points it had suggested but not
    evaluated are evaluated first, then the run goes on until ``n_evals`` evaluations *in all*, making exactly the
    suggestions an uninterrupted run makes.

    A failed evaluation — ``f`` raises an ``Exception``, or returns something that is not one finite number — is
    handled by ``on_error``:

    - ``"raise"`` (default): the exception propagates; with ``checkpoint=`` the optimiser is saved first, with every
      evaluation told so far and the failing point still pending (a resumed run evaluates it again first);
    - ``"skip"``: the point is dropped (:meth:`BayesOpt.fail`: not told, not suggested again) and the run goes on
      (a failure is not an evaluation: the run still makes ``n_evals`` of them);
    - a callable ``on_error(opt, x, exc) -> bool``: ``True`` skips, ``False`` raises (to log failures, or to stop
      after too many).

    Any other exception raised while ``f`` or the callback runs (``KeyboardInterrupt`` included) also saves the
    checkpoint before it propagates; one inside ``ask`` / ``tell`` keeps the previous save.
    """
    if not callable(f):
        raise TypeError("f must be callable: f(x) -> float, x an ndarray (dim,) or a dict for a typed space")
    if not isinstance(n_evals, (int, np.integer)) or n_evals < 1:
        raise ValueError(f"n_evals must be a positive int, got {n_evals!r}")
    direction = resolve_direction(direction)
    if on_error in ("raise", "skip"):
        skip = (lambda opt, x, exc: False) if on_error == "raise" else (lambda opt, x, exc: True)
    elif callable(on_error):
        skip = on_error
    else:
        raise ValueError(f"on_error must be 'raise', 'skip' or a function (opt, x, exc) -> bool, got {on_error!r}")
    if space is None and is_typed_space(bounds):
        bounds, space = None, bounds
    domain = dict(space=space) if space is not None else dict(bounds=bounds)

    def make() -> BayesOpt:
        return BayesOpt(**domain, surrogate=surrogate, acquisition=acquisition, direction=direction, seed=seed,
                        **kwargs)

    saver = None
    if checkpoint is None:
        opt = make()
    else:
        opt, resumed = open_or_create(checkpoint, make, model=kwargs.get("model"),
                                      surrogate=None if isinstance(surrogate, str) else surrogate)
        saver = Autosave(opt, checkpoint, save_every)
        if resumed:
            saver.saved_evals = opt.n_evals  # the file holds this state already
    todo = list(opt.pending)  # suggested before an interruption: what the run evaluated next
    consistent = True  # False while ask / tell may be half-way through changing the optimiser
    try:
        while opt.n_evals < n_evals:
            consistent = False
            x = todo.pop(0) if todo else opt.ask()
            consistent = True
            try:
                y = _evaluate(f, x)
            except Exception as e:
                if not skip(opt, x, e):
                    raise
                opt.fail(x)
                continue
            consistent = False
            opt.tell(x, y)
            consistent = True
            if saver is not None:
                saver.tick()
            if callback is not None:
                callback(opt, x, y)
    except BaseException:
        if saver is not None and consistent:
            saver.now()
        raise
    if saver is not None and saver.saved_evals != opt.n_evals:
        saver.now()
    return BOResult(opt)


def _evaluate(f: Callable[[Any], float], x: Any) -> float:
    """``f(x)`` as one finite float (``ValueError`` otherwise)."""
    y = f(x)
    try:
        y = float(np.asarray(y).reshape(()))
    except (TypeError, ValueError) as e:
        raise ValueError(f"f must return one number, got {y!r}") from e
    if not math.isfinite(y):
        raise ValueError(f"f returned {y} at x={x if isinstance(x, Mapping) else x.tolist()}; the objective "
                         "must be finite")
    return y
