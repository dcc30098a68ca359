"""A simulated disk for power-loss tests: it loses exactly what was not synced.

How it works (the model of ALICE and LazyFS, in memory): every file is an inode with its
*current* content (the page cache; a mapped file's map *is* this buffer, so writes through
the map are seen) and its *durable* content (what the last :meth:`DiskFile.sync` forced).
Names live in a log of namespace operations (link a name to an inode, unlink a name; a
rename is a link then an unlink, ``mkdir`` a link of a directory), each durable once its
directory is synced. :meth:`SimDisk.power_cut` freezes that state; :meth:`Frozen.image`
then builds one post-crash disk from it:

* names: every durable operation, plus a random *prefix* of the others (file systems journal
  metadata in order: a later rename never survives without an earlier one);
* each file: its durable content, with a random subset of the 4 KiB pages written since the
  last sync replaced by their current content (writes torn at page granularity), and its
  size either the durable or the current one.

An image is written out as a real directory (:meth:`Image.write_to`), where the real store
recovers from it, so recovery itself runs on the real file system code. A capacity can be
set to make block reservations fail with ``ENOSPC``.
"""

from __future__ import annotations

import errno
import itertools
import os
import random
import threading
import time
from dataclasses import dataclass, field

from ariane.store.disk import DiskFile, FileMap

__all__ = ["PAGE_SIZE", "Frozen", "Image", "SimDisk"]

PAGE_SIZE = 4096


class _Dir:
    """A directory node."""


_DIR = _Dir()


class _Inode:
    __slots__ = ("data", "durable", "mapped", "mtime_ms")

    def __init__(self) -> None:
        self.data = bytearray()
        self.durable = b""
        self.mapped = False
        self.mtime_ms = time.time_ns() // 1_000_000


_Node = _Inode | _Dir


@dataclass
class _Op:
    kind: str  # "link" | "unlink"
    path: str
    node: _Node | None
    directory: str
    synced: bool = False


class _SimFile:
    """A handle on an inode."""

    def __init__(self, disk: SimDisk, inode: _Inode, path: str) -> None:
        self._disk = disk
        self._inode = inode
        self.path = path

    @property
    def size(self) -> int:
        return len(self._inode.data)

    def truncate(self, size: int) -> None:
        data = self._inode.data
        if self._inode.mapped:
            raise OSError(errno.EBUSY, "a mapped file keeps its size", self.path)
        if size < len(data):
            del data[size:]
        else:
            data.extend(bytes(size - len(data)))

    def reserve(self, size: int) -> None:
        self._disk.check_space(size - len(self._inode.data), self.path)
        if size > len(self._inode.data):
            self.truncate(size)

    def map(self, size: int) -> FileMap:
        if len(self._inode.data) != size:
            raise ValueError(f"{self.path}: map of {size} bytes over {len(self._inode.data)}")
        self._inode.mapped = True
        return self._inode.data

    def sync(self) -> None:
        self._disk.sync_inode(self._inode)

    def read_into(
        self,
        buf: bytearray | memoryview,
        pos: int,
        length: int | None = None,
        *,
        single_pages: bool = False,
    ) -> None:
        """Nothing to warm in memory."""

    # the system-call face (a FUSE file system over this disk, tests/support/powerfs.py)
    def pwrite(self, data: bytes, offset: int) -> int:
        """``pwrite(2)`` into the page cache (durable after :meth:`sync`)."""
        with self._disk._lock:
            inode = self._inode
            end = offset + len(data)
            self._disk.check_space(end - len(inode.data), self.path)
            if end > len(inode.data):
                inode.data.extend(bytes(end - len(inode.data)))
            inode.data[offset:end] = data
            inode.mtime_ms = time.time_ns() // 1_000_000
            return len(data)

    def pread(self, size: int, offset: int) -> bytes:
        """``pread(2)``."""
        with self._disk._lock:
            return bytes(self._inode.data[offset : offset + size])

    def resize(self, size: int) -> None:
        """``ftruncate(2)`` (growing takes space)."""
        with self._disk._lock:
            self._disk.check_space(size - len(self._inode.data), self.path)
            self.truncate(size)
            self._inode.mtime_ms = time.time_ns() // 1_000_000

    def duplicate(self) -> DiskFile:
        return _SimFile(self._disk, self._inode, self.path)

    def close(self) -> None:
        """The page cache outlives the handle."""


@dataclass
class Image:
    """One post-crash disk: path -> file content (None for a directory)."""

    files: dict[str, bytes | None]

    def write_to(self, sim_root: str, real_root: str) -> None:
        """Create the image's tree under ``sim_root`` as real files under ``real_root``."""
        sim_root = os.path.normpath(sim_root)
        for path, content in sorted(self.files.items()):
            if path != sim_root and not path.startswith(sim_root + os.sep):
                continue
            target = os.path.join(real_root, os.path.relpath(path, sim_root))
            if content is None:
                os.makedirs(target, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as f:
                    f.write(content)


@dataclass
class Frozen:
    """The disk at the moment of a power cut."""

    base: dict[str, _Node]
    ops: list[_Op]
    contents: dict[int, tuple[bytes, bytes]]  # id(inode) -> (current, durable)
    process_kill: bool = field(default=False)

    def image(self, rng: random.Random) -> Image:
        """A random post-crash disk (see the module docs)."""
        cut = rng.randint(0, len(self.ops))
        keep_new = rng.choice([0.0, 1.0, rng.random()])
        return self._build(cut, keep_new, rng)

    def survivor(self) -> Image:
        """What a process kill leaves (the page cache survives: everything written)."""
        return self._build(len(self.ops), 1.0, random.Random(0))

    def lost(self) -> Image:
        """Only what was synced."""
        return self._build(0, 0.0, random.Random(0))

    def _build(self, cut: int, keep_new: float, rng: random.Random) -> Image:
        names = dict(self.base)
        for i, op in enumerate(self.ops):
            if not (op.synced or i < cut):
                continue
            if op.kind == "link":
                assert op.node is not None
                names[op.path] = op.node
            else:
                names.pop(op.path, None)
        files: dict[str, bytes | None] = {}
        for path, node in sorted(names.items()):
            if not _ancestors_are_dirs(path, names):
                continue  # its directory did not survive: neither did it
            if isinstance(node, _Dir):
                files[path] = None
            else:
                current, durable = self.contents[id(node)]
                files[path] = _torn(current, durable, keep_new, rng)
        return Image(files)


def _ancestors_are_dirs(path: str, names: dict[str, _Node]) -> bool:
    parent = os.path.dirname(path)
    while parent != path:
        if not isinstance(names.get(parent), _Dir):
            return False
        path, parent = parent, os.path.dirname(parent)
    return True


def _torn(current: bytes, durable: bytes, keep_new: float, rng: random.Random) -> bytes:
    size = len(current) if rng.random() < keep_new or len(current) == len(durable) else len(durable)
    if current[:size] == durable[:size] and len(durable) >= size:
        return durable[:size]
    out = bytearray(durable[:size].ljust(size, b"\0"))
    for pos in range(0, size, PAGE_SIZE):
        new = current[pos : pos + PAGE_SIZE]
        if new != out[pos : pos + len(new)] and rng.random() < keep_new:
            out[pos : pos + len(new)] = new
    return bytes(out)


class SimDisk:
    """A :class:`~ariane.store.disk.Disk` in memory that can lose power.

    Args:
        capacity_bytes: total file bytes it holds (reservations beyond fail with ENOSPC).
    """

    def __init__(self, capacity_bytes: int | None = None) -> None:
        self.capacity_bytes = capacity_bytes
        self._lock = threading.RLock()
        self._names: dict[str, _Node] = {"/": _DIR}
        self._base: dict[str, _Node] = {"/": _DIR}
        self._ops: list[_Op] = []
        self._tokens = itertools.count(1)
        self._inodes: dict[int, _Inode] = {}
        #: counters of what the store asked for (``sync``, ``sync_dir``, ``create``...)
        self.calls: dict[str, int] = {}

    # -- namespace ---------------------------------------------------------------------
    def _count(self, what: str) -> None:
        self.calls[what] = self.calls.get(what, 0) + 1

    @staticmethod
    def _norm(path: str) -> str:
        return os.path.normpath(os.path.abspath(path))

    def _log(self, kind: str, path: str, node: _Node | None) -> None:
        if kind == "link":
            assert node is not None
            self._names[path] = node
            if isinstance(node, _Inode):
                self._inodes[id(node)] = node
        else:
            self._names.pop(path, None)
        self._ops.append(_Op(kind, path, node, os.path.dirname(path)))

    def _node(self, path: str) -> _Node:
        node = self._names.get(self._norm(path))
        if node is None:
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", path)
        return node

    def _inode(self, path: str) -> _Inode:
        node = self._node(path)
        if not isinstance(node, _Inode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        return node

    def _parent_must_exist(self, path: str) -> None:
        parent = os.path.dirname(path)
        if not isinstance(self._names.get(parent), _Dir):
            raise FileNotFoundError(errno.ENOENT, "no such directory", parent)

    # -- Disk ----------------------------------------------------------------------------
    def open(self, path: str) -> DiskFile:
        with self._lock:
            return _SimFile(self, self._inode(path), self._norm(path))

    def open_new(self, path: str) -> DiskFile:
        with self._lock:
            self._count("create")
            path = self._norm(path)
            self._parent_must_exist(path)
            inode = _Inode()
            self._log("link", path, inode)
            return _SimFile(self, inode, path)

    def exists(self, path: str) -> bool:
        with self._lock:
            return self._norm(path) in self._names

    def isdir(self, path: str) -> bool:
        with self._lock:
            return isinstance(self._names.get(self._norm(path)), _Dir)

    def listdir(self, path: str) -> list[str]:
        with self._lock:
            path = self._norm(path)
            if not isinstance(self._names.get(path), _Dir):
                raise FileNotFoundError(errno.ENOENT, "no such directory", path)
            prefix = path.rstrip("/") + "/"
            return sorted(
                p[len(prefix) :]
                for p in self._names
                if p.startswith(prefix) and "/" not in p[len(prefix) :] and p != path
            )

    def file_size(self, path: str) -> int:
        with self._lock:
            return len(self._inode(path).data)

    def mtime_ms(self, path: str) -> int:
        with self._lock:
            return self._inode(path).mtime_ms

    def makedirs(self, path: str) -> None:
        with self._lock:
            path = self._norm(path)
            if isinstance(self._names.get(path), _Dir):
                return
            parent = os.path.dirname(path)
            if parent != path:
                self.makedirs(parent)
            if path not in self._names:
                self._log("link", path, _DIR)
                self.sync_dir(parent)

    def unlink(self, path: str) -> None:
        with self._lock:
            path = self._norm(path)
            self._inode(path)
            self._log("unlink", path, None)

    def rmdir(self, path: str) -> None:
        with self._lock:
            path = self._norm(path)
            if not isinstance(self._names.get(path), _Dir):
                raise FileNotFoundError(errno.ENOENT, "no such directory", path)
            if self.listdir(path):
                raise OSError(errno.ENOTEMPTY, "directory not empty", path)
            self._log("unlink", path, None)

    def replace(self, src: str, dst: str) -> None:
        with self._lock:
            src, dst = self._norm(src), self._norm(dst)
            node = self._node(src)
            self._parent_must_exist(dst)
            self._log("link", dst, node)
            self._log("unlink", src, None)

    def sync_dir(self, path: str) -> None:
        with self._lock:
            self._count("sync_dir")
            path = self._norm(path)
            for op in self._ops:
                if op.directory == path:
                    op.synced = True
            while self._ops and self._ops[0].synced:  # fold the durable prefix into the base
                op = self._ops.pop(0)
                if op.kind == "link":
                    assert op.node is not None
                    self._base[op.path] = op.node
                else:
                    self._base.pop(op.path, None)

    def read_file(self, path: str) -> bytes:
        with self._lock:
            return bytes(self._inode(path).data)

    def write_file(self, path: str, data: bytes, *, sync: bool) -> None:
        with self._lock:
            path = self._norm(path)
            node = self._names.get(path)
            if isinstance(node, _Inode):
                inode = node
            else:
                self._parent_must_exist(path)
                inode = _Inode()
                self._log("link", path, inode)
            self.check_space(len(data) - len(inode.data), path)
            inode.data[:] = data
            inode.mtime_ms = time.time_ns() // 1_000_000
            if sync:
                self.sync_inode(inode)

    def lock(self, path: str) -> int:
        with self._lock:
            if not self.exists(path):
                self.write_file(path, b"", sync=False)
            return next(self._tokens)

    def unlock(self, token: int) -> None:
        """Locks are not contended in memory."""

    # -- the system-call face (a FUSE file system over this disk, tests/support/powerfs.py) --
    def mkdir(self, path: str) -> None:
        """``mkdir(2)``: a new directory name, durable once its parent is synced."""
        with self._lock:
            path = self._norm(path)
            if path in self._names:
                raise FileExistsError(errno.EEXIST, "file exists", path)
            self._parent_must_exist(path)
            self._log("link", path, _DIR)

    # -- sync and space ---------------------------------------------------------------
    def sync_inode(self, inode: _Inode) -> None:
        """Make an inode's current content durable (``fdatasync``/``msync``)."""
        with self._lock:
            self._count("sync")
            inode.durable = bytes(inode.data)

    def used_bytes(self) -> int:
        """Bytes held by files that still have a name."""
        with self._lock:
            return sum(
                len(n.data) for n in {id(n): n for n in self._names.values()}.values()
                if isinstance(n, _Inode)
            )  # fmt: skip

    def check_space(self, growth: int, path: str) -> None:
        """Refuse ``growth`` more bytes beyond the capacity (ENOSPC)."""
        cap = self.capacity_bytes
        if cap is not None and growth > 0 and self.used_bytes() + growth > cap:
            raise OSError(errno.ENOSPC, "No space left on device", path)

    # -- power -------------------------------------------------------------------------
    def power_cut(self) -> Frozen:
        """Freeze the disk as it is now (the store may go on; the images will not see it)."""
        with self._lock:
            ops = [_Op(o.kind, o.path, o.node, o.directory, o.synced) for o in self._ops]
            contents = {
                key: (bytes(inode.data), inode.durable) for key, inode in self._inodes.items()
            }
            return Frozen(dict(self._base), ops, contents)
