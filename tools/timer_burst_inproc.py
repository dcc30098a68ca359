"""In-process cost of a timer burst (issue 16): N timers in one slot, read ahead, then the
boundary pass, on a real store in a temporary directory with a manual clock (no broker, no
sockets, no consumer). Prints wall and CPU seconds per phase and the garbage collector's share.

    PYTHONPATH=src .venv/bin/python tools/timer_burst_inproc.py [N] [--freeze] [--gen0 T]

``--freeze``: the collector settled after start-up as the broker does
(``ariane.common.gc_policy.settle_after_start``); ``--gen0 T``: young collections every T
allocations (with ``--freeze``).

Shows where the broker's time goes when the burst falls due; ``ariane bench pop --burst``
measures the lateness end to end.
"""

from __future__ import annotations

import gc
import shutil
import sys
import tempfile
import time
from typing import Any

from ariane.broker.timer import TimerHook
from ariane.common.clock import ManualClock
from ariane.common.gc_policy import settle_after_start
from ariane.common.message import HostPort
from ariane.store.config import StoreConfig
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore
from ariane.store.timer import TimerMessageStore

T0 = 1_700_000_000_000
HOST = HostPort(b"\x7f\x00\x00\x01", 10911)
_gc_ms = [0.0, 0.0, 0.0]
_gc_n = [0, 0, 0]
_gc_start = [0.0]


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_start[0] = time.perf_counter()
    else:
        _gc_ms[info["generation"]] += (time.perf_counter() - _gc_start[0]) * 1000
        _gc_n[info["generation"]] += 1


def _gc_line() -> str:
    line = ", ".join(f"gen{g} {_gc_n[g]}x {_gc_ms[g]:.0f} ms" for g in range(3))
    _gc_ms[:] = [0.0, 0.0, 0.0]
    _gc_n[:] = [0, 0, 0]
    return line


def main(n: int, freeze: bool, gen0: int) -> None:
    tmp = tempfile.mkdtemp(prefix="timer-burst-")
    clock = ManualClock(T0)
    cfg = StoreConfig(store_path_root_dir=tmp, timer_precision_ms=1000)
    store = MessageStore(cfg, clock=clock)
    assert store.load()
    store.start()
    wheel = TimerMessageStore(store, cfg, clock)
    wheel.load()
    hook = TimerHook(lambda: cfg, clock)
    if freeze:
        print(f"frozen after start-up: {settle_after_start(gen0)} objects, {gc.get_threshold()}")
    due = T0 + 20_500
    try:
        for i in range(n):
            props = {"TIMER_DELIVER_MS": str(due), "UNIQ_KEY": f"7F0000010001{i:020X}"}
            msg = MessageInner("BenchBurst", i % 4, b"t" * 64, 0, props, 0, T0, HOST, HOST)
            hook.schedule(msg, due)
            assert store.put_message(msg).stored
        store.wait_dispatched(60)
        gc.callbacks.append(_on_gc)
        _gc_line()
        clock.advance(11_600)  # the slot is due within the read-ahead window
        wall, cpu = time.perf_counter(), time.thread_time()
        while True:
            wheel.run_pass()
            if wheel.enqueue() == 0 and wheel.read_ahead() == 0:
                break
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        print(f"enqueue + read ahead: {wall:.2f} s wall, {cpu / n * 1e6:.1f} us CPU per timer")
        print(f"  GC: {_gc_line()}")
        clock.advance(9_400)  # the slot's boundary
        wall, cpu, proc = time.perf_counter(), time.thread_time(), time.process_time()
        delivered = wheel.run_pass()
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        store.wait_dispatched(120)
        proc = time.process_time() - proc
        print(
            f"boundary: {delivered} delivered in {wall:.3f} s wall; CPU: timer thread "
            f"{cpu / max(1, delivered) * 1e6:.1f} us per copy, process (with dispatch) "
            f"{proc / max(1, delivered) * 1e6:.1f} us per copy"
        )
        print(f"  GC: {_gc_line()}")
    finally:
        if _on_gc in gc.callbacks:
            gc.callbacks.remove(_on_gc)
        wheel.shutdown()
        store.shutdown()
        shutil.rmtree(tmp)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args and args[0].isdigit() else 100_000,
        "--freeze" in args,
        int(args[args.index("--gen0") + 1]) if "--gen0" in args else 0,
    )
