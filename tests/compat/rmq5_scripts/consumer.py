"""Consume with PyPI ``rocketmq-python-client`` 5.1.2 (gRPC); one JSON line per delivery.

``--kind simple``: a SimpleConsumer receiving ``--batch`` at a time with ``--invisible``
seconds; ``--kind push``: a PushConsumer. ``--fail-times N``: the first N deliveries of each
message are not acknowledged (simple: left to expire, or with ``--nack`` made visible again
after 1 s through ChangeInvisibleDuration; push: the listener returns FAILURE). Exits after
``--expect`` distinct messages were acknowledged (plus ``--linger`` seconds to catch
duplicates) or after ``--timeout``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time


def emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def describe(msg: object, attempt: int) -> dict[str, object]:
    body = msg.body  # type: ignore[attr-defined]
    return {
        "id": msg.message_id,  # type: ignore[attr-defined]
        "topic": msg.topic,  # type: ignore[attr-defined]
        "tag": msg.tag,  # type: ignore[attr-defined]
        "keys": sorted(msg.keys),  # type: ignore[attr-defined]
        "props": dict(msg.properties),  # type: ignore[attr-defined]
        "group": msg.message_group,  # type: ignore[attr-defined]
        "attempt": msg.delivery_attempt,  # type: ignore[attr-defined]
        "size": len(body),
        "sha": hashlib.sha256(body).hexdigest(),
        "seen": attempt,
        "corrupted": msg.corrupted,  # type: ignore[attr-defined]
        "delivery": msg.delivery_timestamp,  # type: ignore[attr-defined]
        "at": time.time(),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--kind", choices=["simple", "push"], default="simple")
    ap.add_argument("--expect", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--invisible", type=int, default=15)
    ap.add_argument("--fail-times", type=int, default=0)
    ap.add_argument("--nack", action="store_true")
    ap.add_argument("--linger", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--await-s", type=int, default=5)
    ap.add_argument("--ak", default="")
    ap.add_argument("--sk", default="")
    args = ap.parse_args()

    from rocketmq import (
        ClientConfiguration,
        ConsumeResult,
        Credentials,
        FilterExpression,
        MessageListener,
        PushConsumer,
        SimpleConsumer,
    )

    config = ClientConfiguration(args.endpoint, Credentials(args.ak, args.sk))
    seen: dict[str, int] = {}
    acked: set[str] = set()
    lock = threading.Lock()
    done = threading.Event()

    def note(msg: object) -> int:
        with lock:
            key = msg.message_id  # type: ignore[attr-defined]
            seen[key] = seen.get(key, 0) + 1
            return seen[key]

    def finished() -> None:
        with lock:
            if len(acked) >= args.expect:
                done.set()

    if args.kind == "push":

        class Listener(MessageListener):
            def consume(self, message: object) -> ConsumeResult:
                n = note(message)
                emit(event="msg", **describe(message, n))
                if n <= args.fail_times:
                    return ConsumeResult.FAILURE
                with lock:
                    acked.add(message.message_id)  # type: ignore[attr-defined]
                finished()
                return ConsumeResult.SUCCESS

        consumer = PushConsumer(config, args.group, Listener(), {args.topic: FilterExpression("*")})
        consumer.startup()
        emit(event="started")
        done.wait(args.timeout)
    else:
        consumer = SimpleConsumer(
            config, args.group, {args.topic: FilterExpression("*")}, args.await_s
        )
        consumer.startup()
        emit(event="started")
        deadline = time.monotonic() + args.timeout
        while not done.is_set() and time.monotonic() < deadline:
            try:
                received = consumer.receive(args.batch, args.invisible)
            except Exception as exc:  # a transient failure (deadline on a loaded machine)
                emit(event="error", op="receive", error=repr(exc))
                continue
            for msg in received:
                n = note(msg)
                emit(event="msg", **describe(msg, n))
                try:
                    if n <= args.fail_times:
                        if args.nack:
                            consumer.change_invisible_duration(msg, 1)
                        continue
                    consumer.ack(msg)
                except Exception as exc:
                    emit(event="error", op="ack", error=repr(exc))
                    continue
                with lock:
                    acked.add(msg.message_id)
                finished()
    if not done.is_set():
        emit(event="timeout", acked=len(acked))
    time.sleep(args.linger)
    consumer.shutdown()
    emit(event="done", acked=len(acked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
