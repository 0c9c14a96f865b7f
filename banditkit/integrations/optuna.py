"""banditkit's Bayesian optimiser as an Optuna sampler: ``optuna.create_study(sampler=BanditkitSampler())``.

.. code-block:: python

   import optuna
   from banditkit.integrations.optuna import BanditkitSampler

   study = optuna.create_study(direction="maximize", sampler=BanditkitSampler(surrogate="hilofi", seed=0))
   study.optimize(objective, n_trials=60)      # objective(trial) uses trial.suggest_float / _int / _categorical

Needs the ``optuna`` extra (``pip install banditkit[optuna]``); ``import banditkit`` does not import Optuna.

How it samples.  The first ``n_startup_trials`` trials come from an independent sampler (``RandomSampler`` by
default, or TPE).  After that, the parameters every completed trial has (Optuna's intersection search space, less
single-value ones) are sampled *jointly* by a :class:`~banditkit.bo.BayesOpt` over the typed space they map to —
``FloatDistribution(low, high, log, step)`` → :class:`~banditkit.bo.space.Float`, ``IntDistribution(low, high, log,
step)`` → :class:`~banditkit.bo.space.Int`, ``CategoricalDistribution(choices)`` →
:class:`~banditkit.bo.space.Categorical` — fed every ``COMPLETE`` trial (minimised or maximised as the study is);
``RUNNING`` trials are its pending points (constant liar for EI / PI / UCB, distinct Thompson draws), so parallel
workers do not propose the same point.  Parameters outside that space (a define-by-run branch) fall back to the
independent sampler.

Many workers.  Several processes may share one storage (``JournalStorage`` on a file, SQLite or another RDB
through ``RDBStorage``), each with its own sampler: the storage is the only state that matters.  At every trial
the sampler reads the study's trials and *catches up*: the completed trials it has not folded in yet are told to
its optimiser (in trial-number order), and the running ones become the pending list.  Catching up rather than
rebuilding from scratch is the choice here because the network surrogates are online filters — one ``O(1)`` update
per observation — so a rebuild would cost ``O(n)`` filter steps per trial; the memo is keyed by the study and
thrown away (a rebuild) when the search space changes or a folded-in trial is no longer there.  Each trial draws its
randomness — BO's and the startup sampler's alike — from ``(seed, trial.number)``, so two workers with one seed never
share a draw and a trial's suggestion does not depend on which worker made it beyond the data it saw.  A running
trial's point is known to the others from the moment its sampler has chosen it: the sampler publishes it at once as
the trial's system attribute ``banditkit:proposal`` (before the objective suggests the parameters), then reads the
storage again, and if another trial has the same point it asks again with that point pending.  The storage orders the
writes, so of two workers whose asks overlapped the later to publish sees the other's point: no two trials evaluate
one point (up to ``min_distance``), however the asks interleave.  No worker waits for another, and trials are numbered
by the storage, so none is lost or duplicated.  ``incremental=False`` rebuilds the optimiser from all completed trials
at every trial instead (deterministic given the study; slower).
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.search_space import intersection_search_space
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from banditkit.bo import BayesOpt
from banditkit.bo.space import Categorical, Float, Int, Param, Space

__all__ = ["BanditkitSampler", "to_param", "to_space"]

_logger = logging.getLogger(__name__)

PROPOSAL_KEY = "banditkit:proposal"  # a trial's system attribute: the point its sampler proposed, published at once
PUBLISH_ROUNDS = 4  # asks per trial at most when its point coincides with another worker's


def to_param(distribution: BaseDistribution) -> Param:
    """The :mod:`banditkit.bo.space` parameter of an Optuna distribution (``ValueError`` for one it cannot map)."""
    if isinstance(distribution, FloatDistribution):
        return Float(distribution.low, distribution.high, log=distribution.log, step=distribution.step)
    if isinstance(distribution, IntDistribution):
        return Int(distribution.low, distribution.high, log=distribution.log, step=distribution.step)
    if isinstance(distribution, CategoricalDistribution):
        return Categorical(distribution.choices)
    raise ValueError(f"no banditkit parameter for the distribution {distribution!r}")


def to_space(search_space: dict[str, BaseDistribution]) -> Space:
    """A :class:`~banditkit.bo.space.Space` of Optuna distributions, in the mapping's order."""
    return Space([(name, to_param(d)) for name, d in search_space.items()])


class _Memo:
    """One study's optimiser and the trial numbers already told to it."""

    def __init__(self, opt: BayesOpt, space: Space, direction: str):
        self.opt, self.space, self.direction = opt, space, direction
        self.told: set[int] = set()


class BanditkitSampler(BaseSampler):
    """An Optuna sampler driven by :class:`~banditkit.bo.BayesOpt` (see the module docstring).

    Args:
      surrogate: the BO surrogate: a posterior backend name (``"hilofi"``, ``"lofi"``, ...), ``"gp"``, ``"auto"``
        (the GP with EI up to 100 evaluations, HiLoFi with Thompson sampling after: :mod:`banditkit.bo.auto`), or a
        factory (``BayesOpt(surrogate=...)``).
      acquisition: ``"thompson"`` (the default, ``None``), ``"ei"``, ``"pi"`` or ``"ucb"``; ``surrogate="auto"``
        picks its own.
      n_startup_trials: completed trials before BO takes over (the independent sampler proposes until then).
      seed: seed of the optimiser and of the default independent sampler; ``None``: a random one.
      independent_sampler: ``"random"`` (default), ``"tpe"``, or any Optuna sampler: the startup trials and the
        parameters outside the relative search space.
      warn_independent_sampling: log a warning when a parameter is sampled independently after the startup.
      incremental: catch up from the trials not yet seen (default) or rebuild from all of them at every trial.
      warm_up: while the startup trials run, build and exercise a throw-away optimiser of the study's search space
        in a background thread (default ``True``), so that the first model-based trial finds the surrogate's and
        the acquisition's programs traced and compiled: their cost overlaps the startup trials' objective instead
        of delaying that trial.  The suggestions are the same with or without it.
      **bayesopt_kwargs: further :class:`~banditkit.bo.BayesOpt` options (``features``, ``surrogate_kwargs``,
        ``n_candidates``, ``trust_region``, ...).
    """

    def __init__(
        self,
        surrogate: Any = "hilofi",
        acquisition: str | None = None,
        n_startup_trials: int = 10,
        seed: int | None = None,
        *,
        independent_sampler: str | BaseSampler = "random",
        warn_independent_sampling: bool = True,
        incremental: bool = True,
        warm_up: bool = True,
        **bayesopt_kwargs: Any,
    ):
        if not isinstance(n_startup_trials, (int, np.integer)) or isinstance(n_startup_trials, bool) \
                or n_startup_trials < 1:
            raise ValueError(f"n_startup_trials must be a positive int, got {n_startup_trials!r}")
        for bad in ("bounds", "space", "direction", "seed", "n_initial"):
            if bad in bayesopt_kwargs:
                raise ValueError(f"BanditkitSampler sets BayesOpt's {bad!r} itself (from the study); drop {bad}=")
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be None or a non-negative int, got {seed!r}")
        self._seed = int(seed)
        self._n_startup = int(n_startup_trials)
        # an owned independent sampler ("random" / "tpe") is made afresh for every draw, seeded by (seed, trial
        # number, parameter name): one shared RNG stream would give two workers with the same seed the same
        # startup points, since each worker's stream starts at the same place.  A sampler the user passes in is
        # used as it is (its seeding is the user's).
        self._owned: str | None = None
        if isinstance(independent_sampler, BaseSampler):
            self._independent = independent_sampler
        elif independent_sampler in ("random", "tpe"):
            self._owned = independent_sampler
            self._independent = self._owned_sampler(self._seed)
        else:
            raise ValueError(f"independent_sampler must be 'random', 'tpe' or an Optuna sampler, got "
                             f"{independent_sampler!r}")
        self._surrogate, self._acquisition = surrogate, acquisition
        self._warn = bool(warn_independent_sampling)
        self._incremental = bool(incremental)
        self._warm_up = bool(warm_up)
        self._warming: dict[Any, threading.Thread] = {}  # the warm-up thread of each search space seen
        self._kwargs = dict(bayesopt_kwargs)
        # fail now, not at trial n_startup_trials, on arguments BayesOpt rejects
        BayesOpt(space={"x": Float(0.0, 1.0)}, surrogate=surrogate, acquisition=acquisition, seed=self._seed,
                 direction="minimize", **self._kwargs)
        self._memos: dict[Any, _Memo] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # a copy (pickle, n_jobs > 1) starts without the memo
        state = self.__dict__.copy()
        state["_memos"], state["_lock"], state["_warming"] = {}, None, {}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _owned_sampler(self, seed: int) -> BaseSampler:
        if self._owned == "tpe":
            return TPESampler(seed=seed, n_startup_trials=self._n_startup)
        return RandomSampler(seed=seed)

    def _draw_seed(self, trial: FrozenTrial, param_name: str) -> int:
        """The seed of one independent draw: a function of ``(seed, trial.number, param_name)`` alone, the same in
        every process (``zlib.crc32``, not Python's salted ``hash``)."""
        words = [self._seed, int(trial.number), zlib.crc32(param_name.encode())]
        return int(np.random.SeedSequence(words).generate_state(1)[0])

    # Optuna's sampler interface ----------------------------------------------------------------------------------
    def reseed_rng(self) -> None:
        self._independent.reseed_rng()

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._independent.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self._independent.after_trial(study, trial, state, values)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """The parameters every completed trial has with the same distribution (less single-value ones and any
        that do not map onto a banditkit parameter), sorted by name."""
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        out: dict[str, BaseDistribution] = {}
        for name, dist in intersection_search_space(complete).items():
            if dist.single():
                continue
            try:
                to_param(dist)
            except ValueError as e:
                _logger.warning(f"BanditkitSampler: parameter {name!r} is sampled independently ({e})")
                continue
            out[name] = dist
        return dict(sorted(out.items()))

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        self._raise_error_if_multi_objective(study)
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        space = to_space(search_space)
        direction = "minimize" if study.direction == StudyDirection.MINIMIZE else "maximize"
        if len(complete) < self._n_startup:
            if self._warm_up:
                self._start_warm_up(space, direction)
            return {}
        for thread in list(self._warming.values()):  # its programs are ready (or being made: wait, not redo)
            thread.join()
        with self._lock:
            memo = self._memo(study, space, direction, complete)
            self._catch_up(memo, complete)
            for attempt in range(PUBLISH_ROUNDS):
                if attempt:  # trials completed since the first read are evaluations now, not pending points
                    self._catch_up(memo, [t for t in trials if t.state == TrialState.COMPLETE])
                pending = self._others(memo.space, trials, trial.number, states=(TrialState.RUNNING,))
                seed = int(trial.number) if attempt == 0 else int(np.random.SeedSequence(
                    [self._seed, int(trial.number), attempt]).generate_state(1)[0])
                point = memo.opt.ask(pending=pending, seed=seed)
                # publish, then read the storage again: of two workers whose asks overlapped in time, the later
                # to publish sees the other's point (the storage orders the writes), and yields if they coincide
                study._storage.set_trial_system_attr(trial._trial_id, PROPOSAL_KEY, point)
                trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
                others = self._others(memo.space, trials, trial.number, states=(TrialState.COMPLETE,
                                                                               TrialState.RUNNING))
                if not memo.opt.repeats(point, others):
                    return point
            _logger.warning(f"BanditkitSampler: trial {trial.number} still repeats another worker's point after "
                            f"{PUBLISH_ROUNDS} asks; evaluating it anyway")
            return point

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        if self._warn and len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= self._n_startup:
            _logger.warning(
                optuna.samplers._base._INDEPENDENT_SAMPLING_WARNING_TEMPLATE.format(
                    param_name=param_name, trial_number=trial.number,
                    independent_sampler_name=self._independent.__class__.__name__,
                    sampler_name=self.__class__.__name__,
                    fallback_reason="the parameter is not in every completed trial with one distribution (a dynamic "
                                    "search space), or has a single value",
                )
            )
        sampler = self._independent if self._owned is None else self._owned_sampler(self._draw_seed(trial, param_name))
        return sampler.sample_independent(study, trial, param_name, param_distribution)

    # the warm-up: the first model-based trial's programs made while the startup trials run ----------------------
    def _start_warm_up(self, space: Space, direction: str) -> None:
        key = (space, direction)
        if key in self._warming:
            return
        thread = threading.Thread(target=self._warm, args=(space, direction), name="banditkit-warm-up")
        self._warming[key] = thread
        thread.start()

    def _warm(self, space: Space, direction: str) -> None:
        """Tell a throw-away optimiser ``n_startup_trials`` random points and ask once (with a pending point): the
        jitted programs it traces and compiles are kept by JAX (and the surrogates, shared by optimisers of one
        configuration, keep their compiled code), so the real optimiser built at the first model-based trial runs
        them at once.  Its errors are left to that optimiser to raise."""
        try:
            opt = BayesOpt(space=space, surrogate=self._surrogate, acquisition=self._acquisition, direction=direction,
                           seed=self._seed, n_initial=self._n_startup, **self._kwargs)
            rng = np.random.default_rng(self._seed)
            points = [space.decode(u) for u in space.sample(rng, self._n_startup + 1)]
            opt.tell(points[:-1], rng.standard_normal(self._n_startup).tolist())
            opt.ask(pending=points[-1:], seed=0)
        except Exception:  # noqa: BLE001 - a warm-up only; the real optimiser reports the problem
            _logger.debug("BanditkitSampler: the warm-up failed", exc_info=True)

    # the memo: an optimiser per study, caught up with the storage -------------------------------------------------
    def _memo(self, study: Study, space: Space, direction: str, complete: list[FrozenTrial]) -> _Memo:
        key = (study.study_name, getattr(study, "_study_id", None), id(getattr(study, "_storage", None)))
        memo = self._memos.get(key)
        numbers = {t.number for t in complete}
        if (memo is None or not self._incremental or memo.space != space or memo.direction != direction
                or not memo.told <= numbers):
            opt = BayesOpt(space=space, surrogate=self._surrogate, acquisition=self._acquisition, direction=direction,
                           seed=self._seed, n_initial=self._n_startup, **self._kwargs)
            memo = self._memos[key] = _Memo(opt, space, direction)
        return memo

    @classmethod
    def _others(cls, space: Space, trials: list[FrozenTrial], number: int, states: tuple) -> list[dict]:
        """The points of the trials in ``states`` other than trial ``number``: their parameters, or for a running
        trial that has not suggested them yet, the point its sampler published."""
        out = []
        for t in trials:
            if t.state in states and t.number != number:
                p = cls._point(space, t)
                if p is None and t.state == TrialState.RUNNING:
                    p = cls._point(space, t, t.system_attrs.get(PROPOSAL_KEY))
                if p is not None:
                    out.append(p)
        return out

    @staticmethod
    def _point(space: Space, trial: FrozenTrial, values: dict | None = None) -> dict | None:
        """The trial's values of the space's parameters, or those of ``values`` if given (``None`` if one is missing
        or not valid)."""
        try:
            source = trial.params if values is None else values
            point = {name: source[name] for name in space.names}
            space.encode(point)
            return point
        except (KeyError, ValueError):
            return None

    def _catch_up(self, memo: _Memo, complete: list[FrozenTrial]) -> None:
        """Tell ``memo.opt`` every completed trial it has not seen, in trial-number order (one batch)."""
        new = sorted((t for t in complete if t.number not in memo.told), key=lambda t: t.number)
        points, values = [], []
        for t in new:
            point = self._point(memo.space, t)
            value = t.value
            if point is None or value is None or not np.isfinite(value):  # nothing the surrogate can learn from
                continue
            points.append(point)
            values.append(float(value))
        if points:
            memo.opt.tell(points, values)
        memo.told.update(t.number for t in new)
