"""Named fault points for crash tests: hooks that cost nothing when disarmed.

How it works: code that wants a crash test to be able to stop it *exactly there* calls
``faults.point("name")`` at that spot. Normally no point is armed and the call returns at once
(one global lookup and a truth test). A test (or a test child's entry point) arms a point
with an action: kill the process with SIGKILL, or raise :class:`SimulatedCrash` to unwind a
store running on a simulated disk. ``after`` lets the action fire on the n-th hit only.

Every point is listed in :data:`POINTS` with what is half done when it fires; arming an
unknown name is refused, so a renamed point cannot silently stop being tested.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

__all__ = ["POINTS", "SimulatedCrash", "arm", "armed", "disarm_all", "kill_process", "point"]

#: name -> what has happened when the point fires.
POINTS: dict[str, str] = {
    "file.create.before_rename": "a new store file is sized and synced under its temporary name",
    "file.create.before_dir_sync": "a new store file has its name, not yet synced",
    "commitlog.roll.after_blank": "the BLANK record ends the full file; the next file is unused",
    "recovery.after_save_tail": "the torn tail is saved to <file>.trN but still in the file",
    "recovery.after_zero_tail": "the torn tail is zeroed, later files not yet set aside",
    "metadata.before_rename": "a metadata file (checkpoint...) is written and synced as .new",
    "metadata.after_rename": "a metadata file is renamed into place, the directory not synced",
    "index.create.after_file": "a new index file exists, its header not yet written",
    "cleanup.after_commitlog_delete": "expired CommitLog files are deleted, queues not yet",
    "cleanup.after_queue_delete": "expired ConsumeQueue files are deleted",
}

_armed: dict[str, Callable[[], None]] = {}


class SimulatedCrash(BaseException):
    """Raised by an armed point to stop a store in-process (not an ``Exception``: nothing
    on the way up catches it)."""


def point(name: str) -> None:
    """Fire the action armed for ``name``, if any (no cost to speak of otherwise)."""
    if _armed:
        action = _armed.get(name)
        if action is not None:
            action()


def kill_process() -> None:
    """The action "the process dies here": SIGKILL to itself, nothing flushed or cleaned."""
    os.kill(os.getpid(), signal.SIGKILL)


def arm(name: str, action: Callable[[], None] = kill_process, *, after: int = 0) -> None:
    """Run ``action`` at point ``name`` on its ``after + 1``-th hit.

    Raises:
        KeyError: ``name`` is not a known point.
    """
    if name not in POINTS:
        raise KeyError(f"unknown fault point {name!r}; known: {', '.join(sorted(POINTS))}")
    remaining = [after]

    def fire() -> None:
        if remaining[0] > 0:
            remaining[0] -= 1
            return
        del _armed[name]
        action()

    _armed[name] = fire


def armed() -> list[str]:
    """The names armed now."""
    return sorted(_armed)


def disarm_all() -> None:
    """Disarm every point."""
    _armed.clear()
