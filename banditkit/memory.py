"""Deprecated: :mod:`banditkit.runtime.memory` (process-wide settings live in :mod:`banditkit.runtime`)."""

from banditkit._alias import alias

alias(__name__, "banditkit.runtime.memory")
