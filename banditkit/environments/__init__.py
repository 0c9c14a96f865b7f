"""banditkit.environments: Gymnasium bandit and BO environments on real data, with a functional JAX form.

``import banditkit`` registers these ids (``gymnasium.make(id, **kwargs)``; ``env.unwrapped`` is the class):

=============================  ===========================  =========================================================
id                             class                        kwargs (besides ``max_steps``)
=============================  ===========================  =========================================================
``banditkit/MNIST-v0``         :class:`MNISTBandit`         ``split``, ``replace`` (``banditkit data fetch mnist``)
``banditkit/FashionMNIST-v0``  :class:`FashionMNISTBandit`  same (``fetch fashion_mnist``)
``banditkit/Mushroom-v0``      :class:`MushroomBandit`      ``replace`` (committed data)
``banditkit/Shuttle-v0``       :class:`ShuttleBandit`       (committed data)
``banditkit/Adult-v0``         :class:`AdultBandit`         (committed data)
``banditkit/Covertype-v0``     :class:`CovertypeBandit`     ``data_dir`` | ``synthetic``
``banditkit/Census-v0``        :class:`CensusBandit`        ``data_dir`` | ``synthetic``, ``max_rows``
``banditkit/Jester-v0``        :class:`JesterBandit`        ``data_dir`` | ``synthetic``, ``shuffle_cols``
``banditkit/Financial-v0``     :class:`FinancialBandit`     ``data_dir`` | ``synthetic``
``banditkit/Wheel-v0``         :class:`WheelBandit`         ``delta``
``banditkit/MovieLens-v0``     :class:`MovieLensBandit`     ``rank``, ``num_movies``, ``ratings`` (``fetch movielens``)
``banditkit/KuaiRec-v0``       :class:`KuaiRecBandit`       ``data_dir`` | ``synthetic``, ``shuffle``
``banditkit/Ackley-v0``        :class:`AckleyEnv`           ``dim``, ``noise_std``
``banditkit/Branin-v0``        :class:`BraninEnv`           ``noise_std``
``banditkit/Hartmann6-v0``     :class:`Hartmann6Env`        ``noise_std``
``banditkit/DrawNN-v0``        :class:`DrawNNEnv`           ``dim``, ``noise_std``, ``seed``
=============================  ===========================  =========================================================

Bandit envs (``task == "bandit"``): ``Discrete(K)`` actions, ``info`` with ``expected_rewards (K,)``,
``expected_reward``, ``optimal_reward``, ``optimal_action``, ``regret``; ``env.unwrapped.stream(seed, steps)`` gives
what a compiled loop plays (a :class:`BanditStream`: contexts and realised rewards), ``oracle(seed, steps)`` the
expected rewards that only regret reads, and ``functional(seed, steps)`` both as a :class:`FunctionalBandit`
(:func:`step`, :func:`observation`).  A user's own problem: :func:`from_arrays` (contexts and every arm's reward,
replayed one stream per seed) or :class:`ClassificationBandit` ``(X, y)``; any Gymnasium env with a ``Discrete``
action space runs in the Gymnasium loop.
``env.unwrapped.num_actions``, ``per_arm_features`` (KuaiRec: observation ``(K, F)``) and ``default_model``
(``"lenet5"``, ``"mlp"``, ``"embedding_mlp"``; BO envs ``"bo_mlp"``, ``task == "bo"``) guide agent construction.
"""

from __future__ import annotations

from banditkit.environments import bo_functions
from banditkit.environments.arrays import ArrayBandit, from_arrays
from banditkit.environments.base import Episode, SyntheticDataWarning, TableBandit
from banditkit.environments.bo import AckleyEnv, BOEnv, BraninEnv, DrawNNEnv, Hartmann6Env
from banditkit.environments.bo_functions import FUNCTIONS, BOFunction, make_function
from banditkit.environments.classification import (
    AdultBandit,
    CensusBandit,
    ClassificationBandit,
    CovertypeBandit,
    FashionMNISTBandit,
    MNISTBandit,
    ShuttleBandit,
)
from banditkit.environments.functional import BanditStream, FunctionalBandit, observation, step
from banditkit.environments.kuairec import KuaiRecBandit
from banditkit.environments.movielens import MovieLensBandit
from banditkit.environments.showdown import FinancialBandit, JesterBandit, MushroomBandit, WheelBandit
from banditkit.gym_ids import ENV_IDS, register_all  # the ids and their registration: banditkit/gym_ids.py

register_all()

__all__ = [
    "ArrayBandit",
    "BanditStream",
    "from_arrays",
    "ENV_IDS",
    "FUNCTIONS",
    "SyntheticDataWarning",
    "AckleyEnv",
    "AdultBandit",
    "BOEnv",
    "BOFunction",
    "BraninEnv",
    "CensusBandit",
    "ClassificationBandit",
    "CovertypeBandit",
    "DrawNNEnv",
    "Episode",
    "FashionMNISTBandit",
    "FinancialBandit",
    "FunctionalBandit",
    "Hartmann6Env",
    "JesterBandit",
    "KuaiRecBandit",
    "MNISTBandit",
    "MovieLensBandit",
    "MushroomBandit",
    "ShuttleBandit",
    "TableBandit",
    "WheelBandit",
    "bo_functions",
    "make_function",
    "observation",
    "register_all",
    "step",
]
