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
