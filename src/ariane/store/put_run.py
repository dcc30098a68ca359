"""A run of single messages put under one hold of the put lock (issue 18: the send
processor's per-read pass, ``broker/processors/send_run.py``).

How it works. :func:`put_many` is ``CommitLog.put_message`` for each message of a run, in order:
it takes the put lock once and calls the compiled ``put_log`` (``store/commit_log_state.py``:
``put_one`` and the bookkeeping, as ``put_message`` does) per message with the lock held (the
loop itself compiled: ``put_log_run``, no Python bytecode per message; the Python loop is its
reference); a
message ``put_log`` declines (a new topic, a shape only the pure code takes, a full file) goes
through ``CommitLog._put_two_steps`` outside the lock,
exactly as ``put_message`` would send it, and the run goes on. The store's part
(:func:`store_put_run`, :func:`store_submit_run`) is ``MessageStore.put_message`` /
``submit_message_to`` per message (refusals, a CommitLog file that cannot be created, the failed
count, the flush policy), with one reput wake-up for the run instead of one per put. Every
record, queue offset and result is what the one-at-a-time calls give (tests:
``tests/unit/broker/test_send_run.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from operator import attrgetter
from typing import cast

from ariane.store.commit_log import CommitLog
from ariane.store.commit_log_state import put_log, put_log_run
from ariane.store.flush import Completion
from ariane.store.inner import MessageInner
from ariane.store.message_store import MessageStore
from ariane.store.results import PutResult, PutStatus

_PUT_OK = PutStatus.PUT_OK
_MSG_NUM = attrgetter("msg_num")

__all__ = [
    "RunCompletion",
    "put_many",
    "store_append_run",
    "store_put_run",
    "store_submit_run",
    "store_wait_run",
]


def put_many(log: CommitLog, msgs: Sequence[MessageInner], out: list[PutResult]) -> None:
    """``log.put_message(m)`` for each of ``msgs`` in order, each result appended to ``out``.

    Raises:
        OSError: as ``put_message`` (a new CommitLog file could not be created); ``out`` then
            holds the results of the messages before the one that raised.
    """
    one_call = log._fast_put  # put_log: put_message's locked part (None: the reference)
    count = len(msgs)
    i = 0
    if one_call is None:
        while i < count:
            out.append(log.put_message(msgs[i]))
            i += 1
        return
    # the loop below in one C call (put_log's own loop) when the put is the compiled put_log
    run = put_log_run if one_call is put_log and type(msgs) is list else None
    lock = log.put_lock
    while i < count:
        lock.acquire()
        try:
            state, table, staged = log._state, log.topic_queue_table, log.staged
            if run is not None:  # to the first message put_log declines
                i = run(state, cast(list[MessageInner], msgs), i, table, staged, out)
            else:
                while i < count:
                    result = one_call(state, msgs[i], None, table, staged)  # None: lock held
                    if result is None:
                        break
                    out.append(result)
                    i += 1
        finally:
            lock.release()
        if i < count:  # what put_message does when put_log declines
            out.append(log._put_two_steps(msgs[i]))
            i += 1


def _put_run(store: MessageStore, msgs: Sequence[MessageInner]) -> list[PutResult] | None:
    """The results of the run's appends, as ``put_message`` (ASYNC_FLUSH) or ``_append``
    (SYNC_FLUSH) gives them one by one; None when the store refuses puts now (the caller then
    puts one by one, which says why)."""
    if not store._running or store._not_writeable or store._replica_mode:
        return None
    log = store.commit_log
    out: list[PutResult] = []
    try:
        put_many(log, msgs, out)
    except OSError as exc:
        done = len(out)
        store.put_failed_times += list(map(_MSG_NUM, out)).count(0)
        if store.answers_at_once:  # put_message: one more try through _append
            out.append(store._append(partial(log.put_message, msgs[done])))
            out += [store.put_message(m) for m in msgs[done + 1 :]]
        else:  # _append saw the error: the store becomes unwriteable
            out.append(store._append(partial(_reraise, exc)))
            out += [store._append(partial(log.put_message, m)) for m in msgs[done + 1 :]]
        return out
    store.put_failed_times += list(map(_MSG_NUM, out)).count(0)
    return out


def _reraise(exc: OSError) -> PutResult:
    raise exc


def store_put_run(store: MessageStore, msgs: Sequence[MessageInner]) -> list[PutResult]:
    """``store.put_message(m)`` for each of ``msgs`` (ASYNC_FLUSH: ``answers_at_once``), in
    order, with one reput wake-up."""
    out = _put_run(store, msgs)
    if out is None:
        return [store.put_message(m) for m in msgs]
    reput = store.reput
    if reput.idle and any(r.msg_num for r in out):  # idle: the scan only when it may wake
        reput.wake_after_put()
    return out


def store_append_run(
    store: MessageStore, msgs: Sequence[MessageInner], waits: Sequence[bool]
) -> tuple[list[PutResult], list[int]] | None:
    """The appends of :func:`store_submit_run`: every message's result, in order, and the
    indices of those that wait for the group commit (stored, ``waits[i]`` true, SYNC_FLUSH);
    the others' results are final as they are (a ``WAIT=false`` one woke the group commit, as
    ``submit_message_to`` does). None when the store refuses puts now (``store_submit_run``
    then puts one by one, which says why). :func:`store_wait_run` waits for the ones that
    wait."""
    out = _put_run(store, msgs)
    if out is None:
        return None
    gc = store.group_commit
    waiting: list[int] = []
    if gc is None or not store._sync:
        return out, waiting
    for i, (result, wait) in enumerate(zip(out, waits, strict=True)):
        if result.msg_num:
            if wait:
                waiting.append(i)
            else:
                gc.wakeup()
    return out, waiting


def store_wait_run(store: MessageStore, results: Sequence[PutResult], done: Completion) -> None:
    """One group-commit request for ``results`` (stored by one run, in log order, each
    waiting: :func:`store_append_run`): ``done.set_result`` once the log is durable up to the
    end of the last (a round's flush covers everything written before it), with a result of
    its own whose status is FLUSH_DISK_TIMEOUT if the request timed out (``done`` then gives
    that status to each of ``results``)."""
    gc = store.group_commit
    assert gc is not None
    last = results[-1]
    shared = PutResult(_PUT_OK, last.wrote_offset, last.wrote_bytes)
    gc.put_request(last.wrote_offset + last.wrote_bytes, done, shared)


def store_submit_run(
    store: MessageStore,
    msgs: Sequence[MessageInner],
    waits: Sequence[bool],
    dones: Sequence[Completion],
) -> None:
    """``store.submit_message_to(m, d)`` for each message and completion, in order (SYNC_FLUSH:
    ``waits[i]`` is false for a ``WAIT=false`` message). The messages that wait share one
    group-commit request, for the end of the last one: they are answered together once the
    log is durable up to it (a round's flush covers everything written before it), each with
    its own result, FLUSH_DISK_TIMEOUT for all of them if that request times out."""
    appended = store_append_run(store, msgs, waits)
    if appended is None:
        for msg, done in zip(msgs, dones, strict=True):
            store.submit_message_to(msg, done)
        return
    out, waiting = appended
    if len(waiting) == len(out):
        pairs = list(zip(out, dones, strict=True))
    else:
        if len(dones) != len(out):
            raise ValueError("store_submit_run: messages and completions differ in length")
        pairs = [(out[i], dones[i]) for i in waiting]
        at = 0
        for i, result in enumerate(out):  # the others are final now
            if at < len(waiting) and waiting[at] == i:
                at += 1
            else:
                dones[i].set_result(result)
    if len(pairs) == 1:
        result, done = pairs[0]
        gc = store.group_commit
        assert gc is not None
        gc.put_request(result.wrote_offset + result.wrote_bytes, done, result)
    elif pairs:
        store_wait_run(store, [result for result, _done in pairs], RunCompletion(pairs))


class RunCompletion:
    """The group commit's completion of a run's waiting messages (see
    :func:`store_submit_run`)."""

    __slots__ = ("_done", "_waiting")

    def __init__(self, waiting: list[tuple[PutResult, Completion]]) -> None:
        self._waiting = waiting
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: PutResult) -> None:
        self._done = True
        timeout = result.status is PutStatus.FLUSH_DISK_TIMEOUT
        for own, completion in self._waiting:
            if timeout:
                own.status = PutStatus.FLUSH_DISK_TIMEOUT
            completion.set_result(own)
