"""Vowpal Wabbit's contextual bandits (``vowpalwabbit``) as a peer: ``--cb_explore_adf`` with action-dependent features.

Each round is one multi-line ADF example, the context in the shared namespace ``s`` and each arm ``k`` an indicator
feature ``a{k}`` in namespace ``a``; ``-q sa`` crosses them, so VW's linear regressor learns one weight per (context
feature, arm) pair — a linear model per arm, as LinTS / LinUCB have::

    shared |s f0:x_0 f1:x_1 ...        (non-zero features only)
    |a a0
    ...
    |a a{K-1}

``predict`` returns the exploration policy's probability vector ``p`` (SquareCB's inverse-gap weighting or
ε-greedy); the arm is drawn from ``p`` with a NumPy generator seeded by the run's seed (VW's own ``--random_seed``
is that seed too), and ``learn`` gets the chosen arm's line labelled ``0:c:p_a`` with the cost ``c = −r`` (VW
minimises cost; the reward's units unchanged).
"""

from __future__ import annotations

import numpy as np

from benchmarks.peers import check_context


class VWLearner:
    """One seed's VW contextual bandit on ``num_actions`` arms; ``explore`` the exploration flags (``--squarecb``,
    ``--epsilon 0.05``), ``interactions`` the namespace crossing."""

    def __init__(self, num_actions: int, seed: int, explore: str = "--squarecb", interactions: str = "-q sa"):
        import vowpalwabbit

        if num_actions < 2:
            raise ValueError(f"VWLearner needs at least 2 arms, got {num_actions}")
        self.num_actions = int(num_actions)
        self.args = f"--cb_explore_adf {explore} {interactions} --quiet --random_seed {int(seed)}"
        self._vw = vowpalwabbit.Workspace(self.args)
        self._rng = np.random.default_rng(int(seed))
        self._arms = [f"|a a{k}" for k in range(self.num_actions)]
        self._last: tuple[bytes, np.ndarray] | None = None  # (context bytes, pmf) of the last choose

    def _shared(self, x: np.ndarray) -> str:
        nz = np.flatnonzero(x)
        return "shared |s " + " ".join(f"f{j}:{x[j]:.9g}" for j in nz)

    def pmf(self, x: np.ndarray) -> np.ndarray:
        """VW's exploration distribution over the arms for context ``x`` (sums to 1)."""
        x = check_context(x, "VWLearner")
        p = np.asarray(self._vw.predict([self._shared(x), *self._arms]), np.float64)
        if p.shape != (self.num_actions,) or not np.all(np.isfinite(p)) or p.sum() <= 0:
            raise RuntimeError(f"VW returned an invalid action distribution {p!r} for {self.num_actions} arms")
        return p / p.sum()

    def choose(self, x: np.ndarray) -> int:
        p = self.pmf(x)
        self._last = (np.asarray(x, np.float64).tobytes(), p)
        return int(self._rng.choice(self.num_actions, p=p))

    def update(self, x: np.ndarray, action: int, reward: float) -> None:
        x = check_context(x, "VWLearner")
        if self._last is not None and self._last[0] == x.tobytes():
            p = self._last[1]  # the distribution the arm was drawn from
        else:
            p = self.pmf(x)
        lines = [self._shared(x), *self._arms]
        lines[1 + int(action)] = f"0:{-float(reward):.9g}:{max(float(p[action]), 1e-12):.9g} {self._arms[action]}"
        self._vw.learn(lines)
        self._last = None
