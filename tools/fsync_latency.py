"""The disk's own floor under a SYNC_FLUSH ack (issue 18): the latency of one ``fdatasync``
after a 1 KiB write, the way the CommitLog writes (a ``posix_fallocate``d file written through
``mmap``), next to plain ``pwrite`` and a sparse or zero-filled file. Paced like the peer
harness's latency phase (one write + sync every ``--gap-ms``), so the disk is not saturated.
A broker that syncs before it acks cannot answer faster than this at the same percentile.

    python tools/fsync_latency.py [--dir DIR] [--count N] [--gap-ms MS]
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import time

SIZE = 64 << 20
RECORD = 1024


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def prepare(fd: int, how: str) -> None:
    if how == "sparse":
        os.ftruncate(fd, SIZE)
    elif how == "fallocate":
        os.posix_fallocate(fd, 0, SIZE)
    else:
        os.ftruncate(fd, SIZE)
        for offset in range(0, SIZE, 1 << 20):
            os.pwrite(fd, bytes(1 << 20), offset)
        os.fsync(fd)


def measure(directory: str, how: str, through_map: bool, count: int, gap_s: float) -> list[float]:
    fd, path = tempfile.mkstemp(dir=directory, prefix="fsync-latency-")
    try:
        prepare(fd, how)
        mapped = mmap.mmap(fd, SIZE) if through_map else None
        record, latencies = b"z" * RECORD, []
        for i in range(count):
            offset = i * RECORD
            if mapped is not None:
                mapped[offset : offset + RECORD] = record
            else:
                os.pwrite(fd, record, offset)
            start = time.perf_counter()
            os.fdatasync(fd)
            latencies.append(time.perf_counter() - start)
            time.sleep(gap_s)
        if mapped is not None:
            mapped.close()
        return latencies
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir", default=tempfile.gettempdir(), help="a directory on the disk to test"
    )
    parser.add_argument("--count", type=int, default=2000, help="syncs per variant")
    parser.add_argument("--gap-ms", type=float, default=0.5, help="pause between syncs")
    args = parser.parse_args()
    if not os.path.isdir(args.dir):
        parser.error(f"--dir {args.dir!r} is not a directory")
    print(f"1 KiB write + fdatasync, {args.count} per variant, in {args.dir} (ms)")
    for how in ("fallocate", "sparse", "zeroed"):
        for through_map in (True, False):
            lat = measure(args.dir, how, through_map, args.count, args.gap_ms / 1000)
            name = f"{how} {'mmap' if through_map else 'pwrite'}"
            p50, p90, p99 = (percentile(lat, p) * 1000 for p in (0.5, 0.9, 0.99))
            print(
                f"  {name:<18} p50 {p50:6.3f}  p90 {p90:6.3f}  p99 {p99:6.3f}  max {max(lat) * 1000:6.3f}"
            )


if __name__ == "__main__":
    main()
