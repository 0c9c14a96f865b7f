"""MABWiser's linear contextual bandits (``mabwiser``) as a peer: ``LinTS`` and ``LinUCB`` with their defaults.

Both keep one ridge regression per arm, ``A_k = λI + Σ x xᵀ`` and ``b_k = Σ r x`` over the rounds arm ``k`` was
pulled, ``β_k = A_k⁻¹ b_k``, and score an arm by ``xᵀβ̃_k`` with ``β̃_k ~ N(β_k, α² A_k⁻¹)`` (LinTS) or by
``xᵀβ_k + α √(xᵀA_k⁻¹x)`` (LinUCB); the arm with the highest score is played.  ``MAB(arms, policy, seed=seed)``
holds the seed; before the first round the bandit is fitted on no data (``A_k = λI``, ``β_k = 0``), since MABWiser
predicts only after a fit.

``MAB.partial_fit`` deep-copies every arm's model each call and keeps only the pulled arm's (``_Linear._fit_arm``),
which costs ``K`` copies per round — most of a round's time on 14 arms.  :class:`MABWiserLearner` (``fast=True``) does
what that call keeps: it copies and refits the pulled arm's model and marks the arm trained, with the same arithmetic
and the same random stream, so the arms chosen are exactly those of ``partial_fit``
(``tests/benchmarks/test_bench_peers.py`` checks it round by round).
"""

from __future__ import annotations

from copy import deepcopy

import numpy as np

from benchmarks.peers import check_context

POLICIES = ("LinTS", "LinUCB")


class MABWiserLearner:
    """One seed's MABWiser ``LinTS`` / ``LinUCB`` bandit (MABWiser's defaults unless ``policy_kwargs``) on arms
    ``0..num_actions-1``; ``fast=False`` updates through ``MAB.partial_fit`` itself."""

    def __init__(self, num_actions: int, seed: int, policy: str = "LinTS", fast: bool = True,
                 policy_kwargs: dict | None = None):
        from mabwiser.mab import MAB, LearningPolicy

        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        if num_actions < 2:
            raise ValueError(f"MABWiserLearner needs at least 2 arms, got {num_actions}")
        self.num_actions = int(num_actions)
        self.fast = bool(fast)
        self._mab = MAB(list(range(self.num_actions)), getattr(LearningPolicy, policy)(**(policy_kwargs or {})),
                        seed=int(seed))
        self._dim: int | None = None

    def _start(self, x: np.ndarray) -> None:
        if self._dim is None:
            self._dim = x.shape[0]
            self._mab.fit(np.zeros(0, np.int64), np.zeros(0), np.zeros((0, self._dim)))
        elif x.shape[0] != self._dim:
            raise ValueError(f"context has {x.shape[0]} features, the earlier rounds had {self._dim}")

    def choose(self, x: np.ndarray) -> int:
        x = check_context(x, "MABWiserLearner")
        self._start(x)
        return int(self._mab.predict(x[None, :]))

    def update(self, x: np.ndarray, action: int, reward: float) -> None:
        x = check_context(x, "MABWiserLearner")
        self._start(x)
        a, r = int(action), float(reward)
        if not self.fast:
            self._mab.partial_fit([a], [r], x[None, :])
            return
        imp = self._mab._imp  # what _Linear.partial_fit keeps of its per-arm pass: the pulled arm, refitted on a copy
        model = deepcopy(imp.arm_to_model[a])
        model.fit(x[None, :], np.asarray([r]))
        imp.arm_to_model[a] = model
        imp._set_arms_as_trained(decisions=np.asarray([a]), is_partial=True)
