"""Options of the ``ariane`` Spark data source, parsed and checked (no Spark, no I/O).

How it works: Spark hands a data source its options as a case-insensitive map of strings.
``SourceOptions.parse`` and ``SinkOptions.parse`` turn that map into frozen dataclasses once,
on the driver, so every mistake surfaces as an ``InvalidArgumentError`` naming the option
before any task runs. Names follow Spark's Kafka connector where one exists
(``startingOffsets``, ``endingOffsets``, ``startingTimestamp``, ``failOnDataLoss``,
``maxOffsetsPerTrigger``, ``minPartitions``, ``assign``) and the RocketMQ connector's where
RocketMQ differs (``nameserver``, ``subExpression``, offsets per broker).

Offsets are ``{topic: {brokerName: {queueId: offset}}}`` (JSON keys are strings), with
``-2`` meaning earliest and ``-1`` latest, as in both connectors.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from ariane.common.topics import validate_topic as check_topic
from ariane.common.trace import DEFAULT_TRACE_TOPIC
from ariane.errors import InvalidArgumentError

if TYPE_CHECKING:  # imported where an account is given: the ACL package is ~0.3 s to import
    from ariane.acl.credentials import SessionCredentials

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "PropertiesMode",
    "QueueKey",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
    "decodes_trace",
    "offsets_from_json",
    "offsets_to_json",
    "offsets_to_nested",
]

#: Offset placeholders inside a JSON offsets option (Kafka's and RocketMQ-Spark's convention).
EARLIEST = -2
LATEST = -1

#: A queue: (topic, broker name, queue id).
QueueKey = tuple[str, str, int]

DEFAULT_READ_GROUP = "ARIANE_SPARK_READER"
DEFAULT_WRITE_GROUP = "ARIANE_SPARK_WRITER"
#: rows per SEND_BATCH request of the sink (``batchRows``; a batch also stops at 1 MiB): 1,024
#: rows of 1 KiB cost the broker ~20 % less CPU per row than 256 (docs/benchmarks.md)
DEFAULT_BATCH_ROWS = 1024


def _norm(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items() if v is not None}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise InvalidArgumentError(f"option {name} must be true or false, not {raw!r}")


def _int(opts: dict[str, str], name: str, default: int | None, minimum: int = 1) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidArgumentError(f"option {name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise InvalidArgumentError(f"option {name} must be at least {minimum}, not {value}")
    return value


def parse_credentials(opts: dict[str, str]) -> SessionCredentials | None:
    """The ``accessKey``/``secretKey`` options (an ACL account; both or neither).

    Raises:
        InvalidArgumentError: only one of them is given.
    """
    ak = opts.get("accesskey", "").strip()
    sk = opts.get("secretkey", "").strip()
    if bool(ak) != bool(sk):
        raise InvalidArgumentError("give both options accessKey and secretKey (or neither)")
    if not ak:
        return None
    from ariane.acl.credentials import SessionCredentials

    return SessionCredentials(ak, sk)


def parse_timestamp_ms(raw: str, name: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC unless it names a zone).

    Raises:
        InvalidArgumentError: neither form.
    """
    text = raw.strip()
    if re.fullmatch(r"-?\d+", text):
        value = int(text)
    else:
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgumentError(
                f"option {name} must be milliseconds since the epoch or an ISO-8601 time, "
                f"not {raw!r}"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        value = int(parsed.timestamp() * 1000)
    if value < 0:
        raise InvalidArgumentError(f"option {name} must not be negative")
    return value


# -- offsets ----------------------------------------------------------------------------------


def offsets_to_nested(offsets: Mapping[QueueKey, int]) -> dict[str, dict[str, dict[str, int]]]:
    """``{(t, b, q): o}`` as ``{t: {b: {"q": o}}}`` with every level sorted (stable JSON)."""
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for topic, broker, queue_id in sorted(offsets):
        nested.setdefault(topic, {}).setdefault(broker, {})[str(queue_id)] = offsets[
            (topic, broker, queue_id)
        ]
    return nested


def offsets_to_json(offsets: Mapping[QueueKey, int]) -> str:
    """The JSON text of ``offsets_to_nested``."""
    return orjson.dumps(offsets_to_nested(offsets)).decode()


def offsets_from_nested(value: Any, name: str = "offsets") -> dict[QueueKey, int]:
    """Parse ``{topic: {broker: {queueId: offset}}}`` (already decoded JSON).

    Raises:
        InvalidArgumentError: another shape, a negative queue id, an offset below -2.
    """
    if not isinstance(value, dict):
        raise InvalidArgumentError(
            f"{name} must be a JSON object {{topic: {{broker: {{queue: offset}}}}}}"
        )
    out: dict[QueueKey, int] = {}
    for topic, brokers in value.items():
        if not isinstance(brokers, dict):
            raise InvalidArgumentError(f"{name}: topic {topic!r} must map broker names to objects")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise InvalidArgumentError(
                    f"{name}: {topic!r}/{broker!r} must map queue ids to offsets"
                )
            for qid, offset in queues.items():
                try:
                    queue_id = int(qid)
                except ValueError:
                    raise InvalidArgumentError(
                        f"{name}: queue id {qid!r} is not an integer"
                    ) from None
                if queue_id < 0:
                    raise InvalidArgumentError(f"{name}: queue id {queue_id} is negative")
                if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                    raise InvalidArgumentError(
                        f"{name}: offset of {topic}/{broker}/{queue_id} must be an integer >= -2"
                    )
                out[(str(topic), str(broker), queue_id)] = offset
    return out


def offsets_from_json(text: str, name: str = "offsets") -> dict[QueueKey, int]:
    """Parse the JSON text of an offsets map (see ``offsets_from_nested``).

    Raises:
        InvalidArgumentError: not JSON, or the wrong shape.
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{name} is not valid JSON: {exc}") from None
    return offsets_from_nested(value, name)


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends: ``earliest``, ``latest`` or explicit per-queue offsets.

    Queues missing from ``offsets`` take ``default`` (``EARLIEST`` or ``LATEST``).
    """

    default: int
    offsets: Mapping[QueueKey, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: str, name: str, *, allow_earliest: bool = True) -> OffsetSpec:
        """Parse ``earliest``, ``latest`` or a JSON offsets map.

        Raises:
            InvalidArgumentError: anything else, or ``earliest``/-2 where not allowed.
        """
        text = raw.strip()
        if text.lower() == "earliest":
            spec = cls(EARLIEST)
        elif text.lower() == "latest":
            spec = cls(LATEST)
        elif text.startswith("{"):
            spec = cls(EARLIEST if allow_earliest else LATEST, offsets_from_json(text, name))
        else:
            raise InvalidArgumentError(
                f"option {name} must be earliest, latest or a JSON object, not {raw!r}"
            )
        if not allow_earliest and (spec.default == EARLIEST or EARLIEST in spec.offsets.values()):
            raise InvalidArgumentError(f"option {name} cannot be earliest (-2)")
        return spec

    def resolve(self, key: QueueKey, earliest: int, latest: int) -> int:
        """The concrete offset for ``key`` given its queue's min and max offsets."""
        value = self.offsets.get(key, self.default)
        if value == EARLIEST:
            return earliest
        if value == LATEST:
            return latest
        return value


# -- subscription -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a pull asks the broker to filter: a tag expression or a SQL92 expression."""

    expression: str = "*"
    expression_type: str = "TAG"

    @property
    def tags(self) -> frozenset[str] | None:
        """The tag set of a TAG subscription (``None`` = every message)."""
        if self.expression_type != "TAG":
            return None
        expr = self.expression.strip()
        if expr in ("", "*"):
            return None
        return frozenset(t.strip() for t in expr.split("||") if t.strip())

    @classmethod
    def parse(cls, sub_expression: str | None, sql_filter: str | None) -> Subscription:
        """From the ``subExpression`` and ``filter`` options (at most one of them).

        Raises:
            InvalidArgumentError: both given, or an empty filter.
        """
        sub = (sub_expression or "").strip()
        sql = (sql_filter or "").strip()
        if sql and sub and sub != "*":
            raise InvalidArgumentError("give either subExpression (tags) or filter (SQL92)")
        if sql:
            return cls(sql, "SQL92")
        if sub and sub != "*" and not any(t.strip() for t in sub.split("||")):
            raise InvalidArgumentError(f"subExpression {sub_expression!r} names no tag")
        return cls(sub or "*", "TAG")


class PropertiesMode(enum.Enum):
    """Which properties the ``properties`` column carries."""

    USER = "user"  # properties that are not RocketMQ's reserved ones
    ALL = "all"  # every property, reserved ones included
    NONE = "none"  # the column is null (cheapest)

    @classmethod
    def parse(cls, raw: str | None) -> PropertiesMode:
        """``true``/``user`` (default), ``all``, or ``false``/``none``.

        Raises:
            InvalidArgumentError: another value.
        """
        value = (raw or "true").strip().lower()
        if value in ("true", "user"):
            return cls.USER
        if value == "all":
            return cls.ALL
        if value in ("false", "none"):
            return cls.NONE
        raise InvalidArgumentError(
            f"option includeProperties must be true, false or all, not {raw!r}"
        )


def decodes_trace(options: Mapping[str, str]) -> bool:
    """Whether the ``decode`` option asks for trace records (``trace``; default ``none``).

    Raises:
        InvalidArgumentError: another value.
    """
    raw = _norm(options).get("decode", "")
    value = raw.strip().lower()
    if value in ("", "none"):
        return False
    if value == "trace":
        return True
    raise InvalidArgumentError(f"option decode must be none or trace, not {raw!r}")


def _topics(opts: dict[str, str]) -> tuple[str, ...]:
    raw = opts.get("topic", "")
    topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    for topic in topics:
        check_topic(topic)
    return topics


def parse_assign(raw: str) -> dict[str, dict[str | None, tuple[int, ...]]]:
    """``{"t": {"broker-a": [0, 1]}}`` or ``{"t": [0, 1]}`` (those ids on every broker).

    Raises:
        InvalidArgumentError: another shape.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgumentError(f"option assign is not valid JSON: {exc}") from None
    if not isinstance(value, dict) or not value:
        raise InvalidArgumentError('option assign must look like {"topic": {"broker": [0, 1]}}')
    out: dict[str, dict[str | None, tuple[int, ...]]] = {}

    def ids(v: Any) -> tuple[int, ...]:
        if not isinstance(v, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v
        ):
            raise InvalidArgumentError("option assign: queue ids must be lists of integers >= 0")
        return tuple(sorted(set(v)))

    for topic, spec in value.items():
        check_topic(topic)
        if isinstance(spec, list):
            out[topic] = {None: ids(spec)}
        elif isinstance(spec, dict):
            out[topic] = {str(b): ids(q) for b, q in spec.items()}
        else:
            raise InvalidArgumentError(f"option assign: {topic!r} must map to a list or object")
    return out


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The reading options (batch and streaming); see ``docs/spark.md`` for the table."""

    nameserver: str
    topics: tuple[str, ...]
    assign: Mapping[str, Mapping[str | None, tuple[int, ...]]] | None
    starting: OffsetSpec | None
    ending: OffsetSpec
    starting_timestamp_ms: int | None
    ending_timestamp_ms: int | None
    subscription: Subscription
    fail_on_data_loss: bool
    properties: PropertiesMode
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    consumer_group: str
    commit_offsets_to_group: str | None
    pull_batch_size: int
    timeout_ms: int
    credentials: SessionCredentials | None = None
    #: ``decode=trace``: rows are the decoded message-trace records (issue 15)
    decode_trace: bool = False
    #: pulls of one queue range in flight at once (option ``pullsInFlight``)
    pulls_in_flight: int = 16
    #: raw reads use the Ariane bulk pull when the broker has it (option ``bulkPull``)
    bulk_pull: bool = True
    #: bulk pulls of one queue range in flight at once (option ``bulkPullsInFlight``)
    bulk_pulls_in_flight: int = 4
    #: bulk pulls on a blocking connection of the task's own instead of the SDK's client
    #: (option ``bulkPullSocket``; never with an ACL account)
    bulk_pull_socket: bool = True
    #: batch reads take Spark's filters on queueId/queueOffset (option ``pushFilters``)
    push_filters: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Check and convert Spark's option map.

        Raises:
            InvalidArgumentError: a missing, unknown-valued or conflicting option.
        """
        opts = _norm(options)
        nameserver = (opts.get("nameserver") or opts.get("namesrvaddr") or "").strip()
        if not nameserver:
            raise InvalidArgumentError("option nameserver is required (host:port[;host:port])")
        topics = _topics(opts)
        assign = parse_assign(opts["assign"]) if opts.get("assign", "").strip() else None
        decode_trace = decodes_trace(options)
        if decode_trace and not topics and not assign:
            topics = (DEFAULT_TRACE_TOPIC,)
        if bool(topics) == bool(assign):
            raise InvalidArgumentError("give exactly one of the options topic and assign")
        starting = (
            OffsetSpec.parse(opts["startingoffsets"], "startingOffsets")
            if "startingoffsets" in opts
            else None
        )
        ending = (
            OffsetSpec.parse(opts["endingoffsets"], "endingOffsets", allow_earliest=False)
            if "endingoffsets" in opts
            else OffsetSpec(LATEST)
        )
        start_ts = (
            parse_timestamp_ms(opts["startingtimestamp"], "startingTimestamp")
            if opts.get("startingtimestamp", "").strip()
            else None
        )
        end_ts = (
            parse_timestamp_ms(opts["endingtimestamp"], "endingTimestamp")
            if opts.get("endingtimestamp", "").strip()
            else None
        )
        if start_ts is not None and end_ts is not None and end_ts < start_ts:
            raise InvalidArgumentError("endingTimestamp is before startingTimestamp")
        commit_group = opts.get("commitoffsetstogroup", "").strip() or None
        return cls(
            nameserver=nameserver,
            topics=topics,
            assign=assign,
            starting=starting,
            ending=ending,
            starting_timestamp_ms=start_ts,
            ending_timestamp_ms=end_ts,
            subscription=Subscription.parse(opts.get("subexpression"), opts.get("filter")),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            properties=PropertiesMode.parse(opts.get("includeproperties")),
            min_partitions=_int(opts, "minPartitions", None),
            max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", None),
            consumer_group=opts.get("consumergroup", "").strip() or DEFAULT_READ_GROUP,
            commit_offsets_to_group=commit_group,
            pull_batch_size=_int(opts, "pullBatchSize", 256) or 256,
            timeout_ms=_int(opts, "timeoutMs", 10_000) or 10_000,
            credentials=parse_credentials(opts),
            decode_trace=decode_trace,
            pulls_in_flight=_int(opts, "pullsInFlight", 16) or 16,
            bulk_pull=_bool(opts, "bulkPull", True),
            bulk_pulls_in_flight=_int(opts, "bulkPullsInFlight", 4) or 4,
            bulk_pull_socket=_bool(opts, "bulkPullSocket", True),
            push_filters=_bool(opts, "pushFilters", False),
        )

    @property
    def all_topics(self) -> tuple[str, ...]:
        """The topics read (from ``topic`` or ``assign``)."""
        return self.topics if self.topics else tuple(self.assign or {})

    def selects(self, key: QueueKey) -> bool:
        """Whether ``assign`` (if given) includes the queue."""
        if self.assign is None:
            return key[0] in self.topics
        spec = self.assign.get(key[0])
        if spec is None:
            return False
        ids = spec.get(key[1], spec.get(None))
        return ids is not None and key[2] in ids


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """The writing options (batch and streaming)."""

    nameserver: str
    topic: str | None
    producer_group: str
    batch_rows: int
    max_in_flight: int
    send_timeout_ms: int
    id_namespace: str | None
    credentials: SessionCredentials | None = None
    #: stamp ``__ARIANE_DEDUP`` so the broker drops repeats (option ``idempotent``)
    idempotent: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Check and convert Spark's option map.

        Raises:
            InvalidArgumentError: a missing or malformed option.
        """
        opts = _norm(options)
        nameserver = (opts.get("nameserver") or opts.get("namesrvaddr") or "").strip()
        if not nameserver:
            raise InvalidArgumentError("option nameserver is required (host:port[;host:port])")
        topic = opts.get("topic", "").strip() or None
        if topic is not None:
            if "," in topic:
                raise InvalidArgumentError("a sink writes to one topic option (or a topic column)")
            check_topic(topic)
        return cls(
            nameserver=nameserver,
            topic=topic,
            producer_group=opts.get("producergroup", "").strip() or DEFAULT_WRITE_GROUP,
            batch_rows=_int(opts, "batchRows", DEFAULT_BATCH_ROWS) or DEFAULT_BATCH_ROWS,
            max_in_flight=_int(opts, "maxInFlight", 16) or 16,
            send_timeout_ms=_int(opts, "sendTimeoutMs", 10_000) or 10_000,
            id_namespace=(opts.get("idnamespace") or opts.get("idempotencekey") or "").strip()
            or None,
            credentials=parse_credentials(opts),
            idempotent=_bool(opts, "idempotent", True),
        )
