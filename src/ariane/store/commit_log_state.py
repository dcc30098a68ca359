"""What a CommitLog's puts read and advance under the put lock, in one slotted object.

How it works (issue 18: one Python frame per single put; RocketMQ ``CommitLog`` keeps the same
state in its fields). :class:`PutState` holds the topic and tags caches, the limits, the clock,
the current :class:`~ariane.store.mapped_file.MappedFile`, the last store time and the put
counters. Every put path of the CommitLog advances them here (``CommitLog._put_two_steps``,
the reference, ``put_prepared``, ``put_block``, ``put_messages``, and the batch puts through
the CommitLog's properties), and the compiled ``put_log`` (``_speedups_putlog.h``) reads and
writes the same slots through their offsets, so a single put of the common shape is one C call
with its bookkeeping. ``put_log`` is None in the pure build (``ARIANE_PURE=1`` or no
compiler) or with a stale build.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ariane.common import native
from ariane.common.clock import Clock
from ariane.store.inner import MessageInner
from ariane.store.mapped_file import MappedFile
from ariane.store.put_native import put_one as _put_one  # configures what put_log calls
from ariane.store.results import PutResult

__all__ = ["PutLog", "PutLogRun", "PutState", "PutStateView", "put_log", "put_log_run"]


class PutState:
    """The put state of one CommitLog (see the module docs).

    Args:
        topics: the topic cache (topic -> (TOPICLENGTH + TOPIC bytes, magic) or why not).
        tag_codes: the tags-code cache.
        max_props: ``max_properties_length``.
        max_size: ``max_message_size``.
        room_limit: the file size less ``END_FILE_MIN_BLANK_LENGTH``.
        clock: the store clock, None for the system clock (read as ``time.time_ns() //
            1_000_000``).
    """

    __slots__ = (
        "clock",
        "current",
        "last_store_ts",
        "max_props",
        "max_size",
        "put_size_total",
        "put_times_total",
        "room_limit",
        "tag_codes",
        "topics",
    )

    def __init__(
        self,
        topics: dict[str, tuple[bytes, int] | str],
        tag_codes: dict[str, int],
        max_props: int,
        max_size: int,
        room_limit: int,
        clock: Clock | None,
    ) -> None:
        self.topics = topics
        self.tag_codes = tag_codes
        self.max_props = max_props
        self.max_size = max_size
        self.room_limit = room_limit
        self.clock = clock
        #: the file puts go to (None until the first put or after a shutdown)
        self.current: MappedFile | None = None
        #: the last store time given (store times never go back)
        self.last_store_ts = 0
        self.put_times_total = 0
        self.put_size_total = 0


class PutStateView:
    """The CommitLog's attributes kept in its :class:`PutState` (``_state``), by their old
    names: the counters, the last store time, the current file."""

    _state: PutState

    @property
    def put_times_total(self) -> int:
        """Messages stored by this log's puts."""
        return self._state.put_times_total

    @put_times_total.setter
    def put_times_total(self, value: int) -> None:
        self._state.put_times_total = value

    @property
    def put_size_total(self) -> int:
        """Bytes stored by this log's puts."""
        return self._state.put_size_total

    @put_size_total.setter
    def put_size_total(self, value: int) -> None:
        self._state.put_size_total = value

    @property
    def _last_store_ts(self) -> int:
        return self._state.last_store_ts

    @_last_store_ts.setter
    def _last_store_ts(self, value: int) -> None:
        self._state.last_store_ts = value

    @property
    def _current(self) -> MappedFile | None:
        return self._state.current

    @_current.setter
    def _current(self, mf: MappedFile | None) -> None:
        self._state.current = mf


#: ``put_log(state, msg, put_lock, queue_table, staged)``: the locked part of
#: ``CommitLog.put_message`` in one call, or None before any effect; ``put_lock`` None when
#: the caller holds it
PutLog = Callable[[PutState, MessageInner, Any, dict[tuple[str, int], int], Any], PutResult | None]


def _load() -> PutLog | None:
    fast = native.speedups
    if fast is None or _put_one is None or not hasattr(fast, "put_log"):  # pure, or stale
        return None
    fast.configure_put_log(PutState, MappedFile)
    log: PutLog = fast.put_log
    return log


#: the compiled call (None: the pure build)
put_log = _load()

#: ``put_log_run(state, msgs, start, queue_table, staged, out) -> int``: ``put_log`` with the
#: lock held (None) of ``msgs[start]``, ``msgs[start + 1]``... appended to ``out`` up to the
#: first it declines, whose index it returns; None in the pure build (or an extension built
#: before it): ``store/put_run.put_many``'s loop, the reference
PutLogRun = Callable[
    [PutState, list[MessageInner], int, dict[tuple[str, int], int], Any, list[PutResult]], int
]
put_log_run: PutLogRun | None = (
    getattr(native.speedups, "put_log_run", None) if put_log is not None else None
)
