"""``BanditAgent``: a reward model + an online posterior over its parameters + a policy.

Two reward-model shapes (the seeds use both):

* multi-output (``per_arm=False``): ``f(params, context) (K,)``, one output per arm.  A round observes only the
  pulled arm, so the posterior is built on the *selected-output* model
  ``g(params, (context, e_a)) = f(params, context) · e_a  (1,)`` with ``e_a = one_hot(a)`` (:func:`selected_output`).
  Scoring all K arms costs one forward pass (``reward_fn``) or K linearisations (``moments_fn``).
* per-arm (``per_arm=True``): ``f(params, x_a) (1,)`` and the context is ``(K, *feature_shape)``: one feature row per
  arm (KuaiRec, BO candidates).  The posterior is built on ``f`` itself and observes ``x = context[a]``.

Round t::

    action, state = agent.act(key, state, context)        # policy.choose on the current belief
    state = agent.observe(state, context, action, reward)  # θ-posterior: update(x, y), then predict

``observe`` applies the measurement update and then the time update (``predict``: forgetting / dynamics noise), so
the stored belief is always the prior for the next round, which ``act`` uses.

Warm-up (``warmup_steps = τ > 0``): the first τ rounds pull arms round-robin (``a = t mod K``).  A backend that
declares a ``refit`` hook (:class:`~banditkit.posteriors.base.Posterior`; seed 002's subspace EKF, whose subspace is
fitted to the warm-up data) is *not* updated during those rounds: ``observe`` stores them in a fixed-size buffer in
the state (:class:`WarmupBuffer`), and at round ``t = τ`` ``act`` first calls :meth:`BanditAgent.warmup`, which hands
the buffer to ``posterior.refit`` (for ``subspace_ekf``: SGD on the pulled arms' rewards, then the SVD basis of the
iterates, ``bk.posteriors.subspace_from_sgd``) and filters the τ buffered observations through the refitted posterior
(seed 002 Alg. 2).  Other backends are updated online during the warm-up and ``warmup`` is the identity.  With
``τ = 0`` a backend with ``refit`` gets its data-free reset at ``init`` (``refit`` with no observations: for
``subspace_ekf`` a random subspace through the initial weights).  The public ``act`` does the warm-up automatically:
with a concrete state by one jitted call, inside a trace by a ``lax.cond`` on the round counter (every round then
carries the branch, and under ``vmap`` over seeds the batched predicate turns it into a select that runs the fit every
round, so loops over many rounds should call ``warmup`` themselves, with the key ``agent.warmup_key(round key)``, for
the ``agent.warmup_rounds`` round).  The compiled runner does so: it ends a scan segment at ``t = τ`` and calls
``warmup`` once between two segments.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from banditkit import policies as _policies
from banditkit import posteriors as _posteriors
from banditkit._xla.conv import canonical_convs
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP, EmbeddingMLP, LeNet5
from banditkit.policies import propensity as _probs
from banditkit.policies.base import Policy, output_candidates, point_candidates
from banditkit.posteriors.base import Posterior, as_obs
from banditkit.posteriors.registry import accepts_keyword

Array = jax.Array
PyTree = Any

WARMUP_KEY = 0x5EED  # the warm-up fit's key is fold_in(round key at t = τ, WARMUP_KEY), in every loop
PROPENSITY_KEY = 0x9A05  # a round's propensity draws use fold_in(round key, PROPENSITY_KEY), in every loop


class WarmupBuffer(NamedTuple):
    contexts: PyTree  # (τ, *context_shape): the warm-up contexts
    actions: Array  # (τ,) int32
    rewards: Array  # (τ,) the rewards as observed (r / reward_scale)


@jax.tree_util.register_static
@dataclass(frozen=True)
class AgentShapes:
    """What :meth:`BanditAgent.init` learns from its example context, carried in the state as *static* pytree data
    (no leaves: it rides through ``jit`` / ``vmap`` / ``lax.scan`` / checkpoints in the tree structure, so two states
    of one agent initialised with different context shapes never interfere, and the agent object is never written).

    ``contexts``: the shape of each leaf of the context (``(K, F...)`` per-arm); ``num_actions``: ``K``."""

    contexts: tuple[tuple[int, ...], ...]
    num_actions: int


class AgentState(NamedTuple):
    posterior: Any  # the posterior backend's state
    step: Array  # int32: rounds observed so far
    warmup: Any  # WarmupBuffer for a backend with refit and τ > 0, else ()
    scale: Any = ()  # reward_scale="auto": the reward scale learned so far, max |r| over observed rewards; else ()
    shapes: Any = ()  # AgentShapes: the context shapes and K found at init (static, no leaves)


#: ``reward_scale`` value that learns the scale from the rewards the agent observes (:meth:`BanditAgent.scale_of`)
AUTO = "auto"


def selected_output(model_apply: Callable) -> Callable:
    """``g(params, (context, e)) = f(params, context) · e`` with shape ``(1,)``: a K-output model observed through
    the one-hot arm indicator ``e (K,)``.  Build a posterior on this to plug it into a multi-output agent."""

    def apply_fn(params, x):
        context, e = x
        f = jnp.atleast_1d(model_apply(params, context))
        return jnp.sum(f * e.astype(f.dtype), keepdims=True)

    return apply_fn


def backends() -> dict:
    """Backend factories by name (``bk.posteriors.REGISTRY``)."""
    return dict(_posteriors.REGISTRY)


def resolve_backend(name: str):
    """The factory called ``name`` (``-``/``_`` and case-insensitive); unknown names list the valid ones."""
    return _posteriors.get(name)


def _is_traced(tree) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(tree))


def reset_posterior(posterior: Posterior, key: Array, state, example_x: PyTree, example_y: Array):
    """``posterior.refit`` with no observations (``n = 0``): the backend's data-free reset (``subspace_ekf``: a random
    subspace through the current mean).  ``example_x`` / ``example_y (C,)``: one input and one observation, which fix
    the shapes of the empty batch ``xs (0, 1, ...)``, ``ys (0, 1, C)``, ``weights (0, 1)``.  The state unchanged for a
    backend without ``refit``."""
    if posterior.refit is None:
        return state
    empty = lambda a: jnp.zeros((0, 1, *jnp.shape(a)), jnp.result_type(a))
    ys = empty(example_y)
    return posterior.refit(key, state, jax.tree_util.tree_map(empty, example_x), ys, jnp.zeros((0, 1), ys.dtype))


#: the deprecated BanditAgent arguments of the subspace warm-up and the posterior_kwargs that replace them
_DEPRECATED = {"subspace_dim": "dim", "subspace_basis": "fit_basis", "sgd_kwargs": "sgd"}


def backend_settings(name: str) -> frozenset[str] | None:
    """The hyper-parameters the backend ``name`` (a registry name) takes as keyword arguments, read from its
    factory's signature (everything after ``apply_fn, likelihood``); ``None`` when it takes any keyword
    (``**kwargs``).  Unknown names raise ``ValueError`` listing the valid ones."""
    factory = resolve_backend(name)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    named = [k for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return frozenset(k for k in named if k not in ("apply_fn", "likelihood"))


class BanditAgent:
    """Model + posterior + policy (see the module docstring).

    The agent object is configuration only: ``init``, ``act``, ``observe``, ``observe_batch``, ``propensity``,
    ``action_probabilities`` and ``warmup`` are pure functions of it and never write to it.  What ``init`` learns
    from its example context (the context's shapes and the arm count K) is part of the state it returns
    (``state.shapes``, an :class:`AgentShapes` held as static pytree data), so one agent may hold states for contexts
    of different shapes side by side.  A round has two public spellings:

    * ``act`` / ``observe``: checked (context shapes, finite inputs, the action's range) and, with concrete inputs,
      one jitted call each; ``act`` also runs the warm-up fit at round τ.  Inside a trace they run their pure bodies.
    * ``choose(key, state, context, mask)`` / ``update(state, context, action, reward)``: those pure bodies — no
      checks, no jit, no warm-up fit — for loops that trace a whole run themselves (``lax.scan`` over rounds,
      ``vmap`` over seeds: the compiled runner, benchmarks, studies).  Such a loop calls ``warmup(warmup_key(key_t),
      state)`` itself at round :attr:`warmup_rounds`, and ``propensity`` (traceable) for a round's logged
      propensity with the key ``propensity_key(key_t)``.

    Args:
      model: a Flax module (or any object with ``init(key, x)`` and ``apply(params, x)``).  Multi-output:
        ``apply(params, context) -> (K,)``; per-arm: ``apply(params, x_a) -> (1,)``.
      posterior: a backend name (``bk.posteriors.REGISTRY``), a factory ``factory(apply_fn, likelihood)``
        (e.g. ``functools.partial(bk.posteriors.hilofi, rank=5)``), or a built :class:`Posterior` whose apply_fn
        is the selected-output model :func:`selected_output` (multi-output) or the model itself (per-arm).
      policy: a :class:`~banditkit.policies.Policy` or a policy name (``"thompson"``, ``"ucb"``, ``"eps_greedy"``...).
      likelihood: observation model of the reward (default ``Gaussian(obs_noise)``); its ``mean`` link turns the
        network output into the expected reward.
      per_arm: the reward model scores one arm's features at a time (context ``(K, F...)``).
      posterior_kwargs: hyper-parameters for a backend given by name or factory.
      warmup_steps: τ round-robin warm-up rounds before the policy takes over (``make_agent`` picks a default for a
        backend with ``refit``); see the module docstring.
      subspace_dim, subspace_basis, sgd_kwargs: deprecated (``DeprecationWarning``): ``subspace_ekf``'s settings, now
        ``posterior_kwargs=dict(dim=..., fit_basis=..., sgd=...)``; forwarded there to a backend that takes them.
      obs_noise: variance of the default Gaussian likelihood (with ``adaptive_noise``, its starting value).
      adaptive_noise: learn the Gaussian observation variance online (``True``, or a dict of
        :func:`banditkit.posteriors.adaptive_noise`'s settings) instead of keeping ``obs_noise`` fixed; for the
        Gaussian filter backends (``adaptive_noise.SUPPORTED``) given by name or factory.
      num_actions: K for a multi-output model (default: the model's output size, found at ``init`` and kept in the
        state, :meth:`num_actions_of`).
      reward_scale: rewards are observed as ``r / reward_scale`` (scores are in those units; the argmax is
        unchanged), so one set of default hyper-parameters fits rewards of any magnitude.  ``"auto"`` learns it from
        the stream: the state carries ``s_t = max_{τ ≤ t} |r_τ|`` over the rewards observed so far and round ``t``
        is observed as ``r_t / s_t`` (1 before any non-zero reward) — the largest reward seen is 1 in observed
        units, as ``make_agent``'s defaults expect, without knowing the reward's range in advance.
      rescale: with ``reward_scale="auto"``, what happens to a posterior that declares ``rescale`` (HiLoFi, linear)
        when the scale grows from ``s`` to ``s'``: ``"mean"`` (default) multiplies its mean outputs by ``s / s'`` so
        what it learned keeps its meaning in reward units and leaves its covariance (its uncertainty relative to the
        new range); ``"exact"`` also shrinks the covariance by ``(s / s')²`` (the posterior of the rescaled model:
        after a rare large reward the agent then trusts what it learned at the old scale too much —
        ``benchmarks/studies/honest_defaults``); ``None`` leaves the posterior as it is.
      head_prior: ``"unit"``: the prior variance of the model's head (HiLoFi's ``init_cov_last``) is set at
        :meth:`init` from the context it is given, the first one the agent sees:
        ``σ_ℓ² = 1 / (‖φ(x_0)‖² + 1)`` with ``φ`` the head's input at the initial weights, so that a head-prior draw
        moves an output by about 1, the largest observed reward (:mod:`banditkit.agents.priors`, *Unit head*).
        Needs a model with ``return_features`` and a backend whose ``init`` takes ``init_cov_last``; ``None``: the
        backend's own.
      affine_head: the model's outputs are affine in the posterior's last layer (a ``Dense`` head with nothing after
        it), so a Thompson draw may draw the K outputs given the other parameters' draw (the posterior's
        ``sample_outputs``, when it declares one: HiLoFi / LoLoFi) instead of drawing every parameter — the same law,
        no factorisation of the head's covariance.  ``None`` (default): ``True`` for ``banditkit.models`` nets (each
        ends in a ``Dense`` named ``head``) with a posterior whose ``last_layer`` is that ``head``, else ``False``.
      spec: the agent's label (``agent.spec``; the spec text the user wrote, e.g. ``"LoFi-UCB"``), used to name the
        agent in results; ``None``: no label (results use :attr:`name`).
      posterior_name: the backend's name (``agent.posterior_name``, e.g. ``"hilofi"``); ``None``: the factory's
        ``__name__`` (or the built Posterior's ``name``).
    """

    def __init__(
        self,
        model,
        posterior: str | Posterior | Callable = "ekf",
        policy: str | Policy = "thompson",
        *,
        likelihood=None,
        per_arm: bool = False,
        posterior_kwargs: dict | None = None,
        warmup_steps: int = 0,
        subspace_dim: int | None = None,
        subspace_basis: str | None = None,
        sgd_kwargs: dict | None = None,
        obs_noise: float = 0.1,
        adaptive_noise: bool | dict = False,
        num_actions: int | None = None,
        reward_scale: float | str = 1.0,
        affine_head: bool | None = None,
        head_prior: str | None = None,
        rescale: str | None = "mean",
        spec: str | None = None,
        posterior_name: str | None = None,
    ):
        if not (hasattr(model, "init") and hasattr(model, "apply")):
            raise TypeError(
                f"model must be a Flax module (or have init(key, x) and apply(params, x)), got {type(model).__name__}"
            )
        if reward_scale != AUTO and not (isinstance(reward_scale, (int, float, np.number)) and reward_scale > 0):
            raise ValueError(f"reward_scale must be a number > 0 or 'auto' (learned from the rewards observed), got "
                             f"{reward_scale!r}")
        if rescale not in (None, "mean", "exact"):
            raise ValueError(f"rescale must be 'mean', 'exact' or None, got {rescale!r}")
        if head_prior not in (None, "unit"):
            raise ValueError(f"head_prior must be None or 'unit', got {head_prior!r}")
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        if subspace_basis is not None and subspace_basis not in ("svd", "random"):
            raise ValueError(f"subspace_basis must be 'svd' or 'random', got {subspace_basis!r}")
        self.model = model
        self.per_arm = bool(per_arm)
        self.likelihood = likelihood if likelihood is not None else Gaussian(obs_noise)
        self.policy = _policies.get(policy)
        self.warmup_steps = int(warmup_steps)
        # the deprecated subspace arguments, as given (None: not given); they live in posterior_kwargs now
        self.subspace_dim, self.subspace_basis = subspace_dim, subspace_basis
        self.sgd_kwargs = None if sgd_kwargs is None else dict(sgd_kwargs)
        self.num_actions = num_actions
        self.auto_scale = reward_scale == AUTO
        self.reward_scale = 1.0 if self.auto_scale else float(reward_scale)
        self.head_prior = head_prior
        self.rescale = rescale
        self.apply_fn = model.apply if self.per_arm else selected_output(model.apply)
        kwargs = dict(posterior_kwargs or {})
        deprecated = {k: v for k, v in (("subspace_dim", subspace_dim), ("subspace_basis", subspace_basis),
                                 ("sgd_kwargs", self.sgd_kwargs)) if v is not None}
        if deprecated:
            use = ", ".join(f"{_DEPRECATED[k]}=..." for k in deprecated)
            warnings.warn(f"BanditAgent({'=..., '.join(deprecated)}=...) is deprecated: pass "
                          f"posterior_kwargs=dict({use}) (the subspace_ekf backend's own settings)", DeprecationWarning,
                          stacklevel=2)
        if isinstance(posterior, Posterior):
            if kwargs:
                raise ValueError("posterior_kwargs apply to a backend name or factory, not to a built Posterior")
            if adaptive_noise:
                raise ValueError("adaptive_noise wraps a backend name or factory, not a built Posterior; pass "
                                 "bk.posteriors.adaptive_noise(backend) as the posterior instead")
            self.posterior = posterior
            self.posterior_name = posterior.name
        else:
            factory = resolve_backend(posterior) if isinstance(posterior, str) else posterior
            if not callable(factory):
                raise TypeError(f"posterior must be a backend name, a factory or a Posterior, got {posterior!r}")
            if adaptive_noise:
                settings = adaptive_noise if isinstance(adaptive_noise, dict) else {}
                factory = _posteriors.adaptive_noise(factory, **settings)
            self.posterior_name = getattr(factory, "__name__", str(posterior))
            for k, v in deprecated.items():
                new_key = _DEPRECATED[k]
                if new_key in kwargs:
                    raise ValueError(f"{k}= and posterior_kwargs[{new_key!r}] both set {new_key}; pass only "
                                     f"posterior_kwargs")
                if accepts_keyword(factory, new_key):  # other backends ignored these arguments, and still do
                    kwargs[new_key] = v
            self.posterior = factory(self.apply_fn, self.likelihood, **kwargs)
        if affine_head is None:
            affine_head = (isinstance(model, (MLP, LeNet5, EmbeddingMLP))
                           and self.posterior.hyper.get("last_layer", "head") == "head")
        self.affine_head = bool(affine_head)
        self.spec = None if spec is None else str(spec)
        if posterior_name is not None:
            self.posterior_name = str(posterior_name)
        self._jit_choose = jax.jit(self.choose)
        # observe / warmup may loop over batched gradients (body retraining, the warm-up SGD): keep their
        # convolutions in XLA:CPU's fast layout inside those loops (banditkit._xla.conv)
        self._jit_update = jax.jit(canonical_convs(self.update))
        self._jit_observe_batch = jax.jit(canonical_convs(self._observe_batch))
        self._jit_warmup = jax.jit(canonical_convs(self.warmup))
        self._jit_probs = jax.jit(self._action_probabilities, static_argnames=("num_draws",))
        self._jit_propensity = jax.jit(self._propensity, static_argnames=("num_draws",))

    # ---------------------------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"BanditAgent(posterior={self.posterior_name!r}, policy={self.policy.name!r}, per_arm={self.per_arm})"

    @property
    def name(self) -> str:
        return f"{self.posterior_name}-{self.policy.name}"

    @property
    def warmup_rounds(self) -> int:
        """τ when the posterior declares ``refit`` (the agent buffers the τ warm-up rounds and calls :meth:`warmup`
        at round τ), else 0 (nothing happens between rounds)."""
        return self.warmup_steps if self.posterior.refit is not None else 0

    @staticmethod
    def warmup_key(round_key: Array) -> Array:
        """The key of :meth:`warmup` at round τ from that round's key (the one ``act`` is given): every loop derives
        it this way, so the compiled and the Gymnasium loop fit the same warm-up."""
        return jax.random.fold_in(round_key, WARMUP_KEY)

    @staticmethod
    def propensity_key(round_key: Array) -> Array:
        """The key of a round's :meth:`propensity` (Monte-Carlo draws) from that round's ``act`` key: independent of
        the draw that chose the action, and the same in every loop."""
        return jax.random.fold_in(round_key, PROPENSITY_KEY)

    def posterior_for(self, state: AgentState) -> Posterior:
        """The :class:`Posterior` of ``state.posterior``: ``self.posterior``, the same for every state (kept for
        code written when the subspace basis lived outside the posterior's state)."""
        return self.posterior

    @property
    def is_subspace(self) -> bool:
        """Deprecated: whether the posterior has a warm-up fit (``refit``); use ``agent.warmup_rounds > 0``."""
        warnings.warn("agent.is_subspace is deprecated: a backend that needs a warm-up fit declares refit; use "
                      "agent.warmup_rounds > 0", DeprecationWarning, stacklevel=2)
        return self.posterior.refit is not None

    def _example_input(self, context):
        return context[0] if self.per_arm else context

    @staticmethod
    def num_actions_of(state: AgentState) -> int:
        """``K``, the number of arms of ``state`` (found by :meth:`init`: the model's outputs, or the per-arm context's
        rows)."""
        return state.shapes.num_actions

    # ---------------------------------------------------------------------------------------------------------
    def init(self, key: Array, example_context) -> AgentState:
        """Initial weights from ``model.init`` and the prior belief; ``example_context`` fixes the shapes."""
        example_context = jax.tree_util.tree_map(jnp.asarray, example_context)
        context_shapes = tuple(tuple(int(n) for n in jnp.shape(c)) for c in jax.tree_util.tree_leaves(example_context))
        if self.per_arm and jnp.ndim(jax.tree_util.tree_leaves(example_context)[0]) < 1:
            raise ValueError("a per-arm agent needs a context with one feature row per arm, shape (K, ...)")
        k_model, k_basis = jax.random.split(key)
        params = self.model.init(k_model, self._example_input(example_context))
        if self.per_arm:
            k = context_shapes[0][0]
        else:
            out = jax.eval_shape(self.model.apply, params, example_context)
            if len(out.shape) != 1:
                raise ValueError(f"a multi-output model must return (K,) for one context, got shape {out.shape}")
            k = int(out.shape[0])
            if self.num_actions is not None and self.num_actions != k:
                raise ValueError(f"num_actions={self.num_actions} but the model returns {k} outputs")
        shapes = AgentShapes(context_shapes, int(k))
        x0 = self._observation(example_context, jnp.int32(0), shapes.num_actions)
        dtype = jnp.result_type(*jax.tree_util.tree_leaves(params))
        overrides = {}
        if self.head_prior == "unit":
            overrides["init_cov_last"] = self._unit_head_variance(params, example_context)
        post_state = self.posterior.init(params, example_x=x0, **overrides)
        if self.warmup_steps == 0:  # no warm-up to fit: the backend's data-free reset (if it has one)
            post_state = reset_posterior(self.posterior, k_basis, post_state, x0, jnp.zeros((1,), dtype))
        warm: Any = ()
        if self.warmup_rounds > 0:
            tau = self.warmup_steps
            ctx = jax.tree_util.tree_map(lambda c: jnp.zeros((tau, *jnp.shape(c)), jnp.result_type(c)), example_context)
            warm = WarmupBuffer(ctx, jnp.zeros((tau,), jnp.int32), jnp.zeros((tau,), dtype))
        scale = jnp.zeros((), dtype) if self.auto_scale else ()
        return AgentState(post_state, jnp.zeros((), jnp.int32), warm, scale, shapes)

    def _unit_head_variance(self, params, context) -> Array:
        """``1 / (‖φ(context)‖² + 1)`` at ``params`` (the ``head_prior="unit"`` rule, traceable)."""
        if self.per_arm:
            raise ValueError("head_prior='unit' applies to a multi-output model (one context, K outputs)")
        try:
            phi = self.model.apply(params, context, return_features=True)
        except TypeError as e:
            raise ValueError(f"head_prior='unit' needs a model whose apply takes return_features=True (the "
                             f"banditkit.models nets); {type(self.model).__name__} does not") from e
        return 1.0 / (jnp.sum(jnp.square(phi)) + 1.0)

    def scale_of(self, state: AgentState) -> Array:
        """The reward scale of ``state``: ``r`` is observed as ``r / scale`` (the learned one with
        ``reward_scale="auto"``, 1 before any non-zero reward)."""
        if self.auto_scale:
            return jnp.where(state.scale > 0, state.scale, jnp.ones_like(state.scale))
        return jnp.asarray(self.reward_scale)

    # ---------------------------------------------------------------------------------------------------------
    def candidates(self, posterior: Posterior, context, num_actions: int | None = None):
        """``(reward_fn, moments_fn)`` of the K arms for ``context`` (see :mod:`banditkit.policies.base`).
        ``num_actions``: K of a multi-output model (with a state at hand, :meth:`num_actions_of`); default: the
        agent's ``num_actions``, else the model's output size for ``context`` (abstract evaluation, no FLOPs)."""
        if self.per_arm:
            return point_candidates(posterior, self.model.apply, context, self.likelihood,
                                    affine_head=self.affine_head)
        k = self.num_actions if num_actions is None else num_actions
        if k is None:
            spec = jax.tree_util.tree_map(lambda c: jax.ShapeDtypeStruct(jnp.shape(c), jnp.result_type(c)), context)
            out = jax.eval_shape(lambda c: self.model.apply(self.model.init(jax.random.PRNGKey(0), c), c), spec)
            k = int(out.shape[0])
        return output_candidates(posterior, self.model.apply, context, int(k), self.likelihood,
                                 affine_head=self.affine_head)

    def _round_robin(self, step: Array, k: int, mask: Array | None) -> Array:
        """The warm-up arm of round ``step``: ``step mod K``, or with a mask the first available arm from there on
        (cyclically)."""
        first = step % k
        if mask is None:
            return first.astype(jnp.int32)
        order = (jnp.arange(k) - first) % k
        return jnp.argmin(jnp.where(jnp.asarray(mask, bool), order, k)).astype(jnp.int32)

    def _in_warmup(self, state: AgentState) -> Array:
        return state.step < self.warmup_steps

    def choose(self, key: Array, state: AgentState, context, mask: Array | None = None) -> Array:
        """The action (int32) :meth:`act` takes in ``state``, without act's input checks and warm-up fit: pure,
        traceable, not jitted — the round's decision for loops that call :meth:`warmup` themselves at round
        :attr:`warmup_rounds` (the compiled runner, benchmarks).  ``mask`` as in :meth:`act`."""
        post = self.posterior
        reward_fn, moments_fn = self.candidates(post, context, self.num_actions_of(state))
        if mask is None:
            action = self.policy.choose(key, post, state.posterior, reward_fn, moments_fn)
        else:  # unavailable arms score -inf (an all-true mask gives choose's action)
            scores = self.policy.score(key, post, state.posterior, reward_fn, moments_fn)
            action = jnp.argmax(_probs.masked(scores, mask)).astype(jnp.int32)
        if self.warmup_steps > 0:
            rr = self._round_robin(state.step, self.num_actions_of(state), mask)
            action = jnp.where(self._in_warmup(state), rr, action).astype(jnp.int32)
        return action

    def _check_mask(self, mask, state):
        """``mask`` as a bool ``(K,)`` array (``None`` passes): one flag per arm, at least one arm available."""
        if mask is None:
            return None
        k = self.num_actions_of(state)
        if tuple(jnp.shape(mask)) != (k,):
            raise ValueError(f"mask must have one flag per arm, shape ({k},), got {tuple(jnp.shape(mask))}")
        if not _is_traced(mask) and not np.any(np.asarray(mask)):
            raise ValueError("mask marks no arm available: at least one arm must be available")
        return jnp.asarray(mask, bool)

    def act(self, key: Array, state: AgentState, context, mask: Array | None = None) -> tuple[Array, AgentState]:
        """Choose an arm for ``context``: ``(action int32, state)``.

        ``mask``: ``(K,)`` booleans, the arms available this round (``None``: all); an unavailable arm is never
        chosen (its score is ``-inf``; during the round-robin warm-up the next available arm is pulled).

        At round ``t = warmup_steps`` this first fits the warm-up (see the module docstring), with a key derived
        from ``key``; in a traced call that happens inside a ``lax.cond``.
        """
        self._check_ready(state)
        context = jax.tree_util.tree_map(jnp.asarray, context)
        self._check_context(context, state)
        mask = self._check_mask(mask, state)
        if not _is_traced(context):
            from banditkit.validation import check_finite

            check_finite("context", context, hint="clean or impute the context before act()")
        if self.warmup_rounds > 0:
            k_warm = self.warmup_key(key)
            if _is_traced((key, state, context)):
                state = jax.lax.cond(
                    state.step == self.warmup_steps, lambda s: self.warmup(k_warm, s), lambda s: s, state
                )
            elif int(state.step) == self.warmup_steps:
                state = self._jit_warmup(k_warm, state)
        if _is_traced((key, state, context, mask)):
            return self.choose(key, state, context, mask), state
        return self._jit_choose(key, state, context, mask), state

    # ---------------------------------------------------------------------------------------------------------
    def _action_probabilities(self, key, state, context, mask=None, num_draws: int = _probs.DEFAULT_DRAWS):
        post = self.posterior
        reward_fn, moments_fn = self.candidates(post, context, self.num_actions_of(state))
        probs = _probs.action_probabilities(self.policy, key, post, state.posterior, reward_fn, moments_fn,
                                                 mask=mask, num_draws=num_draws)
        if self.warmup_steps > 0:
            k = probs.shape[0]
            rr = jax.nn.one_hot(self._round_robin(state.step, k, mask), k, dtype=probs.dtype)
            probs = jnp.where(self._in_warmup(state), rr, probs)
        return probs

    def action_probabilities(self, key: Array, state: AgentState, context, mask: Array | None = None, *,
                             num_draws: int = _probs.DEFAULT_DRAWS) -> Array:
        """``π(· | context)``, ``(K,)``: the distribution :meth:`act` draws its action from in ``state``.

        Exact for greedy / UCB / EI / PI (one-hot; ties to the lowest index, as ``act``), ε-greedy
        (``(1 − ε) 1{greedy} + ε / (available arms)``) and the round-robin warm-up (one-hot); otherwise (Thompson
        sampling) the share of ``num_draws`` policy draws with keys ``split(key, num_draws)`` that pick each arm
        (:mod:`banditkit.policies.propensity`).  Give a state after a warm-up fit (the one ``act`` returns).
        """
        self._check_ready(state)
        context = jax.tree_util.tree_map(jnp.asarray, context)
        self._check_context(context, state)
        mask = self._check_mask(mask, state)
        if _is_traced((key, state, context, mask)):
            return self._action_probabilities(key, state, context, mask, num_draws)
        return self._jit_probs(key, state, context, mask, num_draws=num_draws)

    def _propensity(self, key, state, context, action, mask=None, num_draws: int = _probs.DEFAULT_DRAWS):
        post = self.posterior
        reward_fn, moments_fn = self.candidates(post, context, self.num_actions_of(state))
        p = _probs.taken_propensity(self.policy, key, post, state.posterior, reward_fn, moments_fn, action,
                                         mask=mask, num_draws=num_draws)
        if self.warmup_steps > 0:
            p = jnp.where(self._in_warmup(state), jnp.ones_like(p), p)
        return p

    def propensity(self, key: Array, state: AgentState, context, action, mask: Array | None = None, *,
                   num_draws: int = _probs.DEFAULT_DRAWS) -> Array:
        """``π(action | context)`` of an action :meth:`act` chose in ``state`` (the state ``act`` returned): the
        logged propensity of the round.

        Exact where :meth:`action_probabilities` is; for Thompson sampling ``(c + 1) / (num_draws + 1)`` with ``c``
        the draws among ``num_draws`` fresh ones (keys from ``key``, which must be independent of the key that chose
        the action: use :meth:`propensity_key` of the round's key) that pick ``action`` — the chosen draw counted as
        one more, so the propensity is never 0.
        """
        self._check_ready(state)
        context = jax.tree_util.tree_map(jnp.asarray, context)
        self._check_context(context, state)
        mask = self._check_mask(mask, state)
        action = jnp.asarray(action, jnp.int32)
        if _is_traced((key, state, context, action, mask)):
            return self._propensity(key, state, context, action, mask, num_draws)
        return self._jit_propensity(key, state, context, action, mask, num_draws=num_draws)

    def _observation(self, context, action, k: int):
        if self.per_arm:
            x = jax.tree_util.tree_map(lambda c: c[action], context)
        else:
            x = (context, jax.nn.one_hot(action, k))
        return x

    def update(self, state: AgentState, context, action: Array, reward: Array) -> AgentState:
        """The state :meth:`observe` returns, without observe's input checks: pure, traceable, not jitted — the
        round's learning step for loops that trace it themselves (the compiled runner, benchmarks)."""
        post = self.posterior
        dtype = jnp.result_type(*jax.tree_util.tree_leaves(state.posterior))
        scale = state.scale
        if self.auto_scale:  # the largest |reward| observed so far, this one included
            scale = jnp.maximum(state.scale, jnp.max(jnp.abs(as_obs(reward, dtype))))
            if self.rescale is not None and post.rescale is not None:  # what was learned, in reward units
                ratio = jnp.where(state.scale > 0, state.scale / jnp.where(scale > 0, scale, 1), 1)
                state = state._replace(posterior=post.rescale(state.posterior, ratio, self.rescale == "exact"))
            state = state._replace(scale=scale)
        y = as_obs(reward, dtype) / self.scale_of(state).astype(dtype)
        x = self._observation(context, action, self.num_actions_of(state))
        new = post.predict(post.update(state.posterior, x, y))
        warm = state.warmup
        if self.warmup_rounds > 0:  # buffered for the refit; the posterior starts after it
            in_warmup = state.step < self.warmup_steps
            i = jnp.clip(state.step, 0, self.warmup_steps - 1)
            buf = warm
            put = lambda arr, v: jnp.where(in_warmup, arr.at[i].set(jnp.asarray(v, arr.dtype)), arr)
            ctx = jax.tree_util.tree_map(put, buf.contexts, context)
            warm = buf._replace(contexts=ctx, actions=put(buf.actions, action), rewards=put(buf.rewards, y[0]))
            new = jax.tree_util.tree_map(lambda a, b: jnp.where(in_warmup, a, b), state.posterior, new)
        return state._replace(posterior=new, step=state.step + 1, warmup=warm, scale=scale)

    def observe(self, state: AgentState, context, action, reward) -> AgentState:
        """Update the belief with the reward of the pulled arm (then the time update ``predict``)."""
        self._check_ready(state)
        self._check_context(jax.tree_util.tree_map(jnp.asarray, context), state)
        if not _is_traced((context, action, reward)):
            from banditkit.validation import check_action, check_finite

            check_finite("reward", reward, hint="drop or impute the round before observe()")
            if int(np.size(np.asarray(reward))) != 1:
                raise ValueError(
                    f"reward must be one number (the pulled arm's reward), got an array of shape "
                    f"{np.shape(np.asarray(reward))}"
                )
            check_finite("context", context, hint="clean the context before observe()")
            check_action(int(action), self.num_actions_of(state))
        context = jax.tree_util.tree_map(jnp.asarray, context)
        action = jnp.asarray(action, jnp.int32)
        if _is_traced((state, context, action, reward)):
            return self.update(state, context, action, reward)
        return self._jit_update(state, context, action, reward)

    def _observe_batch(self, state: AgentState, contexts, actions: Array, rewards: Array) -> AgentState:
        body = lambda st, row: (self.update(st, *row), None)
        return jax.lax.scan(body, state, (contexts, actions, rewards))[0]

    def observe_batch(self, state: AgentState, contexts, actions, rewards) -> AgentState:
        """Observe ``n`` rounds at once, in order: ``contexts`` with a leading axis ``n`` (each as ``act`` saw it),
        ``actions (n,)``, ``rewards (n,)`` — delayed or batched feedback of rounds acted on earlier.  The result is
        the state of ``n`` :meth:`observe` calls in that order (one compiled ``lax.scan``)."""
        self._check_ready(state)
        contexts = jax.tree_util.tree_map(jnp.asarray, contexts)
        actions = jnp.asarray(actions, jnp.int32).reshape(-1)
        rewards = jnp.asarray(rewards).reshape(-1)
        n = actions.shape[0]
        lead = [jnp.shape(c)[0] if jnp.ndim(c) else None for c in jax.tree_util.tree_leaves(contexts)]
        if rewards.shape[0] != n or any(m != n for m in lead):
            raise ValueError(f"observe_batch needs one context, action and reward per round: got {lead} contexts, "
                             f"{n} actions, {rewards.shape[0]} rewards")
        if n == 0:
            return state
        self._check_context(jax.tree_util.tree_map(lambda c: c[0], contexts), state)
        if not _is_traced((contexts, actions, rewards)):
            from banditkit.validation import check_finite

            check_finite("rewards", rewards, hint="drop or impute those rounds before observe_batch()")
            check_finite("contexts", contexts, hint="clean the contexts before observe_batch()")
            k = self.num_actions_of(state)
            bad = np.flatnonzero((np.asarray(actions) < 0) | (np.asarray(actions) >= k))
            if bad.size:
                raise ValueError(f"actions out of range [0, {k}) at batch positions {bad[:8].tolist()}")
        if _is_traced((state, contexts, actions, rewards)):
            return self._observe_batch(state, contexts, actions, rewards)
        return self._jit_observe_batch(state, contexts, actions, rewards)

    def _check_ready(self, state):
        if not (isinstance(state, AgentState) and isinstance(state.shapes, AgentShapes)):
            raise RuntimeError("call agent.init(key, example_context) first and pass the state it returns")

    def _check_context(self, context, state: AgentState):
        """The context has the shapes of the example given to ``init`` (static, so this works under jit too)."""
        shapes = tuple(tuple(jnp.shape(c)) for c in jax.tree_util.tree_leaves(context))
        want = state.shapes.contexts
        if shapes != want:
            want = want[0] if len(want) == 1 else list(want)
            got = shapes[0] if len(shapes) == 1 else list(shapes)
            raise ValueError(
                f"context has shape {got} but the agent was initialised with contexts of shape {want}"
                + (" (per-arm: one feature row per arm)" if self.per_arm else "")
            )

    # ---------------------------------------------------------------------------------------------------------
    def warmup(self, key: Array, state: AgentState, targets: Array | None = None) -> AgentState:
        """Refit the posterior to the warm-up buffer (a backend with ``refit``), else the identity.  Pure, jittable.

        ``posterior.refit(key, state, xs, ys, weights)`` on the τ buffered rounds as ``n = τ`` examples of ``E = 1``
        observation each: ``x`` = the posterior's input for the pulled arm (``(context, e_a)``, or the arm's feature
        row per-arm), ``y`` = its observed reward, weight 1 (``subspace_ekf``: ``θ*, A = subspace_from_sgd`` on
        ``½(f_a − y)²``, the pulled arm's output only).  Then the τ observations are filtered through the refitted
        posterior (predict after each update).

        ``targets``: optional ``(τ, K)`` rewards of *every* arm for the τ warm-up contexts (raw rewards, as the
        env pays them), when they are known — a labelled warm-up set.  The refit then sees ``E = K`` observations per
        example, one per arm, each with weight ``1/K`` (the loss ``(1/K) Σ_k ½(f_k − y_k)²``, the same scale as the
        bandit fit's one observed entry ``½(f_a − y_a)²``, so one learning rate serves both); the filter still sees
        only the pulled arms' rewards.  This is what seed 002's reference code does (its warm-up loss,
        ``l2_loss(...).mean()``, reads the full one-hot label vectors); the default ``None`` is bandit feedback.
        Multi-head models only.
        """
        if self.warmup_rounds == 0:
            return state
        post = self.posterior
        buf: WarmupBuffer = state.warmup
        tau, k = self.warmup_steps, self.num_actions_of(state)
        observe = jax.vmap(lambda c, a: self._observation(c, a, k))  # the posterior's input of (context, arm)
        if targets is None:
            xs = jax.tree_util.tree_map(lambda a: a[:, None], observe(buf.contexts, buf.actions))  # (τ, 1, ...)
            ys = buf.rewards[:, None, None]
            weights = jnp.ones((tau, 1), ys.dtype)
        else:
            want = (tau, k)
            if self.per_arm or tuple(jnp.shape(targets)) != want:
                raise ValueError(
                    f"warmup targets must have shape {want} (every arm's reward for each warm-up context) and need "
                    f"a multi-head model; got shape {tuple(jnp.shape(targets))}"
                    + (" with a per-arm model" if self.per_arm else "")
                )
            arms = jnp.arange(k, dtype=jnp.int32)
            xs = jax.vmap(lambda c: jax.vmap(lambda a: self._observation(c, a, k))(arms))(buf.contexts)  # (τ, K, ...)
            scale = self.scale_of(state).astype(buf.rewards.dtype)
            ys = (jnp.asarray(targets, buf.rewards.dtype) / scale)[..., None]
            weights = jnp.full((tau, k), 1.0 / k, ys.dtype)  # the mean over the K observed entries
        pstate = post.refit(key, state.posterior, xs, ys, weights)

        def step(ps, i):
            ctx = jax.tree_util.tree_map(lambda c: c[i], buf.contexts)
            x = self._observation(ctx, buf.actions[i], k)
            return post.predict(post.update(ps, x, buf.rewards[i][None])), None

        pstate, _ = jax.lax.scan(step, pstate, jnp.arange(tau))
        return state._replace(posterior=pstate)
