"""Timer messages on the send side (RocketMQ 5 ``HookUtils.handleScheduleMessage``): the
rewrite that parks a message with a delivery time in the timer queue.

How it works, for every message the broker stores for a client (a ``MessageRewriter`` after the
4.x delay levels, whose ``DELAY`` wins and strips the timer properties), for the commit of a
transactional message, and for POP's revive records: a message already in
``rmq_sys_wheel_timer`` (a rolled copy), one carrying ``TIMER_OUT_MS`` (a delivered copy) and
half or rolled-back transactional records are left alone. Otherwise the due time is
``now + TIMER_DELAY_SEC * 1000``, else ``now + TIMER_DELAY_MS``, else ``TIMER_DELIVER_MS``. A
time not after now stores the message as it is (deliverable at once); one further than
``timerMaxDelaySec`` ahead, or a value that does not parse, is refused with MESSAGE_ILLEGAL;
``timerWheelEnable=false`` refuses timer messages with SYSTEM_ERROR. Else the message gets
``TIMER_OUT_MS`` (its slot: the due time rounded down to ``timerPrecisionMs``, one slot earlier
for an exact multiple), ``REAL_TOPIC`` and ``REAL_QID``, and goes to ``rmq_sys_wheel_timer``
queue 0, where :class:`~ariane.store.timer.TimerMessageStore` takes it. The send answer's queue
offset is then the timer queue's, as upstream.
"""

from __future__ import annotations

from collections.abc import Callable

from ariane.broker.processors import error
from ariane.broker.topic_config import TopicConfigManager
from ariane.common.clock import Clock
from ariane.common.properties import (
    REAL_QUEUE_ID,
    REAL_TOPIC,
    TIMER_DEL_UNIQKEY,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    TIMER_OUT_MS,
)
from ariane.common.sysflag import (
    PERM_READ,
    PERM_WRITE,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    transaction_value,
)
from ariane.common.topics import TIMER_TOPIC, TRANS_HALF_TOPIC
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store import MessageInner, MessageStore, StoreConfig
from ariane.store.timer import TimerMessageStore
from ariane.store.timer.format import slot_time

__all__ = ["TimerFeature", "TimerHook", "WheelBridge", "due_time"]


def due_time(properties: dict[str, str], now_ms: int) -> int | None:
    """The delivery time the timer properties ask for; None when there is none.

    Raises:
        ValueError: a timer property does not parse.
    """
    sec = properties.get(TIMER_DELAY_SEC)
    if sec is not None:
        return now_ms + int(sec.strip()) * 1000
    ms = properties.get(TIMER_DELAY_MS)
    if ms is not None:
        return now_ms + int(ms.strip())
    at = properties.get(TIMER_DELIVER_MS)
    if at is not None:
        return int(at.strip())
    return None


class TimerHook:
    """Parks timer messages in the timer queue (a send ``MessageRewriter``).

    Args:
        store_config: returns the store configuration (``timer*`` fields).
        clock: time source.
    """

    def __init__(self, store_config: Callable[[], StoreConfig], clock: Clock) -> None:
        self.store_config = store_config
        self.clock = clock

    def rewrite(self, inner: MessageInner) -> RemotingCommand | None:
        """Move a timer message to the timer queue, or refuse it."""
        props = inner.properties
        # the common case first: no timer property (three dict probes, no generator per send)
        if (
            TIMER_DELIVER_MS not in props
            and TIMER_DELAY_SEC not in props
            and TIMER_DELAY_MS not in props
        ):
            return None
        if inner.topic in (TIMER_TOPIC, TRANS_HALF_TOPIC):
            return None
        if transaction_value(inner.sys_flag) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return None
        if TIMER_OUT_MS in props:
            return None
        cfg = self.store_config()
        if not cfg.timer_wheel_enable:
            return error(
                ResponseCode.SYSTEM_ERROR,
                "accurate timer message is not enabled, timerWheelEnable is false",
            )
        now = self.clock.now_ms()
        try:
            deliver = due_time(props, now)
        except ValueError:
            return error(
                ResponseCode.MESSAGE_ILLEGAL,
                "timer message illegal: TIMER_DELIVER_MS, TIMER_DELAY_SEC and TIMER_DELAY_MS "
                "must be whole numbers",
            )
        if deliver is None:
            return None
        return self.schedule(inner, deliver)

    def schedule(self, inner: MessageInner, deliver_ms: int) -> RemotingCommand | None:
        """Park ``inner`` until ``deliver_ms`` (or leave it when that is not in the future)."""
        cfg = self.store_config()
        now = self.clock.now_ms()
        delete = TIMER_DEL_UNIQKEY in inner.properties
        max_ms = cfg.timer_max_delay_sec * 1000
        if (deliver_ms <= now and delete) or deliver_ms - now > max_ms:
            return error(
                ResponseCode.MESSAGE_ILLEGAL,
                f"timer message illegal, the delay time should not be bigger than the max delay "
                f"{max_ms}ms; or if set del msg, the delay time should be bigger than the current "
                f"time",
            )
        if deliver_ms <= now:
            return None
        props = inner.properties
        props[TIMER_OUT_MS] = str(slot_time(deliver_ms, cfg.timer_precision_ms))
        props[REAL_TOPIC] = inner.topic
        props[REAL_QUEUE_ID] = str(inner.queue_id)
        inner.properties_string = None
        inner.topic = TIMER_TOPIC
        inner.queue_id = 0
        return None


class WheelBridge:
    """The timer as POP's revive log uses it (``ReviveTimer``).

    Args:
        hook: the send-side rewrite.
        wheel: the timer store (its read time says what was delivered).
    """

    def __init__(self, hook: TimerHook, wheel: TimerMessageStore) -> None:
        self.hook = hook
        self.wheel = wheel

    def schedule(self, inner: MessageInner, deliver_ms: int) -> RemotingCommand | None:
        """Park ``inner`` until ``deliver_ms``."""
        return self.hook.schedule(inner, deliver_ms)

    def read_time_ms(self) -> int:
        """Every timer message due before this time has been delivered."""
        return self.wheel.read_time_ms


class TimerFeature:
    """The timer's parts in one broker: the send hook, the wheel and, for POP, the bridge.

    Args:
        store: the message store.
        store_config: the store configuration at start (``timerWheelEnable`` and the files).
        clock: time source.
    """

    def __init__(self, store: MessageStore, store_config: StoreConfig, clock: Clock) -> None:
        self.enabled = store_config.timer_wheel_enable
        self.hook = TimerHook(lambda: store_config, clock)
        self.wheel = TimerMessageStore(store, store_config, clock)
        self.bridge: WheelBridge | None = (
            WheelBridge(self.hook, self.wheel) if self.enabled else None
        )

    def create_topic(self, topics: TopicConfigManager) -> None:
        """Put ``rmq_sys_wheel_timer`` (1 queue) into the topic table."""
        if TIMER_TOPIC not in topics.table:
            topics.table[TIMER_TOPIC] = TopicConfig(TIMER_TOPIC, 1, 1, PERM_READ | PERM_WRITE)
        topics.system_topics.add(TIMER_TOPIC)

    def load(self) -> None:
        """Recover the wheel (after the store loaded).

        Raises:
            CorruptionError: a timer file has a wrong size.
            OSError: a file cannot be opened.
        """
        if self.enabled:
            self.wheel.load()

    def start(self) -> None:
        """Start the wheel's thread (a master's; files opened again after a role change).

        Raises:
            CorruptionError: a timer file has a wrong size.
            OSError: a file cannot be opened.
        """
        if self.enabled:
            if not self.wheel.loaded:
                self.wheel.load()
            self.wheel.start()

    def shutdown(self) -> None:
        """Stop the thread and close the files (blocking: call it off the loop)."""
        if self.enabled:
            self.wheel.shutdown()

    def runtime_info(self) -> dict[str, str]:
        """The timer keys of GET_BROKER_RUNTIME_INFO (zeros when the wheel is off)."""
        if self.enabled:
            return self.wheel.runtime_info()
        return {
            "timerReadBehind": "0",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
        }

    def on_arrival(self) -> None:
        """A message reached the timer queue (dispatch thread)."""
        if self.enabled:
            self.wheel.on_arrival()
