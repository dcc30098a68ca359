"""``ariane bench memory`` reads a process's memory from /proc (issue 18)."""

from __future__ import annotations

import os

from ariane.bench.memory import proc_memory_kib


def test_reads_rss_and_peak_of_this_process() -> None:
    before = proc_memory_kib(os.getpid())
    block = bytearray(64 << 20)  # 64 MiB touched: RSS and the peak grow by about that much
    block[::4096] = b"\x01" * len(block[::4096])
    after = proc_memory_kib(os.getpid())
    assert set(after) == {"VmRSS", "VmHWM"}
    assert after["VmRSS"] - before["VmRSS"] >= 60 << 10
    assert after["VmHWM"] >= after["VmRSS"]
    del block
