"""Does one update overshoot its own observation?  The check for grid cells that are unstable by construction.

For a state, an observation ``(x, y)`` with residual ``e = y − ŷ`` (``ŷ``: the state's predictive mean at ``x``)
and ``e′ = y − ŷ′`` (``ŷ′``: the predictive mean of ``update(state, x, y)`` at the same ``x``), the **self-fit gain**
is the fraction of the residual the update removes,

    κ = 1 − ⟨e′, e⟩ / ‖e‖².

In the linearised model (``H (1, P)``, ``Gaussian(R)``) every rule of the grid moves the mean by ``Δμ = P_t Hᵀ R⁻¹ e``
for a positive semi-definite ``P_t``, so ``e′ = (1 − κ) e`` with ``κ = H P_t Hᵀ / R`` exactly.  ``κ > 2`` means the
step passes the target by more than it was off (``|e′| > |e|`` with the sign flipped); repeated, the residual grows
geometrically — the step is unstable by construction, whatever the precision does.  ``|κ|`` is the size of the step
at the observed input in units of the residual, so a Monte-Carlo estimator whose noisy step points away from the
target (``κ < 0``) is judged by the same bound, ``|κ| > 2``:

- ``bong`` / ``blr`` on ``"full"`` or ``"dlr"`` (mean from the un-truncated precision ``Λ + HᵀR⁻¹H``):
  ``κ = s / (R/α + s)`` with ``s = HΣHᵀ`` (``α = 1`` for bong), so ``0 ≤ κ < 1`` always.
- ``bong`` on ``"diag"`` (seed 004 eq. 213/215, ``Δμ = g / υ_t`` with ``υ_t = υ + diag(HᵀR⁻¹H)``):
  ``κ = Σ_j H_j² / (R υ_j + H_j²)``, which ignores the correlations between parameters and can reach ``P``;
  ``blr`` on ``"diag"`` (first iterate): ``κ = α Σ_j H_j² / (R υ_j + α H_j²)``.  Both shrink as ``init_cov``
  shrinks (about in proportion while ``init_cov · H_j² ≪ R``).
- ``bog`` on ``"dlr"`` (``Δμ = α g``): ``κ = α ‖H‖² / R`` — the learning rate times the curvature of the
  linearised loss must stay below 2 (plain gradient descent on a quadratic): the stable learning rates are those
  below ``2α / κ``.

:func:`self_fit_gain` measures ``κ`` on the real (non-linear) model through the posterior's own ``update`` and
``predictive``, so it applies to any rule, estimator and family (and to any backend of the :class:`Posterior`
contract).  :func:`check_step` is the shell-side check: the median ``|κ|`` over a batch of observations, each
updated from the same state, and a warning (or, with ``strict=True``, a ``ValueError``) that names the reason and
the fix when it exceeds 2.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from banditkit.posteriors.base import Posterior, as_obs

Array = jax.Array


def self_fit_gain(post: Posterior, state: Any, x: Any, y: Array) -> Array:
    """``κ = 1 − ⟨e′, e⟩ / ‖e‖²`` for one observation: scalar; ``inf`` when ``ŷ′`` is not finite, NaN when ``e = 0``.

    Pure and traceable (``jit`` / ``vmap`` over ``(x, y)``)."""
    y = as_obs(y, state.mean.dtype) if hasattr(state, "mean") else as_obs(y)
    e = y - post.predictive(state, x)[0]
    after = post.predictive(post.update(state, x, y), x)[0]
    den = jnp.sum(e * e)
    gain = 1.0 - jnp.sum((y - after) * e) / jnp.where(den > 0, den, 1.0)
    return jnp.where(jnp.all(jnp.isfinite(after)), jnp.where(den > 0, gain, jnp.nan), jnp.inf)


def _reason(post: Posterior, kappa: float) -> str:
    """Why a cell of the grid overshoots and what to change, from its hyper-parameters."""
    hyper = post.hyper
    rule, family = hyper.get("rule"), hyper.get("family")
    if rule in ("bog", "bbb"):
        lr = float(hyper.get("learning_rate", float("nan")))
        return (f"rule={rule!r} takes plain gradient steps of size learning_rate={lr:g}; in the linearised model "
                "the mean step is stable only while learning_rate × λ_max(HᵀR⁻¹H) < 2, and here it is about "
                f"{kappa:.3g}. Lower learning_rate below about {2 * lr / kappa:.3g}, or use rule='bong' (no learning "
                "rate).")
    if family == "diag":
        c0 = float(hyper.get("init_cov", float("nan")))
        return ("the diagonal family's natural step μ ← μ + α g / υ (seed 004 eq. 213/215) ignores the correlations "
                "between parameters, so it moves the prediction by κ times the residual (stable while κ < 2). Lower "
                f"init_cov={c0:g} (κ shrinks about in proportion), or use family='dlr' or the 'diag_ekf' backend, "
                "whose mean step uses the un-truncated precision.")
    return ("the update moves the prediction past its own observation by more than the residual; lower init_cov or "
            "the learning rate, or raise the observation noise.")


def check_step(post: Posterior, state: Any, xs: Any, ys: Array, *, strict: bool = False) -> float:
    """Median ``|κ|`` (self-fit gain) over ``n`` observations, each updated from ``state``; warn when it exceeds 2.

    Args:
      post: a posterior (any backend; the message is specific to the BONG grid's ``hyper``).
      state: the state to step from, e.g. ``post.init(params)``.
      xs: inputs with a leading axis ``n`` (a pytree); ``ys (n, C)`` or ``(n,)``: their observations.
      strict: raise ``ValueError`` instead of warning (refuse the configuration).

    Returns the median ``|κ|`` (observations with zero residual ignored; ``inf`` counts as too large).  A
    ``UserWarning`` (or the ``ValueError``) gives the reason: for ``bog`` / ``bbb`` the learning rate times the
    curvature bound exceeds 2, for the diagonal family the natural step's neglect of correlations at this
    ``init_cov``.
    """
    ys = jnp.asarray(ys)
    ys = ys[:, None] if ys.ndim == 1 else ys
    gains = np.asarray(jax.jit(jax.vmap(lambda x, y: self_fit_gain(post, state, x, y)))(xs, ys))
    kappa = float(np.nanmedian(np.abs(gains))) if np.any(~np.isnan(gains)) else float("nan")
    if kappa > 2:
        name = post.name + (f"(rule={post.hyper['rule']!r}, family={post.hyper['family']!r})"
                            if "rule" in post.hyper else "")
        msg = (f"{name}: unstable by construction at this state — one update moves the prediction at its own input "
               f"by |κ| = {kappa:.3g} times the residual (median over {len(gains)} observations; a stable step has "
               f"0 ≤ κ < 2, the residual then shrinks; here it grows about {kappa - 1:.3g}× per step). "
               f"{_reason(post, kappa)}")
        if strict:
            raise ValueError(msg)
        warnings.warn(msg, UserWarning, stacklevel=2)
    return kappa
