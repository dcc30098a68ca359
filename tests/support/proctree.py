"""Whole process trees for tests: start a command so that nothing it spawns can outlive the
test, and kill every process of a tree.

How it works (Linux, ``/proc``): a tree is the root plus every process whose parent chain
leads to it, plus every process of the root's session when the root leads one (a child
re-parented to init when its parent died keeps its session id, so it is still found).
``kill_tree`` first freezes what it finds with SIGSTOP and looks again until nothing new
appears (a frozen process cannot fork, and its children are not re-parented while it is
alive), then sends SIGKILL to all of them and reaps the root when it is our child. A Spark
driver (``spark-submit`` -> ``java``) and its Python daemon and workers die together this
way, however the test ended: a timeout of ``communicate``, pytest-timeout's exception, a
failed assertion.

``spawn`` starts a command in its own session with ``PR_SET_PDEATHSIG`` = SIGKILL, so the
root also dies if the test process itself dies (pytest-timeout's thread method exits the
worker without running ``finally`` blocks).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["descendants", "kill_tree", "live", "spawn", "spawned"]

_PR_SET_PDEATHSIG = 1


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of ``pid``, None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name is in parentheses and may hold spaces and ')': fields after the last
    fields = data[data.rfind(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1]), int(fields[3])


def _table() -> dict[int, tuple[int, int]]:
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                out[int(entry.name)] = stat
    return out


def descendants(pid: int, *, root_gone: bool = False) -> set[int]:
    """Every live process below ``pid`` (children, their children...), and every process
    of ``pid``'s session when ``pid`` leads one; ``pid`` itself excluded.

    ``root_gone``: ``pid`` has exited and was reaped, so the number may already belong to
    someone else: only members of session ``pid`` (which keep the number reserved) and
    their descendants count."""
    table = _table()
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    if root_gone or (pid in table and table[pid][1] == pid):
        found.update(p for p, (_, sid) in table.items() if sid == pid and p != pid)
    todo = list(found) if root_gone else [pid, *found]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found and child != pid:
                found.add(child)
                todo.append(child)
    return found


def live(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    return _stat(pid) is not None


def kill_tree(
    pid: int, *, include_root: bool = True, proc: subprocess.Popen[Any] | None = None
) -> set[int]:
    """SIGKILL ``pid`` (unless ``include_root`` is false) and its whole tree; returns the
    pids killed. ``proc``, the root's ``Popen``, is reaped (and tells whether the root
    already exited, see ``descendants``)."""
    root_gone = proc is not None and proc.poll() is not None
    frozen: set[int] = set()
    for _ in range(50):
        new = descendants(pid, root_gone=root_gone) - frozen
        if include_root and not root_gone and pid not in frozen and live(pid):
            new.add(pid)
        if not new:
            break
        for p in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGSTOP)
        frozen |= new
    for p in frozen:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
    if proc is not None and include_root:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
    deadline = time.monotonic() + 10
    while any(live(p) for p in frozen - {pid}) and time.monotonic() < deadline:
        time.sleep(0.01)  # init reaps the orphans
    return frozen


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def spawn(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``Popen(args)`` in a new session that dies with this process (see the docstring).

    Call it from the main thread: the death signal follows the thread that forked."""
    return subprocess.Popen(
        list(args), start_new_session=True, preexec_fn=_die_with_parent, **kwargs
    )


@contextlib.contextmanager
def spawned(args: Sequence[str], **kwargs: Any) -> Iterator[subprocess.Popen[Any]]:
    """``spawn`` for a block: the whole tree is killed when the block ends, however it ends
    (a process that already exited leaves nothing behind to kill either)."""
    proc = spawn(args, **kwargs)
    try:
        yield proc
    finally:
        kill_tree(proc.pid, proc=proc)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
