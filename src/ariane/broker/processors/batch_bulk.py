"""The common SEND_BATCH in bulk: every message's stamping done by C-level maps, not a loop.

How it works: ``SendMessageProcessor._send_batch`` (RocketMQ's
``SendMessageProcessor.asyncSendBatchMessage`` plus Ariane's idempotence window) walks the
batch message by message: decode the properties, look the ``__ARIANE_DEDUP`` id up, refuse
transactional or delayed messages, add ``UNIQ_KEY``, ``CLUSTER`` and the trace properties
where missing. A batch from the Spark sink or ``send_batch`` has one shape: every message
carries its ``UNIQ_KEY`` (and maybe an id), none is transactional or delayed, none names a
cluster or region. :func:`bulk_items` recognises that shape with a few searches of the
joined properties text and then builds the batch's items with ``map`` over the entries, so
a message costs no Python bytecode of its own; anything else (a marker found, a message
without ``UNIQ_KEY``, a text not ending in the separator) returns ``None`` and the
processor takes its per-message loop, which stays the reference: both give the same items.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import add

from ariane.common.batch import BatchEntry
from ariane.common.properties import (
    CLUSTER,
    DEDUP,
    DELAY,
    MSG_REGION,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    TRACE_SWITCH,
    TRANSACTION_PREPARED,
    UNIQ_KEY,
    decode_properties,
)
from ariane.store.inner import BatchItem

__all__ = ["bulk_items"]

#: keys whose presence in any message needs the per-message loop (checks or stamping that
#: differ per message); a key is found as a whole name: after a property separator (each
#: message's text ends with one, and one is put before the first) and before the name/value
#: separator, so a name that merely ends with one of them (``XDELAY``) is an ordinary property
_SLOW_MARKERS = tuple(
    PROPERTY_SEPARATOR + key + NAME_VALUE_SEPARATOR
    for key in (TRANSACTION_PREPARED, DELAY, CLUSTER, MSG_REGION, TRACE_SWITCH)
)


def bulk_items(
    entries: Sequence[BatchEntry], stamp: dict[str, str], stamp_text: str
) -> tuple[list[BatchItem], list[str | None]] | None:
    """The items of a batch of the common shape (module docstring) with the properties of
    ``stamp`` (``CLUSTER``, ``MSG_REGION``, ``TRACE_ON``, in that order; ``stamp_text``
    their encoded text) added to each, and each message's ``__ARIANE_DEDUP`` value (``None``
    without one); ``None`` when the batch needs the per-message loop."""
    bodies, flags, texts = zip(*entries, strict=True)
    if not all(map(str.endswith, texts, repeat(PROPERTY_SEPARATOR))):
        return None
    joined = PROPERTY_SEPARATOR + "".join(texts)
    for marker in _SLOW_MARKERS:
        if marker in joined:
            return None
    props = list(map(decode_properties, texts))
    if not all(map(dict.__contains__, props, repeat(UNIQ_KEY))):
        return None
    ids: list[str | None] = list(map(dict.get, props, repeat(DEDUP)))
    for p in props:
        p.update(stamp)
    items = list(
        map(
            BatchItem,
            bodies,
            flags,
            props,
            map(add, texts, repeat(stamp_text)),
        )
    )
    return items, ids
