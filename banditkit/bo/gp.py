"""Exact Gaussian-process surrogate for the BO baseline: Matérn-5/2 ARD kernel, constant mean, inferred noise.

Model (inputs ``x ∈ [0, 1]^d``, targets standardised by the caller)::

    y_i = f(x_i) + ε_i,   f ~ GP(c, k),   ε_i ~ N(0, σ_n²)
    k(x, x') = σ_f² (1 + √5 r + 5 r² / 3) exp(−√5 r),   r² = Σ_j (x_j − x'_j)² / ℓ_j²

Conditioning (:func:`condition`), with ``n`` data ``X (n, d)``, ``y (n,)``::

    K = k(X, X) + (σ_n² + δ) I = Uᵀ U          (upper Cholesky, ``linalg.chol_upper``; δ = jitter · σ_f²)
    α = K⁻¹ (y − c) = U⁻¹ U⁻ᵀ (y − c)            (``chol_inv = U⁻¹``, ``linalg.tri_inverse``, kept for predictions)

Prediction at ``X* (q, d)`` (:func:`predict`), ``k* = k(X, X*) (n, q)``, ``v = U⁻ᵀ k* (n, q)``::

    mean = c + k*ᵀ α    (q,)          var_f = σ_f² − Σ_i v_i²    (q,)    (+ σ_n² for a new observation)

Joint posterior of ``f`` on ``X*`` (:func:`sample_joint`, Thompson sampling): ``N(mean, k(X*, X*) − vᵀ v)``.

Hyper-parameters ``θ = (log ℓ (d,), log σ_f², log σ_n², c)`` maximise the log marginal likelihood plus a weak
log prior (MAP, :func:`fit_params`)::

    LML(θ) = −½ (y − c)ᵀ α − Σ_i log U_ii − (n/2) log 2π
    log ℓ_j ~ N(√2 + ½ log d, 3)   (dimension-scaled lengthscale prior, Hvarfner et al. 2024, on the unit cube)
    log σ_f² ~ N(0, 1),   log σ_n² ~ N(−4, 1),   c ~ N(0, 1)          (targets standardised)

Every hyper-parameter lives in a box (:data:`BOUNDS`, on the log scale except ``c``); L-BFGS on the objective at
the point clipped to the box (optax, both starts vmapped in one compiled ``while_loop``; SciPy's L-BFGS-B with
``optimizer="scipy"``), with the closed-form gradient ``½ tr((ααᵀ − K⁻¹) ∂K/∂θ)``, runs from two starts — the
previous optimum (warm start) and the default ``ℓ_j = e^{√2−3} √d`` (the prior's mode), ``σ_f² = 1``,
``σ_n² = e^{−5}``, ``c = 0`` — for at most ``steps`` iterations each, and the better end point is kept.

Fixed shapes.  The data are padded to a *capacity* ``m ≥ n`` (a power of two, at least 16) with a 0/1 ``mask``;
padded rows get ``K_ii = 1``, no off-diagonal entries and a zero residual, so they change neither ``α``, nor
``log det K``, nor any prediction.  Jitted code therefore compiles once per capacity, not once per ``n``.
:func:`fit` keeps only the most recent ``buffer`` points (a FIFO buffer; ``None`` = all).

Precision: use float64 (``with jax.enable_x64(True): ...``); every function follows the dtype of its inputs.
All functions are pure; :func:`fit` is the convenience shell (NumPy in, padded ``GPState`` out).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from banditkit._xla import flat_random as rng
from banditkit.posteriors.linalg import chol_upper, tri_inverse

Array = jax.Array

# (low, high) of (log ℓ_j, log σ_f², log σ_n², c)
BOUNDS = {
    "log_lengthscale": (math.log(5e-3), math.log(2e2)),
    "log_signal_var": (math.log(5e-2), math.log(2e1)),
    "log_noise_var": (math.log(1e-6), math.log(1.0)),
    "mean": (-10.0, 10.0),
}
_SQRT5 = math.sqrt(5.0)
MIN_CAPACITY = 16


class GPParams(NamedTuple):
    """Hyper-parameters: ``log_lengthscale (d,)``, ``log_signal_var ()`` (log σ_f²), ``log_noise_var ()``
    (log σ_n²), ``mean ()`` (c)."""

    log_lengthscale: Array
    log_signal_var: Array
    log_noise_var: Array
    mean: Array


class GPState(NamedTuple):
    """A conditioned GP: padded data ``x (m, d)``, ``y (m,)``, ``mask (m,)`` (1 = real point), ``params``,
    the upper Cholesky factor ``chol (m, m)`` of ``K``, ``alpha = K⁻¹ (y − c) (m,)`` and ``chol_inv = U⁻¹ (m, m)``
    (``None``: predictions solve with ``chol`` instead; with it ``U⁻ᵀ k* = chol_invᵀ k*`` is one GEMM, which
    XLA:CPU runs several times faster than a triangular solve, most of all a batched one under ``vmap``)."""

    x: Array
    y: Array
    mask: Array
    params: GPParams
    chol: Array
    alpha: Array
    chol_inv: Array | None = None


def default_params(dim: int, dtype=jnp.float64) -> GPParams:
    """The default start: ``ℓ_j = exp(√2 − 3) √d`` (mode of the lengthscale prior), ``σ_f² = 1``,
    ``σ_n² = e^{−5}``, ``c = 0``."""
    ls = math.sqrt(2.0) - 3.0 + 0.5 * math.log(dim)
    return GPParams(jnp.full((dim,), ls, dtype), jnp.zeros((), dtype), jnp.asarray(-5.0, dtype), jnp.zeros((), dtype))


def matern52(x1: Array, x2: Array, params: GPParams) -> Array:
    """Matérn-5/2 ARD kernel matrix ``k(x1, x2) (n1, n2)`` for ``x1 (n1, d)``, ``x2 (n2, d)``.

    ``r = 0`` is handled with a double ``where`` so gradients in ``x`` and ``ℓ`` stay finite (they are 0 there).
    """
    inv_ls = jnp.exp(-params.log_lengthscale)
    diff = (x1[:, None, :] - x2[None, :, :]) * inv_ls
    r2 = jnp.sum(diff**2, axis=-1)
    pos = r2 > 0
    r = jnp.where(pos, jnp.sqrt(jnp.where(pos, r2, 1.0)), 0.0)
    return jnp.exp(params.log_signal_var) * (1.0 + _SQRT5 * r + (5.0 / 3.0) * r2) * jnp.exp(-_SQRT5 * r)


def _gram(x: Array, mask: Array, params: GPParams, jitter: float) -> Array:
    """Masked ``K (m, m)``: real block ``k(X, X) + (σ_n² + jitter σ_f²) I``, identity on padded rows."""
    k = matern52(x, x, params) * (mask[:, None] * mask[None, :])
    diag = mask * (jnp.exp(params.log_noise_var) + jitter * jnp.exp(params.log_signal_var)) + (1.0 - mask)
    return k + jnp.diag(diag)


def _default_jitter(dtype) -> float:
    return 1e-8 if jnp.finfo(dtype).bits == 64 else 1e-5


def condition(x: Array, y: Array, mask: Array, params: GPParams, jitter: float | None = None) -> GPState:
    """Condition the GP on padded data ``x (m, d)``, ``y (m,)``, ``mask (m,)``: ``U`` and ``α`` (module docstring)."""
    jitter = _default_jitter(x.dtype) if jitter is None else jitter
    u = chol_upper(_gram(x, mask, params, jitter))
    u_inv = tri_inverse(u)
    alpha = u_inv @ (u_inv.T @ ((y - params.mean) * mask))
    return GPState(x, y, mask, params, u, alpha, u_inv)


def _half_solve(state: GPState, ks: Array) -> Array:
    """``U⁻ᵀ k* (m, q)``: a GEMM with ``chol_inv`` when the state has it, else a triangular solve."""
    if state.chol_inv is not None:
        return state.chol_inv.T @ ks
    return solve_triangular(state.chol, ks, trans="T", lower=False)


def log_marginal_likelihood(params: GPParams, x: Array, y: Array, mask: Array, jitter: float | None = None) -> Array:
    """``log p(y | X, θ) = −½ (y − c)ᵀ α − Σ log U_ii − (n/2) log 2π`` over the real (unmasked) points."""
    st = condition(x, y, mask, params, jitter)
    resid = (y - params.mean) * mask
    n = jnp.sum(mask)
    return -0.5 * resid @ st.alpha - jnp.sum(jnp.log(jnp.diagonal(st.chol))) - 0.5 * n * math.log(2 * math.pi)


def log_prior(params: GPParams) -> Array:
    """Log density (up to a constant) of the weak priors of the module docstring, on the log scale."""
    d = params.log_lengthscale.shape[0]
    mu_ls = math.sqrt(2.0) + 0.5 * math.log(d)
    return (
        -0.5 * jnp.sum((params.log_lengthscale - mu_ls) ** 2) / 3.0
        - 0.5 * params.log_signal_var**2
        - 0.5 * (params.log_noise_var + 4.0) ** 2
        - 0.5 * params.mean**2
    )


def _bounds(dim: int, dtype) -> tuple[Array, Array]:
    b = BOUNDS
    lo = [b["log_lengthscale"][0]] * dim + [b["log_signal_var"][0], b["log_noise_var"][0], b["mean"][0]]
    hi = [b["log_lengthscale"][1]] * dim + [b["log_signal_var"][1], b["log_noise_var"][1], b["mean"][1]]
    return jnp.asarray(lo, dtype), jnp.asarray(hi, dtype)


def _pack(params: GPParams) -> Array:
    return jnp.concatenate(
        [params.log_lengthscale, jnp.stack([params.log_signal_var, params.log_noise_var, params.mean])]
    )


def _unpack(v: Array, dim: int) -> GPParams:
    return GPParams(v[:dim], v[dim], v[dim + 1], v[dim + 2])


@partial(jax.jit, static_argnames=("use_prior",))
def _objective_and_grad(v: Array, x: Array, y: Array, mask: Array, use_prior: bool = True) -> tuple[Array, Array]:
    """``−(LML + log prior) / n`` and its gradient in the packed log-scale vector ``v (d + 3,)``.

    The gradient is the standard identity instead of differentiating through the Cholesky factor::

        ∂LML/∂θ = ½ tr((α αᵀ − K⁻¹) ∂K/∂θ)  (kernel parameters: one VJP of the element-wise Gram matrix)
        ∂LML/∂c = Σ_i α_i                  (the constant mean, over real points)

    with ``K⁻¹ = U⁻¹ U⁻ᵀ`` from one triangular inverse; this is 1.5–3× cheaper on XLA:CPU than the reverse pass of
    the Cholesky and agrees with it to rounding (``tests/bo/test_gp.py``).
    """
    dim = x.shape[1]
    n = jnp.maximum(jnp.sum(mask), 1.0)
    jitter = _default_jitter(x.dtype)
    gram, gram_vjp = jax.vjp(lambda v: _gram(x, mask, _unpack(v, dim), jitter), v)
    u = chol_upper(gram)
    u_inv = tri_inverse(u)
    k_inv = u_inv @ u_inv.T
    p = _unpack(v, dim)
    resid = (y - p.mean) * mask
    alpha = k_inv @ resid
    lml = -0.5 * resid @ alpha - jnp.sum(jnp.log(jnp.diagonal(u))) - 0.5 * n * math.log(2 * math.pi)
    (grad,) = gram_vjp(0.5 * (jnp.outer(alpha, alpha) - k_inv))
    grad = grad.at[dim + 2].add(alpha @ mask)
    if use_prior:
        prior, prior_grad = jax.value_and_grad(lambda v: log_prior(_unpack(v, dim)))(v)
        lml, grad = lml + prior, grad + prior_grad
    return -lml / n, -grad / n


FIT_OPTIMIZERS = ("compiled", "scipy")


def fit_params(
    x: Array, y: Array, mask: Array, init: GPParams, *, steps: int = 50, use_prior: bool = True,
    optimizer: str = "compiled",
) -> GPParams:
    """MAP hyper-parameters: L-BFGS on ``−(LML + log prior) / n`` over the packed log-scale vector, from ``init``
    (warm start) and from :func:`default_params`, at most ``steps`` iterations each; returns the best of the starts
    and end points (never worse than either start).

    ``optimizer="compiled"`` (default): both starts in one compiled program (:func:`_fit_compiled`: optax L-BFGS
    on the objective at the point clipped to the box, vmapped over the starts).  ``optimizer="scipy"``: SciPy's
    box-bounded L-BFGS-B, one jitted objective-and-gradient call per evaluation (the reference;
    ``tests/bo/test_gp_fast_paths.py`` checks that both reach the same MAP).  Deterministic (a pure function of
    its inputs).
    """
    if optimizer not in FIT_OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {list(FIT_OPTIMIZERS)}, got {optimizer!r}")
    dim = x.shape[1]
    if optimizer == "compiled":
        starts = jnp.stack([_pack(init).astype(x.dtype), _pack(default_params(dim, x.dtype))])
        best, _ = _fit_compiled(starts, x, y, mask, int(steps), bool(use_prior))
        return _unpack(best, dim)
    from scipy.optimize import minimize

    lo, hi = (np.asarray(b, np.float64) for b in _bounds(dim, jnp.float64))
    box = list(zip(lo, hi, strict=True))

    def fun(v):
        val, grad = _objective_and_grad(jnp.asarray(v, x.dtype), x, y, mask, use_prior)
        val, grad = float(val), np.asarray(grad, np.float64)
        if not (np.isfinite(val) and np.all(np.isfinite(grad))):
            return 1e10, np.zeros_like(v)
        return val, grad

    best_v, best_f = None, np.inf
    for start in (init, default_params(dim, x.dtype)):
        v0 = np.clip(np.asarray(_pack(start), np.float64), lo, hi)
        f0, _ = fun(v0)
        if f0 < best_f:
            best_v, best_f = v0, f0
        if steps > 0:
            res = minimize(fun, v0, jac=True, method="L-BFGS-B", bounds=box, options=dict(maxiter=int(steps)))
            f1, _ = fun(res.x)
            if f1 < best_f:
                best_v, best_f = np.asarray(res.x, np.float64), f1
    return _unpack(jnp.asarray(best_v, x.dtype), dim)


FIT_TOL = 1e-9  # relative decrease of the objective below which the compiled fit stops (SciPy's factr·ε ≈ 2e-9)
GRAD_TOL = 1e-5  # largest |gradient| entry below which it stops (SciPy's pgtol)


def _box_loss(x: Array, y: Array, mask: Array, lo: Array, hi: Array, use_prior: bool) -> Callable[[Array], Array]:
    """``v ↦ −(LML + log prior) / n`` at ``clip(v, lo, hi)`` (its gradient zero in a coordinate outside the box,
    so an unconstrained L-BFGS that steps out stays at the bound's value), differentiable by ``jax.grad`` through
    :func:`_objective_and_grad`'s closed-form gradient (a ``custom_vjp``; a non-finite value counts as ``10¹⁰``
    with a zero gradient)."""

    def value_and_grad(v):
        inside = (v >= lo) & (v <= hi)
        f, g = _objective_and_grad(jnp.clip(v, lo, hi), x, y, mask, use_prior)
        ok = jnp.isfinite(f) & jnp.all(jnp.isfinite(g))
        return jnp.where(ok, f, 1e10), jnp.where(ok & inside, g, 0.0)

    @jax.custom_vjp
    def loss(v):
        return value_and_grad(v)[0]

    def fwd(v):
        return value_and_grad(v)

    def bwd(g, ct):
        return (ct * g,)

    loss.defvjp(fwd, bwd)
    return loss


@partial(jax.jit, static_argnames=("steps", "use_prior"))
def _fit_compiled(starts: Array, x: Array, y: Array, mask: Array, steps: int, use_prior: bool) -> tuple[Array, Array]:
    """L-BFGS (optax, zoom line search) from every row of ``starts (r, d + 3)`` at once (``vmap``; clipped to the
    box first), each at most ``steps`` iterations inside one ``while_loop``, stopping when the objective's relative
    decrease is below :data:`FIT_TOL` or every gradient entry below :data:`GRAD_TOL`.  Returns the best of the
    starts and end points ``(d + 3,)`` and its objective ``()``: one compiled program per capacity, no host round
    trip per iteration."""
    import optax

    lo, hi = _bounds(x.shape[1], x.dtype)
    loss = _box_loss(x, y, mask, lo, hi, use_prior)
    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(loss)

    def one(w0):
        def step(carry):
            w, state, f_prev, _, it = carry
            f, g = value_and_grad(w, state=state)
            upd, state = opt.update(g, state, w, value=f, grad=g, value_fn=loss)
            w_new = optax.apply_updates(w, upd)
            scale = jnp.maximum(jnp.maximum(jnp.abs(f), jnp.abs(f_prev)), 1.0)
            done = (it > 0) & (jnp.abs(f_prev - f) <= FIT_TOL * scale) | (jnp.max(jnp.abs(g)) <= GRAD_TOL)
            return w_new, state, f, done, it + 1

        def cond(carry):
            return (carry[4] < steps) & ~carry[3]

        init = (w0, opt.init(w0), jnp.asarray(jnp.inf, x.dtype), jnp.asarray(False), jnp.asarray(0))
        w, *_ = jax.lax.while_loop(cond, step, init)
        return jnp.clip(w, lo, hi)

    starts = jnp.clip(starts, lo, hi)
    points = jnp.concatenate([starts, jax.vmap(one)(starts)])
    vals = jax.vmap(lambda v: _objective_and_grad(v, x, y, mask, use_prior)[0])(points)
    vals = jnp.where(jnp.isfinite(vals), vals, jnp.inf)
    return points[jnp.argmin(vals)], jnp.min(vals)


_condition_jit = jax.jit(condition)


def capacity(n: int) -> int:
    """The padded size used for ``n`` points: the next power of two, at least :data:`MIN_CAPACITY`."""
    return max(MIN_CAPACITY, 1 << max(int(n) - 1, 0).bit_length())


def pad(x: np.ndarray, y: np.ndarray, buffer: int | None = None, dtype=None) -> tuple[Array, Array, Array]:
    """Keep the last ``buffer`` points (FIFO; ``None`` = all) and pad to :func:`capacity`: ``(x, y, mask)``."""
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64).reshape(-1)
    if x.ndim != 2 or x.shape[0] != y.shape[0] or x.shape[0] < 1:
        raise ValueError(f"need x (n, d) and y (n,) with n >= 1, got shapes {x.shape} and {y.shape}")
    if buffer is not None:
        if int(buffer) < 1:
            raise ValueError(f"buffer must be a positive int or None, got {buffer!r}")
        x, y = x[-int(buffer):], y[-int(buffer):]
    n, d = x.shape
    m = capacity(n)
    xp = np.zeros((m, d))
    yp = np.zeros((m,))
    mask = np.zeros((m,))
    xp[:n], yp[:n], mask[:n] = x, y, 1.0
    dtype = dtype or (jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32)
    return jnp.asarray(xp, dtype), jnp.asarray(yp, dtype), jnp.asarray(mask, dtype)


def fit(
    x: np.ndarray, y: np.ndarray, init: GPParams | None = None, *, buffer: int | None = None, steps: int = 50,
    use_prior: bool = True, optimize: bool = True,
) -> GPState:
    """Fit and condition a GP on ``x (n, d)``, ``y (n,)`` (already standardised): FIFO ``buffer``, padding, MAP
    hyper-parameters by :func:`fit_params` warm-started at ``init`` (``optimize=False`` keeps ``init`` fixed),
    then :func:`condition`.  Call under ``jax.enable_x64(True)`` for float64."""
    xp, yp, mask = pad(x, y, buffer)
    init = default_params(xp.shape[1], xp.dtype) if init is None else jax.tree_util.tree_map(
        lambda a: jnp.asarray(a, xp.dtype), init)
    params = fit_params(xp, yp, mask, init, steps=steps, use_prior=use_prior) if optimize else init
    return _condition_jit(xp, yp, mask, params)


def predict(state: GPState, xq: Array, include_noise: bool = False) -> tuple[Array, Array]:
    """Posterior ``(mean (q,), var (q,))`` of ``f`` at ``xq (q, d)`` (of a new ``y`` with ``include_noise``)."""
    p = state.params
    ks = matern52(state.x, xq, p) * state.mask[:, None]  # (m, q)
    mean = p.mean + ks.T @ state.alpha
    v = _half_solve(state, ks)  # U⁻ᵀ k*
    var = jnp.exp(p.log_signal_var) - jnp.sum(v**2, axis=0)
    var = jnp.maximum(var, jnp.finfo(var.dtype).tiny)
    if include_noise:
        var = var + jnp.exp(p.log_noise_var)
    return mean, var


def predict_joint(state: GPState, xq: Array) -> tuple[Array, Array]:
    """Joint posterior of ``f`` at ``xq (q, d)``: ``(mean (q,), cov (q, q)) = (c + k*ᵀα, k(X*, X*) − vᵀv)``."""
    p = state.params
    ks = matern52(state.x, xq, p) * state.mask[:, None]
    v = _half_solve(state, ks)
    return p.mean + ks.T @ state.alpha, matern52(xq, xq, p) - v.T @ v


def sample_joint(key: Array, state: GPState, xq: Array, jitter: float = 1e-6) -> Array:
    """One joint posterior draw of ``f`` at ``xq (q, d)``: ``mean + L z`` with ``L Lᵀ = cov + jitter σ_f² I``;
    if that Cholesky fails (a near-singular covariance) the draw uses the clipped eigendecomposition instead.
    Cost ``O(q³)``."""
    mean, cov = predict_joint(state, xq)
    q = xq.shape[0]
    cov = 0.5 * (cov + cov.T) + jitter * jnp.exp(state.params.log_signal_var) * jnp.eye(q, dtype=cov.dtype)
    z = rng.normal(key, (q,), cov.dtype)
    chol = jnp.linalg.cholesky(cov)

    def by_eigh():
        w, vecs = jnp.linalg.eigh(cov)
        return mean + vecs @ (jnp.sqrt(jnp.maximum(w, 0.0)) * z)

    return jax.lax.cond(jnp.all(jnp.isfinite(chol)), lambda: mean + chol @ z, by_eigh)
