"""A read's plain single sends handled in one pass (issue 18: the broker's CPU per single
send; RocketMQ handles each request on its own, ``SendMessageProcessor.sendMessage``).

How it works. One read of a producer's connection usually brings ~100 SEND_MESSAGE_V2
requests; the channel hands a run of consecutive SEND_MESSAGE / SEND_MESSAGE_V2 requests to
:class:`SendRun` (``Dispatcher.register_run_processor``; only while no hook looks at sends:
no ACL, no RPC timing). For each request, in arrival order, ``_prepare`` checks what the
per-request path (``SendMessageProcessor.send``) would do and builds the same
``MessageInner``, or declines: a batch, a one-way request, a header that does not parse, a
topic that does not exist yet or is not writable, a retry or dead-letter topic, an illegal or
negative queue id, properties without ``UNIQ_KEY`` or with ``__ARIANE_DEDUP``, ``TRAN_MSG``,
``DELAY`` or a timer property, a transactional sysFlag. The accepted requests before a
declined one are put with one store call (``put_run.store_put_run``: one hold of the put lock, one reput
wake-up) and answered; the declined one then goes through the dispatcher as before, and the
run goes on after it, so every queue keeps the arrival order. Under ASYNC_FLUSH the
``SUCCESS`` answers are formatted from a template straight into frame bytes (the same bytes as
``put_response`` encoded; anything else is answered through ``put_response``) and queued on
the channel together; the statistics are counted once per topic per run. Under SYNC_FLUSH
the run's sends that wait share one group-commit request and one :class:`~.send_sync.SyncRun`;
when the request completes, the loop answers the whole run as ASYNC_FLUSH answers it (one
``answer_run``, one ``send_frames``, the statistics once per topic); a send that does not
wait (``WAIT=false``, a failed put) is answered at once. The whole pass is off (every request
goes through the dispatcher) unless the broker is a writable ASYNC_MASTER on its own CommitLog with only the built-in send interceptors and
rewriters (the message-type check off).

While the pass is on, the channels leave a read's plain single-send frames undecoded
(``remoting/protocol/rawsend.py``: ``RawSend``, the dispatcher's ``raw_sends``) and the compiled
prepare reads their send headers straight from the frame bytes; the reference ``prepare`` and
every other path take the command a ``RawSend`` decodes into. A SYNC_FLUSH send stays a
``RawSend`` (in its ``SyncRun``) until its answer: a SUCCESS frame needs only the opaque; any
other answer decodes the command first.

The per-message loops are one call each: :func:`prepare_run` (a run's requests to the ready
sends, up to the first declined one) and :func:`answer_run` (the SUCCESS frames and the sizes
per topic, up to the first other result). The compiled twins (``_speedups_sendrun.h``) make
no Python frame per message and hand anything but the plain case to ``prepare`` / ``frame``;
:func:`prepare_run_py` and :func:`answer_run_py` (those two in a loop) are the reference.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson

from ariane.broker.message_type import MessageTypeInterceptor
from ariane.broker.processors.send_check import NOT_ALLOWED_SEND_TOPICS
from ariane.broker.processors.send_sync import LoopAnswers, SyncRun, SyncSend
from ariane.broker.retry import RetryToDlqInterceptor
from ariane.broker.schedule import DelayLevelRewriter
from ariane.broker.timer import TimerHook
from ariane.common import native
from ariane.common.message import HostPort
from ariane.common.properties import (
    CLUSTER,
    DEDUP,
    DELAY,
    MSG_REGION,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    TRACE_SWITCH,
    TRANSACTION_PREPARED,
    UNIQ_KEY,
    WAIT_STORE_MSG_OK,
    decode_properties,
)
from ariane.common.roles import BrokerRole
from ariane.common.sysflag import MULTI_TAGS_FLAG, PERM_WRITE, TRANSACTION_TYPE_MASK
from ariane.common.topics import DLQ_PREFIX, RETRY_PREFIX
from ariane.remoting.channel import Channel
from ariane.remoting.dispatch import Dispatcher, RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import (
    CURRENT_VERSION,
    FLAG_RESPONSE,
    RemotingCommand,
    SerializeType,
)
from ariane.remoting.protocol.headers import _base as header_base
from ariane.remoting.protocol.rawsend import as_command
from ariane.store import MessageInner, PutResult, PutStatus
from ariane.store.inner import MessageInner as _InnerClass
from ariane.store.put_run import (
    store_append_run,
    store_put_run,
    store_submit_run,
    store_wait_run,
)

if TYPE_CHECKING:
    from ariane.broker.loop_round import LoopRound
    from ariane.broker.stats import BrokerStats
    from ariane.broker.transaction import TransactionBrokerContext
    from ariane.ha import ReplicaWait
    from ariane.store import MessageStore


class SendSide(Protocol):
    """What the pass uses of the send processor (``SendMessageProcessor``)."""

    broker: TransactionBrokerContext
    store: MessageStore
    stats: BrokerStats

    @property
    def interceptors(self) -> Sequence[object]: ...
    @property
    def rewriters(self) -> Sequence[object]: ...

    _async_flush: bool
    loop_round: LoopRound | None

    @property
    def _submit_to(self) -> object: ...

    _store_host: HostPort
    _msg_id_prefix: str

    def _after_put(self, result: PutResult, wait: bool) -> PutStatus | ReplicaWait | None: ...
    def _stamp_trace(self, props: dict[str, str]) -> str: ...
    def _sync_answers(self) -> LoopAnswers[SyncSend]: ...
    def _answer_replicated(
        self,
        ctx: RequestContext,
        result: PutResult,
        replicated: PutStatus | ReplicaWait,
        topic: str,
        queue_id: int,
        uniq: str | None,
    ) -> RemotingCommand | None: ...
    def put_response(
        self, result: PutResult, topic: str, queue_id: int, uniq: str | None
    ) -> RemotingCommand: ...


__all__ = ["RUN_CODES", "SendRun", "SendSide", "answer_run_py", "prepare_run_py"]

logger = logging.getLogger(__name__)

#: the request codes handled as runs
RUN_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
_V2 = RequestCode.SEND_MESSAGE_V2
_JSON = SerializeType.JSON
#: a ready send's message (``_Ready``'s first item), for the store's run
_MESSAGE = itemgetter(0)
_QUEUE = itemgetter(1, 2)  # a ready send's (topic, queue id)
_PUT_OK = PutStatus.PUT_OK
_PREFIX = struct.Struct(">iI")  # frame length, header word (JSON: the header's length)
#: properties some per-request step acts on: such a send takes the per-request path
_SLOW_KEYS = frozenset(
    (DEDUP, TRANSACTION_PREPARED, DELAY, TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)
)
_INTERCEPTORS = (RetryToDlqInterceptor, MessageTypeInterceptor)
_REWRITERS = (DelayLevelRewriter, TimerHook)
#: one accepted send: (message, topic, queue id, UNIQ_KEY, WAIT is not false)
_Ready = tuple[MessageInner, str, int, str, bool]
#: the header fields the pass reads, in the order of the compiled prepare's plan
_PLAN_FIELDS = (
    "topic", "queue_id", "sys_flag", "born_timestamp", "flag", "properties", "reconsume_times",
    "batch",
)  # fmt: skip
#: MessageInner's slots in its field order (the compiled prepare sets them)
_INNER_SLOTS = tuple(getattr(_InnerClass, f.name) for f in dataclasses.fields(_InnerClass))


def _header_plans(
    cls: type[h.SendMessageRequestHeader],
) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
    """(the plan of ``_PLAN_FIELDS``, the plan of the header's other fields): ``header_parse``'s
    plan entries of ``cls``, or None in the pure build."""
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(cast(Any, cls))
        if f.default is not dataclasses.MISSING
    }
    plan = header_base._plan(cls, cls.FIELDS, defaults)
    if plan is None:
        return None
    by_name = {spec.name: entry for spec, entry in zip(cls.FIELDS, plan, strict=True)}
    rest = tuple(entry for name, entry in by_name.items() if name not in _PLAN_FIELDS)
    return tuple(by_name[name] for name in _PLAN_FIELDS), rest


def prepare_run_py(
    ctx: tuple[Any, ...], requests: list[RemotingCommand], start: int, out: list[_Ready]
) -> int:
    """The ready sends of ``requests[start:]`` appended to ``out`` up to the first one
    declined; its index (``len(requests)`` when none is). ``ctx[1]`` is ``prepare(request)``
    (the reference); the compiled twin reads the rest of ``ctx``."""
    prepare = ctx[1]
    count = len(requests)
    i = start
    while i < count:
        one = prepare(requests[i])
        if one is None:
            break
        out.append(one)
        i += 1
    return i


def answer_run_py(
    ctx: tuple[Any, ...],
    requests: list[RemotingCommand],
    ready: list[_Ready],
    results: list[PutResult],
    start: int,
    frames: list[bytes],
    sizes: dict[str, list[int]],
) -> int:
    """For ``results[start:]`` up to the first that is not one message stored with PUT_OK:
    its SUCCESS frame appended to ``frames`` and its size to ``sizes[topic]``; that result's
    index (``len(results)`` when none is). ``ctx[0]`` is PUT_OK, ``ctx[5]`` is ``frame(opaque,
    result, queue_id, uniq)`` (the reference); the compiled twin writes ``ctx[1:5]``."""
    put_ok, frame = ctx[0], ctx[5]
    count = len(results)
    if len(requests) != count or len(ready) != count:
        raise ValueError("answer_run: requests, ready and results differ in length")
    i = start
    while i < count:
        result = results[i]
        if result.status is not put_ok or result.msg_num != 1:
            break
        _inner, topic, queue_id, uniq, _wait = ready[i]
        per_topic = sizes.get(topic)
        if per_topic is None:
            per_topic = sizes[topic] = []
        per_topic.append(result.wrote_bytes)
        frames.append(frame(requests[i].opaque, result, queue_id, uniq))
        i += 1
    return i


_speedups = native.speedups
_V1_PLANS = _header_plans(h.SendMessageRequestHeader) if _speedups else None
_V2_PLANS = _header_plans(h.SendMessageRequestHeaderV2) if _speedups else None
# by getattr: a compiled module built before these twins existed runs the reference
_PREPARE_C = getattr(_speedups, "send_prepare_run", None)
_ANSWER_C = getattr(_speedups, "send_answer_run", None)
#: the compiled twins when built (and the header plans plain), else the reference
prepare_run: Callable[..., int] = (
    _PREPARE_C
    if _PREPARE_C is not None and _V1_PLANS is not None and _V2_PLANS is not None
    else prepare_run_py
)
answer_run: Callable[..., int] = _ANSWER_C if _ANSWER_C is not None else answer_run_py


def _topic_check(tc: TopicConfig | None, topic: str) -> tuple[int, bool] | None:
    """(the queue id bound, MULTI_TAG) of a topic the pass may take, None when ``send``
    must decide (unknown, closed to clients, not writable, a retry or dead-letter topic)."""
    if tc is None or topic in NOT_ALLOWED_SEND_TOPICS or not tc.perm & PERM_WRITE:
        return None
    if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        return None
    write_nums, read_nums = tc.write_queue_nums, tc.read_queue_nums
    return max(write_nums, read_nums), tc.topic_filter_type == "MULTI_TAG"


class SendRun:
    """The run processor of ``processor``'s single sends (see the module docstring).

    Args:
        processor: the send processor whose checks, store and answers are used.
        dispatcher: where a declined request goes.
    """

    def __init__(self, processor: SendSide, dispatcher: Dispatcher) -> None:
        self.p = processor
        self.dispatcher = dispatcher
        broker = processor.broker
        self._broker = broker
        self._topic_table = broker.topics.table
        #: requests handled by the pass (put in a run), for tests and benchmarks
        self.handled = 0
        self._template_config: object = None
        self._frame: Callable[[int, PutResult, int, str], bytes] | None = None
        self._sync_answers: LoopAnswers[SyncSend | SyncRun] | None = None
        self._answer_parts: tuple[Any, ...] = ()

    # -- the pass -------------------------------------------------------------------------------

    def __call__(self, channel: Channel, requests: list[RemotingCommand]) -> None:
        """Handle every request of the run, in order."""
        handle = self.dispatcher.handle_request
        enabled = self._enabled()
        # the channels' next reads: RawSends while the pass takes sends
        self.dispatcher.raw_sends = enabled
        if not enabled:
            for request in requests:
                handle(channel, request)
            return
        born = channel.attributes.get("born_host")
        if born is None:
            born = channel.attributes["born_host"] = _host_port(channel.remote_addr)
        ctx = self._prepare_ctx(born)
        put = self._put_async if self.p._async_flush else self._put_sync
        if type(requests) is not list:
            requests = list(requests)
        count = len(requests)
        i = 0
        while i < count:
            ready: list[_Ready] = []
            end = prepare_run(ctx, requests, i, ready)
            if ready:
                self.handled += len(ready)
                put(channel, requests[i:end], ready)
            i = end
            if i < count:  # declined: the per-request path, in its place
                handle(channel, requests[i])
                i += 1

    def _enabled(self) -> bool:
        p = self.p
        broker = self._broker
        if not broker.config.broker_permission & PERM_WRITE or not p.store.writes_blocks:
            return False
        if getattr(broker.replication, "role", None) is not BrokerRole.ASYNC_MASTER:
            return False
        if not p._async_flush and p._submit_to is None:
            return False
        for interceptor in p.interceptors:
            if type(interceptor) not in _INTERCEPTORS:
                return False
        if broker.config.enable_remoting_message_type_check:
            return False
        return all(type(rewriter) in _REWRITERS for rewriter in p.rewriters)

    def _prepare_ctx(self, born: HostPort) -> tuple[Any, ...]:
        """``prepare_run``'s context for one run: ``prepare(request)``, the message ``send``
        would store for ``request`` or None to let ``send`` decide (an error: None), and
        what the compiled twin reads (the topics checked in this run, the header plans, the
        broker's stamps). The broker's stamps (``CLUSTER``, ``MSG_REGION``/``TRACE_ON``) and
        each topic's checks are looked up once per run."""
        config = self._broker.config
        cluster = config.broker_cluster_name
        cluster_text = f"{CLUSTER}\x01{cluster}\x02"
        trace_props: dict[str, str] = {}
        trace_text = self.p._stamp_trace(trace_props)
        region, trace_on = trace_props[MSG_REGION], trace_props[TRACE_SWITCH]
        store_host = self.p._store_host
        table = self._topic_table
        #: per topic of the run: (queue id bound, MULTI_TAG), or None when declined
        topics: dict[str, tuple[int, bool] | None] = {}
        v1_parse = h.SendMessageRequestHeader.from_ext_fields
        v2_parse = h.SendMessageRequestHeaderV2.from_ext_fields

        def prepare(request: RemotingCommand) -> _Ready | None:
            request = as_command(request)  # a RawSend: the command it decodes into
            if request.flag or request.serialize_type is not _JSON:
                return None
            header: h.SendMessageRequestHeader
            try:
                if request.code == _V2:
                    header = v2_parse(request.ext_fields)
                else:
                    header = v1_parse(request.ext_fields)
            except Exception:  # the per-request path answers it
                return None
            topic = header.topic
            if topic in topics:
                checked = topics[topic]
            else:
                checked = topics[topic] = _topic_check(table.get(topic), topic)
            if checked is None or header.batch:
                return None
            bound, multi_tag = checked
            queue_id = header.queue_id
            if queue_id < 0 or queue_id >= bound:
                return None
            sys_flag = header.sys_flag
            props_text = header.properties
            if not props_text or sys_flag & TRANSACTION_TYPE_MASK:
                return None
            props = decode_properties(props_text)
            uniq = props.get(UNIQ_KEY)
            if uniq is None or not _SLOW_KEYS.isdisjoint(props):
                return None
            if multi_tag:
                sys_flag |= MULTI_TAGS_FLAG
            extra = ""
            if CLUSTER not in props:
                props[CLUSTER] = cluster
                extra = cluster_text
            if MSG_REGION not in props:
                props[MSG_REGION] = region
                props[TRACE_SWITCH] = trace_on
                extra += trace_text
            if extra and props_text[-1] != "\x02":
                props_text += "\x02"
            inner = MessageInner(
                topic, queue_id, request.body or b"", header.flag, props, sys_flag,
                header.born_timestamp, born, store_host, header.reconsume_times or 0, 0,
                props_text + extra,
            )  # fmt: skip
            return inner, topic, queue_id, uniq, props.get(WAIT_STORE_MSG_OK) != "false"

        def safe_prepare(request: RemotingCommand) -> _Ready | None:
            try:
                return prepare(request)
            except Exception:  # whatever it is, the per-request path answers it
                logger.debug("send run: declined a request it could not read", exc_info=True)
                return None

        v1, v2 = _V1_PLANS or ((), ()), _V2_PLANS or ((), ())
        return (
            topics, safe_prepare, _InnerClass, _INNER_SLOTS, v1[0], v1[1], v2[0], v2[1], _V2,
            _JSON, UNIQ_KEY, _SLOW_KEYS, CLUSTER, cluster, cluster_text, MSG_REGION, region,
            TRACE_SWITCH, trace_on, trace_text, WAIT_STORE_MSG_OK, born, store_host,
            MULTI_TAGS_FLAG, TRANSACTION_TYPE_MASK,
        )  # fmt: skip

    # -- ASYNC_FLUSH: put and answer now ---------------------------------------------------------

    def _put_async(
        self, channel: Channel, requests: list[RemotingCommand], ready: list[_Ready]
    ) -> None:
        p = self.p
        loop_round = p.loop_round
        if loop_round is not None:  # a held pull on a put's queue: dispatched after the read
            loop_round.claim(map(_QUEUE, ready))
        results = store_put_run(p.store, list(map(_MESSAGE, ready)))
        p._after_put(results[-1], True)  # wakes the transfer to slaves (an ASYNC_MASTER)
        self._answer_results(channel, requests, ready, results)

    def _answer_results(
        self,
        channel: Channel,
        requests: Sequence[RemotingCommand],
        ready: Sequence[_Ready],
        results: Sequence[PutResult],
    ) -> None:
        """Answer each of a run's puts, in order: the SUCCESS frames by ``answer_run`` (queued on
        the channel together, the statistics once per topic), any other result through
        ``put_response``."""
        ctx = self._answer_ctx()
        frames: list[bytes] = []
        sizes: dict[str, list[int]] = {}
        count = len(ready)
        i = 0
        while True:
            i = answer_run(ctx, requests, ready, results, i, frames, sizes)
            if i >= count:
                break
            if frames:  # the answers before it go first
                channel.send_frames(frames)
                frames = []
            _inner, topic, queue_id, uniq, _wait = ready[i]
            self._answer_other(channel, requests[i], results[i], topic, queue_id, uniq)
            i += 1
        stats = self.p.stats
        for topic, topic_sizes in sizes.items():
            stats.on_put_each(topic, topic_sizes)
        if frames:
            channel.send_frames(frames)

    def _answer_other(
        self,
        channel: Channel,
        request: RemotingCommand,
        result: PutResult,
        topic: str,
        queue_id: int,
        uniq: str,
    ) -> None:
        """A put that did not end in one stored message: ``put_response``, sent as the
        dispatcher's ``respond`` sends it."""
        response = self.p.put_response(result, topic, queue_id, uniq)
        RequestContext(self.dispatcher, channel, as_command(request)).send_response(response)

    def _framer(self) -> Callable[[int, PutResult, int, str], bytes]:
        """``frame(opaque, result, queue_id, uniq)``: the SUCCESS answer of one stored single
        send as frame bytes, the bytes ``encode_parts`` makes of ``put_response``'s command
        answered by the dispatcher (a JSON header; the broker's region and trace switch
        fixed, rebuilt when the config object changes)."""
        config = self._broker.config
        if config is self._template_config and self._frame is not None:
            return self._frame
        self._template_config = config
        trace = "true" if config.trace_on else "false"
        # the answer's JSON around its varying fields, once: the compiled answer writes these
        # parts, the reference formats a template made of them
        head_a = '{"code":0,"extFields":{"msgId":"' + self.p._msg_id_prefix
        head_b = (
            f'"MSG_REGION":{orjson.dumps(config.region_id).decode()},"TRACE_ON":"{trace}",'
            '"transactionId":'
        )
        head_c = f'}},"flag":{FLAG_RESPONSE},"language":"PYTHON","opaque":'
        head_d = f',"serializeTypeCurrentRPC":"JSON","version":{CURRENT_VERSION}}}'
        template = (
            head_a.replace("%", "%%")
            + '%016X","queueId":"%d","queueOffset":"%d",'
            + head_b.replace("%", "%%")
            + "%s"
            + head_c
            + "%d"
            + head_d
        )
        pack = _PREFIX.pack

        def frame(opaque: int, result: PutResult, queue_id: int, uniq: str) -> bytes:
            txid = f'"{uniq}"' if uniq.isalnum() and uniq.isascii() else orjson.dumps(uniq).decode()
            head = (
                template % (result.offsets[0], queue_id, result.logics_offset, txid, opaque)
            ).encode()
            return pack(4 + len(head), len(head)) + head

        self._frame = frame
        self._answer_parts = (
            _PUT_OK, head_a.encode(), head_b.encode(), head_c.encode(), head_d.encode(), frame,
        )  # fmt: skip
        return frame

    def _answer_ctx(self) -> tuple[Any, ...]:
        """``answer_run``'s context: PUT_OK, the template's parts around the varying fields
        (for the compiled twin) and ``frame`` (see :meth:`_framer`)."""
        self._framer()
        return self._answer_parts

    # -- SYNC_FLUSH: put now, answer after the group commit -------------------------------------

    def _put_sync(
        self, channel: Channel, requests: list[RemotingCommand], ready: list[_Ready]
    ) -> None:
        p = self.p
        answers = self._sync_answers
        if answers is None:
            answers = self._sync_answers = LoopAnswers(p._sync_answers().loop, self._answer_sync)
        waits = [one[4] for one in ready]
        appended = store_append_run(p.store, list(map(_MESSAGE, ready)), waits)
        if appended is None:  # refused now: one by one, each says why
            self._put_sync_each(answers, channel, requests, ready, waits)
            return
        results, waiting = appended
        if len(waiting) == len(results):  # the common case: all wait
            store_wait_run(p.store, results, SyncRun(answers, channel, requests, ready, results))
            return
        if waiting:
            store_wait_run(
                p.store,
                [results[i] for i in waiting],
                SyncRun(
                    answers,
                    channel,
                    [requests[i] for i in waiting],
                    [ready[i] for i in waiting],
                    [results[i] for i in waiting],
                ),
            )
        at = 0
        for i, result in enumerate(results):  # the others are final: answered now, in order
            if at < len(waiting) and waiting[at] == i:
                at += 1
                continue
            _inner, topic, queue_id, uniq, wait = ready[i]
            self._answer(channel, requests[i], result, topic, queue_id, uniq, wait)

    def _put_sync_each(
        self,
        answers: LoopAnswers[SyncSend | SyncRun],
        channel: Channel,
        requests: list[RemotingCommand],
        ready: list[_Ready],
        waits: list[bool],
    ) -> None:
        """Each send with its own :class:`SyncSend` (the store refused the run)."""
        dispatcher = self.dispatcher
        sends = [
            SyncSend(
                answers,
                # a RawSend stays raw until an answer other than a SUCCESS frame needs the
                # command (see _answer)
                RequestContext(dispatcher, channel, request),
                topic,
                queue_id,
                uniq,
            )
            for request, (_inner, topic, queue_id, uniq, _wait) in zip(requests, ready, strict=True)
        ]
        try:
            store_submit_run(self.p.store, list(map(_MESSAGE, ready)), waits, sends)
        finally:
            for send in sends:
                send.submitting = False
        for send, wait in zip(sends, waits, strict=True):
            if send.at_once:  # completed inside the put (WAIT=false, or not stored)
                self._answer_send(send, wait)

    def _answer_sync(self, item: SyncSend | SyncRun) -> None:
        """Answer a send or a run the group commit completed (on the loop, in a drain of a
        round's completions with the channels' flushes held)."""
        if type(item) is SyncRun:
            self._answer_waited(item)
        else:
            assert isinstance(item, SyncSend)
            self._answer_send(item, True)

    def _answer_waited(self, run: SyncRun) -> None:
        """A run whose group-commit request completed: answered as ASYNC_FLUSH answers a run
        while the broker is still an ASYNC_MASTER (no answer waits for a slave); else each as
        the per-request path answers it."""
        results = run.results
        if getattr(self._broker.replication, "role", None) is not BrokerRole.ASYNC_MASTER:
            for request, one, result in zip(run.requests, run.ready, results, strict=True):
                _inner, topic, queue_id, uniq, _wait = one
                self._answer(run.channel, request, result, topic, queue_id, uniq, True)
            return
        self.p._after_put(results[-1], True)  # wakes the transfer to slaves
        self._answer_results(run.channel, run.requests, run.ready, results)

    def _answer_send(self, send: SyncSend, wait: bool) -> None:
        result = send.result
        assert result is not None
        ctx = send.ctx
        self._answer(ctx.channel, ctx.request, result, send.topic, send.queue_id, send.uniq, wait)

    def _answer(
        self,
        channel: Channel,
        request: RemotingCommand,
        result: PutResult,
        topic: str,
        queue_id: int,
        uniq: str | None,
        wait: bool,
    ) -> None:
        """What ``SendMessageProcessor`` answers for a completed SYNC_FLUSH send; a SUCCESS
        as frame bytes from the template (a raw request is decoded only for any other
        answer)."""
        p = self.p
        replicated = p._after_put(result, wait)
        if replicated is None and result.status is _PUT_OK and result.msg_num == 1:
            p.stats.on_put(topic, 1, result.wrote_bytes)
            channel.send_frames([self._framer()(request.opaque, result, queue_id, uniq or "")])
            return
        ctx = RequestContext(self.dispatcher, channel, as_command(request))
        if replicated is not None:
            response = p._answer_replicated(ctx, result, replicated, topic, queue_id, uniq)
        else:
            response = p.put_response(result, topic, queue_id, uniq)
        if response is not None:
            ctx.send_response(response)


def _host_port(addr: str) -> HostPort:
    try:
        return HostPort.parse(addr)
    except ValueError:
        return HostPort(b"\x7f\x00\x00\x01", 0)
