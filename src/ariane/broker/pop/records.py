"""What POP writes into the revive topic (RocketMQ 5 ``PopCheckPoint``, ``AckMsg``,
``BatchAckMsg``): UTF-8 JSON bodies with RocketMQ's short keys, so a revive log written by one
broker version reads back in another.

A checkpoint (tag ``ck``) covers the messages one pop handed out from one queue: ``so``
(start offset: the first offset asked for), ``pt`` (pop time), ``it`` (invisible time),
``n`` (count), ``d`` (each message's offset minus ``so``), ``q``/``t``/``c`` (queue, the topic
actually read, group), ``bn`` (broker name), ``rp`` (re-put count, a decimal string) and
``bm``/``ro`` (kept for compatibility; the reviver tracks acks and positions itself). An ack
(tag ``ack``) names one acked offset ``ao`` of the checkpoint ``so``/``pt``/``bn`` of topic
``t`` queue ``q`` of group ``c``; a batch ack (``bAck``) lists several in ``aol``. Readers
accept the long names (``ackOffset``...), a missing ``bn`` and a missing ``d`` (then the
checkpoint covers ``so .. so+n-1``), as upstream does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import (
    get_int,
    get_list,
    get_opt_str,
    get_str,
    parse_object,
    pick,
)

__all__ = [
    "ACK_TAG",
    "BATCH_ACK_TAG",
    "CK_TAG",
    "AckMsg",
    "CheckpointKey",
    "PopCheckPoint",
    "decode_ack",
]

CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"


class CheckpointKey(NamedTuple):
    """What pairs an ack with its checkpoint (upstream's separator-less ``mergeKey``, made
    structured so that two checkpoints can never collide)."""

    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    broker_name: str


@dataclass(frozen=True, slots=True)
class PopCheckPoint:
    """One checkpoint."""

    start_offset: int
    pop_time: int
    invisible_time: int
    queue_id: int
    topic: str
    group: str
    broker_name: str
    diffs: tuple[int, ...]
    reput_times: int = 0

    @property
    def revive_time(self) -> int:
        """``pt + it``: when un-acked messages become visible again."""
        return self.pop_time + self.invisible_time

    @property
    def num(self) -> int:
        """How many messages the checkpoint covers."""
        return len(self.diffs)

    @property
    def key(self) -> CheckpointKey:
        """The key acks name."""
        return CheckpointKey(
            self.topic, self.group, self.queue_id, self.start_offset, self.pop_time,
            self.broker_name,
        )  # fmt: skip

    def offsets(self) -> list[int]:
        """Queue offsets of the covered messages, in checkpoint order."""
        return [self.start_offset + d for d in self.diffs]

    def index_of(self, offset: int) -> int:
        """Position of ``offset`` in the checkpoint, -1 if it is not covered."""
        try:
            return self.diffs.index(offset - self.start_offset)
        except ValueError:
            return -1

    def encode(self) -> bytes:
        """The JSON body."""
        obj: dict[str, Any] = {
            "so": self.start_offset,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "bm": 0,
            "n": self.num,
            "q": self.queue_id,
            "t": self.topic,
            "c": self.group,
            "ro": 0,
            "d": list(self.diffs),
            "bn": self.broker_name,
            "reviveTime": self.revive_time,
        }
        if self.reput_times:
            obj["rp"] = str(self.reput_times)
        return fastjson.dumps(obj)

    @classmethod
    def decode(cls, data: bytes, default_broker: str) -> PopCheckPoint:
        """Parse a checkpoint body.

        Raises:
            RemoteProtocolError: not a checkpoint.
        """
        what = "PopCheckPoint"
        obj = parse_object(data, what)
        num = get_int(obj, "n", what)
        raw_diffs = obj.get("d")
        if raw_diffs is None:
            diffs: tuple[int, ...] = tuple(range(max(0, num)))
        else:
            diffs = tuple(
                get_int({"d": d}, "d", what) for d in get_list(obj, "d", what)
            )  # fmt: skip
        rp_text = get_opt_str(obj, "rp", what)
        try:
            reput = int(rp_text) if rp_text is not None else 0
        except ValueError:
            reput = 127
        topic = get_str(obj, "t", what)
        group = get_str(obj, "c", what)
        if not topic or not group:
            raise RemoteProtocolError(f"{what}: no topic or group")
        return cls(
            get_int(obj, "so", what),
            get_int(obj, "pt", what),
            get_int(obj, "it", what),
            get_int(obj, "q", what),
            topic,
            group,
            get_str(obj, "bn", what) or default_broker,
            diffs,
            reput,
        )


@dataclass(frozen=True, slots=True)
class AckMsg:
    """An ack (``ack``) or batch ack (``bAck``): ``offsets`` of checkpoint ``start_offset``."""

    offsets: tuple[int, ...]
    start_offset: int
    group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str

    @property
    def key(self) -> CheckpointKey:
        """The key of the checkpoint acked."""
        return CheckpointKey(
            self.topic, self.group, self.queue_id, self.start_offset, self.pop_time,
            self.broker_name,
        )  # fmt: skip

    def encode(self) -> bytes:
        """The JSON body (``ack`` form for one offset, ``bAck`` form for more)."""
        obj: dict[str, Any] = {
            "ao": self.offsets[0] if len(self.offsets) == 1 else -1,
            "so": self.start_offset,
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "pt": self.pop_time,
            "bn": self.broker_name,
        }
        if len(self.offsets) != 1:
            obj["aol"] = list(self.offsets)
        return fastjson.dumps(obj)

    @property
    def tag(self) -> str:
        """``ack`` or ``bAck``."""
        return ACK_TAG if len(self.offsets) == 1 else BATCH_ACK_TAG


def decode_ack(data: bytes, batch: bool, default_broker: str) -> AckMsg:
    """Parse an ``ack`` (``batch`` False) or ``bAck`` body.

    Raises:
        RemoteProtocolError: not an ack.
    """
    what = "BatchAckMsg" if batch else "AckMsg"
    raw = parse_object(data, what)
    obj = {
        "ao": pick(raw, "ao", "ackOffset"),
        "so": pick(raw, "so", "startOffset"),
        "c": pick(raw, "c", "consumerGroup"),
        "t": pick(raw, "t", "topic"),
        "q": pick(raw, "q", "queueId"),
        "pt": pick(raw, "pt", "popTime"),
        "bn": pick(raw, "bn", "brokerName"),
        "aol": pick(raw, "aol", "ackOffsetList"),
    }
    if batch:
        offsets = tuple(get_int({"o": o}, "o", what) for o in get_list(obj, "aol", what))
    else:
        offsets = (get_int(obj, "ao", what),)
    topic = get_str(obj, "t", what)
    group = get_str(obj, "c", what)
    if not topic or not group:
        raise RemoteProtocolError(f"{what}: no topic or group")
    return AckMsg(
        offsets,
        get_int(obj, "so", what),
        group,
        topic,
        get_int(obj, "q", what),
        get_int(obj, "pt", what),
        get_str(obj, "bn", what) or default_broker,
    )
