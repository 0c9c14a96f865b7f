"""Deprecated: :mod:`banditkit._xla.flat_random` (random draws made flat because XLA:CPU compiles N-d draws slowly;
private)."""

from banditkit._alias import alias

alias(__name__, "banditkit._xla.flat_random")
