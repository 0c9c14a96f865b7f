"""Process-wide allocator setting for filters with large ``(P, r)`` factors (a shell-side effect).

XLA:CPU allocates every output buffer of a jitted step with ``malloc``.  glibc serves blocks above its mmap
threshold (dynamic, at most 32 MiB) with a fresh ``mmap`` and gives them back with ``munmap`` on free, so a
filter whose state holds ``(P, r)`` factors of tens of MB page-faults those buffers in again on every step, and its
step time grows faster than its bytes (``benchmarks/studies/scale_1m``: 2.3–2.8× faster at 1M parameters with the
memory kept).

:func:`keep_freed_memory` tells glibc to serve large blocks from the heap and to keep freed memory for reuse
(``mallopt``: ``M_MMAP_THRESHOLD`` 1 GiB, ``M_TRIM_THRESHOLD`` 2 GiB, ``M_TOP_PAD`` 256 MiB). It is not free: the
process keeps its peak heap, and for factors well below 32 MiB it can be slower
(``benchmarks/results/speed_kept.md``). It is a setting of the whole process, so nothing in the library applies it
(``import banditkit`` does not import :mod:`banditkit.runtime`): call it from a script whose factors are tens of MB
or more (``python -m benchmarks speed --keep-freed-memory`` measures both). ``BANDITKIT_MALLOC=system`` in the
environment makes it a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

_applied: bool | None = None


def keep_freed_memory(
    mmap_threshold: int = 1 << 30, trim_threshold: int = (1 << 31) - 1, top_pad: int = 256 << 20
) -> bool:
    """Keep large freed blocks in glibc's heap for reuse (see the module docstring); idempotent.

    Args:
      mmap_threshold: blocks up to this size (bytes) come from the heap instead of a fresh ``mmap``.
      trim_threshold: free memory at the top of the heap kept before it is returned to the system (bytes).
      top_pad: extra bytes requested from the system whenever the heap grows.

    Returns ``True`` when the setting is in effect (glibc found and every ``mallopt`` accepted), ``False`` on other
    C libraries or platforms (nothing changed) or when ``BANDITKIT_MALLOC=system`` is set.
    """
    global _applied
    if os.environ.get("BANDITKIT_MALLOC", "").strip().lower() == "system":
        return False
    if _applied is not None:
        return _applied
    for v, name in ((mmap_threshold, "mmap_threshold"), (trim_threshold, "trim_threshold"), (top_pad, "top_pad")):
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 31:
            raise ValueError(f"keep_freed_memory: {name} must be an int in [0, 2**31), got {v!r}")
    _applied = False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows): nothing to tune
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = all(
        mallopt(param, value) == 1
        for param, value in ((_M_MMAP_THRESHOLD, mmap_threshold), (_M_TRIM_THRESHOLD, trim_threshold),
                             (_M_TOP_PAD, top_pad))
    )  # fmt: skip
    _applied = bool(ok)
    return _applied
