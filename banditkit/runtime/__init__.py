"""Process-wide settings for scripts and the shell: side effects on the whole process, so ``import banditkit`` does
not import this package and nothing in the library applies them.

========================================  ==================================================================
:func:`limit_blas_threads` (``threads``)  cap SciPy's / NumPy's BLAS at ``n`` threads (the LAPACK calls inside
                                          jitted steps); ``BANDITKIT_BLAS_THREADS=system|N``
:func:`blas_threads`                      ``{library: threads}`` of the loaded BLAS libraries
:func:`keep_freed_memory` (``memory``)    glibc keeps large freed blocks for reuse (filters with ``(P, r)``
                                          factors of tens of MB); ``BANDITKIT_MALLOC=system``
========================================  ==================================================================

The ``banditkit`` command and ``python -m benchmarks`` call :func:`limit_blas_threads` at start-up; a script calls
what it needs once, before its first step::

    import banditkit.runtime
    banditkit.runtime.limit_blas_threads()
    banditkit.runtime.keep_freed_memory()
"""

from banditkit.runtime import memory, threads
from banditkit.runtime.memory import keep_freed_memory
from banditkit.runtime.threads import blas_threads, limit_blas_threads

__all__ = ["memory", "threads", "keep_freed_memory", "limit_blas_threads", "blas_threads"]
