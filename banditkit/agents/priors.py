"""Prior variances of a network's weights for the Kalman agents: from its fan-in, or by empirical Bayes.

The neural filters start from ``θ ~ N(θ₀, σ² I)`` around the initial weights ``θ₀`` (HiLoFi: ``σ_h²`` on the
hidden layers, ``σ_ℓ²`` on the head).  Two rules choose ``σ²`` from what the model and the environment declare
instead of one constant for every network and data set:

**Fan-in** (:func:`fan_in_variances`): the variance the network's own initialiser draws each weight with,
``1 / fan_in`` (LeCun; ``fan_in = prod(kernel.shape[:-1])``: inputs × receptive field), averaged over a block's
kernel entries::

    σ_B² = Σ_{l ∈ B} n_l / fan_in_l  /  Σ_{l ∈ B} n_l,      n_l = fan_in_l · fan_out_l  (entries of kernel l)

— the prior the initial weights were drawn from, so a wider layer gets a smaller variance, as its outputs' variance
stays of order one.

**Empirical Bayes** (:func:`empirical_bayes_variances`): under the network linearised at ``θ₀``,
``f(x, θ) ≈ f(x, θ₀) + J(x) (θ − θ₀)``, ``n`` logged rounds ``(x_t, a_t, y_t)`` have the marginal likelihood::

    r = y − f₀ ~ N(0, K),   K = Σ_B σ_B² G_B + R I,   G_B = J_B J_Bᵀ  (n × n, J_B = ∂f_{a_t}(x_t) / ∂θ_B)
    log p(r) = −½ rᵀ K⁻¹ r − ½ log det K − ½ n log 2π

and the rule takes the ``σ_B²`` (and the nuisance ``R``, which the agents set by their own rule,
:mod:`banditkit.agents.scales`) that maximise it: the prior scale at which the function class the filter starts from
explains the first rounds' rewards neither with too little spread (a rigid prior) nor with too much (a vague one).
:func:`logged_rounds` draws the rounds as a uniform-random policy would log them (one arm per context, bandit
feedback only), from the env's ``functional(0, n)``; :func:`linearised_grams` forms ``G_B`` and ``r``;
:func:`empirical_bayes_prior` does both for an environment and a model (one variance for all weights, and one
scale ``c`` on the fan-in profile for the two blocks of HiLoFi).

Which rule ``make_agent`` should use, if either, is measured in ``benchmarks/studies/prior_scale`` (README and
``results/prior_scale.md``): the constants against both rules for HiLoFi-, LoFi- and LRKF-TS on the suite's data
and on two environments outside it.  Neither rule beat the constants on every row there (empirical Bayes helped
HiLoFi-TS on Shuttle, Adult and Fashion-MNIST but lost on Wheel, and lost with LoFi-TS and LRKF-TS on Mushroom), so
``make_agent`` keeps its constants for the hidden layers and for LoFi and LRKF; these functions are the measured
candidates.

**Unit head** (:func:`unit_head_variance`, make_agent's HiLoFi head prior): the agents observe ``y = r / s`` with
``s = max |E r|`` (:mod:`banditkit.agents.scales`), so the largest expected reward is 1 in observed units.  A head
``f_k(x) = w_kᵀ φ(x) + b_k`` with prior ``(w_k, b_k) ~ N(·, σ_ℓ² I)`` moves an output by ``σ_ℓ² (‖φ(x)‖² + 1)`` in
variance, ``φ(x)`` the head's input; the rule makes that 1 on average over the env's contexts::

    σ_ℓ² = 1 / E_x[‖φ(x)‖² + 1]      (φ at the initial weights, x over the first 256 contexts of functional(0, ·))

— a head-prior draw moves an output by about the largest expected reward.  The constant 1.0 it replaces moved it by
1.7–5.9 times that on the benchmark tables (``E[‖φ‖² + 1]`` = 2.9–35 for ``MLP(50, 50)``), and a second-moment
rule (``E[y²] − R`` in place of 1) starved Wheel's rare large payoffs: ``benchmarks/studies/hilofi_gap`` (README,
``results/hilofi_gap.md``).

**Unit low-rank prior** (:func:`unit_lowrank_variance`, a measured candidate for LRKF, not make_agent's default):
LRKF's prior ``Σ_0 = σ² QᵀQ`` lives on a random ``d``-dimensional subspace (``Q (d, P)`` orthonormal rows), so an
output's prior variance is ``σ² ‖Q h_k(x)‖² ≈ σ² (d/P) ‖h_k(x)‖²`` — with make_agent's ``σ² = 0.1`` a prior s.d. of
0.04–0.16 of the largest expected reward on the benchmark tables.  The rule makes a prior draw move an output by about
the largest expected reward, as the unit head does for HiLoFi::

    σ² = 1 / E_{x,k}[‖Q h_k(x)‖²]      (h_k = ∂f_k/∂θ at the initial weights, x over the first 256 contexts)

(4–56 on the tables).  ``benchmarks/studies/lrkf_prior`` pre-registered it: it passed at 5 seeds through Mushroom
alone, a result that flipped with one float32 ulp of ``σ²``, and failed the 20-seed confirmation (Adult worse,
z = −2.7), so make_agent keeps ``0.1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

#: bounds of the variances :func:`empirical_bayes_variances` searches (prior variances and ``R``)
VARIANCE_BOUNDS = (1e-6, 1e2)
#: rounds :func:`logged_rounds` reads by default (the same read as :data:`banditkit.agents.scales.ROUNDS`)
ROUNDS = 256


def _path_name(path) -> str:
    return "/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)


def fan_in_variances(params, last_layer: str = "head") -> dict[str, float]:
    """``{"hidden": σ_h², "last": σ_ℓ², "all": σ²}``: the initialiser's variance ``1 / fan_in`` averaged over the
    kernel entries of the hidden layers, of the layer whose parameter path contains ``last_layer``, and of all
    layers (module docstring).  Biases (initialised at zero, a small share of the weights) are not counted.

    Only the shapes are read: ``jax.eval_shape(model.init, key, x)`` serves as well as the weights.
    Raises ``ValueError`` when ``params`` has no kernel (no leaf with two or more axes) or no kernel on either side
    of the ``last_layer`` split."""
    sums = {"hidden": [0.0, 0], "last": [0.0, 0]}
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        shape = tuple(getattr(leaf, "shape", None) or np.shape(leaf))  # arrays or jax.eval_shape's structs
        if len(shape) < 2:
            continue  # a bias or a scale, not a kernel
        fan_in = int(np.prod(shape[:-1]))
        n = int(np.prod(shape))
        block = "last" if last_layer in _path_name(path) else "hidden"
        sums[block][0] += n / fan_in
        sums[block][1] += n
    missing = [b for b, (_, n) in sums.items() if n == 0]
    if missing:
        raise ValueError(f"fan_in_variances found no kernel (a leaf with >= 2 axes) in the {missing} block(s) with "
                         f"last_layer={last_layer!r}; pass the name of the model's last submodule (e.g. 'head')")
    out = {b: s / n for b, (s, n) in sums.items()}
    out["all"] = (sums["hidden"][0] + sums["last"][0]) / (sums["hidden"][1] + sums["last"][1])
    return out


def log_marginal_likelihood(variances: Sequence[float], grams: Sequence[np.ndarray], residual: np.ndarray,
                            obs_noise: float) -> float:
    """``log N(r; 0, Σ_B σ_B² G_B + R I)`` (module docstring); ``grams`` each ``(n, n)``, ``residual (n,)``."""
    k = _covariance(np.log(variances), grams, np.log(obs_noise))
    chol = np.linalg.cholesky(k)
    z = np.linalg.solve(chol, np.asarray(residual, np.float64))
    return float(-0.5 * z @ z - np.sum(np.log(np.diag(chol))) - 0.5 * len(z) * np.log(2 * np.pi))


def _covariance(log_var, grams, log_noise) -> np.ndarray:
    n = grams[0].shape[0]
    k = np.exp(log_noise) * np.eye(n)
    for lv, g in zip(log_var, grams, strict=True):
        k = k + np.exp(lv) * g
    return k


def _negative_lml_and_grad(z: np.ndarray, grams: Sequence[np.ndarray], residual: np.ndarray, fixed_noise):
    """``−log p(r)`` and its gradient in ``z = (log σ_B²..., [log R])``:
    ``∂ log p / ∂ log σ_B² = ½ σ_B² tr((α αᵀ − K⁻¹) G_B)``, ``α = K⁻¹ r``."""
    nb = len(grams)
    log_noise = np.log(fixed_noise) if fixed_noise is not None else z[nb]
    k = _covariance(z[:nb], grams, log_noise)
    try:
        chol = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return np.inf, np.zeros_like(z)
    inv = np.linalg.inv(chol)
    kinv = inv.T @ inv
    alpha = kinv @ residual
    lml = -0.5 * residual @ alpha - np.sum(np.log(np.diag(chol))) - 0.5 * len(residual) * np.log(2 * np.pi)
    w = np.outer(alpha, alpha) - kinv
    grad = [0.5 * np.exp(z[b]) * np.sum(w * grams[b]) for b in range(nb)]
    if fixed_noise is None:
        grad.append(0.5 * np.exp(log_noise) * np.trace(w))
    return -lml, -np.asarray(grad)


def _negative_lml(z: np.ndarray, grams: Sequence[np.ndarray], residual: np.ndarray, fixed_noise) -> float:
    """``−log p(r)`` alone (one Cholesky factor, no inverse): the grid search's objective; ``inf`` where ``K`` is
    not numerically positive definite."""
    nb = len(grams)
    noise = fixed_noise if fixed_noise is not None else float(np.exp(z[nb]))
    try:
        return -log_marginal_likelihood(np.exp(z[:nb]), grams, residual, noise)
    except np.linalg.LinAlgError:
        return np.inf


def _negative_lml_one_gram(z: np.ndarray, eig: np.ndarray, u2: np.ndarray, fixed_noise):
    """``−log p(r)`` and its gradient for one Gram matrix ``G = Q diag(λ) Qᵀ`` (``u2 = (Qᵀ r)²``): with
    ``d_i = σ² λ_i + R``, ``log p = −½ Σ u_i² / d_i − ½ Σ log d_i − ½ n log 2π``, O(n) per evaluation."""
    log_noise = np.log(fixed_noise) if fixed_noise is not None else z[1]
    d = np.exp(z[0]) * eig + np.exp(log_noise)
    lml = -0.5 * np.sum(u2 / d) - 0.5 * np.sum(np.log(d)) - 0.5 * len(d) * np.log(2 * np.pi)
    w = 0.5 * (u2 / d**2 - 1 / d)
    grad = [np.exp(z[0]) * np.sum(w * eig)]
    if fixed_noise is None:
        grad.append(np.exp(log_noise) * np.sum(w))
    return -lml, -np.asarray(grad)


def empirical_bayes_variances(grams: Sequence[np.ndarray], residual: np.ndarray, obs_noise: float | None = None,
                              tied: bool = False) -> tuple[tuple[float, ...], float]:
    """``((σ_B², ...), R)`` maximising :func:`log_marginal_likelihood` over ``σ_B²`` (and over ``R`` unless
    ``obs_noise`` is given), each within :data:`VARIANCE_BOUNDS`; ``tied=True`` fits one ``σ²`` shared by every
    block (LoFi, LRKF: one prior variance for all weights).  The search starts from the best point of a coarse
    log-grid of tied variances and refines with L-BFGS-B on the log-variances (exact gradient)."""
    grams = [np.asarray(g, np.float64) for g in grams]
    residual = np.asarray(residual, np.float64).reshape(-1)
    n = residual.shape[0]
    if not grams or any(g.shape != (n, n) for g in grams):
        raise ValueError(f"grams must be (n, n) matrices matching the residual's n = {n}, got "
                         f"{[g.shape for g in grams]}")
    if not np.all(np.isfinite(residual)) or any(not np.all(np.isfinite(g)) for g in grams):
        raise ValueError("empirical_bayes_variances got non-finite residuals or Gram matrices")
    if obs_noise is not None and not (np.isfinite(obs_noise) and obs_noise > 0):
        raise ValueError(f"obs_noise must be a positive variance or None (fit it), got {obs_noise!r}")
    work = [sum(grams)] if tied else grams
    nb = len(work)
    objective, data = _negative_lml_and_grad, (work, residual, obs_noise)
    if nb == 1:  # one Gram matrix: diagonalise it once, then each evaluation is O(n)
        eig, q = np.linalg.eigh(work[0])
        objective, data = _negative_lml_one_gram, (np.clip(eig, 0.0, None), (q.T @ residual) ** 2, obs_noise)
    lo, hi = np.log(VARIANCE_BOUNDS[0]), np.log(VARIANCE_BOUNDS[1])
    start, best = None, np.inf
    noise_grid = [np.log(obs_noise)] if obs_noise is not None else np.linspace(lo, hi, 9)
    for lv in np.linspace(lo, hi, 9):
        for ln in noise_grid:
            z = np.full(nb, lv) if obs_noise is not None else np.concatenate([np.full(nb, lv), [ln]])
            value = objective(z, *data)[0] if nb == 1 else _negative_lml(z, work, residual, obs_noise)
            if value < best:
                start, best = z, value
    if start is None:
        raise ValueError("the marginal likelihood is not finite anywhere on the search grid")
    res = optimize.minimize(objective, start, args=data, jac=True,
                            method="L-BFGS-B", bounds=[(lo, hi)] * len(start))
    z = res.x if np.isfinite(res.fun) and res.fun <= best else start
    variances = tuple(float(v) for v in np.exp(z[:nb]))
    if tied:
        variances = variances * len(grams)
    noise = float(obs_noise) if obs_noise is not None else float(np.exp(z[nb]))
    return variances, noise


def logged_rounds(env, rounds: int = ROUNDS, seed: int = 0, scale: float = 1.0):
    """``(contexts (n, ...), actions (n,), targets (n,))``: the first ``rounds`` rounds of ``functional(0, rounds)``
    as a uniform-random policy logs them (arm ``a_t`` drawn from ``default_rng(seed)``; target ``r_{t,a_t} /
    scale``, the observed units).  Raises ``ValueError`` when the env has no functional form."""
    u = getattr(env, "unwrapped", env)
    if not hasattr(u, "functional"):
        raise ValueError(f"{type(u).__name__} has no functional(seed, steps): empirical Bayes needs logged rounds")
    fb = u.functional(0, rounds)
    rewards = np.asarray(fb.rewards, np.float64)
    contexts = np.asarray(fb.contexts)[np.asarray(fb.index)]
    actions = np.random.default_rng(seed).integers(0, rewards.shape[1], size=rewards.shape[0])
    targets = rewards[np.arange(rewards.shape[0]), actions] / scale
    return contexts, actions, targets


def linearised_grams(apply_fn: Callable, params, contexts, actions, last_layer: str = "head",
                     chunk: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(G_hidden, G_last, r₀)``: the Gram matrices ``J_B J_Bᵀ`` ``(n, n)`` of the Jacobian of the chosen output
    ``f_{a_t}(x_t)`` in the hidden and the last block (parameter paths containing ``last_layer``) at ``params``,
    and the outputs ``f_{a_t}(x_t, θ₀)`` ``(n,)``.  ``apply_fn(params, x)`` returns the ``(K,)`` outputs of one
    context.  Jacobians are formed ``chunk`` rounds at a time (memory ``chunk × P``)."""
    actions = jnp.asarray(actions, jnp.int32)
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    mask_tree = jax.tree_util.tree_map_with_path(
        lambda path, leaf: jnp.full(jnp.shape(leaf), last_layer in _path_name(path)), params)
    is_last = np.asarray(jax.flatten_util.ravel_pytree(mask_tree)[0]).astype(bool)
    if not is_last.any() or is_last.all():
        raise ValueError(f"last_layer={last_layer!r} must name the model's last submodule (it selects "
                         f"{int(is_last.sum())} of {is_last.size} parameters)")

    def out(theta, x, a):
        return apply_fn(unravel(theta), x)[a]

    jac = jax.jit(jax.vmap(jax.value_and_grad(out), in_axes=(None, 0, 0)))
    f0, rows = [], []
    for i in range(0, len(actions), chunk):
        v, j = jac(flat, jnp.asarray(contexts[i:i + chunk]), actions[i:i + chunk])
        f0.append(np.asarray(v, np.float64))
        rows.append(np.asarray(j, np.float64))
    j = np.concatenate(rows)
    jh, jl = j[:, ~is_last], j[:, is_last]
    return jh @ jh.T, jl @ jl.T, np.concatenate(f0)


def empirical_bayes_prior(env, model, params, scale: float = 1.0, rounds: int = ROUNDS, last_layer: str = "head",
                          seed: int = 0) -> dict[str, float]:
    """The empirical-Bayes prior of ``model`` (multi-output: ``model.apply(params, x)`` is ``(K,)``) on ``rounds``
    rounds logged by a uniform-random policy (:func:`logged_rounds`), under the model linearised at ``params``:

    - ``"all"``: one variance ``σ²`` for every weight (LoFi, LRKF: ``K = σ² (G_h + G_ℓ) + R I``);
    - ``"hidden"``, ``"last"``: ``c · σ_B²(fan-in)``, one scale ``c`` fitted on the initialiser's per-block
      profile (:func:`fan_in_variances`; ``K = c (σ_h² G_h + σ_ℓ² G_ℓ) + R I``, HiLoFi): fitting the two blocks
      freely is ill-posed when their Gram matrices are nearly collinear (one variance runs to its bound);
    - ``"obs_noise"``, ``"obs_noise_profile"``: the ``R`` fitted alongside each (a nuisance; the agents keep
      :mod:`banditkit.agents.scales`' rule).
    """
    contexts, actions, targets = logged_rounds(env, rounds, seed, scale)
    gh, gl, f0 = linearised_grams(model.apply, params, contexts, actions, last_layer)
    residual = targets - f0
    (tied, _), noise = empirical_bayes_variances([gh, gl], residual, tied=True)
    fan = fan_in_variances(params, last_layer)
    (c,), noise_profile = empirical_bayes_variances([fan["hidden"] * gh + fan["last"] * gl], residual)
    return {"all": tied, "hidden": c * fan["hidden"], "last": c * fan["last"], "obs_noise": noise,
            "obs_noise_profile": noise_profile}


def unit_head_variance(model, params, contexts) -> float:
    """``σ_ℓ² = 1 / E[‖φ(x)‖² + 1]`` (module docstring, *Unit head*): ``φ(x) = model.apply(params, x,
    return_features=True)`` the head's input (``H``,) for each of ``contexts`` ``(n, ...)``; the ``+ 1`` is the
    head's bias."""
    phi = jax.vmap(lambda x: jnp.ravel(model.apply(params, x, return_features=True)))(jnp.asarray(contexts))
    return float(1.0 / (np.mean(np.sum(np.asarray(phi, np.float64) ** 2, axis=1)) + 1.0))


def unit_head_prior(env, model, rounds: int = ROUNDS) -> float | None:
    """:func:`unit_head_variance` of ``model`` (multi-output, with ``return_features``) at ``model.init(PRNGKey(0))``
    over the contexts of ``env.unwrapped.functional(0, rounds)``; ``None`` when the env has no functional form or the
    model does not expose its head's input."""
    try:
        contexts = logged_rounds(env, rounds)[0]  # ValueError without a functional form
        params = model.init(jax.random.PRNGKey(0), contexts[0])
        value = unit_head_variance(model, params, contexts)
    except (TypeError, ValueError, NotImplementedError):  # no such read or no return_features: the constant stays
        return None
    return value if np.isfinite(value) and value > 0 else None


def unit_lowrank_variance(apply_fn: Callable, mean, rows, contexts) -> float:
    """``σ² = 1 / E_{x,k}[‖Q h_k(x)‖²]`` (module docstring, *Unit low-rank prior*): ``h_k(x) = ∂f_k(x) / ∂θ`` at the
    flat weights ``mean (P,)`` (``apply_fn(flat, x) -> (K,)``), ``Q = rows (d, P)`` the prior factor's orthonormal
    rows, ``x`` over ``contexts (n, ...)`` and ``k`` over the ``K`` outputs.  ``Q h_k`` is ``d`` forward-mode
    products per context (no ``(K, P)`` Jacobian is formed)."""
    rows = jnp.asarray(rows)

    def per_context(x):
        along = lambda q: jax.jvp(lambda th: apply_fn(th, x), (mean,), (q,))[1]  # noqa: E731 - (K,) = H q
        return jnp.sum(jax.vmap(along)(rows) ** 2, axis=0)  # (K,): ‖Q h_k‖²

    sq = jax.lax.map(per_context, jnp.asarray(contexts))  # (n, K)
    return float(1.0 / np.mean(np.asarray(sq, np.float64)))


def unit_lowrank_prior(env, agent, rounds: int = ROUNDS) -> float | None:
    """:func:`unit_lowrank_variance` for ``agent`` (a :class:`~banditkit.agents.BanditAgent` on LRKF, multi-output):
    its weights and prior rows from ``agent.init(PRNGKey(0), ·)`` (``Q = C_0 / ‖C_0‖_row``), the contexts of
    ``env.unwrapped.functional(0, rounds)``; ``None`` without a functional form or a finite positive value."""
    try:
        contexts = logged_rounds(env, rounds)[0]  # ValueError without a functional form
    except (TypeError, ValueError, NotImplementedError):
        return None
    state = agent.init(jax.random.PRNGKey(0), contexts[0]).posterior
    while hasattr(state, "inner") or hasattr(state, "members"):  # a learned-noise wrapper (posteriors.noise) or an
        state = state.inner if hasattr(state, "inner") else state.members[0]  # evidence mixture (same prior rows)
    c0 = state.cov.dense()  # (d, P) = √init_cov · Q
    rows = c0 / jnp.sqrt(jnp.sum(c0**2, axis=1, keepdims=True))
    space = state.space
    value = unit_lowrank_variance(lambda th, x: agent.model.apply(space.unravel(th), x), state.mean, rows, contexts)
    return value if np.isfinite(value) and value > 0 else None
