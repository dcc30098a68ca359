"""A thread's scheduler time slice (Linux ``sched_setattr``), for latency-critical threads.

How it works (issue 18): Linux >= 6.12 (EEVDF) lets a SCHED_OTHER thread ask for a shorter
time slice (``sched_attr.sched_runtime``, 0.1-100 ms; no privilege needed). A thread with a
shorter slice than the one running may preempt it when it wakes (the scheduler's
``PREEMPT_SHORT``); with the default slice (~1.4 ms on this project's VM) a thread woken
while both CPUs are busy often waits for the running one's slice or the next tick (4 ms).
:func:`set_thread_slice` reads the calling thread's attributes (``sched_getattr``) and
writes them back with only the slice changed, so its policy and nice value stay as they were
(a thread started under ``SCHED_IDLE`` stays idle). Elsewhere (another OS or architecture,
an older kernel, a refusal) it does nothing and returns False. Nothing of RocketMQ's: its
Java threads have no such knob.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import sys

__all__ = ["SLICE_MAX_NS", "SLICE_MIN_NS", "set_thread_slice"]

logger = logging.getLogger(__name__)

#: The kernel's bounds of a requested slice.
SLICE_MIN_NS = 100_000
SLICE_MAX_NS = 100_000_000

#: (sched_setattr, sched_getattr) system call numbers.
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}
#: Policies with a fair-class slice: SCHED_OTHER, SCHED_BATCH, SCHED_IDLE.
_FAIR_POLICIES = (0, 3, 5)


class _SchedAttr(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
    ]


def set_thread_slice(slice_ns: int) -> bool:
    """Ask for a ``slice_ns`` time slice for the calling thread (0: the kernel's default);
    clamped to the kernel's bounds. Returns True when the kernel took it."""
    calls = _SYSCALLS.get(platform.machine()) if sys.platform == "linux" else None
    if calls is None:
        return False
    if slice_ns:
        slice_ns = min(max(slice_ns, SLICE_MIN_NS), SLICE_MAX_NS)
    libc = ctypes.CDLL(None, use_errno=True)
    attr = _SchedAttr()
    size = ctypes.sizeof(_SchedAttr)
    if libc.syscall(calls[1], 0, ctypes.byref(attr), size, 0) != 0:
        logger.debug("sched_getattr failed: %s", os.strerror(ctypes.get_errno()))
        return False
    if attr.sched_policy not in _FAIR_POLICIES:
        return False  # a real-time or deadline thread: no fair slice to set
    attr.size = size
    attr.sched_flags &= 0x01  # keep SCHED_FLAG_RESET_ON_FORK only
    attr.sched_runtime = slice_ns
    if libc.syscall(calls[0], 0, ctypes.byref(attr), 0) != 0:
        logger.debug("sched_setattr failed: %s", os.strerror(ctypes.get_errno()))
        return False
    return True
