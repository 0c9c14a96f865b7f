"""Old module paths kept as deprecated aliases of their new homes.

``alias(old, new)``, called at the top of module ``old``, makes ``old`` the very module ``new`` (``sys.modules[old]``
is ``new``'s module object, so attributes read, set or monkeypatched through either name are the same) and warns
:class:`DeprecationWarning` once per process, at the import that first named ``old``.
"""

from __future__ import annotations

import importlib
import sys
import warnings


def _importlib(frame) -> bool:
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def _caller_level() -> int:
    """The ``stacklevel`` of the code that imported the old name (or read ``bk.<old name>``): the first frame outside
    this module, the alias module and the package root's lazy ``__getattr__``.  ``warnings.warn`` does not count
    importlib's bootstrap frames, so neither does this."""
    level, frame = 3, sys._getframe(3)  # 1: alias(), 2: the alias module, 3: whoever ran it
    while frame is not None and (_importlib(frame) or frame.f_globals.get("__name__") in ("banditkit", "importlib")):
        if not _importlib(frame):
            level += 1
        frame = frame.f_back
    return level


def alias(old: str, new: str) -> None:
    """Make module ``old`` (being imported now) the module ``new``, with one ``DeprecationWarning``."""
    module = importlib.import_module(new)
    warnings.warn(f"{old} is deprecated and will be removed: import {new} instead", DeprecationWarning,
                  stacklevel=_caller_level())
    sys.modules[old] = module
