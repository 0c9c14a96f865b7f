"""Prequential (predict-then-update) evaluation of any posterior backend on a stream, compiled end to end.

Per seed ``s`` (``init`` key ``PRNGKey(s)``; the stream is the same for every seed, or built per seed when a
callable ``seed -> Stream`` is given), one ``lax.scan`` over steps and ``vmap`` over seeds::

    state_0 = post.init(params_s, example_x=x_0)          # then, for a backend with refit, its data-free reset
    step t:  state = post.predict(state)                 # time update (forgetting / drift)
             m_t, V_t = post.predictive(state, x_t)      # one-step-ahead moments, BEFORE y_t is seen
             metrics(m_t, V_t, y_t)
             state = post.update(state, x_t, y_t)

Metrics per step (``y_t (C,)``):

* classification (``stream.task == "classification"``): class probabilities ``p_t`` are the predictive mean
  (``output="probs"``: ``Categorical`` / ``Bernoulli`` likelihoods, whose mean is ``softmax(f)`` / ``σ(f)`` at the
  current mean parameters — the plug-in predictive of seed 000's "NLL") or ``softmax`` of it (``output="logits"``,
  e.g. a ``Gaussian`` surrogate on one-hot labels).  ``C > 1``: ``accuracy = [argmax p = argmax y]``,
  ``nlpd = −log p_{y}`` (Categorical); ``C = 1``: ``accuracy = [(p > ½) = y]``, ``nlpd = −log Bernoulli(y | p)``.
  ``sq_error = ‖y − p‖² / C`` (Brier score per output).
* regression: ``nlpd = −log N(y | m_t, V_t)`` (full ``C × C`` predictive covariance, epistemic + aleatoric),
  ``sq_error = ‖y − m_t‖² / C``; ``accuracy`` is NaN.

Probabilities are clipped to ``[1e-12, 1]`` inside the log.  Rolling averages over the last ``window`` steps
(per seed; fewer at the start): ``accuracy_roll``, ``nlpd_roll`` and ``rmse_roll = sqrt(rolling mean of
sq_error)``.  Optional ``extras={name: fn(state) -> scalar}`` are recorded after each update (e.g. the learned γ).

Result: a tidy DataFrame, one row per (agent, seed, step): ``agent, seed, step, task_id, accuracy, nlpd, sq_error,
accuracy_roll, nlpd_roll, rmse_roll`` (+ extras); ``df.attrs["timing"][agent] = {compile_s, run_s, per_step_s,
steps, seeds, mode="prequential"}``.  ``bk.run(stream, learner, steps, seeds)`` delegates here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from banditkit._xla.conv import canonical_convs
from banditkit.agents.bandit import reset_posterior
from banditkit.datasets.streams import Stream
from banditkit.posteriors.base import Posterior

Array = jax.Array
PyTree = Any
METRICS = ["accuracy", "nlpd", "sq_error"]
COLUMNS = ["agent", "seed", "step", "task_id", *METRICS, "accuracy_roll", "nlpd_roll", "rmse_roll"]


def seed_list(seeds) -> list[int]:
    """The seeds of a run: a count ``n`` gives ``0..n-1``; a sequence of integers is taken as it is."""
    if isinstance(seeds, (int, np.integer)):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1 (a count) or a list of seeds, got {seeds}")
        return list(range(int(seeds)))
    out = [int(s) for s in seeds]
    if not out:
        raise ValueError("seeds is empty: pass a count (e.g. 5) or a list of integer seeds")
    return out


class StreamLearner(NamedTuple):
    """A posterior and how to get its initial parameters for a seed.

    ``init_params``: a parameter pytree (the same for every seed) or ``key -> params`` (e.g.
    ``lambda k: model.init(k, x0)``).  ``output``: ``"probs"`` or ``"logits"`` for classification (see module
    docstring).  ``extras``: ``{column: fn(state) -> scalar}`` recorded after each update.
    """

    posterior: Posterior
    init_params: PyTree | Callable[[Array], PyTree]
    output: str = "probs"
    extras: dict = {}


def step_metrics(task: str, mean: Array, cov: Array, y: Array, output: str = "probs") -> tuple[Array, Array, Array]:
    """``(accuracy, nlpd, sq_error)`` of one prediction ``(mean (C,), cov (C, C))`` for the target ``y (C,)``."""
    c = y.shape[-1]
    if task == "regression":
        e = y - mean
        chol = jnp.linalg.cholesky(0.5 * (cov + cov.T))
        z = jax.scipy.linalg.solve_triangular(chol, e, lower=True)
        nlpd = 0.5 * z @ z + jnp.sum(jnp.log(jnp.diag(chol))) + 0.5 * c * jnp.log(2 * jnp.pi)
        return jnp.asarray(jnp.nan, mean.dtype), nlpd, e @ e / c
    if output == "logits":
        p = jax.nn.softmax(mean) if c > 1 else jax.nn.sigmoid(mean)
    elif output == "probs":
        p = mean
    else:
        raise ValueError(f"output must be 'probs' or 'logits', got {output!r}")
    tiny = jnp.asarray(1e-12, mean.dtype)
    if c == 1:
        p1 = jnp.clip(p[0], tiny, 1 - tiny)
        acc = ((p1 > 0.5) == (y[0] > 0.5)).astype(mean.dtype)
        nlpd = -(y[0] * jnp.log(p1) + (1 - y[0]) * jnp.log1p(-p1))
    else:
        acc = (jnp.argmax(p) == jnp.argmax(y)).astype(mean.dtype)
        nlpd = -jnp.sum(y * jnp.log(jnp.clip(p, tiny, 1.0)))
    return acc, nlpd, jnp.sum((y - p) ** 2) / c


def _scan_fn(learner: StreamLearner, task: str):
    post = learner.posterior
    extras = dict(learner.extras)

    def one_seed(key, xs, ys):
        params = learner.init_params(key) if callable(learner.init_params) else learner.init_params
        state = post.init(params, example_x=xs[0])
        state = reset_posterior(post, jax.random.fold_in(key, 1), state, xs[0], ys[0])  # a backend with refit

        def body(st, xy):
            x, y = xy
            st = post.predict(st)
            m, v = post.predictive(st, x)
            met = step_metrics(task, m, v, y, learner.output)
            st = post.update(st, x, y)
            ext = tuple(jnp.asarray(f(st), m.dtype) for f in extras.values())
            return st, (*met, *ext)

        return jax.lax.scan(body, state, (xs, ys))[1]

    return one_seed


def rolling(df: pd.DataFrame, window: int) -> pd.DataFrame:
    """Add ``accuracy_roll``, ``nlpd_roll``, ``rmse_roll`` (per agent and seed, trailing ``window`` steps)."""
    g = df.groupby(["agent", "seed"], sort=False)
    roll = lambda col: g[col].transform(lambda s: s.rolling(window, min_periods=1).mean())
    df["accuracy_roll"] = roll("accuracy")
    df["nlpd_roll"] = roll("nlpd")
    df["rmse_roll"] = np.sqrt(roll("sq_error"))
    return df


def run_stream(
    stream: Stream | Callable[[int], Stream],
    learner: StreamLearner | tuple,
    steps: int | None = None,
    seeds: int | Sequence[int] = 1,
    *,
    name: str | None = None,
    window: int = 100,
) -> pd.DataFrame:
    """Prequential run of one learner over ``seeds`` (see the module docstring); a tidy DataFrame.

    Args:
      stream: a :class:`~banditkit.datasets.streams.Stream`, or ``seed -> Stream`` (a new draw per seed).
      learner: a :class:`StreamLearner`, ``(posterior, init_params)``, or a backend spec string (``"lofi"``;
        see :func:`default_learner`).
      steps: use the first ``steps`` steps (default: the whole stream).
      seeds: a count ``n`` (seeds ``0..n-1``) or a list.
      name: the ``agent`` column (default: the posterior's name).
      window: rolling-average window in steps.
    """
    seeds = seed_list(seeds)
    streams = [stream(s) if callable(stream) else stream for s in seeds]
    if isinstance(learner, str):
        learner = default_learner(learner, streams[0])
    elif isinstance(learner, tuple) and not isinstance(learner, StreamLearner):
        learner = StreamLearner(*learner)
    if not isinstance(learner, StreamLearner):
        raise TypeError(f"learner must be a StreamLearner, (posterior, init_params) or a spec string, got {learner!r}")
    steps = len(streams[0]) if steps is None else int(steps)
    streams = [s.head(steps) for s in streams]
    task = streams[0].task
    label = name or learner.posterior.name or "posterior"
    shared = all(s is streams[0] for s in streams)
    xs = jnp.asarray(streams[0].xs) if shared else jnp.stack([jnp.asarray(s.xs) for s in streams])
    ys = jnp.asarray(streams[0].ys) if shared else jnp.stack([jnp.asarray(s.ys) for s in streams])
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    axis = None if shared else 0
    fn = jax.jit(canonical_convs(jax.vmap(_scan_fn(learner, task), in_axes=(0, axis, axis))))  # banditkit._xla.conv
    tic = time.perf_counter()
    compiled = fn.lower(keys, xs, ys).compile()
    compile_s = time.perf_counter() - tic
    tic = time.perf_counter()
    out = jax.device_get(compiled(keys, xs, ys))
    run_s = time.perf_counter() - tic
    n = len(seeds)
    cols = {
        "agent": np.repeat(np.array([label], dtype=object), n * steps),
        "seed": np.repeat(np.asarray(seeds, np.int64), steps),
        "step": np.tile(np.arange(steps, dtype=np.int64), n),
        "task_id": np.concatenate([s.task_ids for s in streams]).astype(np.int64),
    }
    for col, arr in zip([*METRICS, *learner.extras], out, strict=True):
        cols[col] = np.asarray(arr, np.float64).ravel()
    df = rolling(pd.DataFrame(cols), window)
    df = df[COLUMNS + list(learner.extras)]
    df.attrs["timing"] = {label: dict(compile_s=compile_s, run_s=run_s, per_step_s=run_s / steps, steps=steps,
                                      seeds=n, mode="prequential")}
    df.attrs["mode"] = "prequential"
    return df


def default_learner(spec: str, stream: Stream, features: Sequence[int] = (50,), **backend_kwargs) -> StreamLearner:
    """A learner for ``spec`` (``"lofi"``, or ``"lofi-…"``: the part after ``-`` is ignored): ``MLP(features)``
    with ``out = C``, ``Categorical`` (``C > 1``) / ``Bernoulli`` (``C = 1``) for classification streams,
    ``Gaussian(1.0)`` for regression, the backend's defaults plus ``backend_kwargs``."""
    from banditkit import posteriors
    from banditkit.likelihoods import Bernoulli, Categorical, Gaussian
    from banditkit.models.nets import MLP

    factory = posteriors.get(spec.split("-")[0])
    c = stream.num_outputs
    if stream.task == "classification":
        lik = Categorical() if c > 1 else Bernoulli()
    else:
        lik = Gaussian(1.0)
    model = MLP(features=tuple(features), out=c)
    x0 = jnp.asarray(stream.xs[0])
    return StreamLearner(factory(model.apply, lik, **backend_kwargs), lambda key: model.init(key, x0))
