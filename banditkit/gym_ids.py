"""The Gymnasium ids ``import banditkit`` registers, each with its entry point (``"module:Class"``).

Kept apart from :mod:`banditkit.environments` (which re-exports both names) because registering takes only these
strings: ``import banditkit`` registers every id without importing JAX or any environment; ``gymnasium.make(id)``
imports the environment's module on first use.
"""

from __future__ import annotations

ENV_IDS: dict[str, str] = {
    "banditkit/MNIST-v0": "banditkit.environments.classification:MNISTBandit",
    "banditkit/FashionMNIST-v0": "banditkit.environments.classification:FashionMNISTBandit",
    "banditkit/Mushroom-v0": "banditkit.environments.showdown:MushroomBandit",
    "banditkit/Shuttle-v0": "banditkit.environments.classification:ShuttleBandit",
    "banditkit/Adult-v0": "banditkit.environments.classification:AdultBandit",
    "banditkit/Covertype-v0": "banditkit.environments.classification:CovertypeBandit",
    "banditkit/Census-v0": "banditkit.environments.classification:CensusBandit",
    "banditkit/Jester-v0": "banditkit.environments.showdown:JesterBandit",
    "banditkit/Financial-v0": "banditkit.environments.showdown:FinancialBandit",
    "banditkit/Wheel-v0": "banditkit.environments.showdown:WheelBandit",
    "banditkit/MovieLens-v0": "banditkit.environments.movielens:MovieLensBandit",
    "banditkit/KuaiRec-v0": "banditkit.environments.kuairec:KuaiRecBandit",
    "banditkit/Ackley-v0": "banditkit.environments.bo:AckleyEnv",
    "banditkit/Branin-v0": "banditkit.environments.bo:BraninEnv",
    "banditkit/Hartmann6-v0": "banditkit.environments.bo:Hartmann6Env",
    "banditkit/DrawNN-v0": "banditkit.environments.bo:DrawNNEnv",
}


def register_all() -> None:
    """Register every id of :data:`ENV_IDS` with Gymnasium (idempotent)."""
    import gymnasium as gym

    for env_id, entry in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, disable_env_checker=False)
