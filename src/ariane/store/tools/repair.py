"""``ariane store repair``: the operator's way past damage the store refuses to guess about.

How it works: it loads the store the way the broker does; each time loading refuses
(:class:`~ariane.errors.StoreDamagedError`), it moves what the refusal names out of the way,
into ``<store>/repair-<time>/`` under the same relative path (nothing is deleted: every byte
it cuts is kept there), and tries again. Once something was moved, the checkpoint goes too
and the abort file is created, so the final load walks the whole CommitLog and rebuilds every
ConsumeQueue and the index from it. Torn tails are cut and saved by recovery itself
(``<file>.trN``). It prints one line per action and a summary.

The file sizes come from the store's configuration; by default the CommitLog file size is
the size most of its files have, and the ConsumeQueue file size the one most queue files have.
"""

from __future__ import annotations

import collections
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ariane.errors import StoreDamagedError
from ariane.store.config import StoreConfig
from ariane.store.format import parse_file_name
from ariane.store.message_store import MessageStore

__all__ = ["repair"]

#: More refusals than this means something else is wrong.
_MAX_ROUNDS = 64


def _common_size(directory: str, walk: bool) -> int | None:
    sizes: collections.Counter[int] = collections.Counter()
    for dirpath, _dirs, names in os.walk(directory) if walk else [(directory, [], _ls(directory))]:
        for name in names:
            if parse_file_name(name) is not None:
                sizes[os.path.getsize(os.path.join(dirpath, name))] += 1
    return sizes.most_common(1)[0][0] if sizes else None


def _ls(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def store_config_for(root: str, **overrides: Any) -> StoreConfig:
    """A configuration for the store at ``root`` with file sizes taken from its files."""
    config = StoreConfig(store_path_root_dir=root)
    # the index is left alone (its sizes cannot be read off its files): the abort file that
    # a repair leaves makes the broker's next start rebuild it
    values: dict[str, Any] = {"message_index_enable": False}
    cl = _common_size(config.commit_log_dir, walk=False)
    if cl is not None:
        values["mapped_file_size_commit_log"] = cl
        values["max_message_size"] = min(config.max_message_size, cl // 2)
    cq = _common_size(config.consume_queue_dir, walk=True)
    if cq is not None:
        values["mapped_file_size_consume_queue"] = cq
    values.update(overrides)
    return replace(config, **values)


def repair(root: str, echo: Callable[[str], None], config: StoreConfig | None = None) -> int:
    """Repair the store at ``root``; returns how many things were moved aside.

    Raises:
        StoreError: the store is in use, or keeps refusing.
    """
    config = config or store_config_for(root)
    backup = os.path.join(root, time.strftime("repair-%Y%m%d-%H%M%S"))
    moved = 0
    for _ in range(_MAX_ROUNDS):
        store = MessageStore(config)
        try:
            loaded = store.load()
        except StoreDamagedError as exc:
            echo(f"damage: {exc.what}")
            for path in exc.aside:
                _move_aside(root, backup, path, echo)
                moved += 1
            if moved and os.path.exists(config.checkpoint_path):
                _move_aside(root, backup, config.checkpoint_path, echo)
            _touch(config.abort_path, echo)
            continue
        if not loaded:
            store.shutdown()
            raise StoreDamagedError(root, "the store does not load (see the log)", root)
        try:
            echo(
                f"store loaded: CommitLog {store.min_phy_offset}..{store.max_phy_offset}, "
                f"{sum(len(q) for q in store.consume_queue_table.values())} queue(s)"
            )
        finally:
            store.shutdown()
        if moved:
            echo(f"moved {moved} item(s) to {backup}; nothing was deleted")
        else:
            echo("nothing to repair")
        return moved
    raise StoreDamagedError(root, f"still damaged after {_MAX_ROUNDS} repairs", root)


def _move_aside(root: str, backup: str, path: str, echo: Callable[[str], None]) -> None:
    rel = os.path.relpath(path, root)
    target = os.path.join(backup, rel)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.move(path, target)
    echo(f"moved {path} -> {target}")


def _touch(path: str, echo: Callable[[str], None]) -> None:
    if not os.path.exists(path):
        with open(path, "wb"):
            pass
        echo(f"created {path}: the next start walks the whole CommitLog and re-dispatches")
