"""``BayesOpt``: ask/tell Bayesian optimisation over a box or a typed search space (API.md §9, §11).

The optimiser works in the unit cube ``u ∈ [0, 1]^D``: a box ``bounds=[(lo, hi), ...]`` maps as ``x = lo + u (hi −
lo)``; a typed ``space=`` (:mod:`banditkit.bo.space`: ``Float`` with log scale and steps, ``Int``, ``Categorical``)
by its encoding (log warp, equal bins per value, one-hot).  ``ask()`` returns an ndarray for a box and a dict of
typed values for a space; ``tell`` takes the same.  It minimises by default (``direction="minimize"``, as Optuna and
``banditkit bo`` do; until 0.2 the default was ``"maximize"``, and leaving ``direction`` out warns for one
release).  Internally it always *maximises* ``s = sign · y`` (``sign = −1`` for ``direction="minimize"``).

The parts, one idea each:

- :mod:`~banditkit.bo.surrogate` — the model of the objective: a Flax network with an online posterior backend
  (:mod:`~banditkit.bo.surrogate_nn`, the default ``"hilofi"``) or an exact GP (:mod:`~banditkit.bo.surrogate_gp`,
  ``"gp"``);
- :mod:`~banditkit.bo.acquisition` — Thompson sampling, EI, PI, UCB and their maximisation over a mixed space
  (Sobol candidates, gradient refinement of the continuous coordinates, neighbour moves of the discrete ones);
- :mod:`~banditkit.bo.trust_region` — TuRBO's adaptive box around the incumbent;
- :mod:`~banditkit.bo.propose` — the proposal step as a pure function of the model and the data;
- :mod:`~banditkit.bo.points` — a point in the user's form (an array of a box, a dict of a typed space) and in the
  unit cube;
- :mod:`~banditkit.bo.auto` — ``surrogate="auto"``: the GP with EI up to 100 evaluations, HiLoFi-TS after;
- this module — the ask/tell state: evaluations, pending suggestions, the initial design, the PRNG key;
- :mod:`~banditkit.bo.snapshot` — that state as a read-only value (:meth:`BayesOpt.snapshot`), and what
  :meth:`BayesOpt.restore` puts back;
- :mod:`~banditkit.bo.persist` — save / load; :mod:`~banditkit.bo.loop` — :func:`~banditkit.bo.optimize` and
  resumable runs.

Ask.  While fewer than ``n_initial`` evaluations have been told, ``ask`` returns points of a scrambled Sobol
sequence (snapped to valid points of a typed space, repeats skipped).  Afterwards the acquisition is maximised
(:mod:`banditkit.bo.acquisition`).  Two maximisers refine the best ``n_starts`` candidates (``maximizer=``):
``"ascent"`` (the default for Thompson sampling with a network surrogate) takes ``refine_steps`` projected
normalised gradient steps of length at most ``step_size`` (fast, but a start moves by at most
≈ ``step_size · refine_steps / 2``); ``"lbfgs"`` (the default for EI / PI / UCB, and for ``surrogate="gp"``) runs
box-bounded L-BFGS-B (SciPy) on all starts at once for at most ``refine_steps`` iterations on ``log EI`` /
``log PI`` / UCB / the Thompson draw, like BoTorch's ``optimize_acqf`` with LogEI: it reaches maximisers anywhere
in a high-dimensional cube.  Measured (``benchmarks/results/bo_notes.md``, 5 seeds, EI): exact GP on Ackley10
4.1 → 2.0, Ackley50 8.5 → 6.4, DrawNN50 376 → 100 for ~20 % more time per iteration (the GP refit dominates);
HiLoFi on DrawNN50 297 → 207, slightly better on the small tasks, at ~1.7× the time per ask (a Jacobian per start
and iteration).  With Thompson sampling it did not help the network surrogates (Ackley50 unchanged, DrawNN50 145 →
179), so they keep ``"ascent"``.

Pending points.  ``ask(n)`` returns ``n`` distinct points (distinct after snapping), and suggestions not yet told
stay *pending*.  Thompson draws are diverse by themselves (one draw per point); EI / PI / UCB condition the
surrogate on every pending point with the best value so far as its observation (a *constant liar*, without
changing the fitted state), so the acquisition near a point already being evaluated drops and the next suggestion
goes elsewhere.  A suggestion closer than ``min_distance`` to an evaluated or pending point is replaced by the best
candidate that is not.  ``ask(pending=...)`` replaces the pending list by points being evaluated elsewhere (other
workers), and ``ask(seed=...)`` draws the ask's randomness from its own seed (the Optuna sampler,
:mod:`banditkit.integrations.optuna`, uses both).

Trust region (``trust_region=True``, :mod:`banditkit.bo.trust_region`).  TuRBO's local search: candidates and
refinement are confined to an adaptive box around the incumbent, and in high dimension a candidate changes only
``≈ 20`` coordinates of it.  It keeps a network surrogate's queries where its mean is backed by data (away from the
data an ELU network's mean keeps growing, and a global maximiser chases those spurious peaks).  Measured
(``benchmarks/results/bo_notes.md``, 5 seeds, whole cube → box): HiLoFi-TS Hartmann6 0.68 → 0.46, Ackley10
4.0 → 2.3, Ackley50 8.8 → 7.2, DrawNN50 145 → 67, Branin 1.3 → 0.65, but Ackley5 0.70 → 1.03 and DrawNN200 704 →
797 (5 seeds); average rank over the 8 tasks 9.25 → 5.50; exact GP-EI (L-BFGS) Ackley5 1.7 → 0.17, Ackley50 6.4 →
5.7, DrawNN50 100 → 29, no task worse beyond a standard error.  So it is the default for Thompson sampling and for
the GP.  Not for EI / PI / UCB with a network: HiLoFi-EI improved on 5 of 7 tasks (DrawNN50 207 → 120), but its box
collapsed around a poor incumbent on Branin (regret 0.13 → 1.8, every seed worse); ``trust_region=True`` turns it
on there too.  Each surrogate declares these defaults (``default_options``).

State, save and resume.  Everything that determines the next suggestion is saved by :meth:`BayesOpt.save`
(evaluations, the standardisation, the surrogate's state arrays, the PRNG key, the Sobol position and the
pending suggestions, the search space) in a portable ``.npz`` with a JSON header (no pickled code), written
atomically (:mod:`banditkit.bo.persist`).  Persistence, resumable runs, tests and studies read the optimiser only
through :meth:`BayesOpt.snapshot` (and :attr:`~BayesOpt.config`, :attr:`~BayesOpt.fit`,
:meth:`~BayesOpt.proposal_inputs`), never through its private attributes.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from banditkit.bo import acquisition as _acq
from banditkit.bo import auto as _auto
from banditkit.bo import compile_cache, persist, search
from banditkit.bo import propose as _propose
from banditkit.bo import surrogate as _surrogate
from banditkit.bo import trust_region as _tr
from banditkit.bo.acquisition import ACQUISITIONS, MAXIMIZERS
from banditkit.bo.points import Points, is_typed_space
from banditkit.bo.snapshot import Snapshot
from banditkit.bo.space import Space, as_space
from banditkit.validation import check_bounds, check_finite

__all__ = ["ACQUISITIONS", "MAXIMIZERS", "BayesOpt", "Snapshot"]

FORMAT_VERSION = persist.FORMAT_VERSION


def resolve_direction(direction: str | None, stacklevel: int = 3) -> str:
    """``"minimize"`` or ``"maximize"`` from a ``direction`` argument (any case).  ``None`` (the caller did not
    pass one) is ``"minimize"`` — the default since banditkit 0.3, as Optuna and ``banditkit bo`` do — with a
    ``DeprecationWarning`` for one release (0.3), because before it the default was ``"maximize"``; ``stacklevel``
    points the warning at the caller's line."""
    if direction is None:
        warnings.warn("BayesOpt and bk.bo.optimize minimise by default since banditkit 0.3 (before, they maximised): "
                      "pass direction='minimize' to keep this and silence the warning, or direction='maximize' to "
                      "maximise as before", DeprecationWarning, stacklevel=stacklevel)
        return "minimize"
    d = str(direction).strip().lower()
    if d not in ("maximize", "minimize"):
        raise ValueError(f"direction must be 'minimize' or 'maximize', got {direction!r}")
    return d


class BayesOpt:
    """Ask/tell Bayesian optimiser over a box or a typed search space (see the module docstring).

    Args:
      bounds: ``[(low, high), ...]``, one pair per dimension (``ask`` returns ndarrays).  A typed space given here
        is taken as ``space=``.
      space: a typed search space instead of ``bounds``: a :class:`~banditkit.bo.space.Space`, a dict
        ``{name: Float(...) | Int(...) | Categorical(...)}`` or its configuration (``{name: {"type": ...}}``);
        ``ask`` returns a dict ``{name: value}`` of Python floats, ints and choices, ``tell`` takes one.
      surrogate: a posterior backend name of ``bk.posteriors.REGISTRY`` (``"hilofi"``, ``"lofi"``, ``"lrkf"``,
        ``"ekf"``, ``"neural_linear"``, ``"replay_sgd"``, ...), optionally ending in ``-adaptive_noise`` (the
        Gaussian filters: the observation variance is learned online, ``bk.posteriors.adaptive_noise``), ``"gp"``,
        or a factory ``factory(apply_fn, likelihood, **kw)``; or ``"auto"`` (:mod:`banditkit.bo.auto`): the exact GP
        with EI while at most 100 evaluations are told, HiLoFi with Thompson sampling after (it picks the
        acquisition; ``model`` and ``surrogate_kwargs`` are not taken).
      acquisition: ``"thompson"`` (the default, ``None``), ``"ei"``, ``"pi"`` or ``"ucb"``.
      direction: ``"minimize"`` (the default) or ``"maximize"``.  Not given (``None``): ``"minimize"``, and for
        one release (0.3) a ``DeprecationWarning``, because until 0.2 the default was ``"maximize"`` — pass the
        direction to silence it.
      seed: integer seed of everything random (network init, Sobol scrambling, Thompson draws).
      n_initial: number of Sobol design points before the acquisition is used; default ``max(5, 2·p)`` for ``p``
        parameters.
      model: a Flax module mapping one point ``u (D,)`` of the unit cube (the encoding) to ``(1,)``; default
        ``MLP(features=features, out=1)``.  Its last layer should be the submodule ``head`` for the
        last-layer backends.
      surrogate_kwargs: extra keyword arguments of the backend factory (they override the BO defaults).
      obs_noise: observation-noise variance of the Gaussian likelihood, on the standardised scale.
      features: hidden widths of the default MLP.
      n_candidates: size of the fixed Sobol candidate set the acquisition is scored on.
      maximizer: how the best candidates are refined: ``"ascent"`` (projected normalised gradient ascent) or
        ``"lbfgs"`` (L-BFGS-B on the log acquisition; see the module docstring).  Default ``None``: ``"ascent"``
        for Thompson sampling with a network surrogate, ``"lbfgs"`` otherwise.
      n_starts, refine_steps, step_size: refinement from the best ``n_starts`` candidates (default 4 for
        ``"ascent"``, 8 for ``"lbfgs"``).  ``"ascent"``: ``refine_steps`` (default 10) normalised steps whose L2
        length decays linearly from ``step_size``.  The defaults move a point by at most ≈ 0.28 in the unit cube,
        right for low ``d``; in high dimension (the cube's diagonal is √d) scale ``step_size`` with √d and raise
        ``refine_steps`` (the DrawNN-50/200 benchmarks use ``step_size = 0.05·√d`` and 100 steps), or use
        ``maximizer="lbfgs"``, or an acquisition's maximiser far from the candidates stays out of reach.
        ``"lbfgs"``: at most ``refine_steps`` (default 200) iterations; ``step_size`` is unused.
      xi: improvement margin of EI / PI (standardised units).  beta: UCB width ``μ + β σ``.
      min_distance: a suggestion closer than this (max-norm in the unit cube) to an evaluated or pending point is
        replaced by the best-scoring candidate that is not (re-evaluating a point teaches a deterministic
        objective nothing; set 0 to allow repeats except exact duplicates).
      trust_region: search only a box of side ``L`` around the best point so far (TuRBO, Eriksson et al. 2019;
        :mod:`banditkit.bo.trust_region`): the candidates are the Sobol set mapped into the box on a random
        ``min(1, 20/d)`` share of the coordinates (the incumbent's values elsewhere), the refinement is bounded by
        the box, and ``L`` (0.8 at first) doubles after 3 improving evaluations in a row and halves after
        ``max(4, d)`` non-improving ones.  Its state (:attr:`trust_region`) is saved with the optimiser.
        Default ``None``: on for Thompson sampling and for ``surrogate="gp"``, off (the whole cube at every ask)
        for EI / PI / UCB with a network surrogate.
    """

    def __init__(
        self,
        bounds: Sequence[tuple[float, float]] | None = None,
        surrogate: str | Callable = "hilofi",
        acquisition: str | None = None,
        direction: str | None = None,
        seed: int = 0,
        n_initial: int | None = None,
        model: Any = None,
        surrogate_kwargs: dict | None = None,
        *,
        space: Any = None,
        obs_noise: float = 1e-2,
        features: Sequence[int] = (180, 180, 180),
        n_candidates: int = 1024,
        maximizer: str | None = None,
        n_starts: int | None = None,
        refine_steps: int | None = None,
        step_size: float = 0.05,
        xi: float = 0.01,
        beta: float = 2.0,
        min_distance: float = 1e-3,
        trust_region: bool | None = None,
    ):
        compile_cache.enable()  # a compilation another process paid is loaded, not repeated (opt out: see there)
        if bounds is not None and space is not None:
            raise ValueError("give bounds= (a box) or space= (a typed search space), not both")
        if bounds is None and space is None:
            raise ValueError("give the search domain: bounds=[(low, high), ...] or space={name: Float(...), ...}")
        if space is None and is_typed_space(bounds):
            space = bounds
        if space is not None:
            self.space, self._named = as_space(space), True
        else:
            b = check_bounds(bounds)
            self.space, self._named = Space.from_bounds(b), False
        self._points = Points(self.space, self._named)  # the user's form of a point <-> the unit cube
        self._discrete = self._points.discrete
        self.dim = self._points.dim
        self._auto = _auto.is_auto(surrogate)
        if self._auto:
            _auto.check_arguments(acquisition, model, surrogate_kwargs)
        direction = resolve_direction(direction)
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        if n_initial is None:
            n_initial = max(5, 2 * len(self.space))
        if not isinstance(n_initial, (int, np.integer)) or n_initial < 1:
            raise ValueError(f"n_initial must be a positive int, got {n_initial!r}")
        if not isinstance(n_candidates, (int, np.integer)) or n_candidates < 1:
            raise ValueError(f"n_candidates must be a positive int, got {n_candidates!r}")
        if trust_region is not None and not isinstance(trust_region, (bool, np.bool_)):
            raise TypeError(f"trust_region must be True, False or None (the default), got {trust_region!r}")
        if not obs_noise > 0:
            raise ValueError(f"obs_noise is a variance and must be > 0, got {obs_noise!r}")
        self.direction = direction
        self.seed = int(seed)
        self.n_initial = int(n_initial)
        # the maximiser options as given (None: the surrogate's measured default, resolved per phase by _phase_parts)
        self._options = dict(maximizer=maximizer, n_starts=n_starts, refine_steps=refine_steps,
                             trust_region=None if trust_region is None else bool(trust_region))
        self._config = dict(
            obs_noise=float(obs_noise),
            features=[int(f) for f in features],
            n_candidates=int(n_candidates),
            step_size=float(step_size),
            xi=float(xi),
            beta=float(beta),
            min_distance=float(min_distance),
        )
        self._sign = 1.0 if direction == "maximize" else -1.0
        if self._auto:
            surrogate, acquisition = _auto.phase(0)
        self._install(self._phase_parts(surrogate, "thompson" if acquisition is None else acquisition, model,
                                        surrogate_kwargs))
        self._k_init, self._key = jax.random.split(jax.random.PRNGKey(self.seed))
        self._fit = self._surrogate.init(self._k_init)
        # the Sobol candidates are made when first needed (an optimiser made only to check its arguments, e.g. by
        # the Optuna sampler, then does not import SciPy's stats package, ~1-2 s)
        self._candidates_value: jax.Array | None = None

        self._u = np.zeros((0, self.dim))  # unit-cube inputs told so far
        self._y = np.zeros((0,))  # raw values as told
        self._source: list[str] = []
        self._sobol_index = 0
        self._pending = np.zeros((0, self.dim))
        self._pending_source: list[str] = []
        self._failed = np.zeros((0, self.dim))  # suggestions whose evaluation failed (:meth:`fail`)
        self._tr = _tr.TrustRegion()

    # the surrogate and acquisition in use (one for good, or surrogate="auto"'s phase) ---------------------------
    def _phase_parts(self, surrogate: str | Callable, acquisition: str, model: Any = None,
                     surrogate_kwargs: dict | None = None) -> dict:
        """The surrogate, acquisition, resolved maximiser options and compiled kernels of one configuration (the
        options the user left ``None`` take the surrogate's measured defaults); nothing of ``self`` changes."""
        acq = _acq.parse(acquisition)
        defaults = _surrogate.kind(surrogate).default_options(acq)
        opts = self._options
        maximizer = defaults["maximizer"] if opts["maximizer"] is None else opts["maximizer"]
        if maximizer not in MAXIMIZERS:
            raise ValueError(f"unknown maximizer {maximizer!r}; choose one of {list(MAXIMIZERS)}")
        n_starts = MAXIMIZERS[maximizer]["n_starts"] if opts["n_starts"] is None else opts["n_starts"]
        refine_steps = MAXIMIZERS[maximizer]["refine_steps"] if opts["refine_steps"] is None else opts["refine_steps"]
        if not isinstance(n_starts, (int, np.integer)) or n_starts < 1:
            raise ValueError(f"n_starts must be a positive int, got {n_starts!r}")
        if not isinstance(refine_steps, (int, np.integer)) or refine_steps < 0:
            raise ValueError(f"refine_steps must be a non-negative int, got {refine_steps!r}")
        config = dict(self._config, maximizer=maximizer, n_starts=int(min(n_starts, self._config["n_candidates"])),
                      refine_steps=int(refine_steps),
                      trust_region=defaults["trust_region"] if opts["trust_region"] is None else opts["trust_region"])
        config["trust_region"] = bool(config["trust_region"])  # measured per surrogate and acquisition (bo_notes.md)
        sur = _surrogate.make(surrogate, dim=self.dim, model=model, surrogate_kwargs=surrogate_kwargs,
                              obs_noise=config["obs_noise"], features=config["features"])
        return dict(surrogate=sur, acquisition=acq, config=config, kernels=_acq.kernels(sur, config))

    def _install(self, parts: dict) -> None:
        """Use the configuration ``parts`` (:meth:`_phase_parts`); the fit is the caller's to set."""
        self._surrogate, self.acquisition = parts["surrogate"], parts["acquisition"]
        self._config, self._kernels = parts["config"], parts["kernels"]
        self.surrogate = _auto.AUTO if self._auto else self._surrogate.name
        self.surrogate_kwargs = None if self._auto else self._surrogate.kwargs
        self.model = self._surrogate.model
        self._custom_model = self._surrogate.custom_model
        self._candidates_value = None  # in the surrogate's dtype: made again on first use

    def _phase_for(self, n_evals: int) -> dict | None:
        """With ``surrogate="auto"``: the parts of the phase for ``n_evals`` evaluations if it is not the one in
        use, else ``None`` (also ``None`` for any other surrogate)."""
        if not self._auto:
            return None
        name, acq = _auto.phase(n_evals)
        if name == self._surrogate.name and acq == self.acquisition:
            return None
        return self._phase_parts(name, acq)

    # public API -------------------------------------------------------------------------------------------------
    @property
    def bounds(self) -> np.ndarray:
        """``(dim, 2)`` array of ``(low, high)`` (a box; a typed space with other than plain floats has none)."""
        return self.space.bounds

    @property
    def n_evals(self) -> int:
        """Number of evaluations told so far."""
        return int(self._y.size)

    @property
    def pending(self) -> np.ndarray | list[dict]:
        """Suggested points not yet told: ``(m, dim)`` in the box, or a list of dicts for a typed space."""
        return self._external(self._pending, batch=True)

    @property
    def posterior(self):
        """The surrogate's :class:`~banditkit.posteriors.Posterior` and its current state ``(post, state)``
        (for ``surrogate="gp"``: ``(None, GPState)``, the state ``None`` before the first fit)."""
        return self._surrogate.posterior, self._fit.state

    @property
    def config(self) -> Mapping[str, Any]:
        """The resolved options in use (a read-only copy): ``obs_noise``, ``features``, ``n_candidates``,
        ``maximizer``, ``n_starts``, ``refine_steps``, ``step_size``, ``xi``, ``beta``, ``min_distance``,
        ``trust_region`` (with ``surrogate="auto"``: the current phase's)."""
        return MappingProxyType(copy.deepcopy(self._config))

    @property
    def fit(self) -> _surrogate.Fit:
        """What the surrogate learned from the evaluations (:class:`~banditkit.bo.surrogate.Fit`, immutable):
        its ``state``, the standardisation ``shift`` / ``scale`` of the maximised values and ``n_fed``."""
        return self._fit

    @property
    def trust_region(self) -> _tr.TrustRegion | None:
        """The trust region's state (side length, success / failure runs, restarts) with ``trust_region=True``,
        else ``None``."""
        return self._tr if self._config["trust_region"] else None

    def snapshot(self) -> Snapshot:
        """Everything this optimiser holds, as a read-only :class:`~banditkit.bo.snapshot.Snapshot`: the settings,
        the evaluations ``u (n, D)`` / ``y (n,)`` (unit cube; raw values) and their sources, the pending and failed
        points, the PRNG key, the Sobol position, the trust region, the surrogate in use, its acquisition and its
        fit.  What :meth:`save` writes; :meth:`restore` puts it back."""
        return Snapshot.of(self.dim, settings=self._settings(), u=self._u, y=self._y, source=self._source,
                           pending=self._pending, pending_source=self._pending_source, failed=self._failed,
                           key=self._key, sobol_index=self._sobol_index, trust_region=self._tr, sign=self._sign,
                           surrogate=self._surrogate, acquisition=self.acquisition, fit=self._fit)

    def restore(self, snap: Snapshot) -> None:
        """Make this optimiser continue from ``snap`` (a :meth:`snapshot` of an optimiser made with the same
        settings, which are not compared here — :func:`banditkit.bo.loop.open_or_create` does): the evaluations,
        pending and failed points, key, Sobol position and trust region are taken from it; with
        ``surrogate="auto"`` the phase for ``len(snap.y)`` evaluations is put in use.  ``snap.fit`` is the fit of
        that phase's surrogate; ``None`` keeps the data-free fit (allowed only on an optimiser that has not fitted
        anything in that phase: how :func:`banditkit.bo.persist.load` builds the template of the file's arrays).

        Raises ``ValueError`` (nothing changed) for a snapshot of another dimension or direction, or whose
        surrogate / acquisition is not the phase's.
        """
        if snap.u.shape[1] != self.dim or snap.sign != self._sign:
            raise ValueError(f"this snapshot is of a {snap.u.shape[1]}-dimensional optimiser with sign "
                             f"{snap.sign:+g}; this one is {self.dim}-dimensional with sign {self._sign:+g}: "
                             "restore it into an optimiser made with the same settings")
        parts = self._phase_for(snap.y.size)  # surrogate="auto": the phase the snapshot's fit belongs to
        name, acq = (self._surrogate.name, self.acquisition) if parts is None else (parts["surrogate"].name,
                                                                                    parts["acquisition"])
        if snap.phase is not None and snap.phase != (name, acq):
            raise ValueError(f"the snapshot's surrogate / acquisition {snap.phase} are not the ones this optimiser "
                             f"uses after {snap.y.size} evaluations, {(name, acq)}")
        if snap.fit is None and parts is None and self._fit.n_fed:
            raise ValueError("restore(snapshot) without a fit keeps the data-free fit, but this optimiser has "
                             "fitted evaluations: give the snapshot's fit (BayesOpt.snapshot() has it)")
        if parts is not None:
            self._install(parts)
            with self._surrogate.precision():
                self._fit = self._surrogate.init(self._k_init)
        self._u, self._y = np.array(snap.u), np.array(snap.y)
        self._pending, self._failed = np.array(snap.pending), np.array(snap.failed)
        self._source, self._pending_source = list(snap.source), list(snap.pending_source)
        self._key, self._sobol_index = snap.key, int(snap.sobol_index)
        self._tr = _tr.TrustRegion(*snap.trust_region)
        if snap.fit is not None:
            self._fit = snap.fit

    def proposal_inputs(self) -> tuple[_propose.Model, _propose.Data, Points, jax.Array]:
        """``(model, data, points, candidates)``: the arguments of the pure proposal step
        :func:`banditkit.bo.propose.propose` as this optimiser holds them now (``data``'s arrays are copies), so
        that ``propose(k, *opt.proposal_inputs(), keys)`` (inside ``opt.snapshot().surrogate.precision()``) is
        what the next ``ask`` acquires with the same ``keys``."""
        data = self._data()
        data = data._replace(**{f: np.array(getattr(data, f)) for f in ("u", "s", "pending", "failed")})
        return self._model(), data, self._points, self._candidates

    def ask(self, n: int | None = None, *, pending: Any = None, seed: int | None = None):
        """Next point(s) to evaluate: one point for ``n=None``, else ``n`` distinct points.

        A point is an ndarray ``(dim,)`` in the bounds (a batch ``(n, dim)``), or for a typed space a dict
        ``{name: value}`` (a batch: a list of dicts).

        Args:
          pending: points being evaluated elsewhere (in the same form), replacing the optimiser's own list of
            suggestions not yet told (:attr:`pending`) before this ask — e.g. every running trial of a study shared
            by several workers.  ``None``: keep the own list.
          seed: draw this ask's randomness from ``(the optimiser's seed, seed)`` and leave the optimiser's own PRNG
            key as it is (several workers rebuilding one study: a distinct, reproducible draw per trial).
        """
        if n is None:
            k = 1
        elif isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1:
            k = int(n)
        else:
            raise ValueError(f"n must be None or a positive int, got {n!r}")
        if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0):
            raise ValueError(f"seed must be None or a non-negative int, got {seed!r}")
        if pending is not None:
            self._replace_pending(self._internal(pending))
        if seed is None:
            keys = self._next_key
        else:
            keys = _propose.key_stream(jax.random.fold_in(jax.random.PRNGKey(self.seed), int(seed)))
        if self.n_evals < self.n_initial:
            u = self._initial_design(k)
            sources = ["initial"] * k
        else:
            u, sources = self._acquire(k, keys)
        self._pending = np.concatenate([self._pending, u], axis=0)
        self._pending_source = self._pending_source + sources
        return self._external(u[0]) if n is None else self._external(u, batch=True)

    def tell(self, x, y) -> None:
        """Record evaluation(s): one point with a scalar ``y``, or a batch with one value per point.

        Raises ``ValueError`` (leaving the optimiser exactly as it was) for a wrong dimension, a point outside
        the bounds or the space (an unknown or missing parameter, a value outside its range or choices), or a NaN /
        infinite value.
        """
        u, yv = self._validate_tell(x, y)
        # Work on copies; commit only when everything succeeded.
        new_u = np.concatenate([self._u, u], axis=0)
        new_y = np.concatenate([self._y, yv])
        pending, pend_src = self._pending.copy(), list(self._pending_source)
        sources = list(self._source)
        for row in u:
            src = "user"
            if pending.shape[0]:
                d = np.max(np.abs(pending - row), axis=1)
                j = int(np.argmin(d))
                if d[j] <= 1e-9:
                    src = pend_src.pop(j)
                    pending = np.delete(pending, j, axis=0)
            sources.append(src)
        tr = self._tr_after(new_y)
        parts = self._phase_for(new_y.size)  # surrogate="auto" past its switch: a new surrogate, fed everything
        sur = self._surrogate if parts is None else parts["surrogate"]
        with sur.precision():
            old = self._fit if parts is None else sur.init(self._k_init)
            fit = sur.fit(old, new_u, self._sign * new_y, self.n_initial)
        if parts is not None:
            self._install(parts)
        self._u, self._y, self._source = new_u, new_y, sources
        self._pending, self._pending_source = pending, pend_src
        self._fit, self._tr = fit, tr

    def fail(self, x) -> None:
        """Record that the evaluation of the point ``x`` (the user's form, as :meth:`ask` returned it) failed: it
        leaves the pending points, the surrogate is told nothing, and :meth:`ask` does not suggest it again (it
        counts as taken for ``min_distance``, like an evaluated point).  The failed points are saved with the
        optimiser (:meth:`save`).

        Raises ``ValueError`` for a point outside the bounds or the space.
        """
        u = self._internal(x)
        keep = np.ones(self._pending.shape[0], bool)
        for row in u:
            if self._pending.shape[0]:
                d = np.max(np.abs(self._pending - row), axis=1)
                d[~keep] = np.inf
                j = int(np.argmin(d))
                if d[j] <= 1e-9:
                    keep[j] = False
        self._pending = self._pending[keep]
        self._pending_source = [s for s, k in zip(self._pending_source, keep, strict=True) if k]
        self._failed = np.concatenate([self._failed, u], axis=0)

    @property
    def n_failed(self) -> int:
        """Number of points recorded as failed (:meth:`fail`)."""
        return int(self._failed.shape[0])

    @property
    def best(self) -> tuple[np.ndarray | dict, float]:
        """``(x_best, y_best)``: the best evaluation told so far (in the chosen direction); ``x_best`` an ndarray
        ``(dim,)`` for a box, a dict for a typed space."""
        if self.n_evals == 0:
            raise ValueError("no evaluations yet: call tell(x, y) first")
        i = int(np.argmax(self._sign * self._y))
        return self._external(self._u[i]), float(self._y[i])

    @property
    def history(self) -> pd.DataFrame:
        """All evaluations in order: ``trial``, one column per parameter (``x0..x{d-1}`` for a box; typed values for
        a space), ``y, best_y, source`` (source: initial / the acquisition / user)."""
        cols: dict[str, Any] = {"trial": np.arange(self.n_evals)}
        if self._named:
            vals = self.space._values(self._u) if self.n_evals else [np.zeros((0,))] * len(self.space)
            for (name, p), v in zip(self.space.items(), vals, strict=True):
                cols[name] = [p._python(a) for a in v]
        else:
            x = self._external(self._u, batch=True)
            for j, name in enumerate(self.space.names):
                cols[name] = x[:, j] if self.n_evals else np.zeros((0,))
        cols["y"] = self._y.copy()
        s = self._sign * self._y
        cols["best_y"] = self._sign * np.maximum.accumulate(s) if self.n_evals else np.zeros((0,))
        cols["source"] = list(self._source)
        return pd.DataFrame(cols)

    def repeats(self, x, others) -> bool:
        """Whether the point ``x`` is within ``min_distance`` (max-norm in the unit cube) of one of the points
        ``others`` (the user's form, as :meth:`ask` returns them) — the rule :meth:`ask` applies to evaluated and
        pending points."""
        taken = self._internal(others) if len(others) else np.zeros((0, self.dim))
        return bool(taken.shape[0]) and _near(taken, self._internal(x)[0], self._config["min_distance"])

    def save(self, path: str | os.PathLike) -> None:
        """Write the complete optimiser state to ``path`` atomically (:mod:`banditkit.checkpoint`: ``.npz`` arrays
        + JSON header, no pickled code).  :meth:`load` resumes exactly: the next ``ask`` is the same."""
        persist.save(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike, model: Any = None, surrogate: Callable | None = None) -> BayesOpt:
        """Restore an optimiser written by :meth:`save`; the next ``ask`` returns what it would have returned.

        A user-supplied Flax ``model`` (or a surrogate factory that is not a registered name) is code, which is
        not stored: pass the same one again here.
        """
        return persist.load(cls, path, model=model, surrogate=surrogate)

    def __repr__(self) -> str:
        return (
            f"BayesOpt(dim={self.dim}, surrogate={self.surrogate!r}, acquisition={self.acquisition!r}, "
            f"direction={self.direction!r}, n_evals={self.n_evals})"
        )

    @property
    def _candidates(self) -> jax.Array:
        """The fixed Sobol candidate set ``(n_candidates, dim)`` (snapped to valid points), made on first use."""
        if self._candidates_value is None:
            with self._surrogate.precision():
                cands = search.sobol_points(self._config["n_candidates"], self.dim, seed=self.seed + 1)
                self._candidates_value = jnp.asarray(self._snap(cands), self._surrogate.dtype)
        return self._candidates_value

    # points: the user's form <-> the unit cube ------------------------------------------------------------------
    def _snap(self, u: np.ndarray) -> np.ndarray:
        return self._points.snap(u)

    def _external(self, u: np.ndarray, batch: bool = False):
        return self._points.external(u, batch)

    def _internal(self, x) -> np.ndarray:
        return self._points.internal(x)

    def _validate_tell(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        single = self._points.is_single(x)
        u = self._internal(x)
        try:
            ya = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"y must be a number (or one number per point), got {y!r:.60}") from e
        if single:
            if ya.size != 1:
                raise ValueError(f"one point x needs one value y, got y with shape {ya.shape}")
        elif ya.ndim > 1 or ya.size != u.shape[0]:
            raise ValueError(f"x has {u.shape[0]} rows but y has shape {ya.shape}; give one value per row")
        ya = ya.reshape(-1)
        check_finite("y", ya, hint="a failed evaluation cannot be told; skip it or tell a finite penalty value")
        return u, ya

    def _replace_pending(self, u: np.ndarray) -> None:
        """Pending points := ``u`` (keeping the source of those that were this optimiser's own suggestions)."""
        src = []
        for row in u:
            s = "user"
            if self._pending.shape[0]:
                d = np.max(np.abs(self._pending - row), axis=1)
                j = int(np.argmin(d))
                if d[j] <= 1e-9:
                    s = self._pending_source[j]
            src.append(s)
        self._pending, self._pending_source = np.asarray(u, np.float64).reshape(-1, self.dim), src

    # ask internals ----------------------------------------------------------------------------------------------
    def _next_key(self) -> jax.Array:
        self._key, sub = jax.random.split(self._key)
        return sub

    def _taken(self, chosen: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([self._u, self._pending, np.reshape(chosen, (-1, self.dim))], axis=0)

    def _avoid(self, chosen: list[np.ndarray]) -> np.ndarray:
        """The points a new suggestion must not repeat: evaluated, pending, chosen in this ask, and failed."""
        return np.concatenate([self._taken(chosen), self._failed], axis=0)

    def _initial_design(self, k: int) -> np.ndarray:
        """The next ``k`` points of the Sobol sequence; in a space with discrete parameters snapped, and a point
        that repeats an evaluated, pending or chosen one skipped (up to ``64 k`` tries)."""
        if not self._discrete:
            u = search.sobol_points(k, self.dim, seed=self.seed, skip=self._sobol_index)
            self._sobol_index += k
            return u
        chosen: list[np.ndarray] = []
        tries = 0
        while len(chosen) < k:
            x = self._snap(search.sobol_points(1, self.dim, seed=self.seed, skip=self._sobol_index)[0])
            self._sobol_index += 1
            tries += 1
            taken = self._avoid(chosen)
            if tries > 64 * k or not (taken.shape[0] and _near(taken, x, self._config["min_distance"])):
                chosen.append(x)
        return np.stack(chosen)

    def _acquire(self, k: int, keys: Callable[[], jax.Array]) -> tuple[np.ndarray, list[str]]:
        with self._surrogate.precision():
            return self._acquire_points(k, keys)

    def _acquire_points(self, k: int, keys: Callable[[], jax.Array]) -> tuple[np.ndarray, list[str]]:
        u = _propose.propose(k, self._model(), self._data(), self._points, self._candidates, keys)
        return u, [self.acquisition] * k

    def _model(self) -> _propose.Model:
        return _propose.Model(self._surrogate, self._kernels, self._fit, self._config, self.acquisition)

    def _data(self) -> _propose.Data:
        return _propose.Data(self._u, self._sign * self._y, self._pending, self._failed, self._tr, self.seed)

    def _tr_after(self, y: np.ndarray) -> _tr.TrustRegion:
        """The trust region after the values ``y[self.n_evals:]`` are told (each one past the initial design is a
        success or a failure against the best value before it)."""
        tr = self._tr
        if not self._config["trust_region"]:
            return tr
        s = self._sign * y
        start = max(self.n_evals, self.n_initial)
        best = float(np.max(s[:start]))  # start ≥ n_initial ≥ 1, and tell always brings a value
        for v in s[start:]:
            tr = _tr.update(tr, _tr.improves(float(v), best), self.dim)
            best = max(best, float(v))
        return tr

    # persistence hooks (banditkit.bo.persist) -------------------------------------------------------------------
    def _settings(self) -> dict:
        """What makes two optimisers the same run, besides their data and random state."""
        s = dict(
            bounds=self.space.bounds.tolist() if not self._named else None,
            **{k: getattr(self, k) for k in persist.ARGUMENTS},
            custom_model=self._custom_model,
            config=self._config,
        )
        if self._auto:  # the phase is a function of the data: save the options as given, not one phase's
            s["acquisition"] = None
            s["config"] = dict(self._config, **self._options)
        if self._named:
            s["space"] = self.space.to_config()
        return s


_near = _propose.near
