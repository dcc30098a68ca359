"""Consume with the C++ RocketMQ push consumer (PyPI rocketmq==0.4.4); one JSON line per delivery.

Runs inside the client's own virtual environment. Exits after ``--expect`` distinct messages
(then ``--linger`` more seconds to catch duplicates), on SIGTERM, or after ``--timeout``.
"""

import argparse
import json
import signal
import sys
import threading
import time

from rocketmq.client import PushConsumer
from rocketmq.ffi import MessageModel

PROPS = ("UNIQ_KEY", "KEYS", "TAGS", "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "REAL_TOPIC", "DELAY")


_EMIT_LOCK = threading.Lock()


def emit(**fields):
    # one line per call, whole: the C++ client calls back from several threads, and writes of
    # long lines from two threads to sys.stdout can interleave
    line = json.dumps(fields) + "\n"
    with _EMIT_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def text(value):
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--namesrv", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--expression", default="*")
    p.add_argument("--model", choices=["clustering", "broadcasting"], default="clustering")
    p.add_argument("--orderly", action="store_true")
    p.add_argument("--expect", type=int, default=0, help="exit after this many distinct bodies")
    p.add_argument("--linger", type=float, default=2.0)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument(
        "--fail-times",
        type=int,
        default=0,
        help="fail each message's first N deliveries (RECONSUME_LATER)",
    )
    p.add_argument("--instance", default="")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--sleep-ms", type=int, default=0, help="work time per message")
    p.add_argument(
        "--extra-props", default="", help="more property names to print, comma separated"
    )
    p.add_argument("--hex", action="store_true", help="also print each body as hex")
    p.add_argument("--access-key", default="", help="ACL account (set_session_credentials)")
    p.add_argument("--secret-key", default="")
    args = p.parse_args()

    prop_names = PROPS + tuple(n for n in args.extra_props.split(",") if n)
    model = MessageModel.BROADCASTING if args.model == "broadcasting" else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    if args.access_key:
        consumer.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")
    if args.instance:
        consumer.set_instance_name(args.instance)
    if args.threads:
        consumer.set_thread_count(args.threads)
    seen = set()
    attempts = {}
    lock = threading.Lock()
    done = threading.Event()

    def on_message(msg):
        raw = msg.body  # read once: every access goes back to the native message
        body = text(raw)
        with lock:
            attempts[body] = attempts.get(body, 0) + 1
            attempt = attempts[body]
        started = time.time()
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000)
        emit(
            event="msg",
            id=text(msg.id),
            topic=text(msg.topic),
            tags=text(msg.tags),
            keys=text(msg.keys),
            body=body,
            queue_id=msg.queue_id,
            queue_offset=msg.queue_offset,
            reconsume_times=msg.reconsume_times,
            store_timestamp=msg.store_timestamp,
            born_timestamp=msg.born_timestamp,
            attempt=attempt,
            at=started,
            props={k: text(msg.get_property(k)) for k in prop_names if msg.get_property(k)},
            **({"body_hex": bytes(raw).hex()} if args.hex else {}),
        )
        if attempt <= args.fail_times:
            raise RuntimeError("asked to fail")
        with lock:
            seen.add(body)
            if args.expect and len(seen) >= args.expect:
                done.set()

    signal.signal(signal.SIGTERM, lambda *_: done.set())
    consumer.subscribe(args.topic, on_message, args.expression)
    consumer.start()
    emit(event="started")
    deadline = time.monotonic() + args.timeout
    while not done.wait(0.1):
        if time.monotonic() > deadline:
            emit(event="timeout", seen=len(seen))
            break
    if done.is_set() and args.expect:
        time.sleep(args.linger)
    consumer.shutdown()
    emit(event="done", seen=len(seen))


if __name__ == "__main__":
    main()
