"""The bulk record decoder (``ariane.common.record_columns``): the pure reference against the
message-by-message decoder (``decode_records``), and the compiled twin against the reference
(same buffers, same ``None``, same errors at the same positions)."""

from __future__ import annotations

import itertools
import struct
import zlib
from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.common import native, record_columns
from ariane.common import properties as props
from ariane.common.message import HostPort
from ariane.common.record import decode_records
from ariane.common.record_columns import RecordColumns, decode_columns, decode_columns_py
from ariane.common.sysflag import COMPRESSED_FLAG
from ariane.errors import CorruptionError
from tests.support.records import STORE, V4, record

SKIP = tuple(sorted(k.encode() for k in props.SYSTEM_KEYS))
V6 = HostPort.parse("[2001:db8::7]:10911")


def _strings(cols: tuple[bytes, ...]) -> list[bytes | None]:
    """A (offsets, data) or (validity, offsets, data) column as Python values."""
    valid = cols[0] if len(cols) == 3 else None
    offsets = array("i")
    offsets.frombytes(cols[-2])
    data = cols[-1]
    out: list[bytes | None] = []
    for i in range(len(offsets) - 1):
        ok = valid is None or valid[i >> 3] >> (i & 7) & 1
        out.append(bytes(data[offsets[i] : offsets[i + 1]]) if ok else None)
    return out


def _ints(raw: bytes, code: str) -> list[int]:
    values = array(code)
    values.frombytes(raw)
    return list(values)


def rows(cols: RecordColumns) -> list[dict[str, Any]]:
    """The columns as one dict per row (the properties as a list of pairs)."""
    names = [
        "body", "topic", "tags", "keys", "msg_id", "born_host", "store_host",
    ]  # fmt: skip
    texts = {n: _strings(getattr(cols, n)) for n in names}
    fixed = {
        "queue_id": _ints(cols.queue_id, "i"),
        "sys_flag": _ints(cols.sys_flag, "i"),
        "reconsume_times": _ints(cols.reconsume_times, "i"),
        "queue_offset": _ints(cols.queue_offset, "q"),
        "commit_log_offset": _ints(cols.commit_log_offset, "q"),
        "born_us": _ints(cols.born_us, "q"),
        "store_us": _ints(cols.store_us, "q"),
    }
    pairs: list[list[tuple[bytes | None, bytes | None]] | None] = [None] * cols.rows
    if cols.properties is not None:
        entries = _ints(cols.properties[0], "i")
        keys = _strings(cols.properties[1:3])
        values = _strings(cols.properties[3:5])
        pairs = [
            list(zip(keys[a:b], values[a:b], strict=True)) for a, b in itertools.pairwise(entries)
        ]
    out = []
    for i in range(cols.rows):
        row: dict[str, Any] = {n: texts[n][i] for n in names}
        row.update({n: v[i] for n, v in fixed.items()})
        row["properties"] = pairs[i]
        out.append(row)
    return out


def expected(
    buf: bytes,
    start: int,
    end: int,
    tags: set[bytes] | None,
    with_props: bool,
    skip: tuple[bytes, ...],
) -> list[dict[str, Any]]:
    """The same rows from the message-by-message decoder."""
    out = []
    for m in decode_records(buf):
        tag = m.tags.encode() if m.tags is not None else None
        if not start <= m.queue_offset < end or (tags is not None and tag not in tags):
            continue
        p = {k.encode(): v.encode() for k, v in m.properties.items()}
        out.append(
            {
                "body": m.body, "topic": m.topic.encode(), "tags": tag,
                "keys": p.get(props.KEYS.encode()), "msg_id": m.msg_id.encode(),
                "born_host": str(m.born_host).encode(), "store_host": str(m.store_host).encode(),
                "queue_id": m.queue_id, "sys_flag": m.sys_flag,
                "reconsume_times": m.reconsume_times, "queue_offset": m.queue_offset,
                "commit_log_offset": m.commit_log_offset, "born_us": m.born_timestamp_ms * 1000,
                "store_us": m.store_timestamp_ms * 1000,
                "properties": [(k, v) for k, v in p.items() if k not in skip]
                if with_props else None,
            }
        )  # fmt: skip
    return out


def outcome(fn: Any, buf: bytes, *args: Any) -> Any:
    """What ``fn`` gives: its result, or the error's type and text."""
    try:
        return fn(buf, *args)
    except CorruptionError as exc:
        return ("error", str(exc))


def compiled() -> Any:
    if not record_columns.COMPILED:
        pytest.skip(f"decode_columns is not compiled ({native.build_name()})")
    return decode_columns


ODD = b"".join(
    [
        record(0, b"", {props.UNIQ_KEY: "ID0", props.TAGS: "a", props.KEYS: "k1 k2"}),
        record(1, "h\u00e9llo \u263a".encode(), {"n\u00e4me": "v\u00e4lue \U0001f600", "x": "1"}),
        record(2, b"\x00\x01\x02\xff", {props.WAIT_STORE_MSG_OK: "true", "": "noname"}),
        record(3, b"no props", {}, topic="Other", queue_id=5, reconsume=3),
        record(4, b"v", {"k": "a\x01b", "empty": "", props.TAGS: "b"}),
        record(5, b"x" * 5000, {props.UNIQ_KEY: "ID5", "user": "u"}, born=STORE, store=V4),
        record(6, b"dup", {"Dup\x01first\x02Dup": "second", "z": "1"}),  # a name twice
        record(7, b"v2", {props.TAGS: "a"}, topic="L" * 200),  # the V2 magic
        record(8, b"flags", {}, sys_flag=0x2 | 0x8 | 0x40, born_ms=-5),
    ]
)


@pytest.mark.parametrize(
    ("start", "end", "tags", "with_props", "skip"),
    [
        (0, 2**62, None, True, SKIP),
        (0, 2**62, None, True, ()),
        (0, 2**62, None, False, ()),
        (2, 6, None, True, SKIP),
        (0, 99, {b"a", b"b"}, True, ()),
        (0, 99, {b"zzz"}, True, ()),
        (9, 12, None, True, ()),
    ],
)
def test_reference_matches_the_record_decoder(
    start: int, end: int, tags: set[bytes] | None, with_props: bool, skip: tuple[bytes, ...]
) -> None:
    cols = decode_columns_py(ODD, start, end, tags, with_props, skip)
    assert cols is not None
    assert rows(cols) == expected(ODD, start, end, tags, with_props, skip)
    assert (cols.properties is not None) is with_props
    assert decode_columns(ODD, start, end, tags, with_props, skip) == cols


def test_values_of_odd_records() -> None:
    cols = decode_columns_py(ODD, 0, 99, None, True, SKIP)
    assert cols is not None
    got = rows(cols)
    assert [r["queue_offset"] for r in got] == list(range(9))
    assert (got[0]["body"], got[0]["msg_id"], got[0]["keys"]) == (b"", b"ID0", b"k1 k2")
    assert got[3]["msg_id"] == b"7F00000100002A9F0000000000003011"  # offsetMsgId
    assert got[3]["properties"] == []
    assert got[3]["tags"] is None
    assert got[4]["properties"] == [(b"k", b"a\x01b")]  # empty value dropped, TAGS reserved
    assert got[5]["born_host"] == b"127.0.0.1:10911"
    assert got[6]["properties"] == [(b"Dup", b"second"), (b"z", b"1")]  # first place, last value
    assert got[7]["topic"] == b"L" * 200
    assert (got[8]["sys_flag"], got[8]["born_us"]) == (0x4A, -5000)


def test_empty_buffer() -> None:
    cols = decode_columns_py(b"", 0, 9, None, True, ())
    assert cols is not None
    assert cols.rows == 0
    assert cols.body == (b"\x00\x00\x00\x00", b"")
    assert cols.tags == (b"", b"\x00\x00\x00\x00", b"")
    assert decode_columns(b"", 0, 9, None, True, ()) == cols


@pytest.mark.parametrize(
    "odd",
    [
        record(0, born=V6),
        record(0, store=V6),
        record(0, zlib.compress(b"inflated"), sys_flag=COMPRESSED_FLAG),
        record(0, born_ms=2**62),
    ],
    ids=["born-ipv6", "store-ipv6", "compressed", "timestamp-overflow"],
)
def test_records_left_to_the_caller(odd: bytes) -> None:
    buf = record(7) + odd + record(8)
    assert decode_columns_py(buf, 0, 99, None, True, ()) is None
    assert decode_columns(buf, 0, 99, None, True, ()) is None
    assert len(decode_records(buf)) == 3  # well formed: the plain decoder takes them


def _bad_utf8(what: str) -> bytes:
    good = record(0, topic="T\u00e9", properties={"n": "v\u00e9"})
    if what == "topic":
        return good.replace("T\u00e9".encode(), b"T\xff\xff")
    return good.replace("v\u00e9".encode(), b"\xed\xa0\x80")  # a surrogate: not UTF-8


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (record(0) + record(1)[:-1], "record truncated: total size 93, 92 bytes left at 93"),
        (record(0) + b"\x00" * 10, "record truncated: 10 bytes left at 93"),
        (record(0)[:50], "record truncated: 50 bytes left at 0"),
        (b"\x00\x00\x00\x10" + record(0)[4:], "bad total size 16 at 0"),
        (record(0)[:4] + b"\x00\x00\x00\x01" + record(0)[8:], "bad magic code 0x00000001 at 0"),
        (record(0)[:84] + struct.pack(">i", 11) + record(0)[88:], "bad body length 11 at 0"),
        (record(0)[:89] + b"\x05" + record(0)[90:], "bad topic length 5 at 0"),
        (record(0)[:-2] + b"\x00\x05", "bad properties length 5 for total 93 at 0"),
        (_bad_utf8("topic"), "topic is not UTF-8 at 0"),
        (_bad_utf8("properties"), "properties are not UTF-8 at 0"),
    ],
    ids=["truncated", "junk", "short", "total", "magic", "body", "topic", "props", "utf8", "utf8p"],
)
def test_malformed_records_raise_the_same_clear_error(broken: bytes, message: str) -> None:
    # records outside the range are checked too
    assert outcome(decode_columns_py, broken, 5, 6, None, True, ()) == ("error", message)
    assert outcome(decode_columns, broken, 5, 6, None, True, ()) == ("error", message)
    with pytest.raises(CorruptionError):
        decode_records(broken)


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_name = st.sampled_from([props.TAGS, props.KEYS, props.UNIQ_KEY, "WAIT", "a", "\u00e9"]) | _text
_hosts = st.sampled_from([V4, STORE, V6, HostPort(b"\xff\xff\xff\xff", -1), HostPort(b"\0" * 4, 0)])
_spec = st.tuples(
    st.binary(max_size=40),
    st.dictionaries(_name, _text, max_size=5),
    st.sampled_from(["T", "U\u00df", "\U0001f600", "L" * 130]),
    _hosts,
    _hosts,
    st.sampled_from([0, 0, 0x2, 0x4, 0x8, 0xC, 0x40, 0x80, COMPRESSED_FLAG]),
    st.integers(-(2**31), 2**31 - 1),
)


def _buffer(specs: list[Any]) -> bytes:
    parts = []
    for i, (body, p, topic, born, store, flag, qid) in enumerate(specs):
        if flag & COMPRESSED_FLAG:
            body = zlib.compress(body)
        parts.append(
            record(i, body, p, topic=topic, born=born, store=store, sys_flag=flag, queue_id=qid)
        )
    return b"".join(parts)


_args = st.tuples(
    st.integers(0, 12),
    st.integers(0, 14),
    st.none() | st.sets(st.sampled_from([b"", b"a", b"T", "\u00e9".encode()])),
    st.booleans(),
    st.sampled_from([SKIP, (), (b"a", b"WAIT")]),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(_spec, max_size=10), _args)
def test_any_records_match_the_record_decoder(specs: list[Any], args: Any) -> None:
    buf = _buffer(specs)
    start, end, tags, with_props, skip = args
    got = decode_columns_py(buf, start, end, tags, with_props, skip)
    handled = all(
        born.addr != V6.addr and store.addr != V6.addr and not flag & COMPRESSED_FLAG
        for _, _, _, born, store, flag, _ in specs
    )
    assert (got is not None) is handled
    if got is not None:
        assert rows(got) == expected(buf, start, end, tags, with_props, skip)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(_spec, max_size=10), _args)
def test_compiled_twin_identical(specs: list[Any], args: Any) -> None:
    fast = compiled()
    buf = _buffer(specs)
    assert outcome(fast, buf, *args) == outcome(decode_columns_py, buf, *args)


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.lists(_spec, min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 2**16), st.integers(0, 255)), max_size=4),
    st.integers(0, 40),
    st.binary(max_size=100),
)
def test_compiled_twin_identical_on_damaged_bytes(
    specs: list[Any], flips: list[tuple[int, int]], cut: int, junk: bytes
) -> None:
    fast = compiled()
    buf = bytearray(_buffer(specs))
    for at, value in flips:
        buf[at % len(buf)] = value
    damaged = bytes(buf[: len(buf) - cut]) + junk
    args = (0, 2**62, None, True, SKIP)
    assert outcome(fast, damaged, *args) == outcome(decode_columns_py, damaged, *args)


def test_compiled_twin_argument_errors() -> None:
    fast = record_columns._FAST if record_columns.COMPILED else None
    if fast is None:
        pytest.skip("not compiled")
    every = record_columns.ALL_FIELDS
    with pytest.raises(TypeError):
        fast(b"", 0, 1, ["a"], True, (), every)
    with pytest.raises(TypeError):
        fast(b"", 0, 1, None, True, ("str",), every)
    with pytest.raises(TypeError):
        fast(b"", 0, 1, None, True, ())  # no fields
    with pytest.raises(TypeError):
        fast(b"", 0, 1, None, True, (), "all")
    assert fast(b"", -(2**70), 2**70, None, True, (), every)[0] == 0


def raw_record(topic: bytes, text: bytes) -> bytes:
    """A record with these exact topic and properties bytes (V1, empty body)."""
    head = record(0, b"")[:88]
    total = 88 + 1 + len(topic) + 2 + len(text)
    return b"".join(
        [
            struct.pack(">i", total),
            head[4:],
            bytes([len(topic)]),
            topic,
            struct.pack(">h", len(text)),
            text,
        ]
    )


_utf8_edges = st.sampled_from(
    [b"\xc2\x80", b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80",
     b"\xef\xbf\xbf", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
     b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\x80", b"\xe2\x82", b"a", b"\x01", b"\x02"]
)  # fmt: skip
_bytes = st.lists(_utf8_edges | st.binary(max_size=3), max_size=8).map(b"".join)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_bytes.filter(lambda b: len(b) < 128), _bytes)
def test_utf8_checks_match_bytes_decode(topic: bytes, text: bytes) -> None:
    buf = raw_record(topic, text)
    got = outcome(decode_columns_py, buf, 0, 9, None, True, ())
    assert outcome(decode_columns, buf, 0, 9, None, True, ()) == got
    try:
        topic.decode()
        text.decode()
    except UnicodeDecodeError:
        assert got[0] == "error"
    else:
        assert isinstance(got, RecordColumns)
        assert rows(got) == expected(buf, 0, 9, None, True, ())


#: ASCII runs of 0-20 bytes between the edges: the compiled check steps over eight at a time
_ascii = st.integers(0, 20).map(lambda n: b"abcdefghijklmnopqrstu"[:n])
_runs = st.lists(_ascii | _utf8_edges, max_size=10).map(b"".join)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_runs.filter(lambda b: len(b) < 128), _runs)
def test_utf8_checks_across_ascii_runs_match_bytes_decode(topic: bytes, text: bytes) -> None:
    test_utf8_checks_match_bytes_decode.hypothesis.inner_test(topic, text)  # type: ignore[attr-defined]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(_spec, max_size=10), _args, st.lists(st.integers(0, 10), max_size=4))
def test_a_list_of_bodies_decodes_as_their_join(
    specs: list[Any], args: Any, cuts: list[int]
) -> None:
    records = [_buffer([spec]) for spec in specs]
    bodies = [b"".join(records[a:b]) for a, b in itertools.pairwise([0, *sorted(cuts), 99])]
    joined = outcome(decode_columns_py, b"".join(bodies), *args)
    assert outcome(decode_columns_py, bodies, *args) == joined
    assert outcome(decode_columns, bodies, *args) == joined


def test_errors_in_a_list_count_positions_from_the_first_body() -> None:
    first, second = record(0) + record(1), record(2) + record(3)[:-1]
    message = ("error", "record truncated: total size 93, 92 bytes left at 279")
    for decode in (decode_columns_py, decode_columns):
        assert outcome(decode, [first, b"", second], 0, 9, None, True, ()) == message
        # a record cut across two bodies is not decoded across them
        split = [record(0) + record(1)[:50], record(1)[50:]]
        got = outcome(decode, split, 0, 9, None, True, ())
        assert got == ("error", "record truncated: 50 bytes left at 93")
        assert outcome(decode, [], 0, 9, None, True, ()).rows == 0


def pruned(full: RecordColumns, fields: int) -> RecordColumns:
    """``full`` with the columns not in ``fields`` emptied, as a pruned decode returns them."""
    out = full._asdict()
    for name, bit in record_columns.FIELD_BITS.items():
        if not fields & bit:
            out[name] = b"" if isinstance(out[name], bytes) else (b"",) * len(out[name])
    return RecordColumns(**out)


@pytest.mark.parametrize(
    "names",
    [
        (),
        ("body",),
        ("queue_offset", "body"),
        ("tags", "queue_id"),
        ("msg_id", "store_us", "born_host"),
        ("keys", "topic", "store_host", "reconsume_times", "sys_flag"),
    ],
)
@pytest.mark.parametrize(
    ("tags", "with_props"), [(None, False), ({b"a", b"b"}, False), (None, True)]
)
def test_a_subset_of_fields_builds_only_those_columns(
    names: tuple[str, ...], tags: set[bytes] | None, with_props: bool
) -> None:
    fields = sum(record_columns.FIELD_BITS[n] for n in names)
    full = decode_columns_py(ODD, 1, 8, tags, with_props, SKIP)
    assert full is not None
    got = decode_columns_py(ODD, 1, 8, tags, with_props, SKIP, fields)
    assert got == pruned(full, fields)
    assert got is not None
    assert got.rows == (2 if tags else 7)  # tags: offsets 4 and 7
    assert decode_columns(ODD, 1, 8, tags, with_props, SKIP, fields) == got


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(_spec, max_size=8), _args, st.integers(0, record_columns.ALL_FIELDS))
def test_any_subset_of_fields_is_the_full_decode_pruned(
    specs: list[Any], args: Any, fields: int
) -> None:
    buf = _buffer(specs)
    full = outcome(decode_columns_py, buf, *args)
    got = outcome(decode_columns_py, buf, *args, fields)
    if isinstance(full, RecordColumns):
        assert got == pruned(full, fields)
    else:
        assert got == full  # None, or the same error
    if record_columns.COMPILED:
        assert outcome(decode_columns, buf, *args, fields) == got
