"""Run-health checks: is an agent state still finite (checked after every compiled segment), and the numbers a
posterior backend's ``diagnostics`` hook reports about each seed's final state (recorded, its warnings shown).

A posterior that went NaN/inf still "acts" (``argmax`` of NaN scores is arm 0), so its rewards would pass for a
result; the loops warn instead and record ``timing["nonfinite"] = {seed: round}`` (:mod:`banditkit.experiments.
runner`).
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from banditkit.debug import _finite_flags
from banditkit.posteriors.base import Posterior


def state_is_finite(state) -> jax.Array:
    """``True`` iff every floating-point leaf of ``state`` is finite (integer and key leaves are skipped)."""
    flags = _finite_flags(state)
    return jnp.all(jnp.stack(flags)) if flags else jnp.asarray(True)



def _diagnostics(agent, posterior_state, seeds, batched: bool = True) -> dict[str, dict[int, Any]]:
    """``{key: {seed: value}}`` from the posterior's ``diagnostics`` hook on each seed's final state (``{}`` when the
    backend has none).  ``batched``: the state's leading axis is the seed axis (padded seeds past ``len(seeds)``
    ignored); else it is one seed's state and ``seeds`` names that seed."""
    post = getattr(agent, "posterior", None)
    if not isinstance(post, Posterior) or post.diagnostics is None or posterior_state is None:
        return {}
    host = jax.device_get(posterior_state)
    out: dict[str, dict[int, Any]] = {}
    for i, s in enumerate(seeds):
        one = jax.tree_util.tree_map(lambda a, i=i: a[i], host) if batched else host
        for key, value in (post.diagnostics(one) or {}).items():
            out.setdefault(str(key), {})[int(s)] = _plain(value)
    return out



def _plain(value):
    """A diagnostics value as plain Python (numbers, strings, lists): arrays and tuples of arrays become lists."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    arr = np.asarray(value)
    return arr.item() if arr.ndim == 0 else arr.tolist()



def _recorded_diagnostics(diagnostics: dict[str, dict[int, Any]]) -> dict[str, dict[int, Any]]:
    """The timing entries of the diagnostics: every key but the ``"warning"`` messages (shown, not stored)."""
    return {k: v for k, v in diagnostics.items() if k != "warning"}



def _warn_diagnostics(name: str, diagnostics: dict[str, dict[int, Any]], stacklevel: int = 3) -> None:
    """One ``RuntimeWarning`` per distinct ``"warning"`` message of the diagnostics, naming the seeds that gave it."""
    by_message: dict[str, list[int]] = {}
    for s, message in (diagnostics.get("warning") or {}).items():
        if message:
            by_message.setdefault(str(message), []).append(s)
    for message, seeds in by_message.items():
        warnings.warn(f"{name}: seed(s) {sorted(seeds)}: {message}", RuntimeWarning, stacklevel=stacklevel)
