"""Hash index from message keys to CommitLog offsets (RocketMQ ``IndexFile`` + ``IndexService``).

How it works: each file is a 40-byte header, a table of hash slots and a sequence of 20-byte
entries (layout in :mod:`ariane.store.format`). Putting ``topic#key`` writes a new entry that
links to the slot's previous head and makes the slot point at it, so a lookup walks one chain
newest-first and compares hashes (callers re-check the real keys). Entry 0 is never used.
Files are named by creation time and a new one starts when the last is full, seeded with the
previous file's end offset/time. The header lives in Python attributes and is written into the
map after every dispatch batch and before a flush.

Durability: the flush thread forces the dirty files, and the checkpoint's index time T is the
newest file's end time read *before* the first force. Keys are put in store-time order and a
file is marked clean before it is forced (a put during the force marks it again), so every
key of every record stored before T is on disk; keys of records stored at T or later may not
be. After an abnormal exit files whose end time is past T are dropped and rebuilt, but a kept
file (end time T, its header page on disk) can still miss keys its end offset covers (their
entry page lost), and its pages written after the force can survive one by one: a slot or a
prevIndex pointing at a lost entry cuts older, intact keys off its chain. So recovery
relinks a torn file (:mod:`ariane.store.index_repair`: it checks the entries of T's second
and the slots, and relinks from all entries only when they are torn) and re-checks the
records stored at T or later below the index's end offset, putting back the keys no file
holds (``recheck_keys``); the records after the end offset are re-dispatched as before. An exact T
alone (read after the force) would not do: it would claim keys put during the force, and torn
pages would still cut chains. The re-check costs the records of T's millisecond, not the
rebuild of the last file that dropping files whose end time *equals* T would cost.

One deliberate difference from RocketMQ: the first entry of a file computes its timeDiff
against its own store time (0), not against the seed taken from the previous file, so its time
reads back exactly.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

import ariane.store._index_put as _index_put
from ariane.common import faults
from ariane.common.clock import Clock
from ariane.common.hashing import (
    index_key_hash,
    index_key_hash_with_prefix,
    unsigned_hash_and_units,
)
from ariane.common.sysflag import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK, is_rollback
from ariane.errors import CorruptionError
from ariane.store.disk import OS_DISK, Disk
from ariane.store.format import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_SLOT,
    DispatchRequest,
)
from ariane.store.mapped_file import MappedFile
from ariane.store.vector import (
    I64,
    INDEX_ENTRY_DTYPE,
    VECTOR_MIN,
    chain_links,
    index_key_hashes,
)

__all__ = ["IndexFile", "IndexService"]

logger = logging.getLogger(__name__)

_INT_MAX = 0x7FFFFFFF


class IndexFile:
    """One index file.

    Args:
        path: file path.
        slot_num: hash slots.
        index_num: entries (including the unused entry 0).
        create: create a new file seeded with ``seed_phy_offset``/``seed_timestamp_ms``.

    Raises:
        CorruptionError: an existing file has the wrong size.
    """

    def __init__(
        self,
        path: str,
        slot_num: int,
        index_num: int,
        *,
        create: bool,
        seed_phy_offset: int = 0,
        seed_timestamp_ms: int = 0,
        disk: Disk = OS_DISK,
    ) -> None:
        self.slot_num = slot_num
        self.index_num = index_num
        self.size = INDEX_HEADER_SIZE + slot_num * 4 + index_num * INDEX_ENTRY_SIZE
        self.entries_at = INDEX_HEADER_SIZE + slot_num * 4
        self.mf = MappedFile(path, self.size, create=create, disk=disk)
        self.mf.wrote_position = self.size
        if create:
            self.begin_timestamp = self.end_timestamp = seed_timestamp_ms
            self.begin_phy_offset = self.end_phy_offset = seed_phy_offset
            self.hash_slot_count = 0
            self.index_count = 1
            self.write_header()
        else:
            (
                self.begin_timestamp,
                self.end_timestamp,
                self.begin_phy_offset,
                self.end_phy_offset,
                self.hash_slot_count,
                self.index_count,
            ) = INDEX_HEADER.unpack_from(self.mf.mm, 0)
            if self.index_count <= 0 or self.index_count > index_num:
                self.index_count = max(1, min(self.index_count, index_num))
            self._count_written_entries()
        self.dirty = create

    def _count_written_entries(self) -> None:
        """Extend a stale header over entries written after it.

        The header is written after each dispatch batch, so a crash (or a power cut that kept
        the entries' pages) can leave entries, and slots pointing at them, past the header's
        ``index_count``: lookups would refuse those slots and the next put would overwrite
        the entries. Every entry is written before the slot that points at it, so the written
        entries are the non-zero ones from ``index_count`` on.
        """
        mm = self.mf.mm
        count = self.index_count
        last: tuple[int, int, int, int] | None = None
        while count < self.index_num:
            at = self.entries_at + count * INDEX_ENTRY_SIZE
            if not any(mm[at : at + INDEX_ENTRY_SIZE]):
                break
            last = INDEX_ENTRY.unpack_from(mm, at)
            count += 1
        if last is None:
            return
        logger.info(
            "%s: %d index entries past its header's count (header written before a crash)",
            self.path, count - self.index_count,
        )  # fmt: skip
        _hash, phy, diff, _prev = last
        self.index_count = count
        self.end_phy_offset = max(self.end_phy_offset, phy)
        self.end_timestamp = max(self.end_timestamp, self.begin_timestamp + max(diff, 0) * 1000)

    @property
    def path(self) -> str:
        """File path."""
        return self.mf.path

    @property
    def is_write_full(self) -> bool:
        """True when no entry can be added."""
        return self.index_count >= self.index_num

    def write_header(self) -> None:
        """Copy the header attributes into the map."""
        INDEX_HEADER.pack_into(
            self.mf.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )  # fmt: skip

    def put_key(self, key: str, phy_offset: int, store_timestamp_ms: int, prefix: str = "") -> bool:
        """Add ``prefix + key`` (``topic#`` + key). False when the file is full."""
        count = self.index_count
        if count >= self.index_num:
            return False
        mm = self.mf.mm
        key_hash = index_key_hash_with_prefix(prefix, key) if prefix else index_key_hash(key)
        abs_slot = INDEX_HEADER_SIZE + (key_hash % self.slot_num) * 4
        (slot_value,) = INDEX_SLOT.unpack_from(mm, abs_slot)
        if slot_value <= 0 or slot_value > count:
            slot_value = 0
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp_ms
        begin = self.begin_timestamp
        if begin <= 0:
            time_diff = 0
        else:
            time_diff = (store_timestamp_ms - begin) // 1000
            time_diff = 0 if time_diff < 0 else min(time_diff, _INT_MAX)
        INDEX_ENTRY.pack_into(
            mm, self.entries_at + count * INDEX_ENTRY_SIZE, key_hash, phy_offset, time_diff,
            slot_value,
        )  # fmt: skip
        INDEX_SLOT.pack_into(mm, abs_slot, count)
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp_ms
        self.dirty = True
        return True

    def put_hashes(self, hashes: I64, phys: I64, timestamps: I64) -> int:
        """``put_key`` for many precomputed key hashes in order; returns how many fit.

        Entries are written first, then the slots they head, then ``index_count``, as
        ``put_key`` does for one entry, so a concurrent lookup never follows a slot to an
        entry that is not there yet.
        """
        count = self.index_count
        n = min(len(hashes), self.index_num - count)
        if n <= 0:
            return 0
        hashes, phys, timestamps = hashes[:n], phys[:n], timestamps[:n]
        if count <= 1:
            self.begin_phy_offset = int(phys[0])
            self.begin_timestamp = int(timestamps[0])
        entries = np.empty(n, dtype=INDEX_ENTRY_DTYPE)
        entries["hash"] = hashes
        entries["phys"] = phys
        begin = self.begin_timestamp
        entries["diff"] = 0 if begin <= 0 else np.clip((timestamps - begin) // 1000, 0, _INT_MAX)
        numbers = np.arange(count, count + n, dtype=np.int64)
        slots = hashes % self.slot_num
        mm = self.mf.mm
        table = np.frombuffer(mm, dtype=">i4", count=self.slot_num, offset=INDEX_HEADER_SIZE)
        try:
            prev, heads, head_entries = chain_links(slots, numbers, table[slots].astype(np.int64))
            entries["prev"] = prev
            at = self.entries_at + count * INDEX_ENTRY_SIZE
            mm[at : at + n * INDEX_ENTRY_SIZE] = entries.tobytes()
            table[heads] = head_entries
        finally:
            del table  # release the export so the map can be closed
        self.hash_slot_count += int(np.count_nonzero(prev == 0))
        self.index_count = count + n
        self.end_phy_offset = int(phys[n - 1])
        self.end_timestamp = int(timestamps[n - 1])
        self.dirty = True
        return n

    def put_items(self, items: bytes, start: int) -> int:
        """``put_key`` for the listed keys (``_index_put.ITEM`` each) from ``start``, in
        order; returns how many fit."""
        count = self.index_count
        written, new_slots, self.begin_phy_offset, self.begin_timestamp = _index_put.index_write(
            self.mf.mm, self.slot_num, self.index_num, count, self.begin_phy_offset,
            self.begin_timestamp, items, start,
        )  # fmt: skip
        if written:
            _hash, self.end_phy_offset, self.end_timestamp = _index_put.ITEM.unpack_from(
                items, (start + written - 1) * _index_put.ITEM.size
            )
            self.hash_slot_count += new_slots
            self.index_count = count + written
            self.dirty = True
        return written

    def select_phy_offsets(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Offsets of entries whose hash matches ``key`` and time is in range, newest first."""
        out: list[int] = []
        mm = self.mf.mm
        count = self.index_count
        key_hash = index_key_hash(key)
        try:
            (slot_value,) = INDEX_SLOT.unpack_from(
                mm, INDEX_HEADER_SIZE + (key_hash % self.slot_num) * 4
            )
            if slot_value <= 0 or slot_value > count or count <= 1:
                return out
            nxt = slot_value
            base = self.begin_timestamp
            while len(out) < max_num:
                h, phy, diff, prev = INDEX_ENTRY.unpack_from(
                    mm, self.entries_at + nxt * INDEX_ENTRY_SIZE
                )
                if diff < 0:
                    break
                time_read = base + diff * 1000
                if h == key_hash and begin_ms <= time_read <= end_ms:
                    out.append(int(phy))
                if prev <= 0 or prev > count or prev == nxt or time_read < begin_ms:
                    break
                nxt = prev
        except ValueError:  # unmapped by a concurrent delete
            return out
        return out

    def entry_phy(self, number: int) -> int | None:
        """The CommitLog offset entry ``number`` points at (None: never written, or lost)."""
        at = self.entries_at + number * INDEX_ENTRY_SIZE
        entry = INDEX_ENTRY.unpack_from(self.mf.mm, at)
        return int(entry[1]) if any(entry) else None

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """True when the file's time range overlaps [begin_ms, end_ms]."""
        return not (end_ms < self.begin_timestamp or begin_ms > self.end_timestamp)

    def flush(self) -> None:
        """Write the header and force the file.

        The file is marked clean *before* the sync: a key put while it runs marks it dirty
        again, so the next flush forces it (marking it clean after would lose that mark).
        """
        self.dirty = False
        try:
            self.write_header()
            self.mf.sync()
        except BaseException:
            self.dirty = True
            raise


def _flatten_keys(
    wanted: list[bool], uniq_col: tuple[object, ...], keys_col: tuple[object, ...]
) -> tuple[list[int], list[str]]:
    """(row, key) of every key to index, in ``build_index`` order: UNIQ_KEY, then KEYS."""
    rows: list[int] = []
    keys: list[str] = []
    for i, (ok, uniq, spaced) in enumerate(zip(wanted, uniq_col, keys_col, strict=True)):
        if not ok:
            continue
        if uniq:
            rows.append(i)
            keys.append(cast(str, uniq))
        if spaced:
            split = cast(str, spaced).split(" ")
            if "" in split:
                split = [k for k in split if k]
            rows += [i] * len(split)  # a trace message holds hundreds of keys
            keys += split
    return rows, keys


def _key_count(requests: Sequence[DispatchRequest]) -> int:
    """How many KEYS the requests hold (at least; UNIQ_KEYs not counted)."""
    return sum(k.count(" ") + 1 for k in (r[7] for r in requests) if k)  # r.keys


def _index_file_name(now_ms: int) -> str:
    t = time.localtime(now_ms / 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{now_ms % 1000:03d}"


class IndexService:
    """All index files plus the dispatcher that fills them.

    Args:
        index_dir: the ``index`` directory.
        slot_num: hash slots per file.
        index_num: entries per file.
        clock: names new files.
    """

    def __init__(
        self, index_dir: str, slot_num: int, index_num: int, clock: Clock, disk: Disk = OS_DISK
    ) -> None:
        self.index_dir = index_dir
        self.disk = disk
        self.slot_num = slot_num
        self.index_num = index_num
        self.clock = clock
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()
        self._prefix_cache: dict[str, int] = {}

    def load(self, last_exit_ok: bool, index_checkpoint_ms: int) -> int | None:
        """Map the index files; drop unsafe ones. Return the offset to rebuild from, if any.

        After an abnormal exit a file whose end time is past ``index_checkpoint_ms`` may have
        lost writes and is deleted; a file of the wrong size is deleted too. The returned
        physical offset is where re-dispatch must start to rebuild what was dropped (None if
        nothing was).
        """
        return self.apply_load(self.scan_load(last_exit_ok, index_checkpoint_ms))

    def scan_load(self, last_exit_ok: bool, index_checkpoint_ms: int) -> IndexLoadPlan:
        """``load`` without changing anything: which files are kept, which dropped."""
        plan = IndexLoadPlan()
        try:
            names = sorted(self.disk.listdir(self.index_dir))
        except FileNotFoundError:
            names = []
        for name in names:
            if not (len(name) == 17 and name.isdigit()):
                continue
            path = os.path.join(self.index_dir, name)
            try:
                f = IndexFile(path, self.slot_num, self.index_num, create=False, disk=self.disk)
            except (CorruptionError, OSError) as exc:
                logger.warning("dropping damaged index file %s: %s", path, exc)
                plan.drop(path, None, plan.kept[-1].end_phy_offset if plan.kept else 0)
                continue
            if not last_exit_ok and f.end_timestamp > index_checkpoint_ms:
                logger.info("dropping index file %s written after the checkpoint", path)
                plan.drop(path, f, f.begin_phy_offset)
                continue
            plan.kept.append(f)
        return plan

    def apply_load(self, plan: IndexLoadPlan) -> int | None:
        """Delete what ``plan`` drops and keep the rest; returns where to rebuild from."""
        self.disk.makedirs(self.index_dir)
        for path, f in plan.dropped:
            if f is not None:
                f.mf.destroy(sync_dir=False)
            else:
                _unlink(self.disk, path)
        if plan.dropped:
            self.disk.sync_dir(self.index_dir)
        self.files = plan.kept
        return plan.rebuild_from

    @property
    def is_empty(self) -> bool:
        """True when there is no index file at all."""
        return not self.files

    def _end_phy_offset(self) -> int:
        """The newest index file's end offset: records before it are already indexed."""
        files = self.files
        return files[-1].end_phy_offset if files else 0

    def _last_writable(self) -> IndexFile:
        files = self.files
        if files and not files[-1].is_write_full:
            return files[-1]
        with self._lock:
            prev = self.files[-1] if self.files else None
            now = self.clock.now_ms()
            self.disk.makedirs(self.index_dir)
            while True:
                path = os.path.join(self.index_dir, _index_file_name(now))
                if not self.disk.exists(path) and (prev is None or path > prev.path):
                    break
                now += 1
            f = IndexFile(
                path, self.slot_num, self.index_num, create=True,
                seed_phy_offset=prev.end_phy_offset if prev else 0,
                seed_timestamp_ms=prev.end_timestamp if prev else 0, disk=self.disk,
            )  # fmt: skip
            faults.point("index.create.after_file")
            if prev is not None:
                prev.write_header()
            self.files = [*self.files, f]
            return f

    def ensure_file(self) -> None:
        """Create the first index file if none exists (marks the index as built)."""
        self._last_writable()

    def build_index(self, requests: Sequence[DispatchRequest]) -> None:
        """Index the keys of ``requests`` (skipping ones the index already covers): key by
        key for a few, in numpy for many requests or many keys (a trace message carries one
        per traced message: ~400); in C when the extension is built."""
        if requests and (
            _index_put.COMPILED or len(requests) >= VECTOR_MIN or _key_count(requests) >= VECTOR_MIN
        ):
            self.build_index_columns(tuple(zip(*requests, strict=True)))
            return
        self.build_index_each(requests)

    def build_index_each(self, requests: Sequence[DispatchRequest]) -> None:
        """``build_index`` key by key (``put_key``): the reference of the numpy path."""
        end_phy = self._end_phy_offset()
        f: IndexFile | None = None  # opened only when a key is written: no empty files
        for topic, _q, phys, _size, _tags, ts, _qo, keys, uniq, sys_flag, _props in requests:
            split = [k for k in keys.split(" ") if k] if keys else ()
            if (not uniq and not split) or phys < end_phy:
                continue
            if is_rollback(sys_flag):
                continue
            prefix = topic + "#"
            if f is None:
                f = self._last_writable()
            if uniq and not f.put_key(uniq, phys, ts, prefix):
                f = self._put(f, prefix, uniq, phys, ts)
            for k in split:
                if not f.put_key(k, phys, ts, prefix):
                    f = self._put(f, prefix, k, phys, ts)
        if f is not None:
            f.write_header()

    def build_index_columns(self, columns: tuple[tuple[object, ...], ...]) -> None:
        """``build_index`` for a batch given as its columns (``zip(*requests)``), with the
        hashing and slot chaining done in C (``_index_put``) or else numpy."""
        if not columns:
            return
        if _index_put.COMPILED and self._build_from_items(columns):
            return
        topics, _q, phys_col, _s, _t, ts_col, _qo, keys_col, uniq_col, flags_col = columns[:10]
        phys_all = np.array(phys_col, dtype=np.int64)
        flags = np.array(flags_col, dtype=np.int64)
        end_phy = self._end_phy_offset()
        tx = flags & TRANSACTION_TYPE_MASK
        wanted = (phys_all >= end_phy) & (tx != TRANSACTION_ROLLBACK_TYPE)
        rows: list[int]
        keys: list[str]
        if keys_col.count(None) == len(keys_col):
            wanted &= np.fromiter(map(bool, uniq_col), dtype=bool, count=len(uniq_col))
            rows = np.flatnonzero(wanted).tolist()
            keys = cast("list[str]", [uniq_col[i] for i in rows])
        else:
            rows, keys = _flatten_keys(wanted.tolist(), uniq_col, keys_col)
        if not rows:
            return
        prefixes = self._prefix_hashes(topics, rows)
        hashes = index_key_hashes(prefixes, keys)
        phys = phys_all[rows]
        ts = np.array(ts_col, dtype=np.int64)[rows]
        f = self._last_writable()
        done = 0
        while True:
            done += f.put_hashes(hashes[done:], phys[done:], ts[done:])
            if done >= len(rows):
                break
            f = self._last_writable()
        f.write_header()

    def _build_from_items(self, columns: tuple[tuple[object, ...], ...]) -> bool:
        """``build_index_columns`` with the keys listed and put by ``_index_put``; False when
        the columns hold values it does not take (nothing written then)."""
        topics, _q, phys, _s, _t, stamps, _qo, keys, uniqs, flags = columns[:10]
        items = _index_put.index_key_entries(
            topics, phys, stamps, keys, uniqs, flags, self._end_phy_offset()
        )
        if items is None:
            return False
        total = len(items) // _index_put.ITEM.size
        if not total:
            return True
        f = self._last_writable()
        done = f.put_items(items, 0)
        while done < total:
            f = self._last_writable()
            done += f.put_items(items, done)
        f.write_header()
        return True

    def _prefix_hashes(
        self, topics: tuple[object, ...], rows: list[int]
    ) -> int | npt.NDArray[np.uint64]:
        """Unsigned hash of ``topic#`` for the topic of each row (one int if all equal)."""
        cache = self._prefix_cache
        first = cast(str, topics[rows[0]])
        if topics.count(first) == len(topics):
            h = cache.get(first)
            if h is None:
                h = cache[first] = unsigned_hash_and_units(first + "#")[0]
            return h
        out = np.empty(len(rows), dtype=np.uint64)
        for j, i in enumerate(rows):
            topic = cast(str, topics[i])
            h = cache.get(topic)
            if h is None:
                h = cache[topic] = unsigned_hash_and_units(topic + "#")[0]
            out[j] = h
        if len(cache) > 65536:
            cache.clear()
        return out

    def _put(self, f: IndexFile, prefix: str, key: str, phys: int, ts: int) -> IndexFile:
        while not f.put_key(key, phys, ts, prefix):
            f = self._last_writable()
        return f

    def query_offsets(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> tuple[list[int], int, int]:
        """Candidate offsets for ``topic#key``, newest first, plus the newest file's end time
        and end offset (``indexLastUpdateTimestamp``/``indexLastUpdatePhyoffset``)."""
        out: list[int] = []
        files = self.files
        if not files:
            return out, 0, 0
        last = files[-1]
        full_key = f"{topic}#{key}"
        for f in reversed(files):
            if f.is_time_matched(begin_ms, end_ms):
                out.extend(f.select_phy_offsets(full_key, max_num - len(out), begin_ms, end_ms))
            if f.begin_timestamp < begin_ms or len(out) >= max_num:
                break
        return out, last.end_timestamp, last.end_phy_offset

    def flush(self) -> int:
        """Flush dirty files; return the index checkpoint time: every key of every record
        stored *before* it is on disk (0 when nothing can be claimed).

        The time is the newest file's end time read *before* any file is forced. Keys are
        put in store-time order, so every key of a record stored earlier was already put,
        in a file that exists now and is marked dirty until forced (``IndexFile.flush``):
        the forces below cover it. Keys of records stored *in* that millisecond may be put
        after the reading and lost; abnormal recovery re-checks them (``recheck_keys``).
        """
        files = self.files
        if not files:
            return 0
        mark = files[-1].end_timestamp
        for f in list(self.files):
            if f.dirty:
                try:
                    f.flush()
                except ValueError:  # unmapped by a concurrent delete of an expired file
                    continue
                except OSError:
                    logger.exception("could not flush index file %s", f.path)
                    return 0
        return mark

    def recheck_keys(self, requests: Sequence[DispatchRequest]) -> int:
        """Put the keys of ``requests`` that no file holds (their records were indexed,
        then the keys lost with the power); returns how many were put.

        Unlike ``build_index`` it looks every key up first and puts it even below the
        newest file's end offset, which it leaves where it was (``build_index`` skips what
        is below it: these records are older than what the file covers).
        """
        added = 0
        f: IndexFile | None = None
        for topic, _q, phys, _size, _tags, ts, _qo, keys, uniq, sys_flag, _props in requests:
            if is_rollback(sys_flag):
                continue
            split = [k for k in keys.split(" ") if k] if keys else []
            for key in [uniq, *split] if uniq else split:
                if self._holds(f"{topic}#{key}", phys, ts):
                    continue
                if f is None:
                    f = self._last_writable()
                end_phy, end_ts = f.end_phy_offset, f.end_timestamp
                f = self._put(f, topic + "#", key, phys, ts)
                f.end_phy_offset = max(f.end_phy_offset, end_phy)
                f.end_timestamp = max(f.end_timestamp, end_ts)
                added += 1
        if f is not None:
            f.write_header()
        return added

    def _holds(self, full_key: str, phys: int, ts: int) -> bool:
        """True when a file has ``full_key`` at ``phys`` (stored at ``ts``; entries keep
        their time to the second)."""
        begin = ts - 1000
        for f in reversed(self.files):
            if f.is_time_matched(begin, ts) and phys in f.select_phy_offsets(
                full_key, _INT_MAX, begin, ts
            ):
                return True
            if f.begin_timestamp < begin:
                break
        return False

    def delete_expired_files(self, min_phy_offset: int) -> int:
        """Delete files (never the last) whose entries all point below ``min_phy_offset``."""
        files = self.files
        doomed = []
        for f in files[:-1]:
            if f.end_phy_offset < min_phy_offset:
                doomed.append(f)
            else:
                break
        if doomed:
            with self._lock:
                self.files = [f for f in self.files if f not in doomed]
            for f in doomed:
                f.mf.destroy()
        return len(doomed)

    def shutdown(self) -> None:
        """Write headers and unmap."""
        for f in self.files:
            if not f.mf.closed:
                f.write_header()
            f.mf.close()

    def destroy(self) -> None:
        """Delete every index file."""
        files, self.files = self.files, []
        for f in files:
            f.mf.destroy()


def _unlink(disk: Disk, path: str) -> None:
    try:
        disk.unlink(path)
    except OSError:
        logger.exception("could not delete %s", path)


class IndexLoadPlan:
    """What ``IndexService.scan_load`` found: files kept (mapped) and dropped."""

    def __init__(self) -> None:
        self.kept: list[IndexFile] = []
        self.dropped: list[tuple[str, IndexFile | None]] = []
        self.rebuild_from: int | None = None

    def drop(self, path: str, f: IndexFile | None, rebuild_from: int) -> None:
        self.dropped.append((path, f))
        if self.rebuild_from is None or rebuild_from < self.rebuild_from:
            self.rebuild_from = rebuild_from

    @property
    def end_phy_offset(self) -> int:
        """The newest kept file's end offset (-1 when none is kept)."""
        return self.kept[-1].end_phy_offset if self.kept else -1

    def close(self) -> None:
        """Unmap every file (the start was refused)."""
        for kept in self.kept:
            kept.mf.close()
        for _, dropped in self.dropped:
            if dropped is not None:
                dropped.mf.close()
