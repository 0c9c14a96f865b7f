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

Warm-up (seed 002's subspace EKF, and optionally any backend): with ``warmup_steps = τ > 0`` the first τ rounds pull
arms round-robin (``a = t mod K``); ``observe`` stores them in a fixed-size buffer in the state.  At round ``t = τ``
``act`` first calls :meth:`BanditAgent.warmup`: for ``subspace_ekf`` it fits SGD to the warm-up data (bandit feedback:
only the pulled arm's output enters the loss), builds ``A`` from the SVD of the iterates
(``bk.posteriors.subspace_from_sgd``), re-initialises the subspace posterior at ``θ*`` and filters the τ warm-up
observations through it (seed 002 Alg. 2); other backends are updated online during warm-up and ``warmup`` is the
identity.  Without warm-up, ``subspace_ekf`` uses a random subspace through the initial weights.  The public ``act``
does it automatically: with a concrete state by one jitted call, inside a trace by a ``lax.cond`` on the round
counter (every round then carries the branch, and under ``vmap`` over seeds the batched predicate turns it into a
select that runs the fit every round, so loops over many rounds should call ``warmup`` themselves, with the key
``fold_in(round key, WARMUP_KEY)``).  The compiled runner does so: it ends a scan segment at ``t = τ`` and calls
``warmup`` once between two segments.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from banditkit import policies as _policies
from banditkit import posteriors as _posteriors
from banditkit.convs import canonical_convs
from banditkit.likelihoods import Gaussian
from banditkit.policies.base import Policy, output_candidates, point_candidates
from banditkit.posteriors.base import Posterior, as_obs

Array = jax.Array
PyTree = Any

WARMUP_KEY = 0x5EED  # the warm-up fit's key is fold_in(round key at t = τ, WARMUP_KEY), in every loop


class WarmupBuffer(NamedTuple):
    contexts: PyTree  # (τ, *context_shape): the warm-up contexts
    actions: Array  # (τ,) int32
    rewards: Array  # (τ,)
    params: PyTree  # the initial network weights (start of the warm-up SGD)
    basis_rows: Array  # (d, P) subspace basis Aᵀ, one basis vector per row (subspace_ekf only; (0, 0) otherwise)


class AgentState(NamedTuple):
    posterior: Any  # the posterior backend's state
    step: Array  # int32: rounds observed so far
    warmup: Any  # WarmupBuffer, or () without warm-up


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


class BanditAgent:
    """Model + posterior + policy (see the module docstring).

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
      warmup_steps: τ round-robin warm-up rounds before the policy takes over (``make_agent`` picks a default).
      subspace_dim: ``d`` for ``subspace_ekf``; ``sgd_kwargs``: passed to ``subspace_from_sgd``.
      subspace_basis: ``"svd"`` (default: the warm-up SGD iterates' principal directions, seed 002's EKF-Sub-SVD) or
        ``"random"`` (a random orthonormal basis through the warm-up fit θ*, seed 002's EKF-Sub-RND).  Without
        warm-up (``warmup_steps=0``) the basis is random and passes through the initial weights.
      obs_noise: variance of the default Gaussian likelihood (with ``adaptive_noise``, its starting value).
      adaptive_noise: learn the Gaussian observation variance online (``True``, or a dict of
        :func:`banditkit.posteriors.adaptive_noise`'s settings) instead of keeping ``obs_noise`` fixed; for the
        Gaussian filter backends (``adaptive_noise.SUPPORTED``) given by name or factory.
      num_actions: K for a multi-output model (default: the model's output size, found at ``init``).
      reward_scale: rewards are observed as ``r / reward_scale`` (scores are in those units; the argmax is
        unchanged), so one set of default hyper-parameters fits rewards of any magnitude.
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
        subspace_dim: int = 20,
        subspace_basis: str = "svd",
        sgd_kwargs: dict | None = None,
        obs_noise: float = 0.1,
        adaptive_noise: bool | dict = False,
        num_actions: int | None = None,
        reward_scale: float = 1.0,
    ):
        if not (hasattr(model, "init") and hasattr(model, "apply")):
            raise TypeError(
                f"model must be a Flax module (or have init(key, x) and apply(params, x)), got {type(model).__name__}"
            )
        if not reward_scale > 0:
            raise ValueError(f"reward_scale must be > 0, got {reward_scale!r}")
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        if subspace_basis not in ("svd", "random"):
            raise ValueError(f"subspace_basis must be 'svd' or 'random', got {subspace_basis!r}")
        self.model = model
        self.per_arm = bool(per_arm)
        self.likelihood = likelihood if likelihood is not None else Gaussian(obs_noise)
        self.policy = _policies.get(policy)
        self.warmup_steps = int(warmup_steps)
        self.subspace_dim = int(subspace_dim)
        self.subspace_basis = subspace_basis
        self.sgd_kwargs = dict(sgd_kwargs or {})
        self.num_actions = num_actions
        self.reward_scale = float(reward_scale)
        self.apply_fn = model.apply if self.per_arm else selected_output(model.apply)
        kwargs = dict(posterior_kwargs or {})
        self._factory = None
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
            if getattr(factory, "backend", factory) is getattr(_posteriors, "subspace_ekf", None):
                self._factory = (factory, kwargs)
                self.posterior = None  # built per state (the basis lives in the state)
            else:
                self.posterior = factory(self.apply_fn, self.likelihood, **kwargs)
        self.is_subspace = self._factory is not None
        self._template = None
        self._context_shapes = None
        self._jit_act = jax.jit(self._act)
        # observe / warmup may loop over batched gradients (body retraining, the warm-up SGD): keep their
        # convolutions in XLA:CPU's fast layout inside those loops (banditkit.convs)
        self._jit_observe = jax.jit(canonical_convs(self._observe))
        self._jit_warmup = jax.jit(canonical_convs(self.warmup))

    # ---------------------------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"BanditAgent(posterior={self.posterior_name!r}, policy={self.policy.name!r}, per_arm={self.per_arm})"

    @property
    def name(self) -> str:
        return f"{self.posterior_name}-{self.policy.name}"

    def _subspace_posterior(self, basis_rows: Array) -> Posterior:
        factory, kwargs = self._factory
        post = factory(self.apply_fn, self.likelihood, basis_rows=basis_rows, **kwargs)
        zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), self._template)
        post.init(zeros)  # records the parameter layout (dead code under jit)
        return post

    def posterior_for(self, state: AgentState) -> Posterior:
        """The :class:`Posterior` that owns ``state.posterior`` (for ``subspace_ekf`` it depends on the basis)."""
        if self.is_subspace:
            return self._subspace_posterior(state.warmup.basis_rows)
        return self.posterior

    def _example_input(self, context):
        return context[0] if self.per_arm else context

    def _k(self, context) -> int:
        if self.per_arm:
            return int(jax.tree_util.tree_leaves(context)[0].shape[0])
        return int(self.num_actions)

    # ---------------------------------------------------------------------------------------------------------
    def init(self, key: Array, example_context) -> AgentState:
        """Initial weights from ``model.init`` and the prior belief; ``example_context`` fixes the shapes."""
        example_context = jax.tree_util.tree_map(jnp.asarray, example_context)
        self._context_shapes = [tuple(jnp.shape(c)) for c in jax.tree_util.tree_leaves(example_context)]
        if self.per_arm and jnp.ndim(jax.tree_util.tree_leaves(example_context)[0]) < 1:
            raise ValueError("a per-arm agent needs a context with one feature row per arm, shape (K, ...)")
        k_model, k_basis = jax.random.split(key)
        params = self.model.init(k_model, self._example_input(example_context))
        self._template = jax.tree_util.tree_map(
            lambda p: jax.ShapeDtypeStruct(jnp.shape(p), jnp.result_type(p)), params
        )
        if not self.per_arm:
            out = jax.eval_shape(self.model.apply, params, example_context)
            if len(out.shape) != 1:
                raise ValueError(f"a multi-output model must return (K,) for one context, got shape {out.shape}")
            if self.num_actions is None:
                self.num_actions = int(out.shape[0])
            elif self.num_actions != out.shape[0]:
                raise ValueError(f"num_actions={self.num_actions} but the model returns {out.shape[0]} outputs")
        if self.is_subspace:
            from banditkit.posteriors import subspace_random

            basis_rows = subspace_random(k_basis, params, self.subspace_dim)[0].T
            post = self._subspace_posterior(basis_rows)
        else:
            basis_rows = jnp.zeros((0, 0), jnp.result_type(*jax.tree_util.tree_leaves(params)))
            post = self.posterior
        post_state = _init_posterior(post, params, self._observation(example_context, jnp.int32(0)))
        warm: Any = ()
        if self.warmup_steps > 0 or self.is_subspace:
            tau = self.warmup_steps
            dtype = jnp.result_type(*jax.tree_util.tree_leaves(params))
            ctx = jax.tree_util.tree_map(lambda c: jnp.zeros((tau, *jnp.shape(c)), jnp.result_type(c)), example_context)
            warm = WarmupBuffer(ctx, jnp.zeros((tau,), jnp.int32), jnp.zeros((tau,), dtype), params, basis_rows)
        return AgentState(post_state, jnp.zeros((), jnp.int32), warm)

    # ---------------------------------------------------------------------------------------------------------
    def candidates(self, posterior: Posterior, context):
        """``(reward_fn, moments_fn)`` of the K arms for ``context`` (see :mod:`banditkit.policies.base`)."""
        if self.per_arm:
            return point_candidates(posterior, self.model.apply, context, self.likelihood)
        return output_candidates(posterior, self.model.apply, context, self.num_actions, self.likelihood)

    def _act(self, key: Array, state: AgentState, context) -> Array:
        post = self.posterior_for(state)
        reward_fn, moments_fn = self.candidates(post, context)
        action = self.policy.choose(key, post, state.posterior, reward_fn, moments_fn)
        if self.warmup_steps > 0:
            k = self._k(context)
            action = jnp.where(state.step < self.warmup_steps, state.step % k, action).astype(jnp.int32)
        return action

    def act(self, key: Array, state: AgentState, context) -> tuple[Array, AgentState]:
        """Choose an arm for ``context``: ``(action int32, state)``.

        At round ``t = warmup_steps`` this first fits the warm-up (see the module docstring), with a key derived
        from ``key``; in a traced call that happens inside a ``lax.cond``.
        """
        self._check_ready(state)
        context = jax.tree_util.tree_map(jnp.asarray, context)
        self._check_context(context)
        if not _is_traced(context):
            from banditkit.validation import check_finite

            check_finite("context", context, hint="clean or impute the context before act()")
        if self.warmup_steps > 0 and self.is_subspace:
            k_warm = jax.random.fold_in(key, WARMUP_KEY)
            if _is_traced((key, state, context)):
                state = jax.lax.cond(
                    state.step == self.warmup_steps, lambda s: self.warmup(k_warm, s), lambda s: s, state
                )
            elif int(state.step) == self.warmup_steps:
                state = self._jit_warmup(k_warm, state)
        if _is_traced((key, state, context)):
            return self._act(key, state, context), state
        return self._jit_act(key, state, context), state

    def _observation(self, context, action):
        if self.per_arm:
            x = jax.tree_util.tree_map(lambda c: c[action], context)
        else:
            x = (context, jax.nn.one_hot(action, self.num_actions))
        return x

    def _observe(self, state: AgentState, context, action: Array, reward: Array) -> AgentState:
        post = self.posterior_for(state)
        dtype = jnp.result_type(*jax.tree_util.tree_leaves(state.posterior))
        y = as_obs(reward, dtype) / jnp.asarray(self.reward_scale, dtype)
        x = self._observation(context, action)
        new = post.predict(post.update(state.posterior, x, y))
        warm = state.warmup
        if self.warmup_steps > 0:
            in_warmup = state.step < self.warmup_steps
            i = jnp.clip(state.step, 0, self.warmup_steps - 1)
            buf = warm
            put = lambda arr, v: jnp.where(in_warmup, arr.at[i].set(jnp.asarray(v, arr.dtype)), arr)
            ctx = jax.tree_util.tree_map(put, buf.contexts, context)
            warm = buf._replace(contexts=ctx, actions=put(buf.actions, action), rewards=put(buf.rewards, y[0]))
            if self.is_subspace:  # the subspace filter starts after the warm-up fit
                new = jax.tree_util.tree_map(lambda a, b: jnp.where(in_warmup, a, b), state.posterior, new)
        return AgentState(new, state.step + 1, warm)

    def observe(self, state: AgentState, context, action, reward) -> AgentState:
        """Update the belief with the reward of the pulled arm (then the time update ``predict``)."""
        self._check_ready(state)
        self._check_context(jax.tree_util.tree_map(jnp.asarray, context))
        if not _is_traced((context, action, reward)):
            from banditkit.validation import check_action, check_finite

            check_finite("reward", reward, hint="drop or impute the round before observe()")
            if int(np.size(np.asarray(reward))) != 1:
                raise ValueError(
                    f"reward must be one number (the pulled arm's reward), got an array of shape "
                    f"{np.shape(np.asarray(reward))}"
                )
            check_finite("context", context, hint="clean the context before observe()")
            k = self._k(jax.tree_util.tree_map(jnp.asarray, context))
            check_action(int(action), k)
        context = jax.tree_util.tree_map(jnp.asarray, context)
        action = jnp.asarray(action, jnp.int32)
        if _is_traced((state, context, action, reward)):
            return self._observe(state, context, action, reward)
        return self._jit_observe(state, context, action, reward)

    def _check_ready(self, state):
        if self._template is None or not isinstance(state, AgentState):
            raise RuntimeError("call agent.init(key, example_context) first and pass the state it returns")

    def _check_context(self, context):
        """The context has the shapes of the example given to ``init`` (static, so this works under jit too)."""
        shapes = [tuple(jnp.shape(c)) for c in jax.tree_util.tree_leaves(context)]
        if shapes != self._context_shapes:
            want = self._context_shapes[0] if len(self._context_shapes) == 1 else self._context_shapes
            got = shapes[0] if len(shapes) == 1 else shapes
            raise ValueError(
                f"context has shape {got} but the agent was initialised with contexts of shape {want}"
                + (" (per-arm: one feature row per arm)" if self.per_arm else "")
            )

    # ---------------------------------------------------------------------------------------------------------
    def warmup(self, key: Array, state: AgentState, targets: Array | None = None) -> AgentState:
        """Fit the subspace from the warm-up buffer (``subspace_ekf``), else the identity.  Pure and jittable.

        ``θ*, A = subspace_from_sgd(f, θ_0, warm-up data, dim=d, mask=pulled arm, basis=subspace_basis)``; the
        posterior restarts at ``z = 0`` (``θ = θ*``) and filters the τ warm-up observations (predict after each update).

        ``targets``: optional ``(τ, K)`` rewards of *every* arm for the τ warm-up contexts (raw rewards, as the
        env pays them), when they are known — a labelled warm-up set.  The SGD fit then regresses all K outputs,
        with the per-example loss averaged over them (``(1/K) Σ_k ½(f_k − y_k)²``, the same scale as the bandit
        fit's one observed entry ``½(f_a − y_a)²``, so one learning rate serves both); the filter still sees only
        the pulled arms' rewards.  This is what seed 002's reference code does (its warm-up loss,
        ``l2_loss(...).mean()``, reads the full one-hot label vectors); the default ``None`` is bandit feedback.
        Multi-head models only.
        """
        if not (self.is_subspace and self.warmup_steps > 0):
            return state
        from banditkit.posteriors import subspace_from_sgd

        buf: WarmupBuffer = state.warmup
        k = self.num_actions
        if self.per_arm:
            xs = jax.tree_util.tree_map(lambda c: c[jnp.arange(self.warmup_steps), buf.actions], buf.contexts)
            ys, mask, fit_apply = buf.rewards[:, None], None, self.model.apply
        else:
            xs = buf.contexts
            onehot = jax.nn.one_hot(buf.actions, k, dtype=buf.rewards.dtype)
            ys, mask, fit_apply = onehot * buf.rewards[:, None], onehot, self.model.apply
        if targets is not None:
            want = (self.warmup_steps, k)
            if self.per_arm or tuple(jnp.shape(targets)) != want:
                raise ValueError(
                    f"warmup targets must have shape {want} (every arm's reward for each warm-up context) and need "
                    f"a multi-head model; got shape {tuple(jnp.shape(targets))}"
                    + (" with a per-arm model" if self.per_arm else "")
                )
            scale = jnp.asarray(self.reward_scale, buf.rewards.dtype)
            ys = jnp.asarray(targets, buf.rewards.dtype) / scale
            mask = jnp.full(ys.shape, 1.0 / k, ys.dtype)  # the mean over the K observed entries
        opts = dict(n_iters=500, learning_rate=0.05, skip=2, basis=self.subspace_basis)
        opts.update(self.sgd_kwargs)
        basis, offset = subspace_from_sgd(
            fit_apply, buf.params, xs, ys, dim=self.subspace_dim, key=key, mask=mask, **opts
        )
        basis_rows = basis.T  # (d, P): one basis vector per row, the filter's layout
        post = self._subspace_posterior(basis_rows)
        params_star = _unravel_like(buf.params, offset)
        pstate = _init_posterior(
            post, params_star, self._observation(jax.tree_util.tree_map(lambda c: c[0], buf.contexts), jnp.int32(0))
        )

        def step(ps, i):
            ctx = jax.tree_util.tree_map(lambda c: c[i], buf.contexts)
            x = self._observation(ctx, buf.actions[i])
            return post.predict(post.update(ps, x, buf.rewards[i][None])), None

        pstate, _ = jax.lax.scan(step, pstate, jnp.arange(self.warmup_steps))
        return AgentState(pstate, state.step, buf._replace(basis_rows=basis_rows))


def _init_posterior(post: Posterior, params: PyTree, example_x: PyTree):
    """``post.init(params)``, passing ``example_x`` (one posterior input) to backends that keep a buffer of inputs."""
    try:
        sig = inspect.signature(post.init).parameters
    except (TypeError, ValueError):  # pragma: no cover
        sig = {}
    if "example_x" in sig:
        return post.init(params, example_x=example_x)
    return post.init(params)


def _unravel_like(params: PyTree, flat: Array) -> PyTree:
    from jax.flatten_util import ravel_pytree

    return ravel_pytree(params)[1](flat)
