"""A fail-safe start: damage recovery must not guess about stops the start with one clear
message naming the file, and nothing on disk changes; ``ariane store repair`` gets past it,
keeping a copy of everything it moves, and the store then holds everything before the damage.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ariane.errors import StoreDamagedError
from ariane.store.format import CQ_UNIT_SIZE
from ariane.store.message_store import MessageStore
from ariane.store.tools.cli import store as store_cli
from ariane.store.tools.repair import repair
from ariane.store.tools.verify import verify
from tests.unit.store.helpers import msg, small_config
from tests.unit.store.test_recovery import body, fill, read_all

N = 300  # 500-byte bodies: five 64 KiB CommitLog files


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its content."""
    return {
        str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "lock"
    }


def commit_log_files(root: Path) -> list[Path]:
    return sorted((root / "commitlog").glob("0" * 5 + "*"))


def refused(root: Path, *, abort: bool = False) -> StoreDamagedError:
    if abort:
        (root / "abort").touch()
    before = tree(root)
    store = MessageStore(small_config(root))
    with pytest.raises(StoreDamagedError) as info:
        store.load()
    assert tree(root) == before, "a refused start changed the disk"
    message = str(info.value)
    assert "nothing was changed" in message
    assert f"ariane store repair {root}" in message
    return info.value


def repaired(root: Path) -> list[str]:
    lines: list[str] = []
    repair(str(root), lines.append, small_config(root))
    assert verify(str(root))[0] == []
    return lines


def wrong_size_middle(root: Path) -> int:
    files = commit_log_files(root)
    with open(files[2], "r+b") as f:
        f.truncate(1000)
    return 2


def wrong_size_last(root: Path) -> int:
    files = commit_log_files(root)
    with open(files[-1], "ab") as f:
        f.write(b"x")
    return len(files) - 1


def missing_middle(root: Path) -> int:
    commit_log_files(root)[1].unlink()
    return 1


def overlapping(root: Path) -> int:
    files = commit_log_files(root)
    start = int(files[2].name)
    files[2].rename(files[2].with_name(f"{start + 4096:020d}"))
    return 2


@pytest.mark.parametrize(
    "damage", [wrong_size_middle, wrong_size_last, missing_middle, overlapping]
)
@pytest.mark.parametrize("abort", [False, True])
def test_commit_log_damage_refuses_then_repair_keeps_the_prefix(
    tmp_path: Path, damage: Callable[[Path], int], abort: bool
) -> None:
    offsets = fill(tmp_path, N)
    size = 64 * 1024
    first_bad_file = damage(tmp_path)
    error = refused(tmp_path, abort=abort)
    assert "CommitLog damaged" in error.what
    assert error.path.startswith(str(tmp_path / "commitlog"))
    lines = repaired(tmp_path)
    assert any(line.startswith("moved ") for line in lines)
    kept = sum(1 for off in offsets if off // size < first_bad_file)
    store = MessageStore(small_config(tmp_path))
    assert store.load()
    store.start()
    try:
        assert read_all(store) == [body(i) for i in range(kept)]
        r = store.put_message(msg(body=b"after"))
        assert r.ok
        assert r.logics_offset == kept
    finally:
        store.shutdown()
    backups = list(tmp_path.glob("repair-*"))
    assert len(backups) == 1
    assert list(backups[0].rglob("0*")), "the files moved aside are kept"


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b"\0" * 100),
        lambda p: p.write_bytes(p.read_bytes()[:4000] + b"\xff" * 96),
        lambda p: p.write_bytes(struct.pack(">q", -5) + p.read_bytes()[8:]),
    ],
    ids=["short", "trailing-junk", "negative"],
)
def test_damaged_checkpoint_refuses_then_repair_recovers_everything(
    tmp_path: Path, damage: Callable[[Path], object]
) -> None:
    fill(tmp_path, 100)
    damage(tmp_path / "checkpoint")
    error = refused(tmp_path)
    assert error.path == str(tmp_path / "checkpoint")
    repaired(tmp_path)
    with MessageStore(small_config(tmp_path)) as store:
        assert read_all(store) == [body(i) for i in range(100)]


def _swap_entries(root: Path, a: int, b: int) -> None:
    cq = sorted((root / "consumequeue" / "TopicA" / "0").iterdir())[0]
    data = bytearray(cq.read_bytes())
    ea = data[a * CQ_UNIT_SIZE : (a + 1) * CQ_UNIT_SIZE]
    eb = data[b * CQ_UNIT_SIZE : (b + 1) * CQ_UNIT_SIZE]
    data[a * CQ_UNIT_SIZE : (a + 1) * CQ_UNIT_SIZE] = eb
    data[b * CQ_UNIT_SIZE : (b + 1) * CQ_UNIT_SIZE] = ea
    cq.write_bytes(bytes(data))


def _shift_entry(root: Path, n: int) -> None:
    cq = sorted((root / "consumequeue" / "TopicA" / "0").iterdir())[0]
    data = bytearray(cq.read_bytes())
    off, size, tags = struct.unpack_from(">qiq", data, n * CQ_UNIT_SIZE)
    struct.pack_into(">qiq", data, n * CQ_UNIT_SIZE, off + 8, size, tags)
    cq.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: _swap_entries(r, 3, 4),
        lambda r: _shift_entry(r, 0),
        lambda r: _swap_entries(r, 40, 48),
    ],
    ids=["swapped", "shifted-first", "swapped-newest"],
)
def test_consume_queue_with_wrong_entries_refuses_then_is_rebuilt(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    fill(tmp_path, 49, size=100)  # one ConsumeQueue file of 50 entries
    damage(tmp_path)
    error = refused(tmp_path)
    assert "ConsumeQueue damaged" in error.what
    assert error.path == str(tmp_path / "consumequeue" / "TopicA" / "0")
    repaired(tmp_path)
    with MessageStore(small_config(tmp_path)) as store:
        assert read_all(store) == [body(i, 100) for i in range(49)]


def test_repair_of_a_healthy_store_moves_nothing(tmp_path: Path) -> None:
    fill(tmp_path, 20)
    before = tree(tmp_path)
    assert repaired(tmp_path)[-1] == "nothing to repair"
    assert tree(tmp_path) == before


def test_repair_command_prints_what_it_did(tmp_path: Path) -> None:
    fill(tmp_path, N)
    missing_middle(tmp_path)
    result = CliRunner().invoke(store_cli, ["repair", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "damage: CommitLog damaged" in result.output
    assert "nothing was deleted" in result.output
    assert os.path.exists(tmp_path / "abort"), "the next start recovers in full"
