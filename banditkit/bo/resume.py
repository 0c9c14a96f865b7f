"""Runs that survive an interruption — the old home of :func:`open_or_create`, :class:`Autosave` and
:func:`settings`, which now live in :mod:`banditkit.bo.loop` with :func:`~banditkit.bo.optimize` (this name is kept
so that existing imports work)."""

from banditkit.bo.loop import Autosave, open_or_create, settings

__all__ = ["Autosave", "open_or_create", "settings"]
