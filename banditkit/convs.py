"""Deprecated: :mod:`banditkit._xla.conv` (XLA:CPU's fast convolution layout inside loops; private)."""

from banditkit._alias import alias

alias(__name__, "banditkit._xla.conv")
