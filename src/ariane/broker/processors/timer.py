"""GET_TIMER_CHECK_POINT and GET_TIMER_METRICS (RocketMQ 5 ``AdminBrokerProcessor``'s timer
requests): the timer's checkpoint (56 bytes, the ``timercheck`` layout) and the count of timer
messages waiting per real topic (fastjson ``{"dataVersion": ..., "timingCount": {topic:
{"count": n, "timeStamp": ms}}}``; counted since this broker started)."""

from __future__ import annotations

from typing import Protocol

from ariane.broker.context import BrokerContext
from ariane.broker.processors import error, ok
from ariane.broker.timer import TimerFeature
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer

__all__ = ["TimerContext", "TimerProcessor"]


class TimerContext(BrokerContext, Protocol):
    """The broker as the timer requests see it."""

    timer: TimerFeature


class TimerProcessor:
    """Handles the timer's admin requests.

    Args:
        broker: the broker.
    """

    def __init__(self, broker: TimerContext) -> None:
        self.broker = broker

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        server.register_processor(RequestCode.GET_TIMER_CHECK_POINT, self.get_check_point)
        server.register_processor(RequestCode.GET_TIMER_METRICS, self.get_metrics)

    def get_check_point(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_TIMER_CHECK_POINT (60)."""
        timer = self.broker.timer
        if not timer.enabled:
            return error(ResponseCode.SYSTEM_ERROR, "timerWheelEnable is false")
        return ok(body=timer.wheel.checkpoint_bytes())

    def get_metrics(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_TIMER_METRICS (61)."""
        timer = self.broker.timer
        if not timer.enabled:
            return error(ResponseCode.SYSTEM_ERROR, "timerWheelEnable is false")
        now = self.broker.clock.now_ms()
        counts = timer.wheel.waiting_by_topic()
        body = {
            "dataVersion": {"counter": 0, "stateVersion": 0, "timestamp": now},
            "timingCount": {t: {"count": n, "timeStamp": now} for t, n in counts.items()},
        }
        return ok(body=fastjson.dumps(body))
