"""The broker's remoting hook: request latency plus the statistics only visible around a
request (RocketMQ records them inside its processors; here the processors stay untouched).

From every answered request it feeds :class:`~ariane.broker.stats.BrokerStats` with:

* pulls answered with messages: ``GROUP_GET_SIZE`` (answer body bytes, RocketMQ's
  ``bufferTotalSize``) and, unless the pull was held, ``GROUP_GET_LATENCY`` (ms);
* CONSUMER_SEND_MSG_BACK successes: ``SNDBCK_PUT_NUMS`` (key ``originTopic@group``).

Message and byte counts of sends and pulls come from the processors (``on_put``/``on_get``);
sends cost the hook only the latency histogram.
"""

from __future__ import annotations

from ariane.broker.stats import GROUP_GET_LATENCY, GROUP_GET_SIZE, BrokerStats
from ariane.remoting.metrics import PULL_CODES, RpcMetrics
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["BrokerRpcMetrics"]


class BrokerRpcMetrics(RpcMetrics):
    """``RpcMetrics`` that also feeds the broker's statistics.

    Args:
        stats: the broker's statistics.
        timing: measure every request (only when metrics are exported).
    """

    answer_codes = PULL_CODES | {RequestCode.CONSUMER_SEND_MSG_BACK}

    def __init__(self, stats: BrokerStats, *, timing: bool = True) -> None:
        super().__init__(timing=timing)
        self.stats = stats
        self._get_size = stats.sets[GROUP_GET_SIZE]
        self._get_latency = stats.sets[GROUP_GET_LATENCY]

    def on_answer(
        self, request: RemotingCommand, response: RemotingCommand, ms: float, long_polling: bool
    ) -> None:
        """Record what one answered request says about messages."""
        code = request.code
        ext = request.ext_fields
        if code in PULL_CODES:
            body = response.body
            if response.code != ResponseCode.SUCCESS or not body:
                return
            group, topic = ext.get("consumerGroup"), ext.get("topic")
            if group is None or topic is None:
                return
            key = f"{topic}@{group}"  # RocketMQ's keys, built once (hot path)
            self._get_size.add(key, len(body))
            queue_id = ext.get("queueId")
            if not long_polling and queue_id is not None and queue_id.isdigit():
                self._get_latency.add(f"{queue_id}@{key}", int(ms))
        elif code == RequestCode.CONSUMER_SEND_MSG_BACK and response.code == ResponseCode.SUCCESS:
            group, topic = ext.get("group"), ext.get("originTopic")
            if group is not None and topic is not None:
                self.stats.on_send_back(group, topic)
