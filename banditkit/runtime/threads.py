"""Process-wide BLAS threading for the LAPACK calls inside jitted filter steps (a shell-side effect).

XLA:CPU runs matrix products on its own thread pool, but it hands Cholesky factorisations, triangular solves and
eigendecompositions to LAPACK, whose kernels jaxlib takes from SciPy (``scipy.linalg.cython_lapack``, loaded on the
first such call).  SciPy's OpenBLAS starts one thread per core, so inside a jitted step a small factorisation
(an ``(L, L)`` Cholesky and inverse in LoFi's predict, HiLoFi's ``850 × 850`` last-layer square root) is split across
threads that compete with XLA's own workers for the same cores: on a 2-core machine one thread is faster for the
small factorisations of a filter step, while a large factorisation alone still gains from both cores (measured:
``python -m benchmarks speed --blas-threads 1`` against ``--blas-threads system``; the effect on LoFi and HiLoFi
steps is in ``benchmarks/FINDINGS.md``, KuaiRec and BO rows).

:func:`limit_blas_threads` loads SciPy's LAPACK (so the library jaxlib will call is there to be capped) and caps
every loaded BLAS library at ``num_threads`` through ``threadpoolctl``.  The ``banditkit`` command calls it at
start-up; a script calls it once before its first step.  It is a setting of the whole process (NumPy's BLAS is
capped too), so importing banditkit does not apply it (nor import :mod:`banditkit.runtime`).
``BANDITKIT_BLAS_THREADS=system`` in the environment makes it a no-op; ``BANDITKIT_BLAS_THREADS=N`` (an integer)
overrides the argument.
"""

from __future__ import annotations

import os

ENV = "BANDITKIT_BLAS_THREADS"


def _requested(num_threads: int) -> int | None:
    """The thread count to apply: ``num_threads``, or the environment's override (``None`` for ``system``)."""
    raw = os.environ.get(ENV, "").strip().lower()
    if raw == "system":
        return None
    if raw:
        try:
            num_threads = int(raw)
        except ValueError:
            msg = f"{ENV}={raw!r}: set it to a positive integer or to 'system' (leave BLAS as it is)"
            raise ValueError(msg) from None
        if num_threads < 1:
            raise ValueError(f"{ENV}={raw!r}: the thread count must be >= 1 (or 'system')")
    return num_threads


def limit_blas_threads(num_threads: int = 1) -> dict[str, int]:
    """Cap the loaded BLAS libraries (SciPy's, which jaxlib's LAPACK kernels use, loaded first) at ``num_threads``.

    Returns ``{library file: threads before}`` for every library capped: empty when the environment says
    ``system`` or when no BLAS library with a thread pool is loaded (nothing changed).  Idempotent; call it again
    with another count to change it (the counts it returns restore the earlier setting).

    Raises ``ValueError`` for a count below 1 (argument or ``BANDITKIT_BLAS_THREADS``).
    """
    if not isinstance(num_threads, int) or isinstance(num_threads, bool) or num_threads < 1:
        raise ValueError(f"limit_blas_threads: num_threads must be an int >= 1, got {num_threads!r}")
    n = _requested(num_threads)
    if n is None:
        return {}
    import scipy.linalg.cython_lapack  # noqa: F401  (the library jaxlib's LAPACK kernels are taken from)

    before = {}
    for lib in _blas_libraries():
        before[lib.filepath] = lib.num_threads
        lib.set_num_threads(n)
    return before


def blas_threads() -> dict[str, int]:
    """``{library file: threads}`` of the loaded BLAS libraries (what :func:`limit_blas_threads` would change)."""
    return {lib.filepath: lib.num_threads for lib in _blas_libraries()}


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded in this process now."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas").lib_controllers
