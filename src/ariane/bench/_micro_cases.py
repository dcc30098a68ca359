"""The inputs and calls of ``ariane bench micro`` (one ``Case`` per printed row).

Every case builds its input once (``build``) and returns the call to time; the call returns
what it computed, so the unit tests can check that the input is what the row claims (a
batch of 64 entries, a record with five properties, a signature the broker accepts...).
The inputs are the ones ``docs/benchmarks.md`` describes for each figure: a producer's four
properties (``TAGS``, ``UNIQ_KEY``, ``KEYS``, ``WAIT``), 1 KiB bodies, a 1 KiB
``SEND_MESSAGE_V2`` request signed by a non-admin account whose topic permission the broker
checks, one consumed message per listener call. Nothing here opens a socket; the broker
rows (``ariane.bench._micro_broker``) keep a store in a temporary directory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from ariane.acl.credentials import (
    SessionCredentials,
    canonical_text,
    hmac_key,
    request_signer,
    signing_key,
    verify_signature,
)
from ariane.acl.hook import AclHook
from ariane.acl.plain import AclRules, parse_document
from ariane.bench._micro_broker import request_call
from ariane.broker.schedule import DelayLevelRewriter
from ariane.broker.timer import TimerHook
from ariane.client._send import SendSettings, build_request, header_base, prepare_single
from ariane.client._trace_dispatch import AsyncTraceDispatcher, TraceStats
from ariane.client._trace_hooks import ConsumeTracer, SendTracer
from ariane.client.message import SendResult, SendStatus
from ariane.common import properties as props
from ariane.common.batch import decode_batch, encode_batch
from ariane.common.clock import ManualClock
from ariane.common.hashing import index_key_hash_with_prefix
from ariane.common.message import HostPort, Message, MessageExt
from ariane.common.msgid import UniqueIdGenerator
from ariane.common.record import decode_record, encode_record
from ariane.common.trace import ConsumeReturnType, TraceMessageType, pub_record
from ariane.remoting.channel import Channel
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.codec import decode_frame, encode
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.headers import SendMessageRequestHeaderV2
from ariane.store.config import StoreConfig
from ariane.store.inner import MessageInner

__all__ = ["BATCH", "BODY", "CASES", "PRODUCER_PROPERTIES", "RECORD_PROPERTIES", "Case"]

TOPIC = "BenchSingle"
GROUP = "benchmark_producer"
BODY = bytes(range(256)) * 4  # 1 KiB
#: what a producer's single send carries (``Message(tags=..., keys=...)`` + the UNIQ_KEY)
PRODUCER_PROPERTIES: dict[str, str] = {
    props.TAGS: "TagA",
    props.UNIQ_KEY: "7F00000100002A9F0000000000000001",
    props.KEYS: "order-20261206-0001",
    props.WAIT_STORE_MSG_OK: "true",
}
#: a stored record's: the producer's four and the broker's CLUSTER
RECORD_PROPERTIES: dict[str, str] = {**PRODUCER_PROPERTIES, props.CLUSTER: "DefaultCluster"}
#: messages per SEND_BATCH body (``ariane bench producer --batch 64``)
BATCH = 64
BORN_MS = 1_796_000_000_000
ACCESS_KEY, SECRET_KEY = "benchuser", "bench-secret"
ACL_RULES_TEXT = f"""
accounts:
  - accessKey: {ACCESS_KEY}
    secretKey: {SECRET_KEY}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [{TOPIC}=PUB]
"""


@dataclass(frozen=True)
class Case:
    """One row: ``build()`` makes the input and returns the call timed; one call does
    ``per`` units of work (the printed figure is per unit). A call with a ``close()`` (the
    broker rows) is closed after its rounds; one with a ``timer`` attribute is timed with it
    (the broker rows: this thread's CPU clock, so the store's own threads are not counted).

    Attributes:
        name: the row name (``--only`` and the docs use it).
        what: the input, in a few words.
        twin: whether the code measured has a compiled twin (then the pure build is timed too).
        per: units of work per call (messages of a batch body).
        build: makes the input; returns the call to time.
    """

    name: str
    what: str
    twin: bool
    per: int
    build: Callable[[], Callable[[], Any]]


def _encoded_properties() -> Callable[[], Any]:
    source = dict(PRODUCER_PROPERTIES)
    return lambda: props.encode_properties(source)


def _decoded_properties() -> Callable[[], Any]:
    text = props.encode_properties(PRODUCER_PROPERTIES)
    return lambda: props.decode_properties(text)


def _batch_decode() -> Callable[[], Any]:
    text = props.encode_properties(PRODUCER_PROPERTIES)
    body = encode_batch([(BODY, 0, text)] * BATCH)
    return lambda: decode_batch(body)


def stored_message() -> MessageExt:
    """The 1 KiB record of ``record.decode`` (IPv4 hosts, five properties)."""
    return MessageExt(
        TOPIC,
        BODY,
        properties=dict(RECORD_PROPERTIES),
        queue_id=3,
        queue_offset=1234,
        born_timestamp_ms=BORN_MS,
        born_host=HostPort(b"\x7f\x00\x00\x01", 50000),
        store_timestamp_ms=1_796_000_000_002,
        store_host=HostPort(b"\x7f\x00\x00\x01", 10911),
        commit_log_offset=1 << 20,
    )


def _record_decode() -> Callable[[], Any]:
    data = encode_record(stored_message())
    return lambda: decode_record(data)


def send_request() -> RemotingCommand:
    """An unsigned 1 KiB SEND_MESSAGE_V2 request, as ``Producer.send`` builds it."""
    settings = SendSettings(GROUP)
    msg = Message(TOPIC, BODY, properties=dict(PRODUCER_PROPERTIES))
    prepared = prepare_single(msg, settings, UniqueIdGenerator(b"\x7f\x00\x00\x01"))
    request = build_request(prepared, MessageQueue(TOPIC, "broker-a", 1), header_base(settings))
    request.ext_fields["g"] = str(BORN_MS)  # the send time: fixed, so every build signs the same
    return request


def _signer() -> Callable[[RemotingCommand], None]:
    return request_signer(SessionCredentials(ACCESS_KEY, SECRET_KEY))


def _encode_request() -> Callable[[], Any]:
    request = send_request()
    _signer()(request)  # the encoded request is the one that travels: signed
    return lambda: encode(request)


def _sign_request() -> Callable[[], Any]:
    request, signer = send_request(), _signer()

    def call() -> str:
        signer(request)
        return request.ext_fields["Signature"]

    return call


def _sign_and_encode() -> Callable[[], Any]:
    request, signer = send_request(), _signer()

    def call() -> bytes:
        signer(request)
        return encode(request)

    return call


def _canonical() -> Callable[[], Any]:
    request = send_request()
    _signer()(request)
    ext = request.ext_fields
    return lambda: canonical_text(ext)


def _hmac() -> Callable[[], Any]:
    request = send_request()
    _signer()(request)
    content = canonical_text(request.ext_fields) + BODY
    key = hmac_key(SECRET_KEY)

    def call() -> bytes:
        mac = key.copy()
        mac.update(content)
        return mac.digest()

    return call


def _verify() -> Callable[[], Any]:
    request = send_request()
    _signer()(request)
    ext, key = request.ext_fields, signing_key(SECRET_KEY)
    return lambda: verify_signature(ext, BODY, key)


def acl_hook() -> AclHook:
    """The broker's ACL check with one account allowed to publish to the bench topic."""
    return AclHook(AclRules.merge([parse_document(ACL_RULES_TEXT, "plain_acl.yml")]))


def _broker_check() -> Callable[[], Any]:
    request = send_request()
    _signer()(request)
    hook = acl_hook()
    channel = cast(Channel, None)  # the fast path (a signed send) never reads the channel
    return lambda: hook.before_request(channel, request)


def _header_parse() -> Callable[[], Any]:
    request = send_request()
    frame = encode(request)[4:]  # what the frame decoder hands over: no length field

    def call() -> SendMessageRequestHeaderV2:
        return SendMessageRequestHeaderV2.from_ext_fields(decode_frame(frame).ext_fields)

    return call


class TraceSink:
    """A dispatcher stand-in: queues what the hooks hand over into a bounded deque (the
    real dispatcher's ``append_encoded`` / ``append_open`` are a deque append and a flag
    test; the consume hook completes a queued pair itself and counts it in ``stats``)."""

    trace_topic = "RMQ_SYS_TRACE_TOPIC"

    def __init__(self) -> None:
        self.items: deque[Any] = deque(maxlen=1000)
        self.stats = TraceStats()

    def append_encoded(self, trace: Any) -> bool:
        self.items.append(trace)
        return True

    def append_open(self, pair: list[Any]) -> bool:
        self.items.append(pair)
        return True

    def attach(self, pair: list[Any], after: Any) -> bool:
        pair.append(after)
        return pair[2] is after


def _sink() -> AsyncTraceDispatcher:
    return cast(AsyncTraceDispatcher, TraceSink())


def _pub_record() -> Callable[[], Any]:
    uniq = PRODUCER_PROPERTIES[props.UNIQ_KEY]
    offset_id = "7F00000100002A9F0000000000100000"
    return lambda: pub_record(
        BORN_MS, "DefaultRegion", GROUP, TOPIC, uniq, "TagA", "order-20261206-0001",
        "127.0.0.1:10911", len(BODY), 3, TraceMessageType.Normal_Msg, offset_id, True,
        check=False,
    )  # fmt: skip


def _pub_hook() -> Callable[[], Any]:
    tracer = SendTracer(_sink(), GROUP, ManualClock(BORN_MS))
    msg = Message(TOPIC, BODY, properties=dict(PRODUCER_PROPERTIES))
    mq = MessageQueue(TOPIC, "broker-a", 1)
    uniq = PRODUCER_PROPERTIES[props.UNIQ_KEY]
    result = SendResult(SendStatus.SEND_OK, uniq, "7F00000100002A9F0000000000100000", mq, 5)
    return lambda: tracer.pub(msg, result, BORN_MS, "127.0.0.1:10911", len(BODY))


def _consume_hooks() -> Callable[[], Any]:
    tracer = ConsumeTracer(_sink(), "benchmark_consumer", ManualClock(BORN_MS))
    msgs = [stored_message()]

    def call() -> Any:
        before = tracer.before(msgs)
        if before is not None:
            tracer.after(before, 1, True, ConsumeReturnType.SUCCESS)
        return before

    return call


def send_inner() -> MessageInner:
    """A plain single send as the broker holds it before the rewriters (no timer or delay
    property)."""
    return MessageInner(TOPIC, 1, BODY, 0, dict(RECORD_PROPERTIES))


def _send_rewriters() -> Callable[[], Any]:
    config = StoreConfig()
    rewriters = (
        DelayLevelRewriter(len(config.delay_levels_ms)),
        TimerHook(lambda: config, ManualClock(0)),
    )
    inner = send_inner()

    def call() -> list[RemotingCommand | None]:
        return [r.rewrite(inner) for r in rewriters]

    return call


def _timer_check() -> Callable[[], Any]:
    config = StoreConfig()
    hook, inner = TimerHook(lambda: config, ManualClock(0)), send_inner()
    return lambda: hook.rewrite(inner)


def batch_request() -> RemotingCommand:
    """A SEND_BATCH_MESSAGE of ``BATCH`` x 1 KiB messages with the producer's four properties
    (the same UNIQ_KEY in each: the broker does not check it)."""
    request = send_request()
    request.code = RequestCode.SEND_BATCH_MESSAGE
    request.ext_fields["i"] = ""
    request.ext_fields["m"] = "true"
    text = props.encode_properties(PRODUCER_PROPERTIES)
    request.body = encode_batch([(BODY, 0, text)] * BATCH)
    return request


def _broker_single() -> Callable[[], Any]:
    return request_call(send_request())


def _broker_batch() -> Callable[[], Any]:
    return request_call(batch_request())


def _index_key_hash() -> Callable[[], Any]:
    key = PRODUCER_PROPERTIES[props.UNIQ_KEY]
    return lambda: index_key_hash_with_prefix(f"{TOPIC}#", key)


_FOUR = "4 properties (TAGS, UNIQ_KEY, KEYS, WAIT)"
_SEND = "1 KiB SEND_MESSAGE_V2, 4 properties"

CASES: tuple[Case, ...] = (
    Case("properties.encode", _FOUR, True, 1, _encoded_properties),
    Case("properties.decode", _FOUR, True, 1, _decoded_properties),
    Case(
        "send_batch.decode",
        f"SEND_BATCH body of {BATCH} x 1 KiB, 4 properties; per message",
        True,
        BATCH,
        _batch_decode,
    ),
    Case(
        "record.decode",
        "1 KiB CommitLog record, IPv4 hosts, 5 properties (+CLUSTER)",
        True,
        1,
        _record_decode,
    ),
    Case("send.header_parse", f"{_SEND}: decode_frame + header object", False, 1, _header_parse),
    Case("acl.encode", f"{_SEND}, signed: codec.encode", False, 1, _encode_request),
    Case("acl.sign", f"{_SEND}: request_signer", True, 1, _sign_request),
    Case("acl.sign_encode", f"{_SEND}: request_signer + encode", True, 1, _sign_and_encode),
    Case("acl.canonical", f"{_SEND}: sorted, joined header values", True, 1, _canonical),
    Case(
        "acl.hmac_sha1",
        "hashlib's keyed HMAC-SHA1 (the pure twins'): copy, update(header + 1 KiB), digest",
        False,
        1,
        _hmac,
    ),
    Case("acl.verify", f"{_SEND}: verify_signature (canonical + HMAC + compare)", True, 1, _verify),
    Case(
        "acl.broker_check",
        f"{_SEND}: AclHook.before_request (signature + topic PUB)",
        True,
        1,
        _broker_check,
    ),
    Case("trace.pub_record", "one Pub record (14 fields)", False, 1, _pub_record),
    Case("trace.pub_hook", "SendTracer.pub of one 1 KiB send", False, 1, _pub_hook),
    Case(
        "trace.consume_hooks",
        "ConsumeTracer.before + after, one message per listener call",
        False,
        1,
        _consume_hooks,
    ),
    Case(
        "store.index_key_hash",
        "IndexFile key hash of topic# + a 32-char message id (Java String.hashCode)",
        True,
        1,
        _index_key_hash,
    ),
    Case("broker.timer_check", "TimerHook.rewrite of a plain send", False, 1, _timer_check),
    Case(
        "broker.send_rewriters",
        "delay-level + timer rewriters of a plain send",
        False,
        1,
        _send_rewriters,
    ),
    Case(
        "broker.send_single",
        f"{_SEND}: the broker's whole request path (decode .. store .. answer written); CPU",
        True,
        1,
        _broker_single,
    ),
    Case(
        "broker.send_batch64",
        f"SEND_BATCH of {BATCH} x 1 KiB: the broker's whole request path; CPU, per message",
        True,
        BATCH,
        _broker_batch,
    ),
)
