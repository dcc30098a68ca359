"""Send messages with the C++ RocketMQ client (PyPI rocketmq==0.4.4); one JSON line per result.

Runs inside the client's own virtual environment, never in Ariane's.
"""

import argparse
import json
import sys
import threading
import time

from rocketmq.client import Message, Producer

_EMIT_LOCK = threading.Lock()


def emit(**fields):
    # one line per call, whole: the C++ client calls back from several threads, and writes of
    # long lines from two threads to sys.stdout can interleave
    line = json.dumps(fields) + "\n"
    with _EMIT_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def build(args, i):
    msg = Message(args.topic)
    tags = args.tags.split(",") if args.tags else []
    if tags:
        msg.set_tags(tags[i % len(tags)])
    if args.keys_prefix:
        msg.set_keys(f"{args.keys_prefix}{i}")
    for prop in args.property:
        key, _, value = prop.partition("=")
        msg.set_property(key, value)
    if args.delay_level:
        msg.set_delay_time_level(args.delay_level)
    msg.set_body(f"{args.body_prefix}{i}")
    return msg


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--namesrv", required=True)
    p.add_argument("--group", default="PG_COMPAT")
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--start", type=int, default=0)
    p.add_argument(
        "--mode", choices=["sync", "async", "oneway", "orderly", "batch"], default="sync"
    )
    p.add_argument("--tags", default="")
    p.add_argument("--keys-prefix", default="")
    p.add_argument("--body-prefix", default="body-")
    p.add_argument("--property", action="append", default=[])
    p.add_argument("--delay-level", type=int, default=0)
    p.add_argument("--order-keys", type=int, default=4, help="orderly: number of sharding keys")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--timeout-ms", type=int, default=5000)
    p.add_argument("--access-key", default="", help="ACL account (set_session_credentials)")
    p.add_argument("--secret-key", default="")
    args = p.parse_args()

    producer = Producer(args.group, timeout=args.timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    if args.access_key:
        producer.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")
    producer.start()
    emit(event="started")
    errors = 0
    pending = threading.Semaphore(0)
    lock = threading.Lock()
    async_results = {"ok": 0, "failed": 0}
    indices = range(args.start, args.start + args.count)
    try:
        if args.mode == "batch":
            for begin in range(args.start, args.start + args.count, args.batch_size):
                end = min(begin + args.batch_size, args.start + args.count)
                try:
                    res = producer.send_batch([build(args, i) for i in range(begin, end)])
                    emit(
                        event="sent",
                        i=begin,
                        n=end - begin,
                        status=int(res.status),
                        msg_id=res.msg_id,
                        offset=res.offset,
                    )
                except Exception as exc:
                    errors += 1
                    emit(event="error", i=begin, error=str(exc))
        for i in indices if args.mode != "batch" else ():
            msg = build(args, i)
            try:
                # The first async send goes synchronously: rocketmq-client-cpp 1.2.4 fails an
                # async send at once, with an empty error, while another of its threads is
                # still connecting to the broker (TcpRemotingClient::CreateTransport returns
                # no transport in TCP_CONNECT_STATUS_WAIT), and a fresh producer's first
                # burst races with the heartbeat thread's connect; a loaded machine widens
                # the window. The broker never saw those requests.
                if args.mode == "sync" or (args.mode == "async" and i == args.start):
                    res = producer.send_sync(msg)
                    emit(
                        event="sent",
                        i=i,
                        status=int(res.status),
                        msg_id=res.msg_id,
                        offset=res.offset,
                    )
                elif args.mode == "orderly":
                    key = i % args.order_keys
                    res = producer.send_orderly(msg, key)
                    emit(
                        event="sent",
                        i=i,
                        key=key,
                        status=int(res.status),
                        msg_id=res.msg_id,
                        offset=res.offset,
                    )
                elif args.mode == "oneway":
                    producer.send_oneway(msg)
                    emit(event="sent", i=i)
                else:

                    def ok(res, i=i):
                        with lock:
                            async_results["ok"] += 1
                        emit(
                            event="sent",
                            i=i,
                            status=int(res.status),
                            msg_id=res.msg_id,
                            offset=res.offset,
                        )
                        pending.release()

                    def failed(exc, i=i):
                        with lock:
                            async_results["failed"] += 1
                        emit(event="error", i=i, error=str(exc), type=type(exc).__name__)
                        pending.release()

                    producer.send_async(msg, ok, failed)
            except Exception as exc:
                errors += 1
                emit(event="error", i=i, error=str(exc), type=type(exc).__name__)
        if args.mode == "async":
            deadline = time.monotonic() + 60
            for _ in indices[1:]:
                if not pending.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    break
            errors += async_results["failed"]
        if args.mode == "oneway":
            time.sleep(1.0)  # oneway requests are fire-and-forget: let the socket drain
    finally:
        producer.shutdown()
    emit(event="done", errors=errors)


if __name__ == "__main__":
    main()
