"""``record_dispatch``: a record's DispatchRequest (what a DLedger follower queues for every
record it copies), the compiled ``dispatch_record`` against its pure reference
``record_dispatch_py`` on well-formed and damaged records (issue 14).

Runs in both builds (it is in the Makefile's PURE_TESTS): the exact-outcome tests check the
reference; the identity tests skip when nothing is compiled.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import native
from ariane.common.hashing import java_string_hash
from ariane.common.message import HostPort, MessageExt
from ariane.common.record import encode_record
from ariane.common.topics import SCHEDULE_TOPIC
from ariane.store.format import (
    Corrupt,
    DispatchRequest,
    EndOfSegment,
    record_dispatch,
    record_dispatch_py,
)

_HOST = HostPort(b"\x7f\x00\x00\x01", 10911)
_V6 = HostPort(b"\x00" * 15 + b"\x01", 10911)
_LEVELS = (1000, 5000, 10000)


def _record(
    topic: str = "TopicA",
    props: dict[str, str] | None = None,
    *,
    v6: bool = False,
    v2: bool = False,
    queue_offset: int = 7,
    phys: int = 4096,
) -> bytes:
    msg = MessageExt(
        topic=topic, body=b"hello", flag=3, queue_id=2, queue_offset=queue_offset,
        commit_log_offset=phys, store_timestamp_ms=1_700_000_000_123,
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1"} if props is None else props,
        born_host=_V6 if v6 else _HOST, store_host=_HOST,
    )  # fmt: skip
    return encode_record(msg, v2=v2)


def _outcome(fn: object, buf: bytes | bytearray, pos: int, limit: int) -> object:
    res = fn(buf, pos, limit, _LEVELS)  # type: ignore[operator]
    return (type(res).__name__, tuple(res) if isinstance(res, DispatchRequest) else res)


def test_dispatch_fields() -> None:
    rec = _record()
    buf = b"\x00" * 10 + rec + b"\xff" * 5
    req = record_dispatch(buf, 10, len(buf))
    assert type(req) is DispatchRequest
    assert req == DispatchRequest(
        "TopicA", 2, 4096, len(rec), java_string_hash("TagA"), 1_700_000_000_123, 7,
        "k1 k2", "U1", 0, {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1"},
    )  # fmt: skip
    assert req == record_dispatch_py(buf, 10, len(buf))


def test_no_properties_no_tags() -> None:
    rec = _record(props={})
    req = record_dispatch(rec, 0, len(rec))
    assert isinstance(req, DispatchRequest)
    assert (req.tags_code, req.keys, req.uniq_key, req.properties) == (0, None, None, {})


def test_delayed_message_gets_its_due_time() -> None:
    rec = _record(SCHEDULE_TOPIC, {"DELAY": "2", "REAL_TOPIC": "T"})
    req = record_dispatch(rec, 0, len(rec), _LEVELS)
    assert isinstance(req, DispatchRequest)
    assert req.tags_code == 1_700_000_000_123 + 5000


def test_ipv6_and_v2_records() -> None:
    for rec in (_record(v6=True), _record(v2=True)):
        req = record_dispatch(rec, 0, len(rec))
        assert isinstance(req, DispatchRequest)
        assert (req.topic, req.msg_size, req.uniq_key) == ("TopicA", len(rec), "U1")


def test_not_a_record() -> None:
    rec = _record()
    assert record_dispatch(rec, 0, len(rec) - 1) == Corrupt(f"bad total size {len(rec)}")
    assert record_dispatch(rec, -1, len(rec)) == Corrupt("no room for a record header")
    blank = (16).to_bytes(4, "big") + (0xCBD43194).to_bytes(4, "big") + bytes(8)
    assert record_dispatch(blank, 0, 16) == EndOfSegment(16)
    assert record_dispatch(_record(queue_offset=-1), 0, 500) == Corrupt("negative offset")
    bad_topic = bytearray(_record(topic="Tx"))
    at = bad_topic.index(b"Tx")
    bad_topic[at] = 0xFF  # not UTF-8
    res = record_dispatch(bytes(bad_topic), 0, len(bad_topic))
    assert isinstance(res, Corrupt)
    assert res.reason.startswith("undecodable record: 'utf-8' codec can't decode byte 0xff")


def test_compiled_twin_is_used_when_built() -> None:
    if native.speedups is None:
        pytest.skip(f"{native.build_name()}: nothing compiled")
    assert record_dispatch.__name__ == "record_dispatch_compiled"
    fast = native.speedups.dispatch_record
    rec = _record()
    assert type(fast(rec, 0, len(rec))) is DispatchRequest
    # what it leaves to the reference: a delayed message, IPv6 hosts, anything not well-formed
    assert fast(_record(SCHEDULE_TOPIC, {"DELAY": "1"}), 0, 500) is None
    assert fast(_record(v6=True), 0, 500) is None
    assert fast(rec, 0, len(rec) - 1) is None
    assert fast(rec, 2**70, 10) is None


_prop_text = st.text(
    alphabet=st.sampled_from(["a", "B", "é", "\U0001f600", "\x01", "\x02", " "]), max_size=8
)


@settings(max_examples=400, deadline=None)
@given(
    topic=st.sampled_from(["TopicA", "é\U0001f600", SCHEDULE_TOPIC, "x" * 130]),
    props=st.dictionaries(
        st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "é", "k"]),
        st.one_of(_prop_text, st.sampled_from(["1", "3", "99", " 2", "-1"])),
        max_size=4,
    ),
    v6=st.booleans(),
    v2=st.booleans(),
    offsets=st.tuples(st.integers(-2, 2**40), st.integers(-2, 2**40)),
    lead=st.integers(0, 3),
    flips=st.lists(st.tuples(st.integers(0, 220), st.integers(0, 255)), max_size=3),
    cut=st.integers(-4, 4),
)
def test_compiled_identical(
    topic: str,
    props: dict[str, str],
    v6: bool,
    v2: bool,
    offsets: tuple[int, int],
    lead: int,
    flips: list[tuple[int, int]],
    cut: int,
) -> None:
    if native.speedups is None:
        pytest.skip(f"{native.build_name()}: nothing compiled")
    rec = _record(
        topic,
        props,
        v6=v6,
        v2=v2 or len(topic) > 127,
        queue_offset=max(offsets[0], 0),
        phys=max(offsets[1], 0),
    )
    buf = bytearray(b"\xaa" * lead + rec + b"\x00" * 4)
    limit = lead + len(rec) + cut
    fast, pure = record_dispatch, record_dispatch_py
    assert _outcome(fast, bytes(buf), lead, limit) == _outcome(pure, bytes(buf), lead, limit)
    for at, value in flips:
        if lead + at < len(buf):
            buf[lead + at] = value
    assert _outcome(fast, buf, lead, limit) == _outcome(pure, buf, lead, limit)
    view = memoryview(buf)
    assert _outcome(fast, view, lead, limit) == _outcome(pure, view, lead, limit)
