"""banditkit.runtime.memory: the glibc allocator setting the CLI and benchmarks apply."""

import subprocess
import sys
import textwrap

import pytest

from banditkit.runtime import memory

_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    import numpy as np

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2

    def mmapped_while_holding(nbytes):
        a = np.ones(nbytes, np.uint8)  # numpy takes large buffers from malloc
        held = libc.mallinfo2().hblkhd
        del a
        return held

    if sys.argv[1] == "tuned":
        import banditkit.runtime
        assert banditkit.runtime.keep_freed_memory() is True
        assert banditkit.runtime.keep_freed_memory() is True  # idempotent
    print(mmapped_while_holding(64 << 20))
    """
)


def _glibc_with_mallinfo2() -> bool:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallinfo2  # noqa: B018
        return True
    except (OSError, AttributeError):
        return False


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2) to observe the allocator")
def test_large_blocks_come_from_the_heap_after_keep_freed_memory():
    def run(mode):
        out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
        return int(out.stdout.split()[-1])

    assert run("default") >= 64 << 20  # glibc's default: a 64 MiB block is a fresh mmap
    assert run("tuned") < 64 << 20  # kept in the heap, so a freed block is reused instead of page-faulted in again


def test_opt_out_and_no_libc_change_nothing(monkeypatch):
    # in-process calls must not touch this process's allocator (the rest of the suite runs with glibc's defaults)
    monkeypatch.setattr(memory, "_applied", None)
    monkeypatch.setenv("BANDITKIT_MALLOC", "system")
    assert memory.keep_freed_memory() is False
    assert memory._applied is None  # the opt-out changes nothing, not even the cached result
    monkeypatch.delenv("BANDITKIT_MALLOC")
    monkeypatch.setattr(memory.ctypes.util, "find_library", lambda name: None)  # a platform without a C library
    assert memory.keep_freed_memory() is False
    assert memory.keep_freed_memory() is False  # cached


@pytest.mark.parametrize("kw", [dict(mmap_threshold=-1), dict(top_pad=1 << 40), dict(trim_threshold=1.5)])
def test_bad_arguments_are_refused(monkeypatch, kw):
    monkeypatch.setattr(memory, "_applied", None)
    with pytest.raises(ValueError, match="keep_freed_memory"):
        memory.keep_freed_memory(**kw)
