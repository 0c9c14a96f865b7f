"""Seed 003's 1-D "in-between" regression set (after van Amersfoort et al. 2021), generated in code.

``x_raw = 5·sign(z1) + clip(z2, -2, 2)`` with ``z1, z2 ~ N(0, 1)``; ``y = Σ_{k=1}^{30} cos(W_k x_raw) / 2`` with
``W_k ~ N(0, 1)`` (no noise); inputs ``x = x_raw / 10`` form two clusters near ±0.5 with a gap in between.
The authors drew with ``jax.random.PRNGKey(3)``; here NumPy's generator with ``seed`` draws the same
distribution (not the same numbers).
"""

from __future__ import annotations

import numpy as np


def in_between(n: int = 128, seed: int = 3, n_grid: int = 200) -> dict[str, np.ndarray]:
    """``{"x": (n, 1), "y": (n,), "x_grid": (n_grid, 1) = linspace(-0.8, 0.8)}``, float32."""
    if int(n) < 1:
        raise ValueError(f"n must be a positive number of points, got {n}")
    rng = np.random.default_rng(seed)
    z1, z2 = rng.normal(size=n), rng.normal(size=n)
    x_raw = 5.0 * np.sign(z1) + np.clip(z2, -2.0, 2.0)
    w = rng.normal(size=30)
    y = np.cos(np.outer(x_raw, w)).sum(axis=1) / 2.0
    grid = np.linspace(-0.8, 0.8, n_grid)
    return {"x": (x_raw / 10.0)[:, None].astype(np.float32), "y": y.astype(np.float32),
            "x_grid": grid[:, None].astype(np.float32)}
