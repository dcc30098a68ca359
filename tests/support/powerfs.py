"""A FUSE file system that loses exactly what was not synced: power cuts through the kernel.

How it works: the in-memory :class:`~ariane.store.simdisk.SimDisk` (the model of ALICE and
LazyFS the unit power-loss tests use) is mounted with libfuse, so a store using the *real*
``OsDisk`` (``mmap`` + ``fdatasync``, ``fsync`` of directories, ``rename``, ``fallocate``)
writes through the Linux page cache and FUSE into it. What the kernel has not written back
never reaches the daemon (lost at a cut, as in a real power loss); what it wrote back stays
volatile until the kernel asks for ``fsync``/``fdatasync`` (FUSE_FSYNC) of that file; a
create, rename, unlink or mkdir is durable only after FUSE_FSYNCDIR of its directory. So a
store that skips any of those syscalls loses data here, unlike under SIGKILL, where the page
cache survives.

Run as ``python -m tests.support.powerfs MOUNTPOINT`` (as root). It prints ``mounted`` once
the kernel sent FUSE_INIT, then reads commands on stdin:

* ``cut OUT SEED N``: cut the power now (the frozen state is what the disk had at this
  instant; the store may go on writing, the images will not see it) and pickle N post-crash
  images (``lost``: only what was synced; ``survivor``: everything the daemon got; then N-2
  random ones, torn at page granularity) to OUT; answers ``cut-done``.

Unmount (``umount -l MOUNTPOINT``) to stop it.
"""

from __future__ import annotations

import errno
import itertools
import os
import pickle
import random
import stat
import sys
import threading
from typing import Any

import mfusepy as fuse

from ariane.store.disk import DiskFile
from ariane.store.simdisk import SimDisk

__all__ = ["PowerFS", "fuse_unavailable"]


def fuse_unavailable() -> str | None:
    """Why this machine cannot mount the power-loss file system (None: it can)."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if os.geteuid() != 0:
        return "mounting FUSE here needs root"
    from ctypes.util import find_library

    if not (find_library("fuse3") or find_library("fuse")):
        return "libfuse is not installed (apt-get install fuse3; `make test` does it)"
    return None


class PowerFS(fuse.Operations):  # type: ignore[misc]
    """The FUSE operations, each one system call on a :class:`SimDisk`."""

    use_ns = True

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk
        self._files: dict[int, DiskFile] = {}
        self._handles = itertools.count(1)

    def init(self, path: str) -> None:
        print("mounted", flush=True)

    # -- names --------------------------------------------------------------------------
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        disk = self.disk
        if disk.isdir(path):
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, "st_size": 4096}
        if not disk.exists(path):
            raise fuse.FuseOSError(errno.ENOENT)
        size = disk.file_size(path)
        ns = disk.mtime_ms(path) * 1_000_000
        return {
            "st_mode": stat.S_IFREG | 0o644,
            "st_nlink": 1,
            "st_size": size,
            "st_blocks": (size + 511) // 512,
            "st_mtime": ns,
            "st_ctime": ns,
            "st_atime": ns,
        }

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *self.disk.listdir(path)]

    def mkdir(self, path: str, mode: int) -> int:
        self.disk.mkdir(path)
        return 0

    def rmdir(self, path: str) -> int:
        self.disk.rmdir(path)
        return 0

    def unlink(self, path: str) -> int:
        self.disk.unlink(path)
        return 0

    def rename(self, old: str, new: str) -> int:
        self.disk.replace(old, new)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self.disk.sync_dir(path)
        return 0

    def access(self, path: str, amode: int) -> int:
        return 0

    def chmod(self, path: str, mode: int) -> int:
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        return {
            "f_bsize": 4096,
            "f_frsize": 4096,
            "f_blocks": 1 << 24,
            "f_bfree": 1 << 23,
            "f_bavail": 1 << 23,
            "f_files": 1 << 20,
            "f_ffree": 1 << 19,
            "f_namemax": 255,
        }

    # -- files --------------------------------------------------------------------------
    def _handle(self, f: DiskFile) -> int:
        fh = next(self._handles)
        self._files[fh] = f
        return fh

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        if self.disk.exists(path):
            f = self.disk.open(path)
            f.resize(0)  # type: ignore[attr-defined]
            return self._handle(f)
        return self._handle(self.disk.open_new(path))

    def open(self, path: str, flags: int) -> int:
        f = self.disk.open(path)
        if flags & os.O_TRUNC:
            f.resize(0)  # type: ignore[attr-defined]
        return self._handle(f)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return bytes(self._files[fh].pread(size, offset))  # type: ignore[attr-defined]

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return int(self._files[fh].pwrite(bytes(data), offset))  # type: ignore[attr-defined]

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        f = self._files[fh] if fh else self.disk.open(path)
        f.resize(length)  # type: ignore[attr-defined]
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        if mode != 0:
            raise fuse.FuseOSError(errno.EOPNOTSUPP)
        f = self._files[fh]
        if offset + size > f.size:
            f.resize(offset + size)  # type: ignore[attr-defined]
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        self._files[fh].sync()
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        self._files.pop(fh, None)
        return 0


def _commands(disk: SimDisk) -> None:
    for line in sys.stdin:
        words = line.split()
        if words and words[0] == "cut":
            out, seed, count = words[1], words[2], int(words[3])
            frozen = disk.power_cut()
            rng = random.Random(seed)
            images = [frozen.lost(), frozen.survivor()]
            images += [frozen.image(rng) for _ in range(count - 2)]
            with open(out, "wb") as f:
                pickle.dump(images, f)
            print("cut-done", flush=True)


def main() -> None:
    mountpoint = sys.argv[1]
    disk = SimDisk()
    threading.Thread(target=_commands, args=(disk,), daemon=True).start()
    fuse.FUSE(PowerFS(disk), mountpoint, foreground=True, nothreads=True, fsname="ariane-powerfs")


if __name__ == "__main__":
    main()
