"""Reward models: Flax modules whose last layer is the submodule ``head`` (see ``bk.posteriors``)."""

from banditkit.models.nets import MLP, EmbeddingMLP, LeNet5

__all__ = ["MLP", "LeNet5", "EmbeddingMLP"]
