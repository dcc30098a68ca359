"""Send messages with PyPI ``rocketmq-python-client`` 5.1.2 (gRPC) and print one JSON line per
message (runs in the client's own venv; see tests/compat/conftest.py).

Bodies are ``body_of(i, size)`` so the test can rebuild and compare them byte for byte.
Modes: normal, fifo (message groups g0..g<groups-1>), delay (delivery in --delay-ms),
commit / rollback (transactions resolved by the producer), check (left open: the broker's
check-back asks the checker, which commits even and rolls back odd messages).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time


def body_of(i: int, size: int) -> bytes:
    seed = hashlib.sha256(f"body-{i}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--mode", default="normal")
    ap.add_argument("--sizes", default="16")
    ap.add_argument("--groups", type=int, default=3)
    ap.add_argument("--delay-ms", type=int, default=0)
    ap.add_argument("--linger", type=float, default=0.0)
    ap.add_argument("--async-sends", action="store_true")
    ap.add_argument("--big-every", type=int, default=0)
    ap.add_argument("--text", action="store_true", help="printable bodies text-<i>-yyy...")
    ap.add_argument("--ak", default="")
    ap.add_argument("--sk", default="")
    args = ap.parse_args()

    from rocketmq import (
        ClientConfiguration,
        Credentials,
        Message,
        Producer,
        TransactionChecker,
        TransactionResolution,
    )

    checked: list[str] = []
    lock = threading.Lock()

    class Checker(TransactionChecker):
        def check(self, message: Message) -> TransactionResolution:
            i = int(message.properties.get("i", "0"))
            with lock:
                checked.append(message.message_id)
            emit(event="checked", i=i, id=message.message_id, topic=message.topic)
            return TransactionResolution.COMMIT if i % 2 == 0 else TransactionResolution.ROLLBACK

    config = ClientConfiguration(args.endpoint, Credentials(args.ak, args.sk))
    checker = Checker() if args.mode in ("commit", "rollback", "check") else None
    producer = Producer(config, (args.topic,), checker)
    producer.startup()
    emit(event="started")
    sizes = [int(s) for s in args.sizes.split(",")]
    futures = []
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            big = args.big_every and i % args.big_every == args.big_every - 1
            size = 1024 * 1024 if big else sizes[i % len(sizes)]
            msg.body = f"text-{i}-".encode() + b"y" * size if args.text else body_of(i, size)
            msg.tag = f"Tag{i % 3}"
            msg.keys = f"key-{i}"
            msg.add_property("i", str(i))
            msg.add_property("utf", "h\u00e9")
            if args.mode == "fifo":
                msg.message_group = f"g{i % args.groups}"
            if args.mode == "delay":
                msg.delivery_timestamp = int(time.time() * 1000) + args.delay_ms
            if args.mode in ("commit", "rollback", "check"):
                tx = producer.begin_transaction()
                receipt = producer.send(msg, tx)
                emit(event="sent", i=i, id=receipt.message_id, tx=receipt.transaction_id)
                if args.mode == "commit":
                    tx.commit()
                elif args.mode == "rollback":
                    tx.rollback()
                continue
            if args.async_sends:
                futures.append((i, producer.send_async(msg)))
                continue
            receipt = producer.send(msg)
            emit(event="sent", i=i, id=receipt.message_id, offset=receipt.offset, at=time.time())
        for i, future in futures:
            receipt = future.result(timeout=30)
            emit(event="sent", i=i, id=receipt.message_id, offset=receipt.offset)
        deadline = time.monotonic() + args.linger
        while time.monotonic() < deadline:
            with lock:
                if args.mode == "check" and len(checked) >= args.count:
                    time.sleep(1.5)  # the answers (EndTransaction) go out after check()
                    break
            time.sleep(0.1)
    finally:
        producer.shutdown()
    emit(event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
