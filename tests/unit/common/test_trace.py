"""The trace codec: golden bytes in the layouts of the spec (book ch. 8 §1.4, RocketMQ 4.9/5.x
``TraceDataEncoder``), tolerance of older layouts, round trips and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common.trace import (
    ConsumeReturnType,
    TraceBean,
    TraceContext,
    TraceMessageType,
    TraceType,
    UndecodableTrace,
    decode_trace_body,
    decode_trace_data,
    encode_context,
    message_type_of,
    trace_keys,
)
from ariane.errors import InvalidArgumentError, TraceDecodeError

S, E = "\x01", "\x02"
MSG_ID = "7F0000010B1F18B4AAC2186A2A510000"
OFFSET_ID = "7F00000100002A9F0000000000000F3C"


def rec(*fields: object) -> str:
    return S.join(str(f) for f in fields) + E


PUB = TraceContext(
    TraceType.Pub,
    timestamp_ms=1700000000123,
    region_id="DefaultRegion",
    group="pg",
    cost_ms=7,
    success=True,
    beans=(
        TraceBean(
            topic="TopicA",
            msg_id=MSG_ID,
            offset_msg_id=OFFSET_ID,
            tags="TagA",
            keys="order-1 order-2",
            store_host="127.0.0.1:10911",
            body_length=11,
            msg_type=TraceMessageType.Delay_Msg,
        ),
    ),
)
PUB_TEXT = rec(
    "Pub",
    1700000000123,
    "DefaultRegion",
    "pg",
    "TopicA",
    MSG_ID,
    "TagA",
    "order-1 order-2",
    "127.0.0.1:10911",
    11,
    7,
    3,
    OFFSET_ID,
    "true",
)


def test_pub_golden_bytes_and_keys() -> None:
    transfer = encode_context(PUB)
    assert transfer.data == PUB_TEXT
    assert transfer.data.encode() == (
        b"Pub\x011700000000123\x01DefaultRegion\x01pg\x01TopicA\x01" + MSG_ID.encode() + b"\x01"
        b"TagA\x01order-1 order-2\x01127.0.0.1:10911\x0111\x017\x013\x01"
        + OFFSET_ID.encode()
        + b"\x01true\x02"
    )
    assert transfer.keys == {MSG_ID, "order-1", "order-2"}
    assert decode_trace_data(PUB_TEXT) == [PUB]


def test_sub_before_and_after_one_record_per_bean() -> None:
    beans = (
        TraceBean(msg_id="id1", keys="k1", retry_times=2),
        TraceBean(msg_id="id2", keys="null"),
    )
    before = TraceContext(
        TraceType.SubBefore,
        timestamp_ms=1700000000200,
        region_id="r1",
        group="cg",
        request_id="REQ",
        beans=beans,
    )
    assert encode_context(before).data == (
        rec("SubBefore", 1700000000200, "r1", "cg", "REQ", "id1", 2, "k1")
        + rec("SubBefore", 1700000000200, "r1", "cg", "REQ", "id2", 0, "null")
    )
    after = TraceContext(
        TraceType.SubAfter,
        timestamp_ms=1700000000300,
        region_id="r1",
        group="cg",
        cost_ms=50,
        success=False,
        request_id="REQ",
        context_code=ConsumeReturnType.EXCEPTION,
        beans=beans,
    )
    text = encode_context(after).data
    assert text == (
        rec("SubAfter", "REQ", "id1", 50, "false", "k1", 2, 1700000000300, "cg")
        + rec("SubAfter", "REQ", "id2", 50, "false", "null", 2, 1700000000300, "cg")
    )
    # "null" is Java's text for a missing key: never an index key
    assert encode_context(after).keys == {"id1", "id2", "k1"}
    decoded = decode_trace_data(text)
    assert [c.bean.msg_id for c in decoded] == ["id1", "id2"]
    assert all(c.context_code == 2 and c.group == "cg" and not c.success for c in decoded)
    assert decoded[0].timestamp_ms == 1700000000300
    # the region is not part of a SubAfter record
    assert decoded[0].region_id == ""


def test_end_transaction_golden_bytes() -> None:
    ctx = TraceContext(
        TraceType.EndTransaction,
        timestamp_ms=5,
        region_id="DefaultRegion",
        group="txg",
        beans=(
            TraceBean(
                topic="T",
                msg_id="M",
                tags="null",
                keys="null",
                store_host="10.0.0.1:10911",
                msg_type=TraceMessageType.Trans_msg_Commit,
                transaction_id="TX",
                transaction_state="COMMIT_MESSAGE",
                from_transaction_check=True,
            ),
        ),
    )
    text = rec(
        "EndTransaction",
        5,
        "DefaultRegion",
        "txg",
        "T",
        "M",
        "null",
        "null",
        "10.0.0.1:10911",
        2,
        "TX",
        "COMMIT_MESSAGE",
        "true",
    )
    assert encode_context(ctx).data == text
    assert encode_context(ctx).keys == {"M"}
    assert decode_trace_data(text) == [ctx]


def test_recall_layout() -> None:
    ctx = TraceContext(
        TraceType.Recall,
        timestamp_ms=9,
        region_id="r",
        group="g",
        success=False,
        beans=(TraceBean(topic="T", msg_id="M"),),
    )
    assert encode_context(ctx).data == rec("Recall", 9, "r", "g", "T", "M", "false")
    assert decode_trace_data(encode_context(ctx).data) == [ctx]


def test_older_and_newer_layouts_decode() -> None:
    # Pub without offsetMsgId (13 fields) and with the 5.x clientHost (15 fields)
    old_pub = rec("Pub", 1, "r", "g", "T", "M", "t", "k", "h:1", 3, 4, 0, "false")
    (ctx,) = decode_trace_data(old_pub)
    assert ctx.bean.offset_msg_id == ""
    assert ctx.success is False
    assert ctx.bean.body_length == 3
    new_pub = rec("Pub", 1, "r", "g", "T", "M", "t", "k", "h:1", 3, 4, 0, "O", "true", "c:2")
    (ctx,) = decode_trace_data(new_pub)
    assert ctx.bean.offset_msg_id == "O"
    assert ctx.bean.client_host == "c:2"
    assert ctx.success
    # 4.7 SubAfter: 7 fields, no timestamp or group; 4.4: 6 fields, no contextCode
    (ctx,) = decode_trace_data(rec("SubAfter", "R", "M", 5, "true", "k", 4))
    assert (ctx.context_code, ctx.timestamp_ms, ctx.group) == (4, 0, "")
    (ctx,) = decode_trace_data(rec("SubAfter", "R", "M", 5, "TRUE", "k"))
    assert ctx.context_code == 0
    assert ctx.success
    # Java's split drops trailing empty fields: an empty last key is simply absent
    (ctx,) = decode_trace_data("SubBefore\x011\x01r\x01g\x01R\x01M\x010\x02")
    assert ctx.bean.keys == ""
    assert ctx.bean.retry_times == 0
    # 5.x cloud channel writes "contextCode\x01" then the terminator
    (ctx,) = decode_trace_data("SubAfter\x01R\x01M\x015\x01true\x01k\x010\x01\x02")
    assert ctx.timestamp_ms == 0
    # a missing final terminator and empty records are tolerated
    assert len(decode_trace_data(PUB_TEXT + E + PUB_TEXT[:-1])) == 2


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Sub\x011\x02", "unknown trace type 'Sub'"),
        ("Pub\x011\x02", "Pub record has 2 fields"),
        (PUB_TEXT.replace("1700000000123", "17x"), "timeStamp '17x' is not an integer"),
        (PUB_TEXT.replace(f"{S}3{S}", f"{S}9{S}"), "msgType 9"),
        (PUB_TEXT.replace("true", "yes"), "success 'yes' is not true or false"),
        (rec("SubBefore", 1, "r", "g", "R", "M", 99999999999), "retryTimes 99999999999 is out"),
        (rec("SubAfter", "R", "M", " 5", "true", "k"), "costTime ' 5' is not an integer"),
        (
            rec("EndTransaction", 1, "r", "g", "T", "M", "t", "k", "h", 2, "X", "MAYBE", "true"),
            "MAYBE",
        ),
    ],
)
def test_bad_records_name_the_problem(text: str, error: str) -> None:
    with pytest.raises(TraceDecodeError, match="trace record 0: ") as info:
        decode_trace_data(text)
    assert error in str(info.value)


def test_tolerant_body_decoding_keeps_good_records() -> None:
    body = (PUB_TEXT + "Garbage\x01x" + E + PUB_TEXT).encode() + b"Pub\x01\xff\xfe\x02" + b"\x02"
    out = decode_trace_body(body)
    assert out[0] == PUB
    assert out[2] == PUB
    bad, not_utf8 = out[1], out[3]
    assert bad == UndecodableTrace(
        "trace record 1: unknown trace type 'Garbage'", "Garbage\\x01x", 1
    )
    assert isinstance(not_utf8, UndecodableTrace)
    assert not_utf8.index == 3
    assert "trace record 3 is not UTF-8" in not_utf8.error
    assert not_utf8.text == "Pub\\x01\ufffd\ufffd"
    assert len(out) == 4
    assert decode_trace_body(b"") == []
    long = decode_trace_body(b"x" * 500)
    assert isinstance(long[0], UndecodableTrace)
    assert long[0].text == "x" * 200 + "..."


def test_encoder_refuses_what_it_cannot_write() -> None:
    with pytest.raises(InvalidArgumentError, match="no bean"):
        encode_context(TraceContext(TraceType.Pub))
    with pytest.raises(InvalidArgumentError, match="separator"):
        encode_context(TraceContext(TraceType.Pub, group="a\x01b", beans=(TraceBean(),)))
    bad_state = TraceBean(transaction_state="COMMIT")
    with pytest.raises(InvalidArgumentError, match="transaction state"):
        encode_context(TraceContext(TraceType.EndTransaction, beans=(bad_state,)))
    # a SubBefore without beans writes nothing
    assert encode_context(TraceContext(TraceType.SubBefore)).data == ""


def test_batch_ids_are_each_an_index_key() -> None:
    ctx = TraceContext(TraceType.Pub, beans=(TraceBean(msg_id="A,B,C", keys="x  y"),))
    assert trace_keys(ctx) == {"A", "B", "C", "x", "y"}


def test_message_type_of_properties() -> None:
    assert message_type_of({}) is TraceMessageType.Normal_Msg
    assert message_type_of({"TRAN_MSG": "true", "DELAY": "3"}) is TraceMessageType.Trans_Msg_Half
    assert message_type_of({"DELAY": "3"}) is TraceMessageType.Delay_Msg
    assert message_type_of({"TIMER_DELIVER_MS": "1"}) is TraceMessageType.Delay_Msg


# -- round trips ----------------------------------------------------------------------------

_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    max_size=12,
)
# the last string field of a record may be empty (Java drops it, we restore ""), the first
# field of a SubBefore/SubAfter bean (msgId) too; a type name must not be split
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def contexts(draw: st.DrawFn) -> TraceContext:
    kind = draw(st.sampled_from(list(TraceType)))
    bean = st.builds(
        TraceBean,
        topic=_text,
        msg_id=_text,
        offset_msg_id=_text,
        tags=_text,
        keys=_text,
        store_host=_text,
        retry_times=_i32,
        body_length=_i32,
        msg_type=st.sampled_from(list(TraceMessageType)),
        transaction_id=_text,
        transaction_state=st.sampled_from(["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"]),
        from_transaction_check=st.booleans(),
    )
    many = kind in (TraceType.SubBefore, TraceType.SubAfter)
    beans = tuple(draw(st.lists(bean, min_size=1, max_size=3 if many else 1)))
    return TraceContext(
        kind,
        timestamp_ms=draw(_i64),
        region_id=draw(_text),
        group=draw(_text),
        cost_ms=draw(_i32),
        success=draw(st.booleans()),
        request_id=draw(_text),
        context_code=draw(_i32),
        beans=beans,
    )


def _expected(ctx: TraceContext) -> list[TraceContext]:
    """What a decoder can give back: one context per bean, holding the encoded fields."""
    t = ctx.trace_type
    out = []
    for b in ctx.beans if t in (TraceType.SubBefore, TraceType.SubAfter) else ctx.beans[:1]:
        if t is TraceType.Pub:
            bean = TraceBean(
                topic=b.topic,
                msg_id=b.msg_id,
                offset_msg_id=b.offset_msg_id,
                tags=b.tags,
                keys=b.keys,
                store_host=b.store_host,
                body_length=b.body_length,
                msg_type=b.msg_type,
            )
            out.append(
                TraceContext(
                    t,
                    ctx.timestamp_ms,
                    ctx.region_id,
                    ctx.group,
                    ctx.cost_ms,
                    ctx.success,
                    beans=(bean,),
                )
            )
        elif t is TraceType.SubBefore:
            bean = TraceBean(msg_id=b.msg_id, retry_times=b.retry_times, keys=b.keys)
            out.append(
                TraceContext(
                    t,
                    ctx.timestamp_ms,
                    ctx.region_id,
                    ctx.group,
                    request_id=ctx.request_id,
                    beans=(bean,),
                )
            )
        elif t is TraceType.SubAfter:
            out.append(
                TraceContext(
                    t,
                    ctx.timestamp_ms,
                    "",
                    ctx.group,
                    ctx.cost_ms,
                    ctx.success,
                    ctx.request_id,
                    ctx.context_code,
                    (TraceBean(msg_id=b.msg_id, keys=b.keys),),
                )
            )
        elif t is TraceType.EndTransaction:
            bean = TraceBean(
                topic=b.topic,
                msg_id=b.msg_id,
                tags=b.tags,
                keys=b.keys,
                store_host=b.store_host,
                msg_type=b.msg_type,
                transaction_id=b.transaction_id,
                transaction_state=b.transaction_state,
                from_transaction_check=b.from_transaction_check,
            )
            out.append(TraceContext(t, ctx.timestamp_ms, ctx.region_id, ctx.group, beans=(bean,)))
        else:
            out.append(
                TraceContext(
                    t,
                    ctx.timestamp_ms,
                    ctx.region_id,
                    ctx.group,
                    success=ctx.success,
                    beans=(TraceBean(topic=b.topic, msg_id=b.msg_id),),
                )
            )
    return out


@given(st.lists(contexts(), max_size=4))
def test_decode_of_encode_is_identity(ctxs: list[TraceContext]) -> None:
    text = "".join(encode_context(c).data for c in ctxs)
    expected = [e for c in ctxs for e in _expected(c)]
    assert decode_trace_data(text) == expected
    assert decode_trace_body(text.encode()) == expected
    # and the text written again is the same text, byte for byte
    assert "".join(encode_context(c).data for c in expected) == text


@given(st.binary(max_size=300))
def test_body_decoding_never_raises(body: bytes) -> None:
    for item in decode_trace_body(body):
        assert isinstance(item, (TraceContext, UndecodableTrace))


@given(
    st.lists(st.sampled_from(["Pub", "SubAfter", "SubBefore", "1", "", "true", "x"]), max_size=16)
)
def test_field_soup_decodes_or_fails_cleanly(fields: list[str]) -> None:
    text = S.join(fields) + E
    try:
        decode_trace_data(text)
    except TraceDecodeError:
        pass
