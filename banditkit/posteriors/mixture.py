"""Members weighted by their online evidence: a posterior that averages a few filters by how well each predicted.

``M`` member posteriors over the same model (the same backend with different settings, e.g. observation variances
``R_m``) all update on every observation.  Each one's one-step predictive ``p_m(y_t | x_t, D_{t−1}) = N(y_t; ŷ_m,
S_m)`` (``S_m`` the linearised predictive covariance, its ``R_m`` included) is its evidence for that round, and the
mixture weights are the members' posterior probabilities under a uniform prior::

    log w_m ← log w_m + log N(y_t; ŷ_m(x_t), S_m(x_t)) − log Σ_j (…)       (before member m's update at t)

— Bayesian model averaging, with the Kalman filter's predictive likelihood for free.  A Thompson draw first draws a
member ``m ~ Categorical(w)`` and then a draw from that member (a draw from the mixture posterior); ``predictive`` is
the mixture's first two moments; ``mean`` is the most probable member's mean.  Cost per round: the sum of the
members' updates plus one predictive each (``M`` linearisations more).  Shapes: ``y (C,)``; the state is
``MixtureState(members: tuple of M member states, log_weights (M,))``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from banditkit.likelihoods import Gaussian
from banditkit.posteriors.base import Posterior, as_obs

Array = jax.Array


class MixtureState(NamedTuple):
    members: tuple  # M member states
    log_weights: Array  # (M,) normalised log posterior probabilities of the members


def gaussian_log_density(y: Array, mean: Array, cov: Array) -> Array:
    """``log N(y; mean, cov)`` for ``y, mean (C,)`` and ``cov (C, C)`` (Cholesky; a scalar cov for ``C = 1``)."""
    diff = (y - mean).astype(jnp.result_type(cov))
    cov = jnp.atleast_2d(cov)
    chol = jnp.linalg.cholesky(cov)
    z = jax.scipy.linalg.solve_triangular(chol, diff, lower=True)
    c = diff.shape[0]
    return -0.5 * jnp.sum(z**2) - jnp.sum(jnp.log(jnp.diag(chol))) - 0.5 * c * jnp.log(2 * jnp.pi)


def evidence_mixture(members: Sequence[Posterior], name: str = "mixture", hyper: dict | None = None) -> Posterior:
    """The evidence-weighted mixture of ``members`` (module docstring).  Each member's ``init`` takes the same
    arguments (``init(params, example_x=None, **overrides)`` is forwarded to every member)."""
    members = tuple(members)
    if len(members) < 2:
        raise ValueError(f"evidence_mixture needs at least two members, got {len(members)}")
    if any(m.refit is not None for m in members):
        raise ValueError("evidence_mixture: members with a warm-up refit (the subspace EKF) are not supported")
    m_count = len(members)

    def init(params, example_x=None, **overrides) -> MixtureState:
        states = tuple(m.init(params, example_x=example_x, **overrides) for m in members)
        dtype = jnp.result_type(*jax.tree_util.tree_leaves(params))
        return MixtureState(states, jnp.full((m_count,), -jnp.log(m_count), dtype))

    def predict(state: MixtureState) -> MixtureState:
        return MixtureState(tuple(m.predict(s) for m, s in zip(members, state.members, strict=True)),
                            state.log_weights)

    def update(state: MixtureState, x, y) -> MixtureState:
        y = as_obs(y)
        evidence, states = [], []
        for m, s in zip(members, state.members, strict=True):
            yhat, cov = m.predictive(s, x)
            evidence.append(gaussian_log_density(y.astype(yhat.dtype), yhat, cov))
            states.append(m.update(s, x, y))
        logw = state.log_weights + jnp.stack(evidence).astype(state.log_weights.dtype)
        logw = jnp.where(jnp.isfinite(logw), logw, -jnp.inf)
        logw = jax.nn.log_softmax(jnp.where(jnp.any(jnp.isfinite(logw)), logw, state.log_weights))
        return MixtureState(tuple(states), logw)

    def predictive(state: MixtureState, x) -> tuple[Array, Array]:
        w = jnp.exp(state.log_weights)
        moments = [m.predictive(s, x) for m, s in zip(members, state.members, strict=True)]
        means = jnp.stack([mu for mu, _ in moments])  # (M, C)
        covs = jnp.stack([jnp.atleast_2d(c) for _, c in moments])  # (M, C, C)
        mean = jnp.einsum("m,mc->c", w, means)
        second = jnp.einsum("m,mcd->cd", w, covs + means[:, :, None] * means[:, None, :])
        return mean, second - mean[:, None] * mean[None, :]

    def _member(key: Array, state: MixtureState) -> Array:
        return jax.random.categorical(key, state.log_weights)

    def sample(key: Array, state: MixtureState):
        k_m, k_d = jax.random.split(key)
        branches = [lambda st, m=m, i=i: m.sample(k_d, st.members[i]) for i, m in enumerate(members)]
        return jax.lax.switch(_member(k_m, state), branches, state)

    def mean(state: MixtureState):
        branches = [lambda st, m=m, i=i: m.mean(st.members[i]) for i, m in enumerate(members)]
        return jax.lax.switch(jnp.argmax(state.log_weights), branches, state)

    sample_outputs = None
    if all(m.sample_outputs is not None for m in members):

        def sample_outputs(key: Array, state: MixtureState, fn: Callable) -> Array:
            k_m, k_d = jax.random.split(key)
            branches = [lambda st, m=m, i=i: m.sample_outputs(k_d, st.members[i], fn) for i, m in enumerate(members)]
            return jax.lax.switch(_member(k_m, state), branches, state)

    rescale = None
    if all(m.rescale is not None for m in members):

        def rescale(state: MixtureState, c, cov: bool = True) -> MixtureState:
            return state._replace(members=tuple(m.rescale(s, c, cov) for m, s in zip(members, state.members,
                                                                                       strict=True)))

    info: dict[str, Any] = {"members": tuple(m.name for m in members)}
    info.update(hyper or {})
    return Posterior(init, predict, update, predictive, sample, mean, name=name, hyper=info,
                     sample_outputs=sample_outputs, rescale=rescale)


def noise_mixture(factory: Callable, obs_noises: Sequence[float]) -> Callable:
    """A backend factory ``(apply_fn, likelihood, **hyper) -> Posterior``: the evidence mixture of ``factory``'s
    posteriors under ``Gaussian(R)`` for each ``R`` in ``obs_noises`` (the given likelihood only has to be Gaussian:
    its own variance is replaced by the members')."""
    noises = tuple(float(r) for r in obs_noises)
    if len(noises) < 2 or not all(r > 0 for r in noises):
        raise ValueError(f"obs_noises must hold at least two variances > 0, got {obs_noises!r}")
    inner = getattr(factory, "__name__", "posterior")

    def build(apply_fn: Callable, likelihood=None, **hyper) -> Posterior:
        if likelihood is not None and not isinstance(likelihood, Gaussian):
            raise ValueError(f"noise_mixture mixes Gaussian observation variances; got a {type(likelihood).__name__} "
                             "likelihood")
        members = [factory(apply_fn, Gaussian(r), **hyper) for r in noises]
        return evidence_mixture(members, name=f"noise_mixture({members[0].name})",
                                hyper={"obs_noises": noises, **dict(members[0].hyper)})

    build.__name__ = f"noise_mixture({inner})"
    build.__wrapped__ = factory  # accepts_keyword reads the member factory's signature
    return build
