"""Deprecated: :mod:`banditkit.experiments.checkpoints` (the checkpoints of both loops of :func:`banditkit.run`)."""

from banditkit._alias import alias

alias(__name__, "banditkit.experiments.checkpoints")
