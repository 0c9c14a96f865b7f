"""``BayesOpt``: ask/tell Bayesian optimisation with an online neural surrogate (API.md §9).

The optimiser works in the unit cube ``u ∈ [0, 1]^d`` and maps to the user's box as ``x = lo + u (hi − lo)``.
Internally it always *maximises* ``s = sign · y`` (``sign = −1`` for ``direction="minimize"``).

Surrogate.  A reward model ``f(θ, u) ∈ R`` (default: 3×180 ELU :class:`~banditkit.models.MLP` with a ``head``) and
any posterior backend of :mod:`banditkit.posteriors` with a ``Gaussian(obs_noise)`` likelihood.  Targets are
standardised with a **fixed** affine map ``z = (s − m₀) / s₀`` where ``m₀, s₀`` are the mean and standard deviation
of the first ``n_initial`` observations (``s₀ = 1`` if they are all equal).  The map is frozen once chosen,
because an online filter cannot revisit past targets; until then observations are buffered.  After that, every
``tell`` runs exactly one ``predict`` + ``update`` of the filter per observation.

Ask.  While fewer than ``n_initial`` evaluations have been told, ``ask`` returns points of a scrambled Sobol
sequence (``scipy.stats.qmc``).  Afterwards the acquisition is maximised over a fixed Sobol candidate set
(``n_candidates`` points) and refined by projected gradient ascent (:mod:`banditkit.bo.search`):

``thompson``  one parameter draw ``θ̃ ~ q(θ)`` per point; maximise ``u ↦ f(θ̃, u)``.
``ei``        ``EI(u) = d Φ(d/σ) + σ φ(d/σ)``, ``d = μ(u) − z* − ξ``  (``z*`` the best standardised target so far).
``pi``        ``Φ((μ(u) − z* − ξ)/σ(u))``.
``ucb``       ``μ(u) + β σ(u)``.

``μ(u), σ(u)²`` are the surrogate's predictive mean and variance of ``z`` (epistemic + observation noise).

Two maximisers refine the best ``n_starts`` candidates (``maximizer=``): ``"ascent"`` (the default for Thompson
sampling with a network surrogate) takes ``refine_steps`` projected normalised gradient steps of length at most
``step_size`` (fast, but a start moves by at most ≈ ``step_size · refine_steps / 2``); ``"lbfgs"`` (the default
for EI / PI / UCB, and for ``surrogate="gp"``) runs box-bounded L-BFGS-B (SciPy) on all starts at once for at
most ``refine_steps`` iterations on ``log EI`` / ``log PI`` / UCB / the Thompson draw (the log scores have EI's
and PI's maximiser but no underflow; :mod:`banditkit.policies.acquisition`), like BoTorch's ``optimize_acqf``
with LogEI: it reaches maximisers anywhere in a high-dimensional cube.  Measured
(``benchmarks/results/bo_notes.md``, 5 seeds, EI): exact GP on Ackley10 4.1 → 2.0, Ackley50 8.5 → 6.4, DrawNN50
376 → 100 for ~20 % more time per iteration (the GP refit dominates); HiLoFi on DrawNN50 297 → 207, slightly
better on the small tasks, at ~1.7× the time per ask (a Jacobian per start and iteration).  With Thompson sampling
it did not help the network surrogates (Ackley50 unchanged, DrawNN50 145 → 179), so they keep ``"ascent"``.

Gaussian-process surrogate (``surrogate="gp"``, :mod:`banditkit.bo.gp`).  An exact GP (Matérn-5/2 ARD, constant
mean, inferred noise) on the evaluations (all of them, or the last ``buffer_size``), computed in float64.  Unlike
the online filters it refits from the data after every ``tell``: targets are re-standardised over the buffer
(``z = (s − mean)/sd``, recomputed each time), and the hyper-parameters are re-estimated by MAP (``fit_steps``
L-BFGS-B iterations from the previous optimum and from the default start).  EI / PI / UCB use the latent ``f``'s
posterior (no noise term) and the same candidate search; ``thompson`` is one *joint* posterior draw of ``f`` on the
fixed Sobol candidate set (``O(N³)`` for ``N = n_candidates``), whose argmax is the suggestion (no gradient
refinement: a draw on a finite set has none).  Per-``tell`` cost grows as ``O(n³)`` in the number of evaluations.
``surrogate_kwargs``: ``buffer_size`` (``None`` = all; seed 003's baseline used 20), ``fit_steps`` (default 50),
``use_prior`` (default True).
``ask(n)`` with ``n > 1`` returns a batch: the first point maximises the acquisition, the others come from
independent Thompson draws (all of them for ``thompson``); points in one batch are always distinct.

Trust region (``trust_region=True``, :mod:`banditkit.bo.trust_region`).  TuRBO's local search:
candidates and refinement are confined to an adaptive box around the incumbent, and in high dimension a candidate
changes only ``≈ 20`` coordinates of it.  It keeps a network surrogate's queries where its mean is backed by data
(away from the data an ELU network's mean keeps growing, and a global maximiser chases those spurious peaks).
Measured (``benchmarks/results/bo_notes.md``, 5 seeds, whole cube → box): HiLoFi-TS Hartmann6 0.68 → 0.46,
Ackley10 4.0 → 2.3, Ackley50 8.8 → 7.2, DrawNN50 145 → 67, Branin 1.3 → 0.65, but Ackley5 0.70 → 1.03 and
DrawNN200 704 → 797 (5 seeds); average rank over the 8 tasks 9.25 → 5.50; exact GP-EI (L-BFGS) Ackley5 1.7 → 0.17,
Ackley50 6.4 → 5.7, DrawNN50 100 → 29, no task worse beyond a standard error.  So it is the default for Thompson
sampling and for the GP.  Not for EI / PI / UCB with a network: HiLoFi-EI improved on 5 of 7 tasks (DrawNN50
207 → 120), but its box collapsed around a poor incumbent on Branin (regret 0.13 → 1.8, every seed worse);
``trust_region=True`` turns it on there too.

State, save and resume.  Everything that determines the next suggestion is saved by :meth:`BayesOpt.save`
(evaluations, the standardisation, the surrogate's state arrays, the PRNG key, the Sobol position and the
pending suggestions) in a portable ``.npz`` with a JSON header (no pickled code), written atomically.  For the
GP the fitted hyper-parameters are saved and the conditioned state is rebuilt from them and the saved data by the
same deterministic computation, so the next ``ask`` is identical.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from banditkit import checkpoint
from banditkit import posteriors as _posteriors
from banditkit.bo import gp as _gp
from banditkit.bo import search
from banditkit.bo import trust_region as _tr
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP
from banditkit.policies.acquisition import (
    expected_improvement_score,
    log_expected_improvement_score,
    log_probability_of_improvement_score,
    probability_of_improvement_score,
    ucb_score,
)
from banditkit.validation import check_bounds, check_finite, check_in_bounds

ACQUISITIONS = ("thompson", "ei", "pi", "ucb")
_ACQ_ALIASES = {
    "ts": "thompson",
    "thompson_sampling": "thompson",
    "expected_improvement": "ei",
    "probability_of_improvement": "pi",
    "upper_confidence_bound": "ucb",
}
FORMAT_VERSION = 1
MAXIMIZERS = {"ascent": dict(n_starts=4, refine_steps=10), "lbfgs": dict(n_starts=8, refine_steps=200)}

# Defaults applied to a surrogate factory when it accepts the keyword and the user did not set it.  They follow
# the HiLoFi BO setup (seed 003 §12.6: rank 50, last-layer prior 1) except the hidden prior: 0.1 instead of
# 1e-4 (with 1e-4 the hidden layers stay frozen and Branin runs stall at the box edges; measured, see tests).
_SURROGATE_DEFAULTS: dict[str, dict[str, Any]] = {
    "hilofi": dict(rank=50, init_cov_hidden=0.1, init_cov_last=1.0),
    "lolofi": dict(rank=50, init_cov_hidden=0.1, init_cov_last=1.0),
    "lrkf": dict(rank=50, init_cov=1e-2),
    "lofi": dict(rank=50, init_cov=1e-2),
    "diag_ekf": dict(init_cov=1e-2),
    "ekf": dict(init_cov=1e-2),
}


_GP_DEFAULTS: dict[str, Any] = dict(buffer_size=None, fit_steps=50, use_prior=True)


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class BOResult:
    """Result of :func:`banditkit.bo.optimize`: ``x`` / ``y`` (best point and value), ``history``, ``optimizer``."""

    def __init__(self, optimizer: BayesOpt):
        self.optimizer = optimizer
        self.x, self.y = optimizer.best
        self.history = optimizer.history

    def __repr__(self) -> str:
        return f"BOResult(x={np.array2string(self.x, precision=4)}, y={self.y:.6g}, n_evals={len(self.history)})"


class BayesOpt:
    """Ask/tell Bayesian optimiser over a box with an online neural-network surrogate (see module docstring).

    Args:
      bounds: ``[(low, high), ...]``, one pair per dimension.
      surrogate: a posterior backend name of ``bk.posteriors.REGISTRY`` (``"hilofi"``, ``"lofi"``, ``"lrkf"``,
        ``"ekf"``, ``"neural_linear"``, ``"replay_sgd"``, ...), optionally ending in ``-adaptive_noise`` (the
        Gaussian filters: the observation variance is learned online, ``bk.posteriors.adaptive_noise``), ``"gp"``,
        or a factory ``factory(apply_fn, likelihood, **kw)``.
      acquisition: ``"thompson"``, ``"ei"``, ``"pi"`` or ``"ucb"``.
      direction: ``"maximize"`` or ``"minimize"``.
      seed: integer seed of everything random (network init, Sobol scrambling, Thompson draws).
      n_initial: number of Sobol design points before the acquisition is used; default ``max(5, 2·dim)``.
      model: a Flax module mapping one point ``u (dim,)`` of the unit cube to ``(1,)``; default
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
        bounds: Sequence[tuple[float, float]],
        surrogate: str | Callable = "hilofi",
        acquisition: str = "thompson",
        direction: str = "maximize",
        seed: int = 0,
        n_initial: int | None = None,
        model: Any = None,
        surrogate_kwargs: dict | None = None,
        *,
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
        b = check_bounds(bounds)
        self._lo, self._hi = b[:, 0].copy(), b[:, 1].copy()
        self.dim = int(self._lo.size)
        acq = str(acquisition).strip().lower().replace("-", "_")
        acq = _ACQ_ALIASES.get(acq, acq)
        if acq not in ACQUISITIONS:
            raise ValueError(f"unknown acquisition {acquisition!r}; choose one of {list(ACQUISITIONS)}")
        direction = str(direction).strip().lower()
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        if n_initial is None:
            n_initial = max(5, 2 * self.dim)
        if not isinstance(n_initial, (int, np.integer)) or n_initial < 1:
            raise ValueError(f"n_initial must be a positive int, got {n_initial!r}")
        is_gp = isinstance(surrogate, str) and surrogate.strip().lower() == "gp"
        if maximizer is None:
            maximizer = "ascent" if acq == "thompson" and not is_gp else "lbfgs"
        if maximizer not in MAXIMIZERS:
            raise ValueError(f"unknown maximizer {maximizer!r}; choose one of {list(MAXIMIZERS)}")
        n_starts = MAXIMIZERS[maximizer]["n_starts"] if n_starts is None else n_starts
        refine_steps = MAXIMIZERS[maximizer]["refine_steps"] if refine_steps is None else refine_steps
        for name, v in dict(n_candidates=n_candidates, n_starts=n_starts).items():
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not isinstance(refine_steps, (int, np.integer)) or refine_steps < 0:
            raise ValueError(f"refine_steps must be a non-negative int, got {refine_steps!r}")
        if trust_region is None:  # measured: helps TS and the GP, hurts a network's EI on Branin (bo_notes.md)
            trust_region = acq == "thompson" or is_gp
        if not isinstance(trust_region, (bool, np.bool_)):
            raise TypeError(f"trust_region must be True, False or None (the default), got {trust_region!r}")
        if not obs_noise > 0:
            raise ValueError(f"obs_noise is a variance and must be > 0, got {obs_noise!r}")
        self.acquisition = acq
        self.direction = direction
        self.seed = int(seed)
        self.n_initial = int(n_initial)
        self._config = dict(
            obs_noise=float(obs_noise),
            features=[int(f) for f in features],
            n_candidates=int(n_candidates),
            maximizer=maximizer,
            n_starts=int(min(n_starts, n_candidates)),
            refine_steps=int(refine_steps),
            step_size=float(step_size),
            xi=float(xi),
            beta=float(beta),
            min_distance=float(min_distance),
            trust_region=bool(trust_region),
        )
        self._sign = 1.0 if direction == "maximize" else -1.0

        # surrogate ----------------------------------------------------------------------------------------
        self._is_gp = is_gp
        if self._is_gp:
            self._init_gp(model, surrogate_kwargs)
        else:
            self._init_network(surrogate, model, surrogate_kwargs)

        # data -----------------------------------------------------------------------------------------------
        self._u = np.zeros((0, self.dim))  # unit-cube inputs told so far
        self._y = np.zeros((0,))  # raw values as told
        self._source: list[str] = []
        self._shift: float | None = None  # standardisation s ↦ (s - shift) / scale, fixed after n_initial
        self._scale: float | None = None
        self._n_fed = 0  # observations already given to the filter
        self._sobol_index = 0
        self._pending = np.zeros((0, self.dim))
        self._pending_source: list[str] = []
        self._tr = _tr.TrustRegion()

    def _init_gp(self, model: Any, surrogate_kwargs: dict | None) -> None:
        if model is not None:
            raise ValueError("surrogate='gp' takes no model (the GP is not a network); drop model=")
        unknown = sorted(set(surrogate_kwargs or {}) - set(_GP_DEFAULTS))
        if unknown:
            raise TypeError(f"surrogate 'gp' rejected its arguments {unknown}; it accepts {sorted(_GP_DEFAULTS)}")
        kwargs = dict(_GP_DEFAULTS, **(surrogate_kwargs or {}))
        b = kwargs["buffer_size"]
        if b is not None and (not isinstance(b, (int, np.integer)) or isinstance(b, bool) or b < 1):
            raise ValueError(f"buffer_size must be a positive int or None, got {b!r}")
        if not isinstance(kwargs["fit_steps"], (int, np.integer)) or kwargs["fit_steps"] < 0:
            raise ValueError(f"fit_steps must be a non-negative int, got {kwargs['fit_steps']!r}")
        self.surrogate = "gp"
        self.surrogate_kwargs = kwargs
        self._custom_model = False
        self.model = None
        self._post, self._apply_fn, self._step = None, None, None
        key = json.dumps(dict(gp=True, **self._config), sort_keys=True)
        if key not in _KERNELS:
            _KERNELS[key] = _build_gp_kernels(self._config)
        self._thompson, self._analytic = _KERNELS[key]
        _, self._key = jax.random.split(jax.random.PRNGKey(self.seed))
        self._state: Any = None
        self._dtype = jnp.float64
        with jax.enable_x64(True):
            self._candidates = jnp.asarray(
                search.sobol_points(self._config["n_candidates"], self.dim, seed=self.seed + 1), jnp.float64
            )

    def _init_network(self, surrogate: str | Callable, model: Any, surrogate_kwargs: dict | None) -> None:
        if isinstance(surrogate, str):
            base, learns = _posteriors.split_suffix(surrogate)
            if learns and base.lower() == "gp":
                raise ValueError("surrogate 'gp-adaptive_noise': the GP fits its noise variance by marginal likelihood "
                                 "already; -adaptive_noise is for the network surrogates (hilofi, lofi, lrkf, ...)")
            factory = _posteriors.get(surrogate)
        elif callable(surrogate):
            factory = surrogate
        else:
            raise TypeError(f"surrogate must be a backend name or a posterior factory, got {type(surrogate).__name__}")
        # a registered name (a saved optimiser then loads without the factory), else the factory's own name
        self.surrogate = _posteriors.name_of(factory) or getattr(factory, "__name__", "custom")
        self._custom_model = model is not None
        if model is None:
            model = MLP(features=tuple(self._config["features"]), out=1)
        if not (hasattr(model, "init") and hasattr(model, "apply")):
            raise TypeError("model must be a Flax module (with .init and .apply) mapping a point (dim,) to (1,)")
        self.model = model
        kwargs = {}
        wrapped = getattr(factory, "backend", None)  # e.g. posteriors.adaptive_noise(backend): the backend's defaults
        defaults = _SURROGATE_DEFAULTS.get(getattr(wrapped, "__name__", self.surrogate), {})
        for k, v in defaults.items():
            if _accepts(factory, k):
                kwargs[k] = v
        if "last_layer" not in (surrogate_kwargs or {}) and _accepts(factory, "last_layer"):
            kwargs["last_layer"] = "head"
        kwargs.update(surrogate_kwargs or {})
        self.surrogate_kwargs = kwargs

        cache_key = _cache_key(self, factory, model, kwargs)
        cached = _KERNELS.get(cache_key)
        key = jax.random.PRNGKey(self.seed)
        k_init, self._key = jax.random.split(key)
        params = model.init(k_init, jnp.zeros((self.dim,), jnp.float32))
        if cached is None:

            def apply_fn(params, u):
                return jnp.ravel(model.apply(params, 2.0 * u - 1.0))  # the model sees [-1, 1]^d

            out = apply_fn(params, jnp.zeros((self.dim,), jnp.float32))
            if out.shape != (1,):
                raise ValueError(f"the surrogate model must output one value per point, got output shape {out.shape}")
            try:
                extra = {}
                if "example_x" not in kwargs and _accepts(factory, "example_x"):  # replay-buffer backends
                    extra["example_x"] = jnp.zeros((self.dim,), jnp.float32)
                post = factory(apply_fn, Gaussian(self._config["obs_noise"]), **kwargs, **extra)
            except TypeError as e:
                raise TypeError(f"surrogate {self.surrogate!r} rejected its arguments {sorted(kwargs)}: {e}") from e
            cached = (post, apply_fn, *_build_kernels(post, apply_fn, self._config))
            if cache_key is not None:
                if len(_KERNELS) >= 16:
                    _KERNELS.pop(next(iter(_KERNELS)))
                _KERNELS[cache_key] = cached
        self._post, self._apply_fn, self._step, self._thompson, self._analytic = cached
        self._state = self._post.init(params)
        self._dtype = jax.tree_util.tree_leaves(params)[0].dtype
        self._candidates = jnp.asarray(
            search.sobol_points(self._config["n_candidates"], self.dim, seed=self.seed + 1), self._dtype
        )

    # public API -------------------------------------------------------------------------------------------------
    @property
    def bounds(self) -> np.ndarray:
        """``(dim, 2)`` array of ``(low, high)``."""
        return np.stack([self._lo, self._hi], axis=1)

    @property
    def n_evals(self) -> int:
        """Number of evaluations told so far."""
        return int(self._y.size)

    @property
    def pending(self) -> np.ndarray:
        """Suggested points (in bounds) not yet told, ``(m, dim)``."""
        return self._to_box(self._pending)

    @property
    def posterior(self):
        """The surrogate's :class:`~banditkit.posteriors.Posterior` and its current state ``(post, state)``
        (for ``surrogate="gp"``: ``(None, GPState)``, the state ``None`` before the first fit)."""
        return self._post, self._state

    @property
    def trust_region(self) -> _tr.TrustRegion | None:
        """The trust region's state (side length, success / failure runs, restarts) with ``trust_region=True``,
        else ``None``."""
        return self._tr if self._config["trust_region"] else None

    def ask(self, n: int | None = None) -> np.ndarray:
        """Next point(s) to evaluate: ``(dim,)`` for ``n=None``, else ``(n, dim)`` (distinct points), in bounds."""
        if n is None:
            k = 1
        elif isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1:
            k = int(n)
        else:
            raise ValueError(f"n must be None or a positive int, got {n!r}")
        if self.n_evals < self.n_initial:
            u = search.sobol_points(k, self.dim, seed=self.seed, skip=self._sobol_index)
            self._sobol_index += k
            sources = ["initial"] * k
        else:
            u, sources = self._acquire(k)
        self._pending = np.concatenate([self._pending, u], axis=0)
        self._pending_source = self._pending_source + sources
        x = self._to_box(u)
        return x[0] if n is None else x

    def tell(self, x, y) -> None:
        """Record evaluation(s): ``x (dim,)`` with a scalar ``y``, or ``x (n, dim)`` with ``y (n,)``.

        Raises ``ValueError`` (leaving the optimiser exactly as it was) for a wrong dimension, a point outside
        the bounds, or a NaN / infinite value.
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
        if self._is_gp:
            state, shift, scale = self._gp_refit(new_u, new_y)
            self._u, self._y, self._source = new_u, new_y, sources
            self._pending, self._pending_source = pending, pend_src
            self._shift, self._scale, self._state, self._n_fed = shift, scale, state, new_y.size
            self._tr = tr
            return
        shift, scale = self._shift, self._scale
        if shift is None and new_y.size >= self.n_initial:
            s = self._sign * new_y
            shift = float(np.mean(s))
            sd = float(np.std(s))
            scale = sd if sd > 1e-12 * max(1.0, abs(shift)) else 1.0
        state, n_fed = self._state, self._n_fed
        if shift is not None:
            z = (self._sign * new_y - shift) / scale
            for i in range(n_fed, new_y.size):
                state = self._step(state, jnp.asarray(new_u[i], self._dtype), jnp.asarray(z[i : i + 1], self._dtype))
            n_fed = new_y.size
            if not all(
                bool(jnp.all(jnp.isfinite(leaf)))
                for leaf in jax.tree_util.tree_leaves(state)
                if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating)
            ):
                raise FloatingPointError(
                    "the surrogate's filter update produced NaN/inf (the optimiser was left unchanged); try a "
                    "larger obs_noise or a smaller prior covariance in surrogate_kwargs"
                )
        self._u, self._y, self._source = new_u, new_y, sources
        self._pending, self._pending_source = pending, pend_src
        self._shift, self._scale, self._state, self._n_fed = shift, scale, state, n_fed
        self._tr = tr

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

    @property
    def best(self) -> tuple[np.ndarray, float]:
        """``(x_best (dim,), y_best)``: the best evaluation told so far (in the chosen direction)."""
        if self.n_evals == 0:
            raise ValueError("no evaluations yet: call tell(x, y) first")
        i = int(np.argmax(self._sign * self._y))
        return self._to_box(self._u[i]), float(self._y[i])

    @property
    def history(self) -> pd.DataFrame:
        """All evaluations in order: ``trial, x0..x{d-1}, y, best_y, source`` (source: initial / acquisition /
        user)."""
        x = self._to_box(self._u)
        cols: dict[str, Any] = {"trial": np.arange(self.n_evals)}
        for j in range(self.dim):
            cols[f"x{j}"] = x[:, j] if self.n_evals else np.zeros((0,))
        cols["y"] = self._y.copy()
        s = self._sign * self._y
        cols["best_y"] = self._sign * np.maximum.accumulate(s) if self.n_evals else np.zeros((0,))
        cols["source"] = list(self._source)
        return pd.DataFrame(cols)

    # internals --------------------------------------------------------------------------------------------------
    def _to_box(self, u: np.ndarray) -> np.ndarray:
        return self._lo + np.asarray(u, np.float64) * (self._hi - self._lo)

    def _validate_tell(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        xa = check_in_bounds(x, self.bounds, name="x")
        try:
            ya = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"y must be a number (or one number per row of x), got {y!r:.60}") from e
        if xa.ndim == 1:
            xa = xa[None]
            if ya.size != 1:
                raise ValueError(f"one point x needs one value y, got y with shape {ya.shape}")
        elif ya.ndim > 1 or ya.size != xa.shape[0]:
            raise ValueError(f"x has {xa.shape[0]} rows but y has shape {ya.shape}; give one value per row")
        ya = ya.reshape(-1)
        check_finite("y", ya, hint="a failed evaluation cannot be told; skip it or tell a finite penalty value")
        u = np.clip((xa - self._lo) / (self._hi - self._lo), 0.0, 1.0)
        return u, ya

    def _gp_standardise(self, y: np.ndarray) -> tuple[np.ndarray, float, float]:
        """``z = (s − shift) / scale`` over the GP's buffer (the last ``buffer_size`` values, or all)."""
        s = self._sign * y
        b = self.surrogate_kwargs["buffer_size"]
        sb = s if b is None else s[-b:]
        shift, sd = float(np.mean(sb)), float(np.std(sb))
        scale = sd if sd > 1e-12 * max(1.0, abs(shift)) else 1.0
        return (s - shift) / scale, shift, scale

    def _gp_refit(self, u: np.ndarray, y: np.ndarray, params: Any = "previous"):
        """Standardise, refit the hyper-parameters (warm start from the current ones; ``params`` given: use them
        as they are) and condition.  Returns ``(state, shift, scale)``; ``state`` is ``None`` before ``n_initial``
        evaluations."""
        z, shift, scale = self._gp_standardise(y)
        if y.size < self.n_initial:
            return None, shift, scale
        kw = self.surrogate_kwargs
        with jax.enable_x64(True):
            xp, zp, mask = _gp.pad(u, z, kw["buffer_size"], dtype=jnp.float64)
            if isinstance(params, str):
                init = self._state.params if self._state is not None else None
                init = _gp.default_params(self.dim) if init is None else init
                params = _gp.fit_params(xp, zp, mask, init, steps=kw["fit_steps"], use_prior=kw["use_prior"])
            state = _GP_CONDITION(xp, zp, mask, params)
            if not bool(jnp.all(jnp.isfinite(state.alpha))):
                raise FloatingPointError("the GP's Cholesky produced NaN/inf (the optimiser was left unchanged)")
        return state, shift, scale

    def _next_key(self) -> jax.Array:
        self._key, sub = jax.random.split(self._key)
        return sub

    def _acquire(self, k: int) -> tuple[np.ndarray, list[str]]:
        with jax.enable_x64(True) if self._is_gp else contextlib.nullcontext():
            return self._acquire_points(k)

    def _acquire_points(self, k: int) -> tuple[np.ndarray, list[str]]:
        chosen: list[np.ndarray] = []
        sources: list[str] = []
        best = float(np.max((self._sign * self._y - self._shift) / self._scale))
        cands, lo, hi = self._search_space()
        for i in range(k):
            if i == 0 and self.acquisition != "thompson":
                w = jnp.asarray([self.acquisition == a for a in ("ei", "pi", "ucb")], self._dtype)
                x, _, order = self._analytic(self._state, jnp.asarray(best, self._dtype), w, cands, lo, hi)
            else:
                x, _, order = self._thompson(self._state, self._next_key(), cands, lo, hi)
            x = np.clip(np.asarray(x, np.float64), 0.0, 1.0)
            taken = np.concatenate([self._u, self._pending, np.reshape(chosen, (-1, self.dim))], axis=0)
            if taken.shape[0] and _near(taken, x, self._config["min_distance"]):
                # a repeat of an evaluated / pending / chosen point: take the best-ranked candidate that is new
                for j in np.asarray(order):
                    cand = np.asarray(cands[j], np.float64)
                    if not _near(taken, cand, self._config["min_distance"]):
                        x = cand
                        break
            chosen.append(x)
            sources.append(self.acquisition if (i == 0 or self.acquisition == "thompson") else "thompson")
        return np.stack(chosen), sources

    def _search_space(self) -> tuple[jax.Array, jax.Array | None, jax.Array | None]:
        """``(candidates (N, d), lo (d,), hi (d,))`` the acquisition is maximised over: the fixed Sobol set in the
        unit cube (``lo = hi = None``, the kernels' static unit-cube case), or with ``trust_region=True`` the box
        around the incumbent and candidates inside it (:mod:`banditkit.bo.trust_region`)."""
        if not self._config["trust_region"]:
            return self._candidates, None, None
        center = self._u[int(np.argmax(self._sign * self._y))]
        lo, hi = _tr.box(center, self._tr.length)
        lo, hi, c = (jnp.asarray(v, self._dtype) for v in (lo, hi, center))
        return _tr.candidates(self._next_key(), self._candidates, c, lo, hi), lo, hi

    # persistence ------------------------------------------------------------------------------------------------
    def _arrays(self, state) -> dict:
        if self._is_gp:  # the GP state is rebuilt from the data and the saved hyper-parameters
            return dict(key=self._key)
        return dict(state=state, key=self._key)

    def _settings(self) -> dict:
        """What makes two optimisers the same run, besides their data and random state."""
        return dict(
            bounds=self.bounds.tolist(),
            surrogate=self.surrogate,
            acquisition=self.acquisition,
            direction=self.direction,
            seed=self.seed,
            n_initial=self.n_initial,
            surrogate_kwargs=self.surrogate_kwargs,
            custom_model=self._custom_model,
            config=self._config,
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the complete optimiser state to ``path`` atomically (:mod:`banditkit.checkpoint`: ``.npz`` arrays
        + JSON header, no pickled code).  :meth:`load` resumes exactly: the next ``ask`` is the same."""
        meta = dict(
            format="banditkit.BayesOpt",
            version=FORMAT_VERSION,
            **self._settings(),
            shift=self._shift,
            scale=self._scale,
            n_fed=self._n_fed,
            sobol_index=self._sobol_index,
            source=self._source,
            pending_source=self._pending_source,
            # float64 values as JSON (exact round trip: json writes repr), not as arrays — the checkpoint
            # reader returns JAX arrays, which would round them to float32 unless x64 is on
            u=self._u.tolist(),
            y=self._y.tolist(),
            pending=self._pending.tolist(),
            trust_region_state=list(self._tr),
            gp_params=None
            if not (self._is_gp and self._state is not None)
            else {k: np.asarray(v, np.float64).tolist() for k, v in self._state.params._asdict().items()},
        )
        folder = os.path.dirname(os.path.abspath(os.fspath(path)))
        os.makedirs(folder, exist_ok=True)
        try:
            checkpoint.save(path, self._arrays(self._state), posterior=self._post, meta=meta)
        except TypeError as e:
            raise TypeError(f"cannot save this optimiser (surrogate_kwargs must be JSON-serialisable): {e}") from e

    @classmethod
    def load(cls, path: str | os.PathLike, model: Any = None, surrogate: Callable | None = None) -> BayesOpt:
        """Restore an optimiser written by :meth:`save`; the next ``ask`` returns what it would have returned.

        A user-supplied Flax ``model`` (or a surrogate factory that is not a registered name) is code, which is
        not stored: pass the same one again here.
        """
        _, header = checkpoint.load(path)
        meta = header.get("meta") or {}
        if meta.get("format") != "banditkit.BayesOpt":
            raise ValueError(f"{os.fspath(path)!r} is a banditkit checkpoint but not a saved BayesOpt")
        if meta["version"] > FORMAT_VERSION:
            raise ValueError(f"{os.fspath(path)!r} was written by a newer banditkit (format {meta['version']})")
        if meta["custom_model"] and model is None:
            raise ValueError(
                "this optimiser used a custom model: pass the same Flax module as BayesOpt.load(path, model=...)"
            )
        if surrogate is None and meta["surrogate"] != "gp":
            try:
                _posteriors.get(meta["surrogate"])
            except ValueError:
                raise ValueError(
                    f"this optimiser used the surrogate factory {meta['surrogate']!r}, which is not a registered "
                    "backend name (code is not stored in a checkpoint): pass the same factory as "
                    "BayesOpt.load(path, surrogate=...)"
                ) from None
        opt = cls(
            meta["bounds"],
            surrogate=surrogate if surrogate is not None else meta["surrogate"],
            acquisition=meta["acquisition"],
            direction=meta["direction"],
            seed=meta["seed"],
            n_initial=meta["n_initial"],
            model=model,
            surrogate_kwargs=meta["surrogate_kwargs"],
            # a checkpoint without a key predates that option: the ascent over the whole cube made it
            **dict(dict(maximizer="ascent", trust_region=False), **meta["config"]),
        )
        opt._u = np.asarray(meta["u"], np.float64).reshape(-1, opt.dim)
        opt._y = np.asarray(meta["y"], np.float64).reshape(-1)
        opt._pending = np.asarray(meta["pending"], np.float64).reshape(-1, opt.dim)
        tree, _ = checkpoint.load(path, template=opt._arrays(opt._state), posterior=opt._post)
        opt._state, opt._key = tree.get("state"), tree["key"]
        if opt._is_gp and meta.get("gp_params") is not None:
            with jax.enable_x64(True):
                params = _gp.GPParams(**{k: jnp.asarray(v, jnp.float64) for k, v in meta["gp_params"].items()})
            opt._state, _, _ = opt._gp_refit(opt._u, opt._y, params=params)
        opt._shift, opt._scale = meta["shift"], meta["scale"]
        opt._n_fed = int(meta["n_fed"])
        opt._sobol_index = int(meta["sobol_index"])
        opt._source = list(meta["source"])
        opt._pending_source = list(meta["pending_source"])
        opt._tr = _tr.TrustRegion(*meta.get("trust_region_state", _tr.TrustRegion()))
        return opt

    def __repr__(self) -> str:
        return (
            f"BayesOpt(dim={self.dim}, surrogate={self.surrogate!r}, acquisition={self.acquisition!r}, "
            f"direction={self.direction!r}, n_evals={self.n_evals})"
        )


_KERNELS: dict = {}  # compiled kernels shared by optimisers with the same configuration (saves recompiling)


def _cache_key(opt: BayesOpt, factory, model, kwargs) -> tuple | None:
    try:
        key = (
            factory,
            json.dumps(kwargs, sort_keys=True),
            model if not opt._custom_model else id(model),
            opt.dim,
            json.dumps(opt._config, sort_keys=True),
        )
        hash(key)
        return key
    except TypeError:  # unhashable / non-JSON configuration: no sharing
        return None


def _build_kernels(post, apply_fn, cfg: dict):
    """``step(state, u, z)`` (jitted), ``thompson(state, key, cands)`` and ``analytic(state, best, weights, cands)``
    (jitted for ``"ascent"``; host L-BFGS-B loops over jitted pieces for ``"lbfgs"``)."""

    def step(state, u, z):
        return post.update(post.predict(state), u, z)

    def moments(state, u):
        m, c = post.predictive(state, u)
        return m[0], jnp.sqrt(jnp.maximum(c[0, 0], 1e-12))

    if cfg["maximizer"] == "lbfgs":
        draw_fn = jax.jit(post.sample)
        ts_max = _lbfgs_maximizer(lambda draw, u: apply_fn(draw, u)[0], cfg)
        return (jax.jit(step), lambda state, key, cands, lo, hi: ts_max(draw_fn(key, state), cands, lo, hi),
                _analytic_kernel(moments, cfg))

    def thompson(state, key, cands, lo, hi):
        draw = post.sample(key, state)
        return search.maximize(lambda u: apply_fn(draw, u)[0], cands, n_starts=cfg["n_starts"],
                               steps=cfg["refine_steps"], step_size=cfg["step_size"], lo=lo, hi=hi)

    return jax.jit(step), jax.jit(thompson), _analytic_kernel(moments, cfg)


def _analytic_kernel(moments: Callable, cfg: dict) -> Callable:
    """``analytic(state, best, weights, cands) -> (x, a, order)`` for a surrogate's ``moments(state, u) -> (μ, σ)``.

    ``weights (3,)`` is one-hot over (EI, PI, UCB), so one compiled kernel serves all three acquisitions: with
    ``"ascent"`` the weighted sum of the scores, with ``"lbfgs"`` the log score (:func:`_log_score`)."""
    if cfg["maximizer"] == "lbfgs":
        an_max = _lbfgs_maximizer(lambda args, u: _log_score(*moments(args[0], u), args[1], args[2], cfg), cfg)
        return lambda state, best, weights, cands, lo, hi: an_max((state, best, weights), cands, lo, hi)

    def analytic(state, best, weights, cands, lo, hi):
        def score(u):
            m, sd = moments(state, u)
            return (
                weights[0] * expected_improvement_score(m, sd, best, cfg["xi"])
                + weights[1] * probability_of_improvement_score(m, sd, best, cfg["xi"])
                + weights[2] * ucb_score(m, sd, cfg["beta"])
            )

        return search.maximize(score, cands, n_starts=cfg["n_starts"], steps=cfg["refine_steps"],
                               step_size=cfg["step_size"], lo=lo, hi=hi)

    return jax.jit(analytic)


def _log_score(m: jax.Array, sd: jax.Array, best: jax.Array, weights: jax.Array, cfg: dict) -> jax.Array:
    """``log EI``, ``log PI`` or UCB as ``weights`` (one-hot over EI, PI, UCB) says: the L-BFGS objective."""
    return jnp.where(
        weights[0] > 0,
        log_expected_improvement_score(m, sd, best, cfg["xi"]),
        jnp.where(weights[1] > 0, log_probability_of_improvement_score(m, sd, best, cfg["xi"]),
                  ucb_score(m, sd, cfg["beta"])),
    )


def _lbfgs_maximizer(score: Callable, cfg: dict) -> Callable:
    """``maximise(args, cands) -> (x, a, order)`` for ``score(args, u)``: the candidates ranked by one jitted
    call, the best ``n_starts`` refined by :func:`~banditkit.bo.search.lbfgs_refine` (value and gradient of all
    starts one jitted call per iteration)."""

    @jax.jit
    def rank(args, cands):
        return search.rank_candidates(lambda u: score(args, u), cands)[1]

    value_and_grad = jax.jit(jax.vmap(jax.value_and_grad(score, argnums=1), in_axes=(None, 0)))

    def maximise(args, cands, lo, hi):
        order = rank(args, cands)
        starts = np.asarray(cands, np.float64)[np.asarray(order[: cfg["n_starts"]])]
        x, a = search.lbfgs_refine(lambda X: value_and_grad(args, jnp.asarray(X, cands.dtype)), starts,
                                   cfg["refine_steps"], lo, hi)
        return x, a, order

    return maximise


_GP_CONDITION = jax.jit(_gp.condition)


def _build_gp_kernels(cfg: dict):
    """Jitted ``thompson(state, key, cands)`` (a joint draw of ``f`` on the candidates, its argmax) and
    ``analytic(state, best, weights, cands)`` for a :class:`~banditkit.bo.gp.GPState` (call them under x64)."""

    def thompson(state, key, cands, lo, hi):  # a draw on a finite set: no refinement, so no use for the box
        draw = _gp.sample_joint(key, state, cands)
        order = jnp.argsort(-draw)
        return cands[order[0]], draw[order[0]], order

    def moments(state, u):
        m, v = _gp.predict(state, u[None])
        return m[0], jnp.sqrt(v[0])

    return jax.jit(thompson), _analytic_kernel(moments, cfg)


def _near(points: np.ndarray, x: np.ndarray, tol: float) -> bool:
    """Whether ``x`` is within ``tol`` (max-norm, unit cube) of a row of ``points``; ``tol=0`` means exact repeats."""
    return bool(np.min(np.max(np.abs(points - x), axis=1)) <= max(tol, 1e-9))


def optimize(
    f: Callable[[np.ndarray], float],
    bounds: Sequence[tuple[float, float]],
    n_evals: int = 50,
    surrogate: str | Callable = "hilofi",
    acquisition: str = "thompson",
    direction: str = "maximize",
    seed: int = 0,
    callback: Callable[[BayesOpt, np.ndarray, float], None] | None = None,
    checkpoint: str | os.PathLike | None = None,
    save_every: float = 10.0,
    **kwargs,
) -> BOResult:
    """Run ``n_evals`` evaluations of ``f(x) -> float`` (``x`` an ndarray ``(dim,)`` in ``bounds``) with
    :class:`BayesOpt` (extra keyword arguments go to it) and return a :class:`BOResult` with ``x``, ``y``,
    ``history`` and the ``optimizer``.  ``callback(opt, x, y)`` is called after every evaluation.

    ``checkpoint=path`` makes the run resumable (:mod:`banditkit.bo.resume`): the optimiser is saved there every
    ``save_every`` seconds, at the end, and when the run is interrupted (``KeyboardInterrupt``) while ``f`` or the
    callback runs — the usual place for an expensive objective; an interruption inside ``ask`` / ``tell`` keeps the
    previous save.  If ``path`` exists the run continues from it (its settings must match this call's): points it
    had suggested but not evaluated are evaluated first, then the run goes on until ``n_evals`` evaluations *in
    all*, making exactly the suggestions an uninterrupted run makes.
    """
    if not callable(f):
        raise TypeError("f must be callable: f(x: ndarray (dim,)) -> float")
    if not isinstance(n_evals, (int, np.integer)) or n_evals < 1:
        raise ValueError(f"n_evals must be a positive int, got {n_evals!r}")

    def make() -> BayesOpt:
        return BayesOpt(bounds, surrogate=surrogate, acquisition=acquisition, direction=direction, seed=seed,
                        **kwargs)

    saver = None
    if checkpoint is None:
        opt = make()
    else:
        from banditkit.bo import resume

        opt, resumed = resume.open_or_create(checkpoint, make, model=kwargs.get("model"),
                                             surrogate=None if isinstance(surrogate, str) else surrogate)
        saver = resume.Autosave(opt, checkpoint, save_every)
        if resumed:
            saver.saved_evals = opt.n_evals  # the file holds this state already
    todo = [np.asarray(x) for x in opt.pending]  # suggested before an interruption: what the run evaluated next
    consistent = True  # False while ask / tell may be half-way through changing the optimiser
    try:
        while opt.n_evals < n_evals:
            consistent = False
            x = todo.pop(0) if todo else opt.ask()
            consistent = True
            y = f(x)
            try:
                y = float(np.asarray(y).reshape(()))
            except (TypeError, ValueError) as e:
                raise ValueError(f"f must return one number, got {y!r}") from e
            if not math.isfinite(y):
                raise ValueError(f"f returned {y} at x={x.tolist()}; the objective must be finite")
            consistent = False
            opt.tell(x, y)
            consistent = True
            if saver is not None:
                saver.tick()
            if callback is not None:
                callback(opt, x, y)
    except KeyboardInterrupt:
        if saver is not None and consistent:
            saver.now()
        raise
    if saver is not None and saver.saved_evals != opt.n_evals:
        saver.now()
    return BOResult(opt)
