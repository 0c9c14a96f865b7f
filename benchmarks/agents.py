"""The agent sets of the bandit suites and studies, in one place: name → factory ``env -> BanditAgent``.

* :func:`seed002_agents`: seed 002's subspace-EKF bandit agents with the reference code's hyper-parameters (MNIST,
  Showdown, MovieLens), plus the full-feedback warm-up diagnostics (:class:`FullFeedbackWarmup`).
* :func:`seed003_agents`: seed 003's MNIST-bandit agents (HiLoFi-TS, LoLoFi-TS, LRKF-TS, LoFi-TS, replay-SGD
  ε-greedy) and their opt-in diagnostic variants (observation variance, the authors' observation model
  :class:`SigmoidFixedNoise` and initial factors :func:`coordinate_init`, :func:`scaled_draws`, dynamics mode).
* :func:`showdown_agents`, :func:`movielens_agents`, :func:`kuairec_agents`, :func:`arm_blocks_agents`: each suite's
  set, built from the two above.

A factory carries ``spec`` and ``hyper`` (what it passes to ``make_agent``); one marked ``opt_in`` runs only when named
in ``--agents`` (:func:`benchmarks.harness.options.select`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

import banditkit as bk
from banditkit.posteriors.covblocks import LowRankFactor

#: the Gaussian observation variance of the protocol agents (make_agent's default when the committed tables were made;
#: make_agent now reads it from the env, banditkit.agents.scales): kept so that their tables reproduce
PROTOCOL_OBS_NOISE = 0.1


def agent_factory(spec: str, post: dict | None = None, *, per_env: Callable | None = None, note: dict | None = None,
           protocol_noise: bool = True, **kw) -> Callable:
    """Agent factory ``env -> make_agent(spec, env, posterior_kwargs=post, **kw)`` with ``obs_noise =
    PROTOCOL_OBS_NOISE`` unless ``kw`` sets the observation model or ``protocol_noise=False`` (make_agent's own
    default, read from the env: the headline suite's agents).  ``per_env(env) -> dict``: extra
    ``make_agent`` keywords that need the env (e.g. a diagnostic's labels); ``note``: extra entries for ``.hyper``."""
    from banditkit.agents import make_agent

    sets_noise = {"obs_noise", "likelihood", "adaptive_noise"} & set(kw)
    fixed = {"obs_noise": PROTOCOL_OBS_NOISE} if protocol_noise and not sets_noise else {}

    def factory(env):
        return make_agent(spec, env, posterior_kwargs=dict(post or {}), **fixed, **kw,
                          **(per_env(env) if per_env else {}))

    factory.spec = spec
    factory.hyper = dict(post or {}, **(note or {}), **{k: v for k, v in kw.items() if k != "agent_class"})
    return factory


class FullFeedbackWarmup(bk.agents.BanditAgent):
    """Diagnostic, not a bandit protocol: seed 002's reference warm-up fit, which regresses *every* arm's reward on
    the τ warm-up contexts (its loss reads the full one-hot label vectors, ``seed-002-subspace-bandits.md`` §7)
    instead of only the pulled arm's.  The filter still sees only the pulled arms' rewards.

    ``targets_env`` / ``targets_seeds`` / ``targets_steps``: the env and the run's seeds and length; the agent reads
    each seed's first τ contexts and reward rows from ``env.functional(seed, steps)`` and, inside the (vmapped)
    warm-up, picks the seed whose contexts equal the buffer's.  No exact match gives NaN targets, so the runner
    flags the seed as non-finite instead of fitting the wrong labels.
    """

    def __init__(self, *args, targets_env=None, targets_seeds: Sequence[int] = (), targets_steps: int = 0,
                 **kwargs):
        super().__init__(*args, **kwargs)
        if targets_env is None or not targets_seeds or self.warmup_steps < 1:
            raise ValueError("FullFeedbackWarmup needs targets_env, targets_seeds and warmup_steps >= 1")
        u = getattr(targets_env, "unwrapped", targets_env)
        tau, ctx, tgt = self.warmup_steps, [], []
        for seed in targets_seeds:
            fb = u.functional(int(seed), int(targets_steps))
            ctx.append(np.asarray(fb.contexts)[np.asarray(fb.index)[:tau]])
            tgt.append(np.asarray(fb.rewards)[:tau])
        self._warm_contexts = np.stack(ctx).astype(np.float32)  # (S, τ, *context)
        self._warm_targets = np.stack(tgt).astype(np.float32)  # (S, τ, K)

    def warmup(self, key, state, targets=None):
        import jax.numpy as jnp

        if targets is None and self.warmup_rounds > 0:
            buf = jnp.asarray(state.warmup.contexts, jnp.float32)
            ctx = jnp.asarray(self._warm_contexts)
            dist = jnp.sum(jnp.abs(ctx - buf[None]).reshape(ctx.shape[0], -1), axis=1)
            i = jnp.argmin(dist)
            targets = jnp.where(dist[i] == 0, jnp.asarray(self._warm_targets)[i], jnp.nan)
        return super().warmup(key, state, targets)


def full_feedback_warmup(spec: str, post: dict | None, seeds: Sequence[int], steps: int, **kw) -> Callable:
    """Factory for a :class:`FullFeedbackWarmup` agent (``spec``, ``post``, ``kw`` as for the other agents)."""
    return agent_factory(spec, post, agent_class=FullFeedbackWarmup, note=dict(warmup="full feedback (diagnostic)"),
                  per_env=lambda env: dict(targets_env=env, targets_seeds=list(seeds), targets_steps=steps), **kw)


RND_NOTE = ("Random-subspace EKF (`ekf_sub_rnd`, `_diag`): the reference's EKF-Sub-RND, a random orthonormal basis "
            "through the bandit-feedback warm-up fit θ*; `ekf_sub_rnd_nowarm` / `ekf_sub_rnd_diag_nowarm` (opt-in): a "
            "random basis through the initial weights with no warm-up (before 2026-11-25 these were the `ekf_sub_rnd` "
            "rows, and older commands in this file name them so).")


def seed002_agents(*, num_actions: int, warmup_per_arm: int, dim: int = 470, sgd_lr: float = 0.8,
                   nl_buffers: tuple[int, int] = (50, 4800), nl_lr: float = 0.01, model=None,
                   full_feedback: tuple[Sequence[int], int] | None = None) -> dict[str, Callable]:
    """Seed 002's agents with the reference code's hyper-parameters (``seed-002-subspace-bandits.md`` §7).

    * ``ekf_sub_svd`` / ``ekf_sub_svd_diag``: τ = ``warmup_per_arm · K`` round-robin pulls, 1000 SGD steps
      (``sgd(sgd_lr, momentum 0.9)``, every 2nd iterate kept), ``d = dim``, ``Σ_z = 1e-4 I``, full / diagonal.
    * ``ekf_sub_rnd`` / ``ekf_sub_rnd_diag``: the same warm-up fit θ*, but a random orthonormal ``d``-dim basis
      through it (``fit_basis="random"``, the reference code's EKF-Sub-RND), same prior.
    * ``neural_linear_lim`` / ``_unlim``: NIG last layer (``a0 = b0 = 6``, ``Σ0 = 4I``), body retrained every 100
      steps with 100 full-buffer steps of ``sgd(nl_lr, 0.9)``, FIFO buffer ``nl_buffers``; ``_unlim_mb``: the
      unlimited buffer with minibatches of ``nl_buffers[0]`` (a CPU-affordable variant, not the reference's).
    * ``linear``: NIG Bayesian linear regression per arm (``a0 = b0 = 6``, ``Σ0 = 4I``) on the raw context.
    * ``diag_ekf``: diagonal EKF over all weights (``init_cov 1e-3``, seed 002's tabular EKF-Orig prior).

    Opt-in (run only when named): ``ekf_sub_svd_clip0.1`` / ``ekf_sub_svd_diag_clip0.1``, the same bandit protocol
    with the warm-up SGD's gradient clipped to global norm 0.1 (``subspace_from_sgd(clip_norm=0.1)``);
    ``ekf_sub_rnd_nowarm`` / ``ekf_sub_rnd_diag_nowarm``, a random subspace through the *initial* weights with no
    warm-up at all (banditkit's ``subspace_ekf`` default without warm-up; what ``ekf_sub_rnd`` was before
    ``subspace_basis="random"`` existed).

    All use Thompson sampling.  ``model`` overrides the env's default network (e.g. MLP1 vs LeNet5 on MNIST).

    ``full_feedback = (seeds, steps)`` adds two diagnostics that are NOT bandit protocols (they read labels a bandit
    never reveals): ``ekf_sub_svd_fullwarm`` fits the warm-up SGD to every arm's reward, as the reference code
    does (:class:`FullFeedbackWarmup`), and ``ekf_sub_svd_fullwarm_r1e-3`` also takes the reference's observation
    noise 1e-3 — together they are the reference's setup.
    """
    import optax

    tau = int(warmup_per_arm) * int(num_actions)
    # the subspace's fit settings are subspace_ekf's own (posterior kwargs); the warm-up length is the agent's
    fit = dict(dim=dim, sgd=dict(n_iters=1000, learning_rate=sgd_lr, skip=2))
    sub = dict(warmup_steps=tau)
    m = {} if model is None else dict(model=model)
    # arms=K: the head regression as one block per arm (the same NIG posterior as one dense block) — make_agent's
    # default on the envs' own models, set here for the K-output Dense heads passed as ``model`` (LeNet5, MLP1) too
    nl = dict(train_every=100, n_train_steps=100, optimizer=optax.sgd(nl_lr, momentum=0.9), a0=6.0, b0=6.0,
              init_cov=4.0, arms=int(num_actions))
    # seed 002's subspace prior Σ_z = 1e-4 I, full or diagonal (``agent_factory`` copies it per agent)
    prior = dict(init_cov=1e-4, **fit)
    prior_diag = dict(prior, covariance="diagonal")
    rnd, rnd_diag = dict(prior, fit_basis="random"), dict(prior_diag, fit_basis="random")
    nowarm, nowarm_diag = dict(init_cov=1e-4, dim=dim), dict(init_cov=1e-4, dim=dim, covariance="diagonal")
    diag = {}
    if full_feedback is not None:
        fseeds, fsteps = full_feedback
        diag = {
            "ekf_sub_svd_fullwarm": full_feedback_warmup("subspace_ekf-thompson", prior, fseeds, fsteps, **sub, **m),
            "ekf_sub_svd_fullwarm_r1e-3": full_feedback_warmup("subspace_ekf-thompson", prior, fseeds, fsteps,
                                                               obs_noise=1e-3, **sub, **m),
        }
    agents = {
        "ekf_sub_svd": agent_factory("subspace_ekf-thompson", prior, **sub, **m),
        # The reference code's observation noise: R = 0 plus 1e-3 jitter on S (seed-002 digest §7), instead of
        # banditkit's agent default Gaussian(0.1) that every other agent here uses.
        "ekf_sub_svd_r1e-3": agent_factory("subspace_ekf-thompson", prior, obs_noise=1e-3, **sub, **m),
        "ekf_sub_svd_diag": agent_factory("subspace_ekf-thompson", prior_diag, **sub, **m),
        "ekf_sub_rnd": agent_factory("subspace_ekf-thompson", rnd, **sub, **m),
        "ekf_sub_rnd_diag": agent_factory("subspace_ekf-thompson", rnd_diag, **sub, **m),
        "ekf_sub_rnd_nowarm": agent_factory("subspace_ekf-thompson", nowarm, warmup_steps=0, **m),
        "ekf_sub_rnd_diag_nowarm": agent_factory("subspace_ekf-thompson", nowarm_diag, warmup_steps=0, **m),
        "neural_linear_lim": agent_factory("neural_linear-thompson", dict(nl, buffer_size=nl_buffers[0]), **m),
        "neural_linear_unlim": agent_factory("neural_linear-thompson", dict(nl, buffer_size=nl_buffers[1]), **m),
        # Not the reference's agent: the unlimited buffer, but each of the 100 retraining steps takes a minibatch of
        # nl_buffers[0] instead of the whole (masked, always full-size under jit) buffer, so it costs what
        # neural_linear_lim costs (the full-buffer version is ~100x dearer: ~7,000 s per seed for LeNet5 on CPU).
        "neural_linear_unlim_mb": agent_factory("neural_linear-thompson", dict(nl, buffer_size=nl_buffers[1],
                                                                        batch_size=nl_buffers[0]), **m),
        # make_agent's linear agent: one (μ_k, Σ_k) per arm, one σ² shared by all arms — the joint NIG posterior
        # computed K blocks at a time (rows before 2026-11-26 ran the joint (P, P) computation, same posterior);
        # linear_per_arm: the paper's per-arm Lin-TS (seed 002 A.1, Riquelme et al.), each arm its own σ_k² too
        "linear": agent_factory("linear-thompson", dict(init_cov=4.0, noise="nig", a0=6.0, b0=6.0)),
        "linear_per_arm": agent_factory("linear-thompson", dict(init_cov=4.0, noise="nig", a0=6.0, b0=6.0,
                                                         shared_noise=False)),
        "diag_ekf": agent_factory("diag_ekf-thompson", dict(init_cov=1e-3), **m),
    }
    # A bandit-protocol variant (reads no labels), opt-in so the default run stays the reference's: the warm-up SGD's
    # gradient clipped to global norm 0.1, which keeps every MNIST warm-up fit finite at lr 0.8
    # (studies/subspace_warmup/results/mnist_seed002_warmup_fit_clip0.1.md; unclipped, 4 of 16 diverge).
    def clipped(post):
        return dict(post, sgd=dict(post["sgd"], clip_norm=0.1))

    agents["ekf_sub_svd_clip0.1"] = agent_factory("subspace_ekf-thompson", clipped(prior), **sub, **m)
    agents["ekf_sub_svd_diag_clip0.1"] = agent_factory("subspace_ekf-thompson", clipped(prior_diag), **sub, **m)
    for name in ("ekf_sub_svd_r1e-3", "ekf_sub_svd_clip0.1", "ekf_sub_svd_diag_clip0.1", "ekf_sub_rnd_nowarm",
                 "ekf_sub_rnd_diag_nowarm"):
        agents[name].opt_in = True
    for f in diag.values():
        f.opt_in = True
    for name, f in subspace_warmup_variants(num_actions, model=model).items():  # opt-in: studies/subspace_bandit_warmup
        f.opt_in = True
        agents[name] = f
    return agents | diag


#: the variants of studies/subspace_bandit_warmup, each one change from make_agent("subspace_ekf-thompson")
SUBSPACE_WARMUP_VARIANTS = ("sub_default", "sub_tau20", "sub_tau50", "sub_adam", "sub_clip1", "sub_rnd")


def subspace_warmup_variants(num_actions: int, *, model=None) -> dict[str, Callable]:
    """``make_agent("subspace_ekf-thompson")`` as a user gets it and its bandit-feedback warm-up variants (issue 55,
    ``benchmarks/studies/subspace_bandit_warmup``).  Every variant reads only the pulled arms' rewards and keeps
    make_agent's observation variance (read from the env), ``d = 20``, ``Σ_z = I`` and Thompson sampling; each changes
    one thing of the default (τ = 10·K round-robin rounds, 500 full-batch steps of ``sgd(0.05, momentum 0.9)``,
    every 2nd iterate kept, ``A`` = the SVD of the iterates, ``θ*`` = the last iterate):

    * ``sub_default``: nothing set but the warm-up length, pinned at τ = 10·K (make_agent's default until this
      study, 2026-12-02; it is 20·K since, ``sub_tau20``);
    * ``sub_tau20`` / ``sub_tau50``: τ = 20·K / 50·K warm-up rounds;
    * ``sub_adam``: ``adam(1e-3)`` on the gradient clipped to global norm 1 (``sgd=dict(optimizer=..., clip_norm=1)``);
    * ``sub_clip1``: the default SGD on the gradient clipped to global norm 1;
    * ``sub_rnd``: a random orthonormal basis through the same ``θ*`` (``fit_basis="random"``).

    ``model`` overrides the env's default network (the mnist suite passes ``LeNet5(out=10)``, the env's own default).
    """
    import optax

    k = int(num_actions)
    m = {} if model is None else dict(model=model)

    def make(post=None, per_arm: int = 10, **kw):  # the warm-up length pinned: make_agent's default moved to 20·K
        return agent_factory("subspace_ekf-thompson", post, protocol_noise=False, warmup_steps=per_arm * k, **kw, **m)

    return {
        "sub_default": make(),
        "sub_tau20": make(per_arm=20),
        "sub_tau50": make(per_arm=50),
        "sub_adam": make(dict(sgd=dict(optimizer=optax.adam(1e-3), clip_norm=1.0))),
        "sub_clip1": make(dict(sgd=dict(clip_norm=1.0))),
        "sub_rnd": make(dict(fit_basis="random")),
    }


class SigmoidFixedNoise(NamedTuple):
    """A diagnostic observation model, not one of banditkit's likelihoods: the seed-003 MNIST-bandit reward model
    as the authors' code runs it (``anchors-reference-code.md`` §1.5) — mean ``σ(f)``, and their softmax covariance
    applied to one output, which degenerates to a fixed variance ``R = jitter · I`` (not ``σ(f)(1 − σ(f))``)."""

    jitter: float = 1e-4
    name: str = "sigmoid_fixed_noise"

    def mean(self, f):
        import jax

        return jax.nn.sigmoid(f)

    def cov(self, f):
        import jax.numpy as jnp

        return jnp.asarray(self.jitter, f.dtype) * jnp.eye(f.shape[-1], dtype=f.dtype)


def coordinate_init(factory: Callable, loading: float | None = None) -> Callable:
    """A diagnostic: the LRKF / HiLoFi / LoLoFi agent of ``factory`` with the authors' initial factors
    ``C_0 = c·[I_d | 0]`` (their ``low_rank_diag=True`` / ``diag_last=True``; ``seed-003-hilofi.md`` §14.2.3) — prior
    variance ``c²`` on the first ``d`` ravelled parameters of each low-rank block only (on LeNet5's hidden block the
    first convolution's 6 biases and 44 of its kernel weights; on LoLoFi's head the 10 biases and 90 weights) instead
    of banditkit's random orthonormal rows.  ``loading`` is their ``c`` (default: ``√`` of the factory's prior
    variance)."""
    import jax.numpy as jnp

    def rows(c, g):  # C = (v I) [I | 0]
        d, p = c.basis.shape
        dt = c.basis.dtype
        v = jnp.sqrt(g[0]) if loading is None else jnp.asarray(loading, dt)
        return LowRankFactor(v * jnp.eye(d, dtype=dt), jnp.eye(d, p, dtype=dt)), jnp.full((d,), v**2, dt)

    def make(env):
        agent = factory(env)
        post = agent.posterior

        def init(params, *args, **kwargs):  # the backend's own arguments (e.g. ``example_x``) passed through
            s = post.init(params, *args, **kwargs)
            if hasattr(s, "cov_hidden"):  # HiLoFi / LoLoFi: the hidden factor, and a low-rank head's
                ch, gh = rows(s.cov_hidden, s.gram_hidden)
                s = s._replace(cov_hidden=ch, gram_hidden=gh)
                if s.gram_last.size:
                    cl, gl = rows(s.cov_last, s.gram_last)
                    s = s._replace(cov_last=cl, gram_last=gl)
                return s
            c, g = rows(s.cov, s.gram)
            return s._replace(cov=c, gram=g)

        agent.posterior = post._replace(init=init)
        return agent

    make.spec = factory.spec
    make.hyper = dict(factory.hyper, initial_factor="coordinates", **({} if loading is None else dict(loading=loading)))
    return make


def scaled_draws(factory: Callable, scale: float) -> Callable:
    """A diagnostic: the LRKF agent of ``factory`` whose Thompson draws use ``scale`` times the pending isotropic
    variance, ``θ̃ = μ + Cᵀε + √(scale·q̄) z``, while its filter (mean step and factor) keeps ``q̄``: it separates what
    the dynamics noise does to exploration (the draws' spread, about ``√q̄ ‖h‖`` for a logit with gradient ``h``) from
    what it does to learning (the isotropic gradient step ``q̄ Hᵀ S⁻¹ε``).  The posterior's ``hyper`` carries
    ``draw_q_scale`` for probes."""

    def make(env):
        agent = factory(env)
        post = agent.posterior

        def sample(key, state):
            return post.sample(key, state._replace(q=state.q * scale))

        agent.posterior = post._replace(sample=sample, hyper=dict(post.hyper, draw_q_scale=scale))
        return agent

    make.spec = factory.spec
    make.hyper = dict(factory.hyper, draw_q_scale=scale)
    return make


def seed003_agents(*, rank: int = 50, rank_last: int = 100, q: float = 1e-6, cov: float = 0.1,
                   lrkf_cov: float = 1.0, lofi_cov: float = float(np.exp(-8.0)), lofi_rank: int | None = None,
                   eps_greedy: bool = True, model=None) -> dict[str, Callable]:
    """Seed 003's MNIST-bandit agents (``seed-003-hilofi.md`` §11.2(b)), all Thompson sampling except the
    replay-SGD point estimate with ε-greedy (ε = 0.05, AdamW lr 1e-4, 5 inner steps, buffer 1)."""
    import optax

    m = {} if model is None else dict(model=model)
    # draw="joint": the Thompson draw these agents' committed tables were made with (a full parameter draw; HiLoFi's
    # default "auto" draws a dense head's outputs given the hidden draw instead — the same law, another random stream)
    hilofi_post = dict(rank=rank, init_cov_hidden=cov, init_cov_last=cov, dynamics_cov=q, draw="joint")
    lolofi_post = dict(rank=rank, rank_last=rank_last, init_cov_hidden=cov, init_cov_last=cov, dynamics_cov=q)
    lrkf_post = dict(rank=rank, init_cov=lrkf_cov, dynamics_cov=q)
    lofi_post = dict(rank=lofi_rank or rank, init_cov=lofi_cov, dynamics_cov=0.0)
    out = {
        "hilofi_ts": agent_factory("hilofi-thompson", hilofi_post, **m),
        # Not in the paper: HiLoFi-TS with q_ℓ = 0 (q_h as above).  With q_ℓ > 0 every ``predict`` refactors the
        # full (D_ℓ, D_ℓ) last-layer square root (D_ℓ = 850 on LeNet5: a QR of a 1700×850 stack, ~0.6 s per seed
        # and step on this machine, before commit 2f64caa; a Cholesky of UᵀU + qI since); q_ℓ = 0 skips it.
        "hilofi_ts_qlast0": agent_factory("hilofi-thompson", dict(rank=rank, init_cov_hidden=cov, init_cov_last=cov,
                                                           dynamics_cov_hidden=q, dynamics_cov_last=0.0), **m),
        "lolofi_ts": agent_factory("lolofi-thompson", lolofi_post, **m),
        "lrkf_ts": agent_factory("lrkf-thompson", lrkf_post, **m),
        "lofi_ts": agent_factory("lofi-thompson", lofi_post, **m),
    }
    # Opt-in diagnostics (studies/lowrank_mnist): why LRKF-TS / LoLoFi-TS fall short of the authors'
    # notebook; the ``_r1e-2`` / ``_r1e-4`` ones of every filter also across environments (studies/obsnoise).
    # Each changes one thing of the agent above: the observation model (Gaussian variance 0.01 or 1e-4; the
    # moment-matched Bernoulli; the authors' code as it runs, sigmoid mean with a fixed variance 1e-4), the Thompson
    # draw (each arm's reward from its linearised predictive instead of one parameter draw), or the initial factor
    # (the authors' coordinate rows); ``_auth`` is the authors' configuration: their factors and observation model.
    bases = {"hilofi_ts": ("hilofi", hilofi_post), "lrkf_ts": ("lrkf", lrkf_post), "lolofi_ts": ("lolofi", lolofi_post),
             "lofi_ts": ("lofi", lofi_post)}
    auth_lik = dict(likelihood=SigmoidFixedNoise(1e-4), **m)
    for base, (spec, post) in bases.items():
        ts = f"{spec}-thompson"
        variants = {"r1e-2": agent_factory(ts, post, obs_noise=1e-2, **m),
                    "r1e-4": agent_factory(ts, post, obs_noise=1e-4, **m),
                    # the variance learned online from the default start 0.1 (posteriors.adaptive_noise, its
                    # defaults; studies/obsnoise)
                    "vb": agent_factory(ts, post, adaptive_noise=True, **m)}
        if spec == "hilofi":  # their hidden factor (loading 0.1) and full last layer 0.1·I (variance 0.01)
            variants["auth"] = coordinate_init(agent_factory(ts, dict(post, init_cov_last=cov**2), **auth_lik),
                                               loading=cov)
        if spec == "lolofi":  # their factors (loading 0.1, variance 0.01)
            variants["auth"] = coordinate_init(agent_factory(ts, post, **auth_lik), loading=cov)
            # ... with 100x the dynamics noise (1e-4): does it end LoLoFi's arm starvation as it does LRKF's?
            # (results/diag_starvation_q.md)
            variants["auth_q1e-4"] = coordinate_init(agent_factory(ts, dict(post, dynamics_cov=100 * q), **auth_lik),
                                                     loading=cov)
        if spec == "lrkf":
            auth = coordinate_init(agent_factory(ts, post, **auth_lik))
            auth_q1e4 = coordinate_init(agent_factory(ts, dict(post, dynamics_cov=100 * q), **auth_lik))
            variants |= {
                "bern": agent_factory(ts, post, likelihood=bk.likelihoods.Bernoulli(1e-4), **m),
                "sigm": agent_factory(ts, post, **auth_lik),
                "pred": agent_factory(f"{spec}-thompson_predictive", post, **m),
                "coord": coordinate_init(agent_factory(ts, post, **m)),
                "auth": auth,
                # without dynamics noise (q = 0: the factor's row space never leaves the first d coordinates)
                "auth_q0": coordinate_init(agent_factory(ts, dict(post, dynamics_cov=0.0), **auth_lik)),
                # the authors' configuration with a 100x larger fixed variance (1e-2): a wider posterior, to test
                # whether its narrow Thompson draws are what starves arms (results/diag_starvation.md)
                "auth_v1e-2": coordinate_init(agent_factory(ts, post, likelihood=SigmoidFixedNoise(1e-2), **m)),
                # ... and with a rank-10 factor instead of 50: whether the factor's rank sets how far draws move a logit
                "auth_d10": coordinate_init(agent_factory(ts, dict(post, rank=10), **auth_lik)),
                # ... and with 10x / 100x the dynamics noise q (1e-5, 1e-4 for 1e-6): does q set the draws' spread?
                # (it does, as the isotropic √q̄‖h‖, and 1e-4 ends the starvation: results/diag_starvation_q.md)
                "auth_q1e-5": coordinate_init(agent_factory(ts, dict(post, dynamics_cov=10 * q), **auth_lik)),
                "auth_q1e-4": auth_q1e4,
                # ... and each half of it: draws with 100x q̄ while the filter keeps q (exploration only), and the
                # filter with 100x q while the draws use q (learning only)
                "auth_draw100": scaled_draws(auth, 100.0),
                "auth_q1e-4_draw1": scaled_draws(auth_q1e4, 0.01),
                "coord_r1e-4": coordinate_init(agent_factory(ts, post, obs_noise=1e-4, **m)),
                # random rows with a smaller prior variance: at the start ‖CHᵀ‖² ≈ init_cov·d/P·‖H‖², below the
                # q step's q‖H‖² for init_cov = 1e-3 (d/P ≈ 8e-4 on LeNet5), as with the coordinate factor (measured:
                # that alone does not give the coordinate factor's gain)
                "r1e-4_cov1e-2": agent_factory(ts, dict(post, init_cov=1e-2), obs_noise=1e-4, **m),
                "r1e-4_cov1e-3": agent_factory(ts, dict(post, init_cov=1e-3), obs_noise=1e-4, **m),
            }
        if spec in ("hilofi", "lolofi", "lrkf"):
            # the authors' configuration with their code's dynamics too (``dynamics_mode="gain"``: q enters each
            # round's predictive, draw and gain but is not carried in the factor; ``seed-003-hilofi.md`` §3.3)
            gain_post = dict(post, dynamics_mode="gain", **(dict(init_cov_last=cov**2) if spec == "hilofi" else {}))
            variants["auth_gain"] = coordinate_init(agent_factory(ts, gain_post, **auth_lik),
                                                    loading=None if spec == "lrkf" else cov)
        for tag, f in variants.items():
            f.opt_in = True
            out[f"{base}_{tag}"] = f
    if eps_greedy:
        out["replay_sgd_eps"] = agent_factory("replay_sgd-eps_greedy", dict(buffer_size=1, n_inner=5,
                                                                     optimizer=optax.adamw(1e-4)),
                                       policy_kwargs=dict(epsilon=0.05), **m)
    # Opt-in: the agents exactly as a user gets them, ``make_agent(spec, env)`` with nothing set (the env's own
    # model, make_agent's ranks and priors, the observation variance read from the env: agents.scales) — issue 55's
    # MNIST targets are about these, not about the protocol's agents above
    if model is None:
        for name, spec in (("hilofi_ts_default", "hilofi-thompson"), ("lofi_ts_default", "lofi-thompson"),
                           ("lrkf_ts_default", "lrkf-thompson"), ("linear_ts_default", "linear-thompson")):
            out[name] = agent_factory(spec, None, protocol_noise=False)
            out[name].opt_in = True
    return out


# ---------------------------------------------------------------------------------------------- suites' sets
def showdown_agents(env) -> dict[str, Callable]:
    """The Showdown suite's agents: seed 002's with the showdown settings (warm-up 20 pulls per arm, ``sgd(0.05,
    0.9)``, neural-linear buffers 20 / 5000), plus seed 003's HiLoFi-TS and LoFi-TS (LRKF-TS, LoLoFi-TS and the
    variants opt-in)."""
    k = int(env.unwrapped.num_actions)
    agents = seed002_agents(num_actions=k, warmup_per_arm=20, sgd_lr=0.05, nl_buffers=(20, 5000), nl_lr=0.05)
    agents.update(seed003_agents(eps_greedy=False))
    for name in ("lolofi_ts", "lrkf_ts"):  # not in the protocol's table: run only when named
        agents[name].opt_in = True
    return agents


def movielens_agents(env, full_feedback: tuple | None = None) -> dict[str, Callable]:
    """Seed 002's agents with the reference's MovieLens settings, plus HiLoFi-TS (both last-layer forms) and LoFi-TS;
    ``full_feedback = (seeds, steps)`` adds the label-reading warm-up diagnostics (:func:`seed002_agents`)."""
    agents = seed002_agents(num_actions=int(env.unwrapped.num_actions), warmup_per_arm=2, sgd_lr=0.8,
                            nl_buffers=(50, 4800), nl_lr=0.01, full_feedback=full_feedback)
    extra = seed003_agents(eps_greedy=False)
    agents.update({k: extra[k] for k in ("hilofi_ts", "hilofi_ts_qlast0", "lofi_ts")})
    for k, f in extra.items():  # opt-in (run only when named): LRKF-TS, LoLoFi-TS and seed003_agents' variants
        if k not in agents and k.split("_")[0] in ("hilofi", "lrkf", "lolofi", "lofi"):
            f.opt_in = True
            agents[k] = f
    return agents


def kuairec_agents() -> dict[str, Callable]:
    """The KuaiRec suite's agents, all Thompson sampling, with the authors' notebook hyper-parameters."""
    a = agent_factory
    return {
        "hilofi_ts": a("hilofi-thompson", dict(rank=20, init_cov_hidden=1.0, init_cov_last=1.0), obs_noise=1e-4),
        # q = 0 pinned: the committed rows ran with it (make_agent's LoLoFi default before 2026-11-28; now 1e-4)
        "lolofi_ts": a("lolofi-thompson", dict(rank=20, rank_last=20, init_cov_hidden=1.0, init_cov_last=1.0,
                                               dynamics_cov=0.0), obs_noise=1e-4),
        "lrkf_ts": a("lrkf-thompson", dict(rank=20, init_cov=1.0, dynamics_cov=1e-6), obs_noise=1e-2),
        "lofi_ts": a("lofi-thompson", dict(rank=50, init_cov=0.1, dynamics_cov=1e-6), obs_noise=0.1),
    }


def arm_blocks_agents(k: int) -> dict[str, Callable]:
    """The arm-blocks suite's agents on ``k`` arms: seed 002's and seed 003's, and ``kll_ts`` (``kalman_last_layer``
    with make_agent's defaults)."""
    kll = {"kll_ts": agent_factory("kalman_last_layer-thompson", dict(init_cov=1.0))}
    return {**seed002_agents(num_actions=k, warmup_per_arm=20), **seed003_agents(), **kll}
