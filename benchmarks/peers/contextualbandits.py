"""contextualbandits' (``contextualbandits``) online Thompson sampling as a peer: ``LinTS`` and ``BootstrappedTS``.

* ``LinTS(K, sample_from="ci")``: one ridge regression per arm (``A_k = λI + Σ x̃ x̃ᵀ`` with ``x̃ = [x, 1]``, ``λ = 1``,
  ``β_k = A_k⁻¹ Σ r x̃``), scoring arm ``k`` by ``x̃ᵀβ_k + z √(x̃ᵀA_k⁻¹x̃)``, ``z ~ N(0, v²)``, ``v² = 1``: Thompson
  sampling from each arm's predictive interval, the library's ``"ci"`` mode; its other settings are its defaults.
  The default mode, ``sample_from="coef"``, draws the coefficients with covariance ``v²(XᵀX + λI)`` instead of
  ``v²(XᵀX + λI)⁻¹`` in contextualbandits 0.3.30 (measured: after 400 observations of a 3-feature regression the
  first coefficient's draws have variance 414 where ``(A⁻¹)₀₀ = 0.0026`` and ``A₀₀ = 394``; in ``"ci"`` mode the
  score's variance is 0.0026), so its draws never concentrate and it plays at chance on a stream that the ``"ci"``
  mode learns (``tests/benchmarks/test_bench_peers.py``).
* ``BootstrappedTS(LinearRegression(method="chol"), K, batch_train=True)``: 10 bootstrapped copies of the library's
  own online ridge regression per arm (each new observation weighted ``~ Gamma(1, 1)`` in each copy), one copy drawn
  per arm at each prediction; ``batch_train=True`` makes ``partial_fit`` update the copies with the new round only
  (the online form; the default refits on all data each call) and ``njobs_arms=1`` keeps it on one core like every
  other peer (the default, -1, spreads the arms over all cores).  The base is a regressor, not a classifier, because
  Mushroom's and MovieLens' rewards are not in {0, 1}; ``method="chol"`` because the default Sherman-Morrison form
  gets weighted updates wrong in 0.3.30 (measured: 300 Gamma-weighted rows of ``y = x·(1, −1, 0.5)`` give the
  coefficients (2.20, −2.36, 1.17) where weighted ridge gives (1.01, −0.99, 0.49); ``"chol"`` gives (1.04, −1.01,
  0.48) with an intercept and the exact values without one).  The library's other defaults (``beta_prior="auto"``:
  arms with fewer than 2 observations score a Beta draw) are kept.

Both are seeded with ``random_state=seed + 1`` (the library refuses 0) and updated with ``partial_fit(x, [a], [r])``
after every round.
"""

from __future__ import annotations

import numpy as np

from benchmarks.peers import check_context


class _Online:
    """``choose`` = ``model.predict(x)``, ``update`` = ``model.partial_fit(x, [a], [r])`` on a contextualbandits
    policy object."""

    def __init__(self, model, num_actions: int):
        if num_actions < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 arms, got {num_actions}")
        self.num_actions = int(num_actions)
        self._model = model

    def choose(self, x: np.ndarray) -> int:
        x = check_context(x, type(self).__name__)
        return int(np.asarray(self._model.predict(x[None, :])).reshape(-1)[0])

    def update(self, x: np.ndarray, action: int, reward: float) -> None:
        x = check_context(x, type(self).__name__)
        self._model.partial_fit(x[None, :], np.asarray([int(action)]), np.asarray([float(reward)]))


class LinTSLearner(_Online):
    """One seed's ``contextualbandits.online.LinTS`` in ``"ci"`` mode, its other defaults (``policy_kwargs`` override
    them)."""

    def __init__(self, num_actions: int, seed: int, policy_kwargs: dict | None = None):
        from contextualbandits.online import LinTS

        kwargs = dict(sample_from="ci", random_state=int(seed) + 1) | dict(policy_kwargs or {})
        super().__init__(LinTS(int(num_actions), **kwargs), num_actions)


class BootstrappedTSLearner(_Online):
    """One seed's ``contextualbandits.online.BootstrappedTS`` over the library's online ridge regression (Cholesky
    form)."""

    def __init__(self, num_actions: int, seed: int, policy_kwargs: dict | None = None):
        from contextualbandits.linreg import LinearRegression
        from contextualbandits.online import BootstrappedTS

        kwargs = dict(batch_train=True, njobs_arms=1, random_state=int(seed) + 1) | dict(policy_kwargs or {})
        super().__init__(BootstrappedTS(LinearRegression(method="chol"), int(num_actions), **kwargs), num_actions)
