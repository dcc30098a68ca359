"""The compiled twins (``ariane._speedups``) against their pure-Python references (issue 18).

Both builds must give identical results: the same strings, the same dicts in the same order,
the same batch entries, the same errors at the same positions, and the same record bytes. The
pure side of each comparison is the ``*_py`` reference function; ``test_pure_switch`` runs a
child interpreter with ``ARIANE_PURE=1`` and compares its bytes with this process's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import struct
import subprocess
import sys
import zlib
from collections import OrderedDict
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import batch, hashing, native, properties, record
from ariane.common.message import HostPort, MessageExt
from ariane.common.record import decode_record, encode_record
from ariane.errors import CorruptionError
from tests.support.native import compiled

ROOT = Path(__file__).resolve().parents[3]

# texts rich in the two separators, so that every branch of the segment rule is hit
_text = st.text(
    alphabet=st.sampled_from(["\x01", "\x02", "a", "b", "é", "\U0001f600"]), max_size=40
)
_key = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
_props = st.dictionaries(_key, st.one_of(st.none(), _key), max_size=8)


def test_compiled_build_is_used_when_present() -> None:
    fast = compiled()
    assert properties.encode_properties is fast.encode_properties
    assert properties.decode_properties is fast.decode_properties
    assert native.build_name() == "compiled"


@settings(max_examples=300, deadline=None)
@given(props=_props)
def test_encode_properties_identical(props: dict[str, str]) -> None:
    fast = compiled()
    assert fast.encode_properties(props) == properties.encode_properties_py(props)
    ordered = OrderedDict(props)  # a Mapping that is not an exact dict takes the items() path
    assert fast.encode_properties(ordered) == properties.encode_properties_py(ordered)


def test_encode_properties_formats_non_strings_like_the_pure_twin() -> None:
    fast = compiled()
    odd = {"n": 7, 3: "x", "f": 1.5, "none": None, "b": True}
    assert fast.encode_properties(odd) == properties.encode_properties_py(odd)  # type: ignore[arg-type]
    assert fast.encode_properties(odd) == "n\x017\x023\x01x\x02f\x011.5\x02b\x01True\x02"
    with pytest.raises(AttributeError):
        fast.encode_properties(["not", "a", "map"])  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        properties.encode_properties_py(["not", "a", "map"])  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(text=_text)
def test_decode_properties_identical(text: str) -> None:
    fast = compiled()
    got, want = fast.decode_properties(text), properties.decode_properties_py(text)
    assert list(got.items()) == list(want.items())


def test_decode_properties_edges() -> None:
    fast = compiled()
    cases = ["", "\x02", "\x01", "a\x01", "\x01b", "a\x01b\x01c\x02", "a\x01b\x02a\x01c", "k\x01v"]
    for text in cases:
        assert list(fast.decode_properties(text).items()) == list(
            properties.decode_properties_py(text).items()
        ), repr(text)
    assert fast.decode_properties("a\x01b\x01c\x02a\x01d\x02z\x01") == {"a": "d"}
    assert fast.decode_properties(None) == properties.decode_properties_py(None) == {}  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fast.decode_properties(b"a\x01b")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        properties.decode_properties_py(b"a\x01b")  # type: ignore[arg-type]


def test_decode_properties_one_byte_texts() -> None:
    """Texts of one byte per character (ASCII and Latin-1) take the compiled memchr scan; texts
    with wider characters the general one: the same dicts as the reference either way."""
    fast = compiled()
    cases = [
        "UNIQ_KEY\x017F0000010000\x02WAIT\x01true\x02",
        "WAIT\x01true",
        "WAIT\x01truex\x02K\x01tru\x02T\x01\x02\x01true\x02",
        "caf\xe9\x01cr\xe8me\x02WAIT\x01true\x02\x02\x02",
        "\U0001f600\x01true\x02a\x01b",
        "a\x01\x01\x02b\x01c\x01\x02",
    ]
    for text in cases:
        got = fast.decode_properties(text)
        assert list(got.items()) == list(properties.decode_properties_py(text).items()), repr(text)


def test_decode_properties_shares_the_true_value() -> None:
    """A value of exactly "true" (every send's WAIT) is one shared str, not a new one per
    decode: equal to the reference's, and the same object across decodes."""
    fast = compiled()
    one = fast.decode_properties("WAIT\x01true\x02UNIQ_KEY\x01AB\x02")
    two = fast.decode_properties("X\x01true")
    assert one == {"WAIT": "true", "UNIQ_KEY": "AB"}
    assert one["WAIT"] is two["X"]
    assert fast.decode_properties("X\x01True")["X"] == "True"


def _batch_outcome(fn: object, data: bytes) -> object:
    try:
        return fn(data)  # type: ignore[operator]
    except CorruptionError as exc:
        return ("corrupt", str(exc), exc.pos)


_entries = st.lists(
    st.tuples(st.binary(max_size=64), st.integers(-(2**31), 2**31 - 1), _props), max_size=6
)


@settings(max_examples=300, deadline=None)
@given(
    entries=_entries,
    cut=st.integers(0, 400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3),
    junk=st.binary(max_size=30),
)
def test_decode_batch_identical(
    entries: list[tuple[bytes, int, dict[str, str]]],
    cut: int,
    flips: list[tuple[int, int]],
    junk: bytes,
) -> None:
    compiled()
    body = batch.encode_batch(entries)
    whole = batch.decode_batch(body)
    assert whole == batch.decode_batch_py(body)
    assert [(e.body, e.flag) for e in whole] == [(b, f) for b, f, _p in entries]
    assert all(type(e) is batch.BatchEntry and type(e.body) is bytes for e in whole)
    damaged = bytearray(body[: min(cut, len(body))] + junk)
    for at, value in flips:
        if at < len(damaged):
            damaged[at] = value
    for data in (bytes(damaged), memoryview(bytes(damaged)), bytearray(damaged)):
        assert _batch_outcome(batch.decode_batch, data) == _batch_outcome(  # type: ignore[arg-type]
            batch.decode_batch_py, data
        )


def test_decode_batch_errors_name_the_entry() -> None:
    compiled()
    one = batch.encode_batch([(b"xy", 0, {"A": "b"})])
    bad_utf8 = one[:-1] + b"\xff"
    for data in (one[:10], one + one[:21], bad_utf8, b"\x00\x00\x00\x16" + one[4:]):
        fast, pure = (
            _batch_outcome(batch.decode_batch, data),
            _batch_outcome(batch.decode_batch_py, data),
        )
        assert fast == pure
        assert isinstance(fast, tuple)
        assert fast[0] == "corrupt"
    with pytest.raises(TypeError):
        batch.decode_batch("text")  # type: ignore[arg-type]


_HOST = HostPort(b"\x7f\x00\x00\x01", 10911)


def _record_bytes() -> bytes:
    """A fixed set of CommitLog records and batch bodies; the same in either build."""
    out = hashlib.sha256()
    for i in range(200):
        props = {"TAGS": f"T{i % 7}", "UNIQ_KEY": f"{i:032X}", "KEYS": "a b", "é": "\U0001f600"}
        if i % 5 == 0:
            props["WAIT"] = "true"
        msg = MessageExt(
            topic=f"Topic{i % 3}", queue_id=i % 8, flag=i, body=bytes([i % 251]) * (i * 7),
            properties=props, born_timestamp_ms=1_700_000_000_000 + i, born_host=_HOST,
            store_timestamp_ms=1_700_000_000_500 + i, store_host=_HOST, queue_offset=i,
            commit_log_offset=i * 1000, reconsume_times=i % 3,
        )  # fmt: skip
        rec = encode_record(msg)
        back, _end = decode_record(rec, 0)
        assert back.properties == props
        out.update(rec)
        out.update(batch.encode_batch([(msg.body, i, props), (b"", 0, "x\x01y\x02")]))
    return out.digest()


def test_records_identical() -> None:
    compiled()
    assert _record_bytes() == _pure_child("print(m._record_bytes().hex())").strip()


def _pure_child(code: str) -> bytes:
    env = {**os.environ, "ARIANE_PURE": "1"}
    prog = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(Path(__file__))!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n" + code
    )
    done = subprocess.run(
        [sys.executable, "-c", prog], env=env, capture_output=True, timeout=120, check=True
    )
    return bytes.fromhex(done.stdout.decode().strip().splitlines()[-1])


def test_pure_switch() -> None:
    """``ARIANE_PURE=1`` makes an existing build unused."""
    code = (
        "from ariane.common import native, properties as p\n"
        "assert not native.COMPILED and native.speedups is None\n"
        "assert native.build_name() == 'pure (ARIANE_PURE=1)'\n"
        "assert p.encode_properties is p.encode_properties_py\n"
        "print(b'ok'.hex())\n"
    )
    assert _pure_child(code) == b"ok"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ariane_hatch_build", ROOT / "hatch_build.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_install_without_a_compiler_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = _hook()
    monkeypatch.delenv("ARIANE_PURE", raising=False)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    built, why = hook.compile_speedups(ROOT, tmp_path)
    assert built is None
    assert why == f"no C compiler ({tmp_path / 'no-such-cc'} not found)"
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    built, why = hook.compile_speedups(ROOT, tmp_path)
    assert built is None
    assert why.startswith("the C compiler failed")
    assert list(tmp_path.iterdir()) == []  # no half-written file left
    monkeypatch.setenv("ARIANE_PURE", "1")
    assert hook.compile_speedups(ROOT, tmp_path) == (None, "ARIANE_PURE is set")


def _record_outcome(buf: bytes, fast: bool, check_crc: bool, decompress: bool) -> object:
    decode = record._decode if fast else record._decode_py
    try:
        return decode(buf, 0, check_crc, decompress)
    except CorruptionError as exc:
        return ("corrupt", str(exc), exc.pos)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError, zlib.error) as exc:
        return ("undecodable", type(exc).__name__, str(exc))


_v6 = HostPort(b"\x00" * 15 + b"\x01", 10911)


@settings(max_examples=300, deadline=None)
@given(
    topic=st.text(min_size=1, max_size=20),
    body=st.binary(max_size=80),
    props=st.dictionaries(
        st.text(
            alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]),
            min_size=1,
            max_size=8,
        ),
        st.text(
            alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]),
            min_size=1,
            max_size=8,
        ),
        max_size=4,
    ),
    ints=st.tuples(
        st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**62), st.integers(0, 2**31 - 1)
    ),
    v6=st.booleans(),
    v2=st.booleans(),
    compressed=st.booleans(),
    flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 300),
    check_crc=st.booleans(),
)
def test_decode_record_identical(
    topic: str,
    body: bytes,
    props: dict[str, str],
    ints: tuple[int, int, int],
    v6: bool,
    v2: bool,
    compressed: bool,
    flips: list[tuple[int, int]],
    cut: int,
    check_crc: bool,
) -> None:
    compiled()
    flag, offset, reconsume = ints
    if compressed:
        body = zlib.compress(body)
    msg = MessageExt(
        topic=topic, body=body, flag=flag, properties=props, queue_offset=offset,
        commit_log_offset=offset // 3, reconsume_times=reconsume, born_timestamp_ms=offset,
        born_host=_v6 if v6 else _HOST, store_host=_HOST, sys_flag=1 if compressed else 0,
    )  # fmt: skip
    rec = encode_record(msg, v2=v2)
    whole_fast = _record_outcome(rec, True, check_crc, compressed)
    assert whole_fast == _record_outcome(rec, False, check_crc, compressed)
    damaged = bytearray(rec[: max(cut, 0)] if cut < len(rec) else rec)
    for at, value in flips:
        if at < len(damaged):
            damaged[at] = value
    for check in (False, True):
        for inflate in (False, True):
            assert _record_outcome(bytes(damaged), True, check, inflate) == _record_outcome(
                bytes(damaged), False, check, inflate
            )


@settings(max_examples=400, deadline=None)
@given(s=st.text(max_size=300))
def test_java_hash_identical(s: str) -> None:
    """Any str, lone surrogates and astral code points included (one and two UTF-16 units)."""
    fast = compiled()
    assert fast.java_hash_units(s) == hashing.unsigned_hash_and_units_py(s)


def test_java_hash_edges() -> None:
    fast = compiled()
    assert hashing.unsigned_hash_and_units is fast.java_hash_units
    assert fast.java_hash_units("") == (0, 0)
    assert fast.java_hash_units("hello") == (99162322, 5)
    assert fast.java_hash_units("\U0001f600") == (
        hashing.unsigned_hash_and_units_py("\U0001f600")[0],
        2,
    )
    assert fast.java_hash_units("\ud800") == (0xD800, 1)  # a lone surrogate is one unit, as in Java
    assert fast.java_hash_units("polygenelubricants") == (0x80000000, 18)
    long = "k" * 5000  # past the pure twin's cached powers
    assert fast.java_hash_units(long) == hashing.unsigned_hash_and_units_py(long)
    with pytest.raises(TypeError):
        fast.java_hash_units(b"bytes")
