"""Message property keys and the properties string codec (RocketMQ ``MessageConst``/``MessageDecoder``).

A properties map travels and is stored as ``name \\x01 value \\x02`` repeated. Decoding splits
on ``\\x02`` and keeps a segment only when its ``\\x01`` sits strictly inside it, so entries with
an empty name or an empty value are dropped, exactly as the Java decoder does.
"""

from __future__ import annotations

from collections.abc import Mapping

from ariane.common import native

__all__ = [
    "CLUSTER",
    "DEDUP",
    "DELAY",
    "KEYS",
    "KEY_SEPARATOR",
    "MAX_OFFSET",
    "MAX_RECONSUME_TIMES",
    "MIN_OFFSET",
    "ORIGIN_MESSAGE_ID",
    "PRODUCER_GROUP",
    "REAL_QUEUE_ID",
    "REAL_TOPIC",
    "RECONSUME_TIME",
    "RETRY_TOPIC",
    "SHARDING_KEY",
    "SYSTEM_KEYS",
    "TAGS",
    "TRANSACTION_ID",
    "TRANSACTION_PREPARED",
    "TRANSIENT_PREFIX",
    "UNIQ_KEY",
    "WAIT_STORE_MSG_OK",
    "decode_properties",
    "encode_properties",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

KEYS = "KEYS"
TAGS = "TAGS"
WAIT_STORE_MSG_OK = "WAIT"
DELAY = "DELAY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QUEUE_ID = "REAL_QID"
TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
BUYER_ID = "BUYER_ID"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
TRANSFER_FLAG = "TRANSFER_FLAG"
CORRECTION_FLAG = "CORRECTION_FLAG"
MQ2_FLAG = "MQ2_FLAG"
RECONSUME_TIME = "RECONSUME_TIME"
MSG_REGION = "MSG_REGION"
TRACE_SWITCH = "TRACE_ON"
UNIQ_KEY = "UNIQ_KEY"
EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
INNER_NUM = "INNER_NUM"
INNER_BASE = "INNER_BASE"
DUP_INFO = "DUP_INFO"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
TRANSACTION_ID = "__transactionId__"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
INSTANCE_ID = "INSTANCE_ID"
CORRELATION_ID = "CORRELATION_ID"
MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
MESSAGE_TTL = "TTL"
REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
CLUSTER = "CLUSTER"
MESSAGE_TYPE = "MSG_TYPE"
POP_CK = "POP_CK"
POP_CK_OFFSET = "POP_CK_OFFSET"
FIRST_POP_TIME = "1ST_POP_TIME"
SHARDING_KEY = "__SHARDINGKEY"
FORWARD_QUEUE_ID = "PROPERTY_FORWARD_QUEUE_ID"
REDIRECT = "REDIRECT"
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
TRACE_CONTEXT = "TRACE_CONTEXT"
#: Ariane's idempotent-send id: the broker stores a message carrying it once per topic within
#: its dedup window (``ariane.store.dedup``); the Spark sink sets it to the row's id.
DEDUP = "__ARIANE_DEDUP"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
TRANSIENT_PREFIX = "__RMQ.TRANSIENT."
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
CRC32 = "__CRC32#"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

#: ``MessageConst.STRING_HASH_SET``: keys reserved for the system.
SYSTEM_KEYS: frozenset[str] = frozenset(
    {
        TRACE_SWITCH, MSG_REGION, KEYS, TAGS, WAIT_STORE_MSG_OK, DELAY, RETRY_TOPIC, REAL_TOPIC,
        REAL_QUEUE_ID, TRANSACTION_PREPARED, PRODUCER_GROUP, MIN_OFFSET, MAX_OFFSET, BUYER_ID,
        ORIGIN_MESSAGE_ID, TRANSFER_FLAG, CORRECTION_FLAG, MQ2_FLAG, RECONSUME_TIME, UNIQ_KEY,
        MAX_RECONSUME_TIMES, CONSUME_START_TIMESTAMP, POP_CK, POP_CK_OFFSET, FIRST_POP_TIME,
        TRANSACTION_PREPARED_QUEUE_OFFSET, DUP_INFO, EXTEND_UNIQ_INFO, INSTANCE_ID,
        CORRELATION_ID, MESSAGE_REPLY_TO_CLIENT, MESSAGE_TTL, REPLY_MESSAGE_ARRIVE_TIME,
        PUSH_REPLY_TIME, CLUSTER, MESSAGE_TYPE, INNER_MULTI_QUEUE_OFFSET, TIMER_DELAY_MS,
        TIMER_DELAY_SEC, TIMER_DELIVER_MS, TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS, TIMER_ROLL_TIMES,
        TIMER_OUT_MS, TIMER_DEL_UNIQKEY, TIMER_DELAY_LEVEL, BORN_HOST, BORN_TIMESTAMP,
        DLQ_ORIGIN_TOPIC, DLQ_ORIGIN_MESSAGE_ID, CRC32,
    }
)  # fmt: skip


def encode_properties_py(props: Mapping[str, str]) -> str:
    """Serialise a properties map as RocketMQ does (``k\\x01v\\x02`` per entry).

    Entries whose value is ``None`` are skipped, like the Java encoder.
    """
    return "".join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}"
        for k, v in props.items()
        if v is not None
    )


def decode_properties_py(text: str) -> dict[str, str]:
    """Parse a properties string; malformed segments are dropped, never raised on."""
    out: dict[str, str] = {}
    if not text:
        return out
    for segment in text.split(PROPERTY_SEPARATOR):
        # name = up to the first separator, value = the rest; both must be non-empty
        name, _sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            out[name] = value
    return out


# the compiled twins when built (ariane.common.native); the functions above are the reference
encode_properties = native.speedups.encode_properties if native.speedups else encode_properties_py
decode_properties = native.speedups.decode_properties if native.speedups else decode_properties_py
