"""The garbage collector's settings for a long-running server process.

How it works. CPython's cyclic collector runs a young collection every ``threshold0`` (700)
allocations of tracked objects and, now and then, a full one that walks *every* tracked object
of the process. A started broker holds tens of thousands of long-lived ones (modules, classes,
its configuration, topics and groups) that never become garbage, so each full collection walks
them for nothing: tens of ms under the GIL, landing in the middle of whatever the broker does
then (a timer slot of 100,000 copies, a pull). :func:`settle_after_start` collects once and
moves everything alive into the permanent generation (``gc.freeze``: what large Python services
do after start-up), so later collections only walk what was made since; and it can raise
``threshold0`` so that fewer young collections run while a burst allocates (each promotes its
survivors, which the older generations then walk again). Cycles made after start-up are still
collected.

A client process (the SDK's ``ClientInstance.start``) calls :func:`settle_client_process`: the
same collect + freeze, once per process (again in a child made by ``fork`` that starts a client
of its own), without touching the thresholds: what the application set stays.
"""

from __future__ import annotations

import gc
import logging
import os
import time

__all__ = ["settle_after_start", "settle_client_process"]

logger = logging.getLogger(__name__)

#: the process id that settled its collector for a client (a forked child has another one)
_settled_pid: int | None = None


def settle_after_start(threshold0: int = 0) -> int:
    """Collect, then freeze what is alive (out of every later collection); when
    ``threshold0`` > 0, young collections run every ``threshold0`` allocations instead of 700.
    Returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    if threshold0 > 0:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(threshold0, older, oldest)
    return gc.get_freeze_count()


def settle_client_process() -> int | None:
    """:func:`settle_after_start` without a threshold change, the first time a client of
    this process starts: what is alive then (the imports, the application's start-up objects)
    is collected once and frozen out of every later collection, for the rest of the process's
    life. Returns how many objects are frozen, or None when this process already did it or
    the application turned the collector off (``gc.disable()``: it manages it itself)."""
    global _settled_pid
    pid = os.getpid()
    if _settled_pid == pid or not gc.isenabled():
        return None
    _settled_pid = pid
    started = time.perf_counter()
    frozen = settle_after_start()
    logger.info(
        "client process: garbage collector settled, %d objects frozen (%.1f ms)",
        frozen,
        (time.perf_counter() - started) * 1000,
    )
    return frozen
