"""A thread's scheduler time slice (issue 18): ``set_thread_slice`` changes the slice of the
calling thread only, keeps its policy and nice value,."""

from __future__ import annotations

import os
import threading

import pytest

from ariane.common.sched import SLICE_MIN_NS, set_thread_slice
from ariane.errors import ConfigError
from ariane.store.config import StoreConfig


def sched_of(tid: int) -> dict[str, str]:
    with open(f"/proc/self/task/{tid}/sched") as f:
        return {
            k.strip(): v.strip() for k, _, v in (line.partition(":") for line in f) if v.strip()
        }


def slice_supported() -> bool:
    return os.path.exists("/proc/thread-self/sched") and "se.slice" in sched_of(
        threading.get_native_id()
    )


needs_slice = pytest.mark.skipif(not slice_supported(), reason="needs Linux's se.slice (6.12+)")


def _on_a_thread(nice: int, slice_ns: int) -> tuple[bool, dict[str, str], int]:
    out: list[tuple[bool, dict[str, str], int]] = []

    def run() -> None:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, nice)
        took = set_thread_slice(slice_ns)
        out.append((took, sched_of(tid), os.getpriority(os.PRIO_PROCESS, tid)))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


@needs_slice
def test_the_calling_threads_slice_changes_and_its_nice_value_stays() -> None:
    before = sched_of(threading.get_native_id())["se.slice"]
    took, sched, nice = _on_a_thread(5, 200_000)
    assert took
    assert sched["se.slice"] == "200000"
    assert sched["policy"] == "0"
    assert nice == 5
    assert sched_of(threading.get_native_id())["se.slice"] == before  # not this thread's


@needs_slice
def test_a_slice_below_the_kernels_minimum_is_raised_to_it() -> None:
    took, sched, _ = _on_a_thread(0, 1_000)
    assert took
    assert sched["se.slice"] == str(SLICE_MIN_NS)


def test_a_negative_slice_is_refused_by_the_config() -> None:
    with pytest.raises(ConfigError):
        StoreConfig(store_path_root_dir="/nonexistent", group_commit_slice_ns=-1)
