"""Bootstrap worker processes keep the heap memory they free (eqarena/runtime/worker_pool.py,
`_keep_freed_memory`): a block of 16 MB, freed, stays in the heap for the next array instead of going
back to the kernel (glibc's default maps a block that large on its own and unmaps it when freed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration  # starts processes: the setting holds for a whole process

PROBE = textwrap.dedent(
    """
    import ctypes, sys

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    if sys.argv[1] == "worker":
        from eqarena.runtime.worker_pool import _keep_freed_memory
        _keep_freed_memory()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = MallInfo2
    block = libc.malloc(16 << 20)
    ctypes.memset(block, 1, 16 << 20)
    libc.free(block)
    print(libc.mallinfo2().fordblks)
    """
)


def _free_heap_bytes_after_a_16_mb_block(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a glibc setting")
def test_a_worker_keeps_a_freed_block_in_its_heap_where_a_default_process_returns_it():
    assert _free_heap_bytes_after_a_16_mb_block("worker") >= 16 << 20
    assert _free_heap_bytes_after_a_16_mb_block("default") < 16 << 20
