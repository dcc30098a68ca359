"""Mutated SEND frames, SEND_BATCH bodies and PULL headers against a real broker process: the
compiled send paths (a read's single sends prepared in one pass, the header parsed from the
frame's bytes, the answers written from a template, batch bodies put straight into the
CommitLog) meet odd, broken and hostile input many frames per read. The broker must stay up,
answer or drop each connection, and store exactly what it acknowledged: every SUCCESS answer
names a record that holds that frame's body, under the topic and queue its header gave.

The frames are built from valid SEND_MESSAGE (V1) and SEND_MESSAGE_V2 requests whose JSON
headers are then mutated (bytes flipped, cut, duplicated; tokens and escapes inserted; values
replaced by other types, huge numbers, signs, escapes; keys reordered or doubled); the frame's
length fields are written to match, so the mutations reach the header decoders. A few frames
also get a broken length or serialisation byte. The seeds are fixed: the runs are reproducible.
"""

from __future__ import annotations

import json
import random
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from ariane.common.batch import decode_batch_py, encode_batch
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.properties import encode_properties
from ariane.common.record import decode_records
from ariane.errors import CorruptionError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codec import FrameDecoder, decode_frame, encode
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.support.cluster import Cluster
from tests.support.polling import wait_until
from tests.support.rpc import pull, request, send_message

pytestmark = pytest.mark.integration

CONNECTIONS = 700
BATCH_CONNECTIONS = 250
PULL_CONNECTIONS = 300
_TOKENS = [
    b'"', b"\\", b"\\u00e9", b"\\ud800", b'\\"', b"\\n", b",", b":", b"{", b"}", b"[", b"]",
    b" ", b"\n", b"null", b"true", b"1e5", b"-0", b"9" * 25, "é".encode(), b"\xff", b"\x00",
    b"\xed\xa0\x80", b"\xf0\x9f\x98\x80",
]  # fmt: skip
_VALUES = [
    b'""', b'"+1"', b'"-1"', b'"2147483648"', b'"-2147483649"', b'"9223372036854775808"',
    '"\uff19"'.encode(), b"12", b"-3", b"1.5", b"null", b"true", b'"\\u0030"', b'"abc"',
    b'"' + b"x" * 300 + b'"', b"{}", b"[]", b'"\\u0000"', b'"T\\u00e9st"', b'"a\\"b"',
]  # fmt: skip


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A NameServer and one broker, started by each test (SQL92 filters enabled)."""
    c = Cluster(tmp_path / "cluster")
    try:
        yield c.start(enablePropertyFilter="true")
    finally:
        c.stop()


def _valid(i: int, rng: random.Random) -> bytes:
    topic = rng.choice(["Hostile", "Hostile2", f"Hostile_{i % 5}"])
    props = f"UNIQ_KEY\x01U{i:08d}\x02KEYS\x01k{i}\x02TAGS\x01t\x02WAIT\x01true"
    if rng.random() < 0.5:
        props += "\x02"
    if rng.random() < 0.2:
        props += "\x02P\x01é€😀"
    header = h.SendMessageRequestHeader(
        producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=rng.randrange(4), sys_flag=0, born_timestamp=1_700_000_000_000 + i, flag=0,
        properties=props,
    )  # fmt: skip
    if rng.random() < 0.6:
        code, fields = RequestCode.SEND_MESSAGE_V2, header.to_v2().to_ext_fields()
    else:
        code, fields = RequestCode.SEND_MESSAGE, header.to_ext_fields()
    command = RemotingCommand.request(code, fields, b"body-%d" % i)
    command.opaque = i + 1
    return encode(command)


def _split(frame: bytes) -> tuple[int, bytes, bytes]:
    (mark,) = struct.unpack_from(">i", frame, 4)
    length = mark & 0xFFFFFF
    return mark >> 24, frame[8 : 8 + length], frame[8 + length :]


def _join(kind: int, header: bytes, body: bytes) -> bytes:
    return (
        struct.pack(">iI", 4 + len(header) + len(body), (kind << 24) | len(header)) + header + body
    )


def _mutate_json(header: bytes, rng: random.Random) -> bytes:
    data = bytearray(header)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(8)
        at = rng.randrange(len(data) + 1) if data else 0
        if kind == 0 and data:
            data[min(at, len(data) - 1)] ^= rng.randrange(1, 256)
        elif kind == 1 and data:
            data[at : at + rng.randint(1, 8)] = b""
        elif kind == 2:
            data[at:at] = rng.choice(_TOKENS)
        elif kind == 3 and data:
            data[at:at] = data[at : at + rng.randint(1, 12)]
        else:
            data = bytearray(_mutate_document(bytes(data), rng, kind))
    return bytes(data)


def _mutate_document(header: bytes, rng: random.Random, kind: int) -> bytes:
    """Legal-looking changes of a whole header: a field's value, the key order, a doubled key."""
    try:
        doc = json.loads(header)
        ext = doc["extFields"]
    except (ValueError, KeyError, TypeError):
        return header
    if not isinstance(ext, dict) or not ext:
        return header
    key = rng.choice(sorted(ext))
    if kind == 4:  # another value, written raw
        text = json.dumps(doc, ensure_ascii=False).encode(errors="surrogatepass")
        old = json.dumps({key: ext[key]}, ensure_ascii=False)[1:-1].encode(errors="surrogatepass")
        return text.replace(old, json.dumps(key).encode() + b":" + rng.choice(_VALUES), 1)
    if kind == 5:  # keys in another order, escapes where plain text was
        items = list(ext.items())
        rng.shuffle(items)
        doc["extFields"] = dict(items)
        return json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode(errors="surrogatepass")
    if kind == 6:  # a doubled key: the last one counts in both JSON decoders
        text = json.dumps(doc).encode()
        extra = json.dumps(key).encode() + b":" + rng.choice(_VALUES) + b","
        return text.replace(b'"extFields": {', b'"extFields": {' + extra, 1)
    doc[rng.choice(["code", "flag", "opaque", "language", "version"])] = json.loads(
        rng.choice(_VALUES)
    )
    return json.dumps(doc).encode()


def _hostile(i: int, rng: random.Random) -> bytes:
    frame = _valid(i, rng)
    kind, header, body = _split(frame)
    roll = rng.random()
    if roll < 0.03:
        return _join(rng.choice([1, 2, 255]), header, body)  # another serialisation byte
    if roll < 0.05:
        lying = bytearray(frame)
        struct.pack_into(">i", lying, 4, rng.randrange(-5, len(frame) + 50))
        return bytes(lying)
    return _join(kind, _mutate_json(header, rng), body)


def _exchange(
    addr: str, frames: list[bytes], wanted: set[int] | None = None
) -> list[RemotingCommand]:
    """Send the frames in one write and read answers until every opaque of ``wanted`` is
    answered or the broker closes the connection; with no ``wanted``, half-close and read until
    the broker closes."""
    host, port = addr.rsplit(":", 1)
    decoder, answers = FrameDecoder(), []
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"".join(frames))
        if wanted is None:
            s.shutdown(socket.SHUT_WR)
        while chunk := s.recv(1 << 16):
            answers += decoder.feed(chunk)
            if wanted is not None and wanted <= {a.opaque for a in answers}:
                break
    return answers


def _sent_topic_and_queue(frame: bytes) -> tuple[str, int]:
    """The topic and queue id the frame's header asks for, by Python's JSON decoder, reading
    bytes that are not UTF-8 as U+FFFD and allowing raw control characters in strings, as the
    broker (and Java's fastjson over ``new String(bytes, UTF_8)``) does. fastjson's extra
    escapes (``\\0``, ``\\x41``...) are beyond Python's decoder: there the project's frame
    decoder answers."""
    _, header, _ = _split(frame)
    try:
        ext = json.loads(header.decode("utf-8", "replace"), strict=False)["extFields"]
    except ValueError:
        ext = decode_frame(frame[4:]).ext_fields
    return _text(ext.get("b", ext.get("topic"))), int(ext.get("e", ext.get("queueId")))


def _text(value: object) -> str:
    """A JSON scalar as fastjson puts it in a ``Map<String, String>`` (``true``, ``12``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.fixture(params=["ASYNC_FLUSH", "SYNC_FLUSH"])
def send_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A NameServer and one broker of each flush type (SYNC_FLUSH sends answer after the
    group commit, from the frames the send pass left raw)."""
    c = Cluster(tmp_path / "cluster")
    try:
        yield c.start(flushDiskType=request.param)
    finally:
        c.stop()


def test_mutated_send_frames_never_take_the_broker_down(send_cluster: Cluster) -> None:
    """Each connection writes a few plain sends, one hostile frame, then two plain sends, in
    one write: the hostile frame is read in one run with plain ones. A frame the broker cannot
    decode closes its connection (as RocketMQ's decoder does) after the answers before it."""
    cluster = send_cluster
    sync = cluster.broker_confs["broker-a"]["flushDiskType"] == "SYNC_FLUSH"
    addr = cluster.broker_addr()
    for topic in ("Hostile", "Hostile2", *(f"Hostile_{k}" for k in range(5))):
        assert send_message(addr, topic, b"warm").code == ResponseCode.SUCCESS
    rng = random.Random(20261207)
    frames: list[bytes] = []
    stored: dict[str, int] = {}
    hostile_stored = survived = 0
    for _ in range(CONNECTIONS):
        before = rng.randint(0, 6)
        first = len(frames)
        frames.extend(_valid(first + k, rng) for k in range(before))
        frames.append(_hostile(first + before, rng))
        frames.extend(_valid(first + before + 1 + k, rng) for k in range(2))
        plain = {first + k + 1 for k in range(before)} | {len(frames) - 1, len(frames)}
        answers = _exchange(addr, frames[first:], plain)
        by_opaque = {a.opaque: a for a in answers}
        for k in range(before):  # every plain send before the hostile frame is stored
            answer = by_opaque.get(first + k + 1)
            if answer is None:  # the hostile frame closed the connection before the group
                assert sync  # commit of SYNC_FLUSH: the sends are stored, their answers lost
                continue
            assert answer.code == ResponseCode.SUCCESS
        survived += len(frames) in by_opaque
        for answer in answers:
            if answer.code != ResponseCode.SUCCESS or "msgId" not in answer.ext_fields:
                continue
            msg_id = answer.ext_fields["msgId"]
            assert msg_id not in stored, f"one record acknowledged twice: {msg_id}"
            stored[msg_id] = int(answer.ext_fields["queueId"])
            hostile_stored += answer.opaque not in plain
    assert cluster.brokers["broker-a"].proc.poll() is None, "the broker died"
    # the fixed seed gives both kinds: hostile frames stored, connections that outlived one
    assert hostile_stored > 0
    assert survived > 0
    bodies = {b"body-%d" % i: i for i in range(len(frames))}
    for msg_id, queue_id in stored.items():
        offset = decode_offset_msg_id(msg_id).phys_offset
        view = request(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
        assert view.code == ResponseCode.SUCCESS
        assert view.body is not None
        (record,) = decode_records(view.body)
        assert record.body in bodies, record.body[:40]
        topic, asked_queue = _sent_topic_and_queue(frames[bodies[record.body]])
        assert (record.topic, record.queue_id) == (topic, queue_id)
        if 0 <= asked_queue < 4:  # a negative queue id lets the broker choose
            assert asked_queue == queue_id
    print(
        f"{len(frames)} frames, {len(stored)} stored, {hostile_stored} hostile stored, "
        f"{survived} of {CONNECTIONS} connections outlived their hostile frame"
    )
    # still serving plain clients
    assert send_message(addr, "HostileAfter", b"after").code == ResponseCode.SUCCESS
    assert wait_until(
        lambda: (
            [m.body for m in decode_records(pull(addr, "HostileAfter", "CG").body or b"")]
            == [b"after"]
        ),
        10,
    )


def _batch_frame(n: int, rng: random.Random, mutate: bool) -> bytes:
    topic = rng.choice(["Hostile", "Hostile2"])
    entries = []
    for k in range(rng.randint(1, 6)):
        props: dict[str, str] = {"UNIQ_KEY": f"B{n:06d}{k:02d}", "KEYS": f"bk{n}"}
        if rng.random() < 0.3:
            props["P"] = "é€😀"
        entries.append((b"batch-%d-%d" % (n, k), rng.choice([0, 0, 7]), props))
    body = encode_batch(entries)
    if mutate:
        data = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            kind = rng.randrange(4)
            if kind == 0:
                data[at] ^= rng.randrange(1, 256)
            elif kind == 1:
                data[at : at + rng.randint(1, 6)] = b""
            elif kind == 2:
                data[at:at] = rng.choice([b"\x00", b"\xff\xff\xff\xff", b"\x7f\xff", b"\x01\x02"])
            else:  # a lying size field of one entry
                struct.pack_into(">i", data, 0, rng.choice([-1, 0, 21, 22, len(data) + 9]))
        body = bytes(data)
    header = h.SendMessageRequestHeader(
        producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=rng.randrange(4), sys_flag=0, born_timestamp=1_700_000_000_000 + n, flag=0,
        properties="", batch=True,
    )  # fmt: skip
    command = RemotingCommand.request(
        RequestCode.SEND_BATCH_MESSAGE, header.to_v2().to_ext_fields(), body
    )
    command.opaque = n + 1
    return encode(command)


def test_mutated_batch_bodies_never_take_the_broker_down(cluster: Cluster) -> None:
    """SEND_BATCH bodies with flipped, cut and inserted bytes and lying entry sizes, each
    between plain batches on one connection: the broker answers every batch, stores a
    mutated one only if the pure batch decoder reads it, and then exactly its entries."""
    addr = cluster.broker_addr()
    for topic in ("Hostile", "Hostile2"):
        assert send_message(addr, topic, b"warm").code == ResponseCode.SUCCESS
    rng = random.Random(7)
    frames: list[bytes] = []
    stored_batches = refused = 0
    for _ in range(BATCH_CONNECTIONS):
        first = len(frames)
        frames += [_batch_frame(first + k, rng, mutate=k == 2) for k in range(4)]
        answers = {a.opaque: a for a in _exchange(addr, frames[first:])}
        assert sorted(answers) == [first + 1, first + 2, first + 3, first + 4]
        for k, n in enumerate(range(first, first + 4)):
            answer = answers[n + 1]
            _, _, body = _split(frames[n])
            try:
                expected = [e.body for e in decode_batch_py(body)]
            except CorruptionError:
                expected = None
            if k != 2:
                assert answer.code == ResponseCode.SUCCESS
            if answer.code != ResponseCode.SUCCESS:
                refused += 1
                continue
            assert expected is not None, "the broker stored a batch the decoder refuses"
            ids = answer.ext_fields["msgId"].split(",")
            got = []
            for msg_id in ids:
                offset = decode_offset_msg_id(msg_id).phys_offset
                view = request(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
                assert view.code == ResponseCode.SUCCESS
                assert view.body is not None
                got.append(decode_records(view.body)[0].body)
            assert got == expected
            stored_batches += k == 2
    assert cluster.brokers["broker-a"].proc.poll() is None, "the broker died"
    print(f"{BATCH_CONNECTIONS} mutated batches: {stored_batches} stored, {refused} refused")
    assert stored_batches > 0  # the fixed seed gives mutated batches that still decode
    assert refused > 0  # and ones refused


_EXPRESSIONS = [
    ("TAG", "*"), ("TAG", "a || b"), ("TAG", "||"), ("TAG", ""), ("TAG", "a" * 3000),
    ("SQL92", "price > 3 AND color = 'red'"), ("SQL92", "price >"), ("SQL92", "((((((((a"),
    ("SQL92", "price BETWEEN 9 AND 2"), ("SQL92", "color IN ('red', 'é😀')"),
    ("SQL92", "price = 99999999999999999999999"), ("SQL92", "color LIKE '%\\'"),
    ("SQL92", "NOT NOT NOT price IS NULL"), ("SQL92", "a = 'x" + "'" * 50), ("BOGUS", "x"),
]  # fmt: skip


def _pull_frame(n: int, rng: random.Random, mutate: bool) -> bytes:
    kind, expression = rng.choice(_EXPRESSIONS) if mutate else ("TAG", "*")
    header = h.PullMessageRequestHeader(
        consumer_group="GH", topic="HostilePull", queue_id=0, queue_offset=0, max_msg_nums=32,
        sys_flag=0x4 | (0x2 if mutate and rng.random() < 0.2 else 0), commit_offset=0,
        suspend_timeout_millis=rng.choice([0, 1, 50]), sub_version=0, subscription=expression,
        expression_type=kind,
    )  # fmt: skip
    command = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
    command.opaque = n + 1
    frame = encode(command)
    if not mutate or rng.random() < 0.3:
        return frame
    kind_byte, raw, body = _split(frame)
    return _join(kind_byte, _mutate_json(raw, rng), body)


def test_mutated_pulls_never_take_the_broker_down(cluster: Cluster) -> None:
    """Pull headers with mutated JSON, hostile tag and SQL92 expressions, odd offsets and
    sizes, each between plain pulls on one connection: the plain pulls before it get the
    queue's exact messages, and the broker keeps serving."""
    addr = cluster.broker_addr()
    for i in range(20):
        props = encode_properties({"price": str(i), "color": "red" if i % 2 else "blue"})
        sent = send_message(addr, "HostilePull", b"p%d" % i, properties=props)
        assert sent.code == ResponseCode.SUCCESS
    expected = [b"p%d" % i for i in range(20)]
    assert wait_until(
        lambda: (
            [m.body for m in decode_records(pull(addr, "HostilePull", "GH").body or b"")]
            == expected
        ),
        10,
    )
    rng = random.Random(11)
    outlived = 0
    for c in range(PULL_CONNECTIONS):
        first = 3 * c
        frames = [_pull_frame(first, rng, False), _pull_frame(first + 1, rng, True)]
        frames.append(_pull_frame(first + 2, rng, False))
        answers = {a.opaque: a for a in _exchange(addr, frames)}
        plain = answers[first + 1]
        assert plain.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_records(plain.body or b"")] == expected
        if first + 3 in answers:
            outlived += 1
            assert [m.body for m in decode_records(answers[first + 3].body or b"")] == expected
    assert cluster.brokers["broker-a"].proc.poll() is None, "the broker died"
    print(f"{outlived} of {PULL_CONNECTIONS} connections outlived their hostile pull")
    assert outlived > PULL_CONNECTIONS // 4
