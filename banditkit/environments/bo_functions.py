"""Bayesian-optimisation test functions on the unit cube, as in seed 003 (Appendix G.3).

Every function takes ``x01`` of shape ``(..., dim)`` in ``[0, 1]^dim``, scales it to its native domain and returns
the *standard* value (``(...)``) — a quantity to MINIMISE for all four families.  The BO environments
(``banditkit/Ackley-v0`` ...) use ``reward = -value`` so that reward is maximised; :meth:`BOFunction.reward` does
the same.  NumPy input gives NumPy output; a JAX array (also under ``jit``) gives a JAX array.

==============  =========  ================================  ==========================  ===============================
function        dim        native domain                     minimum value               minimiser(s) in ``[0,1]^dim``
==============  =========  ================================  ==========================  ===============================
``ackley``      any        ``[-4, 5]^dim`` (``x' = 9x - 4``)  0                           ``(4/9, ..., 4/9)``
``branin``      2          ``[-5, 10] x [0, 15]``             0.397887357729738...        3 points (``FUNCTIONS``)
``hartmann6``   6          ``[0, 1]^6``                       -3.322368011391339          1 point
``drawnn``      any        ``[0, 1]^dim``                     estimated numerically        best point found
==============  =========  ================================  ==========================  ===============================

Ackley: ``f = -a exp(-b sqrt(mean x'^2)) - exp(mean cos(c x')) + a + e`` with ``a = 20, b = 0.2, c = 2π``.
Branin: ``f = (x2 - b x1^2 + c x1 - r)^2 + s (1 - t) cos x1 + s``, ``b = 5.1/(4π^2), c = 5/π, r = 6, s = 10,
t = 1/(8π)``.  Hartmann6: ``f = -Σ_i α_i exp(-Σ_j A_ij (x_j - P_ij)^2)``.  DrawNN: a fixed random MLP
``dim -> 50 ReLU -> 50 ReLU -> 1``, all weights and biases ``N(0, 1)`` drawn by NumPy from ``seed`` (default 3141;
the authors used a JAX key, so the draw differs); its minimum over the cube is not known in closed form and is
estimated by multi-start projected descent plus a corner search (:func:`drawnn_minimum`), a value the true
minimum can only undercut (so a simple regret below 0 means a better point than the estimate was found).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _xp(x: Any):
    if isinstance(x, np.ndarray) or np.isscalar(x) or isinstance(x, (list, tuple)):
        return np
    import jax.numpy as jnp

    return jnp


def _arr(x: Any, dim: int | None = None):
    xp = _xp(x)
    a = xp.asarray(x, dtype=xp.float64 if xp is np else None)
    if dim is not None and a.shape[-1:] != (dim,):
        raise ValueError(f"expected points of dimension {dim} (shape (..., {dim})), got shape {tuple(a.shape)}")
    return xp, a


def ackley(x01: Any) -> Any:
    """Ackley on ``[-4, 5]^dim``; minimum 0 at ``x01 = 4/9``."""
    xp, x = _arr(x01)
    z = 9.0 * x - 4.0
    a, b, c = 20.0, 0.2, 2.0 * np.pi
    return (-a * xp.exp(-b * xp.sqrt(xp.mean(z**2, axis=-1))) - xp.exp(xp.mean(xp.cos(c * z), axis=-1))
            + a + np.e)


def branin(x01: Any) -> Any:
    """Branin on ``[-5, 10] x [0, 15]``; minimum 0.397887 at three points."""
    xp, x = _arr(x01, 2)
    x1, x2 = 15.0 * x[..., 0] - 5.0, 15.0 * x[..., 1]
    b, c, r, s, t = 5.1 / (4 * np.pi**2), 5.0 / np.pi, 6.0, 10.0, 1.0 / (8 * np.pi)
    return (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * xp.cos(x1) + s


_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_H_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8],
                 [17, 8, 0.05, 10, 0.1, 14]])
_H_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                        [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])


def hartmann6(x01: Any) -> Any:
    """Hartmann-6 on ``[0, 1]^6``; minimum -3.32237."""
    xp, x = _arr(x01, 6)
    inner = xp.sum(_H_A * (x[..., None, :] - _H_P) ** 2, axis=-1)
    return -xp.sum(_H_ALPHA * xp.exp(-inner), axis=-1)


@functools.lru_cache(maxsize=16)
def drawnn_weights(dim: int, seed: int = 3141, width: int = 50) -> tuple[np.ndarray, ...]:
    """``(W1 (dim, w), b1, W2 (w, w), b2, W3 (w, 1), b3)``, all ``N(0, 1)`` from ``default_rng(seed)``."""
    rng = np.random.default_rng([seed, dim])
    shapes = [(dim, width), (width,), (width, width), (width,), (width, 1), (1,)]
    out = tuple(rng.normal(size=s) for s in shapes)
    for w in out:
        w.setflags(write=False)
    return out


def drawnn(x01: Any, seed: int = 3141) -> Any:
    """The fixed random ReLU MLP ``dim -> 50 -> 50 -> 1`` (dim = the last axis of ``x01``)."""
    xp, x = _arr(x01)
    w1, b1, w2, b2, w3, b3 = drawnn_weights(int(x.shape[-1]), seed)
    h = xp.maximum(x @ w1 + b1, 0.0)
    h = xp.maximum(h @ w2 + b2, 0.0)
    return (h @ w3 + b3)[..., 0]


def _drawnn_grad(x: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    w1, b1, w2, b2, w3, b3 = drawnn_weights(x.shape[-1], seed)
    z1 = x @ w1 + b1
    h1 = np.maximum(z1, 0)
    z2 = h1 @ w2 + b2
    h2 = np.maximum(z2, 0)
    f = (h2 @ w3 + b3)[:, 0]
    g2 = (z2 > 0) * w3[:, 0]
    g1 = (g2 @ w2.T) * (z1 > 0)
    return f, g1 @ w1.T


@functools.lru_cache(maxsize=16)
def drawnn_minimum(dim: int, seed: int = 3141, starts: int = 128, iters: int = 200) -> tuple[float, np.ndarray]:
    """Estimate ``min_{x in [0,1]^dim} drawnn(x)`` and a point reaching it, ``(value, x01)``.

    1. projected sign-gradient descent with a decaying step from ``starts`` random points and the centre;
    2. the network is piecewise linear, so from the best 16 end points, round to the cube's corners and run a
       greedy one-coordinate-flip descent over corners until no flip improves.
    The result is an upper bound on the true minimum (deterministic given ``dim, seed``).
    """
    rng = np.random.default_rng([seed, dim, 1])
    x = np.vstack([rng.random((starts, dim)), np.full((1, dim), 0.5)])
    if dim <= 2:  # low dimension: start from the best points of a dense grid as well
        grid = np.stack(np.meshgrid(*[np.linspace(0, 1, 301)] * dim), -1).reshape(-1, dim)
        fg, _ = _drawnn_grad(grid, seed)
        x = np.vstack([x, grid[np.argsort(fg)[:starts]]])
    best_f, best_x = np.inf, x[0]
    for k in range(iters):
        f, g = _drawnn_grad(x, seed)
        i = int(np.argmin(f))
        if f[i] < best_f:
            best_f, best_x = float(f[i]), x[i].copy()
        x = np.clip(x - (0.1 * (1 - k / iters) + 1e-3) * np.sign(g), 0.0, 1.0)
    f, _ = _drawnn_grad(x, seed)
    corners = np.round(x[np.argsort(f)[:16]])
    fc, _ = _drawnn_grad(corners, seed)
    eye = np.eye(dim, dtype=bool)
    for _ in range(4 * dim):
        flips = np.abs(corners[:, None, :] - eye[None]).reshape(-1, dim)  # every one-coordinate flip
        ff, _ = _drawnn_grad(flips, seed)
        ff = ff.reshape(len(corners), dim)
        j = ff.argmin(axis=1)
        better = ff[np.arange(len(corners)), j] < fc - 1e-12
        if not better.any():
            break
        corners[better, j[better]] = 1.0 - corners[better, j[better]]
        fc = np.where(better, ff[np.arange(len(corners)), j], fc)
    j = int(np.argmin(fc))
    if fc[j] < best_f:
        best_f, best_x = float(fc[j]), corners[j].copy()
    best_x.setflags(write=False)
    return best_f, best_x


@dataclass(frozen=True)
class BOFunction:
    """A test function on ``[0,1]^dim``: ``value(x01)`` (to minimise), ``reward(x01) = -value`` (to maximise).

    ``bounds`` is the native domain ``(dim, 2)``; ``minimum`` the minimum value; ``minimizers`` the known
    minimisers in ``[0, 1]^dim`` (``(k, dim)``); ``optimum = -minimum`` is the best reward;
    ``estimated`` is True when the minimum is a numerical estimate (DrawNN).
    """

    name: str
    dim: int
    bounds: np.ndarray
    value: Callable[[Any], Any]
    minimum_fn: Callable[[], tuple[float, np.ndarray]] = field(repr=False)
    estimated: bool = False

    @property
    def minimum(self) -> float:
        return float(self.minimum_fn()[0])

    @property
    def minimizers(self) -> np.ndarray:
        return np.atleast_2d(self.minimum_fn()[1])

    @property
    def optimum(self) -> float:
        return -self.minimum

    def reward(self, x01: Any) -> Any:
        return -self.value(x01)

    def to_domain(self, x01: Any) -> np.ndarray:
        """Scale points from ``[0,1]^dim`` to the native domain."""
        x = np.asarray(x01, dtype=np.float64)
        return self.bounds[:, 0] + x * (self.bounds[:, 1] - self.bounds[:, 0])

    def __call__(self, x01: Any) -> Any:
        return self.value(x01)


_BRANIN_MIN = np.array([[(-np.pi + 5) / 15, 12.275 / 15], [(np.pi + 5) / 15, 2.275 / 15],
                        [(9.42478 + 5) / 15, 2.475 / 15]])
_HARTMANN_MIN = np.array([[0.20168952, 0.15001069, 0.47687398, 0.27533243, 0.31165162, 0.65730054]])


def make_function(name: str, dim: int | None = None, seed: int = 3141) -> BOFunction:
    """The :class:`BOFunction` ``name`` in ``{"ackley", "branin", "hartmann6", "drawnn"}`` (``dim`` for the first
    and the last; default 2 and 50)."""
    key = str(name).lower().replace("-", "").replace("_", "")
    if key == "ackley":
        d = 2 if dim is None else _check_dim(dim)
        return BOFunction("ackley", d, np.tile([-4.0, 5.0], (d, 1)), ackley, lambda: (0.0, np.full((1, d), 4 / 9)))
    if key == "branin":
        _fixed(dim, 2, "branin")
        return BOFunction("branin", 2, np.array([[-5.0, 10.0], [0.0, 15.0]]), branin,
                          lambda: (5.0 / (4 * np.pi), _BRANIN_MIN))
    if key in ("hartmann6", "hartmann"):
        _fixed(dim, 6, "hartmann6")
        return BOFunction("hartmann6", 6, np.tile([0.0, 1.0], (6, 1)), hartmann6,
                          lambda: (-3.322368011391339, _HARTMANN_MIN))
    if key in ("drawnn", "nndraw"):
        d = 50 if dim is None else _check_dim(dim)
        return BOFunction(f"drawnn{d}", d, np.tile([0.0, 1.0], (d, 1)), functools.partial(drawnn, seed=seed),
                          lambda: drawnn_minimum(d, seed), estimated=True)
    raise ValueError(f"unknown BO function {name!r}; choose one of ackley, branin, hartmann6, drawnn")


def _check_dim(dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or int(dim) < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    return int(dim)


def _fixed(dim: Any, want: int, name: str) -> None:
    if dim is not None and int(dim) != want:
        raise ValueError(f"{name} is defined in {want} dimensions only, got dim={dim}")


FUNCTIONS: dict[str, BOFunction] = {
    "ackley": make_function("ackley", 2),
    "ackley5": make_function("ackley", 5),
    "ackley10": make_function("ackley", 10),
    "ackley50": make_function("ackley", 50),
    "branin": make_function("branin"),
    "hartmann6": make_function("hartmann6"),
    "drawnn50": make_function("drawnn", 50),
    "drawnn200": make_function("drawnn", 200),
}
"""Seed 003's eight benchmark tasks (``ackley`` = 2-D); ``make_function`` builds any other ``dim``."""
