"""``ServingAgent``: a banditkit agent behind a service — decide now, learn when the reward arrives, survive restarts.

::

    srv = bk.offline.ServingAgent.from_log("hilofi-thompson", log)       # or from_spec(...) / load(path)
    d = srv.act(context, available=mask)        # Decision(ticket, action, propensity); masked arms never chosen
    ...                                         # later, in any order, one by one or in batches:
    srv.observe(d.ticket, reward)               # srv.observe_many(tickets, rewards)
    srv.save("agent.bk")                        # atomic: a crash never leaves half a file
    srv = bk.offline.ServingAgent.load("agent.bk")                       # the same next action

* Decisions: round ``t`` (the ``t``-th call of :meth:`act`) uses the key ``fold_in(PRNGKey(seed), t)``; its
  propensity ``π(a_t | x_t)`` (exact for greedy / UCB / ε-greedy, a ``num_draws`` Monte-Carlo estimate for
  Thompson sampling: ``BanditAgent.propensity``) is returned with the action, so the service's own traffic is a
  log in :mod:`banditkit.offline.log`'s format (:meth:`history`).
* Delayed and batched rewards: the context, action and propensity of every decision wait under its ticket until
  its reward comes; ``observe_many`` updates the belief with a batch of them in the order given, exactly as the same
  ``observe`` calls one by one would (``BanditAgent.observe_batch``).  A decision whose reward never comes is
  simply never observed (:meth:`drop`).
* Changing arm sets: ``available`` (``(K,)`` 0/1) masks arms per decision.  A multi-output agent has a fixed number
  of output slots ``K``: give arms that do not exist yet (or any more) ``available = 0``; an arm that enters later
  starts from the prior of its slot.  A per-arm agent scores feature rows, so a new arm with per-arm features gets
  the prediction (and uncertainty) of the shared model for its features — pad the ``(K, F)`` context to the
  largest catalogue and mask the padding.
* Micro-batches (``banditkit serve``): :meth:`decide_batch` makes ``B`` decisions in one compiled call — each
  decision's action is drawn from the policy's action probabilities ``π(· | x)`` (exact for greedy / UCB /
  ε-greedy; for Thompson sampling the share of ``num_draws`` posterior draws, made once per batch, that pick each
  arm, so the served policy is "play the choice of one of those draws, uniformly at random" and the returned
  probabilities are *exactly* its propensities); :meth:`record_many` learns from ``n`` rounds decided earlier in
  one compiled, masked ``lax.scan``.  Both pad to power-of-two sizes, so a server compiles a handful of programs once.
* Persistence: :meth:`save` writes the agent state, the pending decisions and the counters into one
  :mod:`banditkit.checkpoint` file (temporary file + ``os.replace``); :meth:`load` rebuilds the agent from the saved
  spec (``from_spec`` / ``from_log`` agents) or takes the agent to load into.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from banditkit import checkpoint
from banditkit.offline.log import LoggedFeedback, from_arrays
from banditkit.offline.log import load as load_log
from banditkit.policies.propensity import DEFAULT_DRAWS

FORMAT = "banditkit-serving/1"
PROPENSITY_KEY = 0x9A05  # the propensity draws of round t use fold_in(round key, PROPENSITY_KEY)


def bucket(n: int) -> int:
    """The smallest power of two ``>= n`` (``n >= 1``): the padded length of a micro-batch."""
    return 1 << max(0, int(n) - 1).bit_length()


class Decision(NamedTuple):
    """One served decision: its ``ticket`` (pass it to ``observe``), the ``action`` and its ``propensity``."""

    ticket: int
    action: int
    propensity: float


class _Pending(NamedTuple):
    context: np.ndarray
    action: int
    propensity: float
    available: np.ndarray


class ServingAgent:
    """See the module docstring.

    Args:
      agent: a :class:`~banditkit.agents.BanditAgent`.
      state: its state (default: ``agent.init(PRNGKey(seed), example_context)``).
      example_context: one context (fixes the shapes; needed when ``state`` is not given).
      seed: the decisions' base key ``PRNGKey(seed)``.
      num_draws: Monte-Carlo draws of a Thompson-sampling propensity.
      keep_history: keep the observed rounds in memory for :meth:`history`.
    """

    def __init__(self, agent, state=None, *, example_context=None, seed: int = 0, num_draws: int = DEFAULT_DRAWS,
                 keep_history: bool = True, _build: dict | None = None):
        if state is None:
            if example_context is None:
                raise ValueError("pass the agent's state or an example_context to initialise it")
            state = agent.init(jax.random.PRNGKey(seed), np.asarray(example_context, np.float32))
        self.agent = agent
        self.state = state
        self.seed = int(seed)
        self.num_draws = int(num_draws)
        self.keep_history = bool(keep_history)
        self.decisions = 0  # act calls so far: round t's key is fold_in(PRNGKey(seed), t)
        self.next_ticket = 0
        self._pending: dict[int, _Pending] = {}
        self._history: list[tuple] = []
        self._build = _build  # how to rebuild the agent on load (from_spec / from_log)
        self._decide = jax.jit(self._decide_fn)
        self._observe_batch = jax.jit(agent.observe_batch)
        self._decide_many = jax.jit(self._decide_many_fn)
        self._record_many = jax.jit(self._record_many_fn)
        self.saved_meta: dict = {}  # the ``extra`` of the file this object was loaded from (:meth:`save`)

    # ------------------------------------------------------------------------------------------------ building
    @classmethod
    def from_spec(cls, spec: str, *, num_actions: int, example_context, per_arm: bool = False,
                  reward_scale: float | None = None, seed: int = 0, state=None, num_draws: int = DEFAULT_DRAWS,
                  **agent_kwargs) -> ServingAgent:
        """``make_agent(spec, ...)`` for ``num_actions`` arms and contexts like ``example_context``
        (``agent_kwargs``: JSON-serialisable keyword arguments of ``make_agent``, saved for :meth:`load`).
        ``reward_scale``: a fixed scale the rewards are divided by; ``None`` (default): learned from the rewards the
        agent observes, as ``make_agent`` does."""
        from banditkit.agents import make_agent

        env = dict(num_actions=int(num_actions), per_arm_features=bool(per_arm), default_model="mlp", task="bandit")
        if reward_scale is not None:
            agent_kwargs = {**agent_kwargs, "reward_scale": float(reward_scale)}
        from types import SimpleNamespace

        agent = make_agent(spec, SimpleNamespace(**env), **agent_kwargs)
        example = np.asarray(example_context, np.float32)
        build = dict(spec=spec, env=env, agent_kwargs=agent_kwargs, context_shape=list(example.shape))
        return cls(agent, state, example_context=example, seed=seed, num_draws=num_draws, _build=build)

    @classmethod
    def from_log(cls, spec: str, log, *, seed: int = 0, weighting: str | None = None, **agent_kwargs):
        """An agent for the log's arms and contexts, warm-started on it (:func:`~banditkit.offline.warm_start`)."""
        from banditkit.offline.reward_model import log_env
        from banditkit.offline.warmstart import warm_start

        log = load_log(log)
        env = log_env(log)
        srv = cls.from_spec(spec, num_actions=env.num_actions, example_context=log.contexts[0],
                            per_arm=env.per_arm_features, reward_scale=env.reward_scale, seed=seed, **agent_kwargs)
        srv.state = warm_start(srv.agent, log, jax.random.PRNGKey(seed), state=srv.state, weighting=weighting,
                               seed=seed)
        return srv

    # ------------------------------------------------------------------------------------------------ serving
    def _decide_fn(self, state, key, context, mask):
        action, state = self.agent.act(key, state, context, mask=mask)
        k_prop = jax.random.fold_in(key, PROPENSITY_KEY)
        prop = self.agent.propensity(k_prop, state, context, action, mask=mask, num_draws=self.num_draws)
        return action, prop, state

    def _k(self, context) -> int:
        return int(np.shape(context)[0]) if self.agent.per_arm else self.agent.num_actions_of(self.state)

    def act(self, context, available=None) -> Decision:
        """Choose an arm for ``context`` among the ``available`` ones (``(K,)`` 0/1; ``None``: all)."""
        x = np.asarray(context, np.float32)
        k = self._k(x)
        mask = np.ones(k, bool) if available is None else np.asarray(available).astype(bool).reshape(-1)
        if mask.shape != (k,):
            raise ValueError(f"available must have one 0/1 flag per arm ({k}), got shape {mask.shape}")
        if not mask.any():
            raise ValueError("no arm is available")
        key = jax.random.fold_in(jax.random.PRNGKey(self.seed), self.decisions)
        action, prop, self.state = self._decide(self.state, key, x, mask)
        self.decisions += 1
        ticket = self.next_ticket
        self.next_ticket += 1
        d = Decision(ticket, int(action), float(prop))
        self._pending[ticket] = _Pending(x, d.action, d.propensity, mask)
        return d

    @property
    def pending(self) -> list[int]:
        """Tickets of the decisions whose reward has not been observed yet."""
        return sorted(self._pending)

    def _take(self, ticket) -> _Pending:
        try:
            return self._pending.pop(int(ticket))
        except KeyError:
            raise KeyError(f"no pending decision with ticket {ticket!r} (observed already, dropped, or never made; "
                           f"pending: {self.pending[:10]}{'...' if len(self._pending) > 10 else ''})") from None

    def observe(self, ticket: int, reward: float) -> None:
        """The reward of decision ``ticket`` (any time after it was made)."""
        self.observe_many([ticket], [reward])

    def observe_many(self, tickets, rewards) -> None:
        """The rewards of several decisions, applied in the order given (the same as one ``observe`` each)."""
        tickets = [int(t) for t in np.asarray(tickets).reshape(-1)]
        rewards = np.asarray(rewards, np.float64).reshape(-1)
        if len(tickets) != len(rewards):
            raise ValueError(f"{len(tickets)} tickets but {len(rewards)} rewards")
        if not np.all(np.isfinite(rewards)):
            bad = [tickets[i] for i in np.flatnonzero(~np.isfinite(rewards))]
            raise ValueError(f"rewards must be finite; tickets {bad[:10]} have NaN/inf (nothing was observed)")
        if len(set(tickets)) != len(tickets):
            raise ValueError("a ticket appears twice in one batch")
        missing = [t for t in tickets if t not in self._pending]
        if missing:
            self._take(missing[0])  # raises the KeyError
        rows = [self._take(t) for t in tickets]
        if not rows:
            return
        xs = np.stack([r.context for r in rows])
        acts = np.asarray([r.action for r in rows], np.int32)
        self.state = self._observe_batch(self.state, xs, acts, rewards.astype(np.float32))
        if self.keep_history:
            self._history.extend((r.context, r.action, float(y), r.propensity, r.available)
                                 for r, y in zip(rows, rewards, strict=True))

    def record(self, context, action: int, reward: float) -> None:
        """Learn from a round decided elsewhere (e.g. by the old policy during a roll-out); not in the history."""
        self.state = self._observe_batch(self.state, np.asarray(context, np.float32)[None],
                                         np.asarray([action], np.int32), np.asarray([reward], np.float32))

    # ------------------------------------------------------------------------------------------------ micro-batches
    def _decide_many_fn(self, state, base, t0, contexts, masks):
        pool = jax.random.fold_in(jax.random.fold_in(base, PROPENSITY_KEY), t0)  # one pool of draws per batch

        def one(i, x, m):
            key = jax.random.fold_in(base, t0 + i)
            probs = self.agent.action_probabilities(pool, state, x, m, num_draws=self.num_draws)
            logits = jnp.where(probs > 0, jnp.log(jnp.maximum(probs, 1e-30)), -jnp.inf)
            return jax.random.categorical(key, logits).astype(jnp.int32), probs

        return jax.vmap(one)(jnp.arange(masks.shape[0]), contexts, masks)

    def decide_batch(self, contexts, available) -> tuple[np.ndarray, np.ndarray]:
        """``B`` decisions in one compiled call: ``(actions (B,) int, probabilities (B, K) float)``.

        ``contexts``: ``(B, *context_shape)``; ``available``: ``(B, K)`` 0/1, at least one arm per row.  Decision
        ``t`` (this object's ``t``-th) has ``π = agent.action_probabilities(pool, state, x, mask, num_draws)`` and
        the action ``a ~ Categorical(π)`` drawn with ``key_t = fold_in(PRNGKey(seed), t)``, so ``π[a]`` is the exact
        propensity of the served action.  The ``pool`` key, ``fold_in(fold_in(PRNGKey(seed), PROPENSITY_KEY), t₀)``
        with ``t₀`` the batch's first decision, is shared by the batch: its ``num_draws`` posterior draws are made
        once and each decision plays the choice of one of them, uniformly at random (Thompson sampling from a pool of
        draws refreshed every batch; the draws' cost is paid once per batch).  The state is not changed (agents with
        a warm-up fit are refused: ``warmup_rounds > 0``).
        """
        if self.agent.warmup_rounds > 0:
            raise ValueError(f"decide_batch cannot serve {getattr(self.agent, 'name', 'this agent')!r}: its backend "
                             "needs a warm-up fit (subspace_ekf / neural_linear); serve a backend without one")
        xs = np.asarray(contexts, np.float32)
        masks = np.asarray(available).astype(bool)
        b = int(masks.shape[0])
        if b == 0:
            return np.zeros(0, np.int64), np.zeros((0, masks.shape[-1]))
        if xs.shape[0] != b or masks.ndim != 2:
            raise ValueError(f"decide_batch needs (B, ...) contexts and (B, K) masks, got {xs.shape} and {masks.shape}")
        if not masks.any(axis=1).all():
            raise ValueError("a row of available marks no arm available")
        size = bucket(b)
        if size > b:
            xs = np.concatenate([xs, np.zeros((size - b, *xs.shape[1:]), np.float32)])
            masks = np.concatenate([masks, np.ones((size - b, masks.shape[1]), bool)])
        acts, probs = self._decide_many(self.state, self._base_key(), jnp.int32(self.decisions), xs, masks)
        self.decisions += b
        return np.asarray(acts)[:b].astype(np.int64), np.asarray(probs, np.float64)[:b]

    def _base_key(self):
        return jax.random.PRNGKey(self.seed)

    def _record_many_fn(self, state, xs, acts, rewards, valid):
        def body(st, row):
            x, a, r, v = row
            new = self.agent.observe(st, x, a, r)
            return jax.tree_util.tree_map(lambda n, o: jnp.where(v, n, o), new, st), None

        return jax.lax.scan(body, state, (xs, acts, rewards, valid))[0]

    def record_many(self, contexts, actions, rewards) -> None:
        """Learn from ``n`` rounds decided earlier (``contexts (n, *context_shape)``, ``actions (n,)``,
        ``rewards (n,)``), in order — the state of ``n`` :meth:`record` calls, in one compiled scan padded to a
        power-of-two length (padded rows leave the state unchanged).  Not in the history."""
        xs = np.asarray(contexts, np.float32)
        acts = np.asarray(actions, np.int32).reshape(-1)
        rews = np.asarray(rewards, np.float32).reshape(-1)
        n = int(acts.shape[0])
        if xs.shape[0] != n or rews.shape[0] != n:
            raise ValueError(f"record_many needs one context, action and reward per round: got {xs.shape[0]} "
                             f"contexts, {n} actions, {rews.shape[0]} rewards")
        if not np.all(np.isfinite(rews)):
            raise ValueError("rewards must be finite (nothing was recorded)")
        if n == 0:
            return
        size = bucket(n)
        valid = np.arange(size) < n
        if size > n:
            xs = np.concatenate([xs, np.repeat(xs[:1], size - n, axis=0)])
            acts = np.concatenate([acts, np.repeat(acts[:1], size - n)])
            rews = np.concatenate([rews, np.zeros(size - n, np.float32)])
        self.state = self._record_many(self.state, xs, acts, rews, valid)

    def drop(self, ticket: int) -> None:
        """Forget a pending decision whose reward will never come."""
        self._take(ticket)

    def history(self) -> LoggedFeedback | None:
        """The rounds observed by this object (since it was made or loaded) as a log, or ``None`` if none."""
        if not self._history:
            return None
        xs, a, r, p, m = (np.stack(c) for c in zip(*self._history, strict=True))
        return from_arrays(xs, a, r, p, num_actions=m.shape[1], available=m if not m.all() else None, warn=False)

    # ------------------------------------------------------------------------------------------------ persistence
    def _tree(self):
        rows = [self._pending[t] for t in self.pending]
        x_shape = self._context_shape()
        k = int(x_shape[0]) if self.agent.per_arm else self.agent.num_actions_of(self.state)
        pend = dict(
            tickets=np.asarray(self.pending, np.int64),
            contexts=np.stack([r.context for r in rows]) if rows else np.zeros((0, *x_shape), np.float32),
            actions=np.asarray([r.action for r in rows], np.int32),
            propensities=np.asarray([r.propensity for r in rows], np.float64),
            available=np.stack([r.available for r in rows]) if rows else np.zeros((0, k), bool),
        )
        return dict(agent=self.state, pending=pend)

    def _context_shape(self) -> tuple:
        shapes = self.state.shapes.contexts  # the shapes agent.init found (BanditAgent: AgentState.shapes)
        if self._build is not None:
            return tuple(self._build["context_shape"])
        if shapes:
            return tuple(shapes[0])
        raise ValueError("cannot tell the context shape of this agent")

    def save(self, path: str | os.PathLike, *, extra: dict | None = None) -> str:
        """Write everything :meth:`load` needs to ``path`` atomically; returns the path.  ``extra``: JSON-serialisable
        information kept with it (``load`` puts it in ``saved_meta``; ``banditkit serve`` records there how far into
        its log the snapshot reaches)."""
        tree = self._tree()
        meta = dict(format=FORMAT, seed=self.seed, decisions=self.decisions, next_ticket=self.next_ticket,
                    num_draws=self.num_draws, pending=len(self._pending), build=self._build,
                    context_shape=list(self._context_shape()), agent=getattr(self.agent, "name", None),
                    extra=dict(extra or {}))
        folder = os.path.dirname(os.path.abspath(os.fspath(path)))
        os.makedirs(folder, exist_ok=True)
        return checkpoint.save(path, tree, meta=meta)

    @classmethod
    def load(cls, path: str | os.PathLike, agent=None, *, keep_history: bool = True) -> ServingAgent:
        """A :class:`ServingAgent` from :meth:`save`'s file; ``agent``: the agent to load into (default: rebuilt
        from the saved spec)."""
        meta = checkpoint.header(path).get("meta") or {}
        if meta.get("format") != FORMAT:
            raise ValueError(f"{os.fspath(path)!r} is not a serving-agent checkpoint ({FORMAT})")
        build = meta.get("build")
        shape = tuple(meta["context_shape"])
        example = np.zeros(shape, np.float32)
        if agent is None:
            if build is None:
                raise ValueError("this checkpoint's agent was built by hand: pass the same agent, load(path, agent)")
            from types import SimpleNamespace

            from banditkit.agents import make_agent

            kwargs = dict(build["agent_kwargs"])
            if "reward_scale" in build["env"]:  # a file saved before issue 69: its agent had this fixed scale
                kwargs.setdefault("reward_scale", build["env"]["reward_scale"])
            agent = make_agent(build["spec"], SimpleNamespace(**build["env"]), **kwargs)
        srv = cls(agent, None, example_context=example, seed=meta["seed"], num_draws=meta["num_draws"],
                  keep_history=keep_history, _build=build)
        m = int(meta["pending"])
        tmpl = srv._tree()
        tmpl["pending"] = jax.tree_util.tree_map(lambda a: np.zeros((m, *a.shape[1:]), a.dtype), tmpl["pending"])
        tree, _ = checkpoint.load(path, template=tmpl)
        srv.state = tree["agent"]
        srv.saved_meta = dict(meta.get("extra") or {})
        srv.decisions, srv.next_ticket = int(meta["decisions"]), int(meta["next_ticket"])
        p = jax.tree_util.tree_map(np.asarray, tree["pending"])
        for i, t in enumerate(p["tickets"]):
            srv._pending[int(t)] = _Pending(p["contexts"][i], int(p["actions"][i]), float(p["propensities"][i]),
                                            p["available"][i].astype(bool))
        return srv

