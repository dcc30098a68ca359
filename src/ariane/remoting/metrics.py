"""Request metrics of a remoting server (RocketMQ ``RemotingMetricsManager``).

How it works: ``RpcMetrics`` is a ``RemotingHook``. ``before_request`` notes when a request
arrived; ``after_response`` measures the time to its answer and counts it into the
``rocketmq_rpc_latency`` histogram of its (request code, response code) pair, with RocketMQ's
buckets (1, 3, 5, 7, 10, 100, 1000, 2000, 3000 ms). A pull the broker held (long polling) is
recorded apart (``is_long_polling``): it is answered in a later loop iteration than the one
that received it, which a ``call_soon`` marker detects. One-way requests are only counted.
Requests still waiting for their answer are the in-flight table behind
``rocketmq_processor_watermark``; entries of closed connections are pruned.

Codes outside the known enums are recorded as ``-1`` so a peer sending random codes cannot
create unbounded series. With ``timing=False`` only the subclass's ``answer_codes`` are looked
at (a broker that exports no metrics pays nothing for the other requests). Everything runs on the event loop thread; readers copy with
``snapshot()``.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from ariane.common.histogram import Histogram
from ariane.remoting.channel import Channel
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import FLAG_ONEWAY, RemotingCommand

__all__ = [
    "PULL_CODES",
    "RPC_LATENCY_BUCKETS_MS",
    "RpcMetrics",
    "RpcSnapshot",
    "processor_of",
    "request_code_name",
    "response_code_name",
]

RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_BOUNDS = tuple(float(b) for b in RPC_LATENCY_BUCKETS_MS)
PULL_CODES = frozenset(
    {
        RequestCode.PULL_MESSAGE,
        RequestCode.LITE_PULL_MESSAGE,
        RequestCode.ARIANE_BULK_PULL_MESSAGE,
    }
)
_REQUEST_CODES = frozenset(int(c) for c in RequestCode)
_RESPONSE_CODES = frozenset(int(c) for c in ResponseCode)
_PROCESSORS: dict[int, str] = {
    RequestCode.SEND_MESSAGE: "send",
    RequestCode.SEND_MESSAGE_V2: "send",
    RequestCode.SEND_BATCH_MESSAGE: "send",
    RequestCode.CONSUMER_SEND_MSG_BACK: "send",
    RequestCode.PULL_MESSAGE: "pull",
    RequestCode.LITE_PULL_MESSAGE: "lite_pull",
    RequestCode.ARIANE_BULK_PULL_MESSAGE: "pull",
    RequestCode.QUERY_MESSAGE: "query_message",
    RequestCode.VIEW_MESSAGE_BY_ID: "query_message",
    RequestCode.HEART_BEAT: "heartbeat",
    RequestCode.UNREGISTER_CLIENT: "client_manager",
    RequestCode.CHECK_CLIENT_CONFIG: "client_manager",
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: "consumer_manager",
    RequestCode.QUERY_CONSUMER_OFFSET: "consumer_manager",
    RequestCode.UPDATE_CONSUMER_OFFSET: "consumer_manager",
    RequestCode.END_TRANSACTION: "transaction",
}


def processor_of(code: int) -> str:
    """RocketMQ's thread-pool name for a request code (``admin`` for the rest)."""
    return _PROCESSORS.get(code, "admin")


def request_code_name(code: int) -> str:
    """``send_message_v2``-style label value (``RemotingHelper.getRequestCodeDesc``)."""
    return RequestCode(code).name.lower() if code in _REQUEST_CODES else str(code)


def response_code_name(code: int) -> str:
    """``success``-style label value (``RemotingHelper.getResponseCodeDesc``)."""
    return ResponseCode(code).name.lower() if code in _RESPONSE_CODES else str(code)


@dataclass(slots=True)
class RpcSnapshot:
    """A copy of the counters for a scrape.

    Attributes:
        latency: (request code, response code, long polling) -> histogram (ms).
        oneway: request code -> one-way requests received.
        in_flight: processor name -> requests waiting for their answer (held pulls apart).
        held_pulls: pulls being held (long polling).
    """

    latency: dict[tuple[int, int, bool], Histogram]
    oneway: dict[int, int]
    in_flight: dict[str, int]
    held_pulls: int


#: (arrival ns, connection, loop iteration of a pull's arrival or -1, request code) of a
#: request not answered yet
_Entry: TypeAlias = tuple[int, Channel, int, int]


class RpcMetrics:
    """A ``RemotingHook`` measuring every request of a server.

    Args:
        clock_ns: monotonic nanoseconds (tests pass a fake).
        max_pending: most unanswered requests tracked (older ones are forgotten beyond it).
        timing: measure every request; when false only ``answer_codes`` are looked at (the
            broker without a metrics endpoint: its statistics need them, nothing else does).
    """

    #: request codes whose answers ``on_answer`` sees (subclasses set it)
    answer_codes: frozenset[int] = frozenset()

    def __init__(
        self,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
        max_pending: int = 200_000,
        *,
        timing: bool = True,
    ) -> None:
        self.clock_ns = clock_ns
        self.timing = timing
        self.max_pending = max_pending
        self.latency: dict[tuple[int, int, bool], Histogram] = {}
        self.oneway: dict[int, int] = {}
        self._pending: dict[int, _Entry] = {}
        # loop iterations that received pulls, counted by one call_soon per iteration: a pull
        # answered in a later iteration than the one that received it was held
        self._iteration = 0
        self._bump_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- RemotingHook (hot path: a few hundred nanoseconds each) --------------------------------

    def before_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Note the arrival of ``request``."""
        code = request.code
        if not self.timing and code not in self.answer_codes:
            return None
        if request.flag & FLAG_ONEWAY:
            if code not in _REQUEST_CODES:
                code = -1
            self.oneway[code] = self.oneway.get(code, 0) + 1
            return None
        iteration = -1
        if code in PULL_CODES:
            iteration = self._iteration
            if not self._bump_scheduled:
                self._schedule_bump()
        pending = self._pending
        if len(pending) >= self.max_pending:
            pending.pop(next(iter(pending)))
        pending[id(request)] = (self.clock_ns(), channel, iteration, code)
        return None

    def ignores(self, code: int) -> bool:
        """Whether requests of ``code`` are not looked at (a dispatcher may then process
        them as runs, without calling this hook)."""
        return not self.timing and code not in self.answer_codes

    def _schedule_bump(self) -> None:
        # the server's loop, looked up once: CPython 3.11's get_running_loop() makes a getpid
        # system call, and a broker serving held pulls came here for most of its messages
        loop = self._loop
        if loop is None or not loop.is_running():
            try:
                loop = self._loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop (driven directly, as unit tests do)
                return
        loop.call_soon(self._bump)
        self._bump_scheduled = True

    def _bump(self) -> None:
        self._iteration += 1
        self._bump_scheduled = False

    def after_response(
        self, channel: Channel, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        """Measure the answer to ``request``."""
        if not self.timing and request.code not in self.answer_codes:
            return
        entry = self._pending.pop(id(request), None)
        if entry is None or response is None:
            return
        ms = (self.clock_ns() - entry[0]) / 1_000_000
        long_polling = entry[2] >= 0 and entry[2] != self._iteration
        if not self.timing:
            self.on_answer(request, response, ms, long_polling)
            return
        key = (request.code, response.code, long_polling)
        hist = self.latency.get(key)
        if hist is None:
            hist = self._histogram(key)
        hist.counts[bisect_left(_BOUNDS, ms)] += 1
        hist.sum += ms
        hist.count += 1
        if request.code in self.answer_codes:
            self.on_answer(request, response, ms, long_polling)

    def _histogram(self, key: tuple[int, int, bool]) -> Histogram:
        """The histogram of a new (request, response, long polling) key; codes outside the
        protocol share the ``-1`` histogram (and are looked up this slow way every time)."""
        req, resp, long_polling = key
        canonical = (
            req if req in _REQUEST_CODES else -1,
            resp if resp in _RESPONSE_CODES else -1,
            long_polling,
        )
        hist = self.latency.get(canonical)
        if hist is None:
            hist = self.latency[canonical] = Histogram(RPC_LATENCY_BUCKETS_MS)
        return hist

    def on_answer(
        self, request: RemotingCommand, response: RemotingCommand, ms: float, long_polling: bool
    ) -> None:
        """Subclass hook: one answered request (``ms`` from arrival to answer)."""

    # -- housekeeping and reading ---------------------------------------------------------------

    def prune(self) -> int:
        """Forget requests of closed connections (they will never be answered)."""
        dead = [k for k, e in self._pending.items() if not e[1].is_active]
        for k in dead:
            del self._pending[k]
        return len(dead)

    def snapshot(self) -> RpcSnapshot:
        """Copy the counters (call on the event loop)."""
        in_flight: dict[str, int] = {}
        held = 0
        for _, _, iteration, code in self._pending.values():
            if iteration >= 0 and iteration != self._iteration:
                held += 1
                continue
            name = processor_of(code)
            in_flight[name] = in_flight.get(name, 0) + 1
        latency = {}
        for key, hist in self.latency.items():
            copy = Histogram(hist.bounds)
            copy.merge(hist)
            latency[key] = copy
        return RpcSnapshot(latency, dict(self.oneway), in_flight, held)
