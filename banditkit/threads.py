"""Deprecated: :mod:`banditkit.runtime.threads` (process-wide settings live in :mod:`banditkit.runtime`)."""

from banditkit._alias import alias

alias(__name__, "banditkit.runtime.threads")
