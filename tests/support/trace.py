"""An unstarted CONSUME trace dispatcher for the trace unit tests (no sender: nothing is sent,
the tests drain its queue and entries themselves)."""

from __future__ import annotations

from typing import Any, cast

from ariane.client._trace_dispatch import AsyncTraceDispatcher, TraceSettings
from ariane.client.config import ClientConfig


def consume_dispatcher(
    cls: type[AsyncTraceDispatcher] = AsyncTraceDispatcher, **settings: Any
) -> AsyncTraceDispatcher:
    """A ``cls`` for host group ``g`` with ``TraceSettings(**settings)``, never started."""
    return cls(
        trace_topic=None,
        host_config=ClientConfig(namesrv_addr="127.0.0.1:9876"),
        host_group="g",
        kind="CONSUME",
        sender_factory=cast(Any, None),
        settings=TraceSettings(**settings),
    )


class StepClock:
    """A ``time_ns`` stand-in: ns stamps 1 ms apart; ``fail_at``: the call that raises."""

    def __init__(self, fail_at: int = 0) -> None:
        self.calls = 0
        self.fail_at = fail_at

    def __call__(self) -> int:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("clock broke")
        return 1_765_000_000_123_456_789 + self.calls * 1_000_000
