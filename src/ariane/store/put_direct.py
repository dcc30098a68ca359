"""``MessageStore.put_message``'s common case in one C call (issue 18: no Python frame per
single ASYNC_FLUSH put; RocketMQ ``DefaultMessageStore.asyncPutMessage`` then
``CommitLog.asyncPutMessage``).

How it works. In the compiled build ``MessageStore.put_message`` is replaced by
:data:`method` made from the Python method (``_speedups_storeput.h``): a method descriptor
that reads the store's ``_direct`` and, when it holds :func:`direct_put`'s tuple, makes
``put_log``'s call itself (``store/commit_log_state.py``: the put lock, the store time, the
record and the bookkeeping, what ``CommitLog.put_message`` calls) and wakes an idle reput
(unless the event loop claimed its next round), as the Python method does. The store keeps ``_direct`` current (:meth:`MessageStore._refresh_direct`
after start, shutdown, a writeability change, a replica switch): the tuple only while the
store is running, ASYNC_FLUSH, writeable and not a replica, with a plain ``CommitLog`` whose
compiled put is on; None otherwise. Any other case (None, a put ``put_log`` declines, a
refusal, an ``OSError``) runs the Python method from its start: it is the reference, and the
only path of the pure build (``ARIANE_PURE=1``), where :data:`method` is None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ariane.common import native
from ariane.store.commit_log import CommitLog
from ariane.store.commit_log_state import put_log

__all__ = ["Direct", "direct_put", "method"]

#: (state, put lock, queue table, staged, reput): what the compiled put_message reads
Direct = tuple[Any, Any, Any, Any, Any]


def direct_put(log: object, reput: object, open_: bool) -> Direct | None:
    """The tuple the compiled ``put_message`` puts with, or None (the Python method decides):
    ``open_`` (running, ASYNC_FLUSH, writeable, not a replica) with a plain ``CommitLog`` whose
    compiled put is on."""
    if not open_ or method is None or type(log) is not CommitLog or log._fast_put is not put_log:
        return None
    return (log._state, log.put_lock, log.topic_queue_table, log.staged, reput)


def _load() -> Callable[[Callable[..., Any]], Any] | None:
    fast = native.speedups
    if fast is None or put_log is None or not hasattr(fast, "store_put_method"):
        return None  # the pure build, or a stale one
    made: Callable[[Callable[..., Any]], Any] = fast.store_put_method
    return made


#: ``method(python_put_message)``: the compiled ``put_message`` (None: the pure build)
method = _load()
