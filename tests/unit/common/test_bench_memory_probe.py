"""``ariane bench memory`` reads a process's memory from /proc (issue 18)."""

from __future__ import annotations

import mmap
import os

from ariane.bench.memory import proc_memory_kib


def test_reads_rss_and_peak_of_this_process() -> None:
    size = 64 << 20
    before = proc_memory_kib(os.getpid())
    # a fresh anonymous mapping, every page written: 64 MiB of new resident pages (a bytearray
    # could reuse pages the allocator kept from earlier tests, and RSS would not move)
    block = mmap.mmap(-1, size)
    try:
        for offset in range(0, size, mmap.PAGESIZE):
            block[offset] = 1
        after = proc_memory_kib(os.getpid())
    finally:
        block.close()
    assert set(after) == {"VmRSS", "VmHWM"}
    assert after["VmRSS"] - before["VmRSS"] >= 60 << 10
    assert after["VmHWM"] >= after["VmRSS"]
