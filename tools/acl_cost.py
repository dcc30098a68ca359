"""Where a signed send's extra CPU goes (issue 11's benchmark bar), both sides in process.

Broker: an in-process broker (``ariane.bench._micro_broker``) answers the same 1 KiB
SEND_MESSAGE_V2 frame N times: unsigned with no ACL hook (off), then signed with the ACL hook
of ``ariane bench micro``'s account registered (on), rounds alternating; this thread's CPU
µs per message, best of ROUNDS. Client: what a producer does per single send besides I/O,
``build_request`` + (``request_signer``) + ``encode_parts``, off and on the same way.

    PYTHONPATH=src .venv/bin/python tools/acl_cost.py N ROUNDS [client|broker]
    PYTHONPATH=src .venv/bin/python tools/acl_cost.py N 1 client-off|client-on|broker-off|broker-on

The second form runs one side and mode only, for callgrind: the difference between two N
gives instructions per message, which the machine's load does not move (OpenSSL's SHA-1 runs
its non-SHA-NI code under valgrind, so the hash counts more there than on the CPU).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ariane.bench import _micro_cases as mc
from ariane.bench._micro_broker import InProcessBroker
from ariane.client._send import SendSettings, build_request, header_base, prepare_single
from ariane.common import native
from ariane.common.message import Message
from ariane.common.msgid import UniqueIdGenerator
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.codec import encode, encode_parts


def _best(call: Callable[[], None], n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time()
        for _ in range(n):
            call()
        best = min(best, time.thread_time() - start)
    return best * 1e6 / n


def broker_side(n: int, rounds: int, only: bool | None = None) -> tuple[float, float]:
    """(off, on) µs per message of the broker's whole send path."""
    broker = InProcessBroker()
    try:
        plain = mc.send_request()
        signed = mc.send_request()
        mc._signer()(signed)
        broker.request(plain)
        hook = mc.acl_hook()
        hooks = broker.controller.remoting.dispatcher.hooks
        frames = {False: encode(plain), True: encode(signed)}

        def run(on: bool) -> float:
            if on:
                hooks.append(hook)
            try:
                frame = frames[on]
                return _best(lambda: broker.feed(frame), n, 1)
            finally:
                if on:
                    hooks.remove(hook)

        off = on = float("inf")
        for _ in range(rounds):
            if only is not True:
                off = min(off, run(False))
            if only is not False:
                on = min(on, run(True))
        return off, on
    finally:
        broker.close()


def client_side(n: int, rounds: int, only: int | None = None) -> tuple[float, float]:
    """(off, on) µs per message of build_request + (sign) + encode_parts."""
    settings = SendSettings(mc.GROUP)
    msg = Message(mc.TOPIC, mc.BODY, properties=dict(mc.PRODUCER_PROPERTIES))
    prepared = prepare_single(msg, settings, UniqueIdGenerator(b"\x7f\x00\x00\x01"))
    mq, base = MessageQueue(mc.TOPIC, "broker-a", 1), header_base(settings)
    signer = mc._signer()

    def off() -> None:
        encode_parts(build_request(prepared, mq, base))

    def on() -> None:
        request = build_request(prepared, mq, base)
        signer(request)
        encode_parts(request)

    a = b = float("inf")
    for _ in range(rounds):
        if only != 1:
            a = min(a, _best(off, n, 1))
        if only != 0:
            b = min(b, _best(on, n, 1))
    return a, b


def one(n: int, side: str) -> None:
    """Only ``side`` (client-off, client-on, broker-off, broker-on), N times: for callgrind."""
    where, mode = side.split("-")
    if where == "client":
        pick = 0 if mode == "off" else 1
        print(client_side(n, 1, only=pick))
    else:
        print(broker_side(n, 1, only=mode == "on"))


def main(n: int, rounds: int, only: str = "both") -> None:
    if "-" in only:
        one(n, only)
        return
    build = native.build_name()
    if only in ("both", "client"):
        off, on = client_side(n, rounds)
        print(f"{build} client: off {off:.2f} µs/msg, on {on:.2f} µs/msg, +{on - off:.2f}")
    if only in ("both", "broker"):
        off, on = broker_side(n, rounds)
        print(f"{build} broker: off {off:.2f} µs/msg, on {on:.2f} µs/msg, +{on - off:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "both")
