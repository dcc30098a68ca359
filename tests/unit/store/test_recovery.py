import os
import random
import shutil
from pathlib import Path

import pytest

from ariane.common.record import decode_record
from ariane.errors import StoreError
from ariane.store.message_store import MessageStore
from ariane.store.results import GetStatus
from ariane.store.tools.verify import verify

from .helpers import msg, open_store, small_config


def read_all(store: MessageStore, topic: str = "TopicA", queue_id: int = 0) -> list[bytes]:
    out: list[bytes] = []
    offset = store.get_min_offset_in_queue(topic, queue_id)
    while True:
        res = store.get_message("g", topic, queue_id, offset, 32)
        if res.status is not GetStatus.FOUND:
            return out
        out.extend(decode_record(m, check_crc=True)[0].body for m in res.messages)
        offset = res.next_begin_offset


def fill(root: Path, n: int, size: int = 500, **overrides: object) -> list[int]:
    with open_store(root, **overrides) as store:  # type: ignore[arg-type]
        rs = [
            store.put_message(msg(body=b"%05d" % i * (size // 5), KEYS=f"k{i}")) for i in range(n)
        ]
        assert store.wait_dispatched()
        return [r.wrote_offset for r in rs]


def body(i: int, size: int = 500) -> bytes:
    return b"%05d" % i * (size // 5)


def last_commit_log(root: Path) -> Path:
    """The newest CommitLog file (an allocation's ``.new`` file is not one)."""
    return sorted(p for p in (root / "commitlog").glob("0*") if p.name.isdigit())[-1]


def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    fill(tmp_path, 300)
    assert not (tmp_path / "abort").exists()
    with open_store(tmp_path) as store:
        assert store.last_exit_ok
        assert read_all(store) == [body(i) for i in range(300)]
        r = store.put_message(msg(body=b"next"))
        assert r.logics_offset == 300
        assert len(store.query_message("TopicA", "k7", 5, 0, 2**62).messages) == 1
    assert verify(str(tmp_path))[0] == []


def test_store_lock(tmp_path: Path) -> None:
    with open_store(tmp_path):
        other = MessageStore(small_config(tmp_path))
        with pytest.raises(StoreError, match="in use"):
            other.load()


def test_abnormal_restart_redispatches(tmp_path: Path) -> None:
    store = MessageStore(small_config(tmp_path))
    assert store.load()
    store.start()
    store.reput.abandon()  # dispatch stops: ConsumeQueues lag behind
    for i in range(100):
        assert store.put_message(msg(body=body(i), KEYS=f"k{i}")).ok
    store.close_without_cleanup()
    assert (tmp_path / "abort").exists()
    with open_store(tmp_path) as store:
        assert not store.last_exit_ok
        assert read_all(store) == [body(i) for i in range(100)]
        assert len(store.query_message("TopicA", "k99", 5, 0, 2**62).messages) == 1
        assert store.put_message(msg()).logics_offset == 100
    assert verify(str(tmp_path))[0] == []


def test_torn_tail_is_saved_and_cut(tmp_path: Path) -> None:
    offsets = fill(tmp_path, 50)
    with open_store(tmp_path) as store:
        end = store.max_phy_offset
    (tmp_path / "abort").touch()
    last = last_commit_log(tmp_path)
    start = int(last.name)
    with open(last, "r+b") as f:
        f.seek(end - start)
        f.write(b"\x00\x00\x01\x00\xda\xa3\x20\xa7garbage")
    assert verify(str(tmp_path))[0]
    with open_store(tmp_path) as store:
        assert store.max_phy_offset == end
        assert read_all(store) == [body(i) for i in range(50)]
        saved = list((tmp_path / "commitlog").glob("*.tr*"))
        assert len(saved) == 1
        assert saved[0].read_bytes().startswith(b"\x00\x00\x01\x00\xda\xa3")
        r = store.put_message(msg(body=b"after"))
        assert r.wrote_offset == end
    assert verify(str(tmp_path))[0] == []
    assert offsets[-1] < end


def test_corrupt_record_cuts_the_log_there(tmp_path: Path) -> None:
    offsets = fill(tmp_path, 120)
    last = last_commit_log(tmp_path)
    start = int(last.name)
    victims = [i for i, o in enumerate(offsets) if o >= start]
    k = victims[len(victims) // 2]
    with open(last, "r+b") as f:
        f.seek(offsets[k] - start + 100)
        f.write(b"\xff\xfe")
    with open_store(tmp_path) as store:
        assert store.max_phy_offset == offsets[k]
        assert read_all(store) == [body(i) for i in range(k)]
        assert store.get_max_offset_in_queue("TopicA", 0) == k
        assert store.put_message(msg()).logics_offset == k
    assert verify(str(tmp_path))[0] == []


def test_truncated_consume_queue_is_rebuilt(tmp_path: Path) -> None:
    fill(tmp_path, 140, size=100)
    cq_files = sorted((tmp_path / "consumequeue" / "TopicA" / "0").iterdir())
    assert len(cq_files) >= 2
    with open(cq_files[1], "r+b") as f:
        f.truncate(333)
    with open_store(tmp_path) as store:
        assert read_all(store) == [body(i, 100) for i in range(140)]
    assert verify(str(tmp_path))[0] == []


def test_deleted_index_and_consume_queue_are_rebuilt(tmp_path: Path) -> None:
    fill(tmp_path, 80)
    shutil.rmtree(tmp_path / "index")
    shutil.rmtree(tmp_path / "consumequeue")
    with open_store(tmp_path) as store:
        assert read_all(store) == [body(i) for i in range(80)]
        assert len(store.query_message("TopicA", "k3", 5, 0, 2**62).messages) == 1
    assert verify(str(tmp_path))[0] == []


def test_empty_store_with_abort_file(tmp_path: Path) -> None:
    tmp_path.joinpath("abort").touch()
    with open_store(tmp_path) as store:
        assert store.max_phy_offset == 0
        assert store.put_message(msg()).ok
    assert not (tmp_path / "abort").exists()


def test_abort_file_kept_when_not_writeable(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store._set_unwriteable("disk", "disk full: test")
    assert (tmp_path / "abort").exists()


def _checked_spans(phys: int, size: int, topic: str = "TopicA") -> list[tuple[int, int]]:
    """Byte ranges of a record (IPv4 hosts, V1 magic) that recovery validates: TOTALSIZE,
    MAGICCODE, BODYCRC, BODYLENGTH, the body, TOPICLENGTH and PROPERTIESLENGTH. (Other
    header fields carry no check in the format: damage there cannot be detected.)"""
    body_end = phys + 88 + size
    props_len_at = body_end + 1 + len(topic)
    return [
        (phys, phys + 12),
        (phys + 84, body_end + 1),
        (props_len_at, props_len_at + 2),
    ]


@pytest.mark.parametrize("seed", range(8))
def test_random_corruption_of_last_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice([50, 300, 900])
    offsets = fill(tmp_path, 150, size=size)
    last = last_commit_log(tmp_path)
    start = int(last.name)
    in_last = [i for i, phys in enumerate(offsets) if phys >= start]
    data = bytearray(last.read_bytes())
    hit: list[int] = []
    for _ in range(rng.randint(1, 5)):
        i = rng.choice(in_last)
        lo, hi = rng.choice(_checked_spans(offsets[i] - start, size))
        at = rng.randrange(lo, hi)
        data[at] ^= rng.randrange(1, 256)  # the byte certainly changes
        for j in range(at + 1, min(hi, at + rng.randint(0, 15))):
            data[j] = rng.randrange(256)
        hit.append(i)
    last.write_bytes(bytes(data))
    if rng.random() < 0.5:
        (tmp_path / "abort").touch()
    survivors = min(hit)  # every record before the first damaged one, nothing after it
    with open_store(tmp_path) as store:
        assert read_all(store) == [body(i, size) for i in range(survivors)]
        assert store.max_phy_offset == offsets[survivors]
        r = store.put_message(msg(body=b"after"))
        assert r.ok
        assert r.logics_offset == survivors
        if survivors:
            kept = store.query_message("TopicA", f"k{survivors - 1}", 5, 0, 2**62)
            assert len(kept.messages) == 1
        assert store.query_message("TopicA", f"k{survivors}", 5, 0, 2**62).messages == []
    problems, _ = verify(str(tmp_path))
    assert problems == []
    assert os.path.exists(tmp_path / "checkpoint")
