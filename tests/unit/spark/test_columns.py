"""The bulk record decoder of Spark reads (``ariane.spark._columns``) against the plain path
(``decode_records`` + ``messages_to_batch``): the same rows, column by column, byte by byte."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

pytest.importorskip("pyarrow")
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import properties as props
from ariane.common import record_columns
from ariane.common.message import HostPort
from ariane.common.record_columns import decode_columns_py
from ariane.common.sysflag import COMPRESSED_FLAG
from ariane.errors import CorruptionError
from ariane.spark import _columns
from ariane.spark._arrow import ARROW_SCHEMA
from ariane.spark._columns import (
    columns_to_batch,
    decode_plain,
    records_to_batch,
    try_records_to_batch,
)
from ariane.spark.options import PropertiesMode
from tests.support.records import STORE, V4, record

V6 = HostPort.parse("[::1]:10911")


def both(
    buf: bytes,
    mode: PropertiesMode = PropertiesMode.USER,
    start: int = 0,
    end: int = 2**62,
    tags: frozenset[str] | None = None,
    *,
    fast: bool | None = True,
    bulk: bool = True,
) -> list[dict[str, Any]]:
    """Rows of every path, asserting they are identical; ``fast``: the numpy path must take
    the batch (``None``: either way), ``bulk``: ``decode_columns`` must (else they hand it
    to the plain path)."""
    plain = decode_plain(buf, "broker-a", mode, start, end, tags)
    quick = _columns._numpy_to_batch(buf, "broker-a", mode, start, end, tags)
    assert fast is None or (quick is not None) is fast
    assert quick is None or (quick.equals(plain) and quick.to_pylist() == plain.to_pylist())
    wanted = None if tags is None else {t.encode() for t in tags}
    skip = _columns._SYSTEM_NAMES if mode is PropertiesMode.USER else ()
    cols = decode_columns_py(buf, start, end, wanted, mode is not PropertiesMode.NONE, skip)
    assert (cols is not None) is bulk
    if cols is not None:
        twin = columns_to_batch(cols, "broker-a", mode)
        twin.validate(full=True)
        assert twin.equals(plain)
        assert twin.to_pylist() == plain.to_pylist()
    compiled = record_columns.COMPILED
    direct = try_records_to_batch(buf, "broker-a", mode, start, end, tags)
    assert (direct is not None) is (bulk if compiled else quick is not None)
    got = records_to_batch(buf, "broker-a", mode, start, end, tags)
    assert got.schema == ARROW_SCHEMA
    assert got.equals(plain)
    rows: list[dict[str, Any]] = got.to_pylist()
    assert rows == plain.to_pylist()
    return rows


ODD = b"".join(
    [
        record(0, b"", {props.UNIQ_KEY: "ID0", props.TAGS: "a", props.KEYS: "k1 k2"}),
        record(1, "h\u00e9llo \u263a".encode(), {"n\u00e4me": "v\u00e4lue \U0001f600", "x": "1"}),
        record(2, b"\x00\x01\x02\xff", {props.WAIT_STORE_MSG_OK: "true", "": "noname"}),
        record(3, b"no props", {}, topic="Other", queue_id=5, reconsume=3),
        record(4, b"v", {"k": "a\x01b", "empty": "", props.TAGS: "b"}),
        record(5, b"x" * 5000, {props.UNIQ_KEY: "ID5", "user": "u"}, born=STORE, store=V4),
    ]
)


@pytest.mark.parametrize("mode", list(PropertiesMode))
def test_odd_records_decode_the_same(mode: PropertiesMode) -> None:
    rows = both(ODD, mode)
    assert [r["queueOffset"] for r in rows] == [0, 1, 2, 3, 4, 5]
    first, second, _, fourth, _, sixth = rows
    assert (first["body"], first["msgId"], first["keys"]) == (b"", "ID0", "k1 k2")
    assert second["body"] == "h\u00e9llo \u263a".encode()
    assert (fourth["topic"], fourth["queueId"], fourth["reconsumeTimes"]) == ("Other", 5, 3)
    assert fourth["msgId"] == "7F00000100002A9F0000000000003011"  # offsetMsgId: no UNIQ_KEY
    assert (sixth["bornHost"], sixth["storeHost"]) == ("127.0.0.1:10911", "10.1.2.3:5555")
    if mode is PropertiesMode.USER:
        assert rows[1]["properties"] == [("n\u00e4me", "v\u00e4lue \U0001f600"), ("x", "1")]
        assert rows[2]["properties"] == []  # WAIT is reserved, an empty name is dropped
        assert rows[4]["properties"] == [("k", "a\x01b")]  # empty values are dropped


@pytest.mark.parametrize(("start", "end"), [(0, 6), (1, 5), (2, 3), (5, 99), (6, 9), (3, 3)])
def test_ranges_that_start_and_end_mid_buffer(start: int, end: int) -> None:
    rows = both(ODD, start=start, end=end)
    assert [r["queueOffset"] for r in rows] == list(range(start, min(end, 6)))


def test_tag_filter() -> None:
    rows = both(ODD, tags=frozenset({"a", "b"}))
    assert [r["queueOffset"] for r in rows] == [0, 4]
    assert both(ODD, tags=frozenset({"zzz"})) == []


def test_empty_buffer() -> None:
    assert both(b"") == []


@pytest.mark.parametrize(
    ("odd", "bulk"),
    [
        (record(0, properties={"Dup\x01first\x02Dup": "second"}), True),  # a name twice
        (record(0, born=V6), False),
        (record(0, store=V6), False),
        (record(0, topic="L" * 200), True),  # long topic: the V2 magic
        (record(0, zlib.compress(b"inflated"), sys_flag=COMPRESSED_FLAG), False),
    ],
    ids=["duplicate-name", "born-ipv6", "store-ipv6", "magic-v2", "compressed"],
)
@pytest.mark.parametrize("mode", list(PropertiesMode))
def test_records_the_fast_path_leaves_to_the_plain_one(
    odd: bytes, bulk: bool, mode: PropertiesMode
) -> None:
    rows = both(record(7) + odd + record(8), mode, fast=False, bulk=bulk)
    assert len(rows) == 3


@pytest.mark.parametrize(
    "broken",
    [
        record(0)[:-1],  # truncated
        record(0) + b"\x00" * 10,  # trailing junk
        b"\x00\x00\x00\x10" + record(0)[4:],  # TOTALSIZE too small
        record(0, topic="T\u00e9").replace("T\u00e9".encode(), b"T\xff"),  # topic not UTF-8
    ],
    ids=["truncated", "junk", "small-total", "bad-utf8"],
)
def test_broken_records_raise_as_the_plain_path_does(broken: bytes) -> None:
    with pytest.raises(CorruptionError):
        decode_plain(broken, "b", PropertiesMode.USER, 0, 10, None)
    assert try_records_to_batch(broken, "b", PropertiesMode.USER, 0, 10) is None
    assert _columns._numpy_to_batch(broken, "b", PropertiesMode.USER, 0, 10, None) is None
    with pytest.raises(CorruptionError):
        decode_columns_py(broken, 0, 10, None, True, ())
    with pytest.raises(CorruptionError):
        records_to_batch(broken, "b", PropertiesMode.USER, 0, 10)


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_props = st.dictionaries(
    st.sampled_from([props.TAGS, props.KEYS, props.UNIQ_KEY, "WAIT", "a", "\u00e9", "k\x01"])
    | _text,
    _text,
    max_size=5,
)
_records = st.lists(
    st.tuples(st.binary(max_size=40), _props, st.integers(0, 3), st.sampled_from(["T", "U\u00df"])),
    max_size=12,
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_records, st.sampled_from(list(PropertiesMode)), st.integers(0, 12), st.integers(0, 12))
def test_any_records_decode_the_same(
    specs: list[tuple[bytes, dict[str, str], int, str]],
    mode: PropertiesMode,
    start: int,
    end: int,
) -> None:
    buf = b"".join(
        record(i, body, p, queue_id=q, topic=t) for i, (body, p, q, t) in enumerate(specs)
    )
    got = both(buf, mode, start, end, fast=None)
    assert len(got) == len([s for i, s in enumerate(specs) if start <= i < end])


def test_a_list_of_pull_bodies_reads_as_their_join() -> None:
    parts = [record(i, b"x" * i, {props.TAGS: "a"}) for i in range(6)]
    bodies = [parts[0] + parts[1], b"".join(parts[2:5]), parts[5]]
    plain = decode_plain(b"".join(bodies), "b", PropertiesMode.ALL, 1, 6, None)
    got = records_to_batch(bodies, "b", PropertiesMode.ALL, 1, 6)
    assert got.equals(plain)
    assert got.num_rows == 5
    # a record cut across two bodies: the plain path decodes the join
    cut = [parts[0] + parts[1][:40], parts[1][40:]]
    assert records_to_batch(cut, "b", PropertiesMode.ALL, 0, 6).equals(
        decode_plain(b"".join(cut), "b", PropertiesMode.ALL, 0, 6, None)
    )


SUBSETS = [
    ("body",),
    ("queueOffset", "body"),
    ("body", "queueOffset"),  # any order
    ("brokerName", "tags", "queueId"),
    ("msgId", "storeTimestamp", "bornHost"),
    ("properties", "keys"),
    ("reconsumeTimes", "storeHost", "topic", "bornTimestamp"),
    tuple(reversed(ARROW_SCHEMA.names)),
]


def pruned_everywhere(
    buf: bytes,
    columns: tuple[str, ...],
    mode: PropertiesMode = PropertiesMode.USER,
    tags: frozenset[str] | None = None,
    start: int = 0,
    end: int = 2**62,
) -> pa.RecordBatch:
    """The batch of ``columns`` from every path (each asserted to be the full read's columns),
    the compiled call with its fields mask included when built."""
    full = decode_plain(buf, "broker-a", mode, start, end, tags)
    want = full.select(list(columns))
    assert want.schema.names == list(columns)
    plain = decode_plain(buf, "broker-a", mode, start, end, tags, columns)
    assert plain.equals(want)
    quick = _columns._numpy_to_batch(buf, "broker-a", mode, start, end, tags, columns)
    assert quick is None or quick.equals(want)
    wanted = None if tags is None else {t.encode() for t in tags}
    skip = _columns._SYSTEM_NAMES if mode is PropertiesMode.USER else ()
    with_props = mode is not PropertiesMode.NONE and "properties" in columns
    fields = _columns.fields_of(columns)
    for decode in (decode_columns_py, record_columns.decode_columns):
        cols = decode(buf, start, end, wanted, with_props, skip, fields)
        if cols is not None:
            twin = columns_to_batch(cols, "broker-a", mode, columns)
            twin.validate(full=True)
            assert twin.equals(want)
    got = records_to_batch(buf, "broker-a", mode, start, end, tags, columns)
    assert got.equals(want)
    assert got.to_pylist() == want.to_pylist()
    return got


@pytest.mark.parametrize("columns", SUBSETS, ids=lambda c: "-".join(c))
@pytest.mark.parametrize("mode", list(PropertiesMode))
def test_a_subset_of_columns_is_the_full_read_s_columns(
    columns: tuple[str, ...], mode: PropertiesMode
) -> None:
    got = pruned_everywhere(ODD, columns, mode)
    assert got.schema.names == list(columns)
    assert got.num_rows == 6


def test_a_subset_of_columns_exact_values() -> None:
    got = pruned_everywhere(ODD, ("queueOffset", "body"), start=1, end=4)
    assert got.to_pylist() == [
        {"queueOffset": 1, "body": "h\u00e9llo \u263a".encode()},
        {"queueOffset": 2, "body": b"\x00\x01\x02\xff"},
        {"queueOffset": 3, "body": b"no props"},
    ]
    only = pruned_everywhere(ODD, ("body",), tags=frozenset({"a", "b"}))
    assert only.to_pylist() == [{"body": b""}, {"body": b"v"}]  # filtered on tags not read
    ids = pruned_everywhere(ODD, ("msgId", "queueId"), start=3, end=4)
    assert ids.to_pylist() == [{"msgId": "7F00000100002A9F0000000000003011", "queueId": 5}]


@pytest.mark.parametrize(
    "odd",
    [
        record(0, properties={"Dup\x01first\x02Dup": "second"}),
        record(0, born=V6),
        record(0, topic="L" * 200),
        record(0, zlib.compress(b"inflated"), sys_flag=COMPRESSED_FLAG),
    ],
    ids=["duplicate-name", "born-ipv6", "magic-v2", "compressed"],
)
@pytest.mark.parametrize("columns", [("body",), ("properties", "queueOffset"), ("msgId",)])
def test_a_subset_of_columns_of_odd_records(odd: bytes, columns: tuple[str, ...]) -> None:
    got = pruned_everywhere(record(7) + odd + record(8), columns, PropertiesMode.ALL)
    assert got.num_rows == 3


def test_a_subset_of_columns_of_an_empty_buffer() -> None:
    got = pruned_everywhere(b"", ("tags", "body"))
    assert got.schema.names == ["tags", "body"]
    assert got.num_rows == 0
