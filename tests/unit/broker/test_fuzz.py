"""Every request code the broker serves, with random headers and bodies: always an answer
(or a held pull), never an exception out of the dispatcher, and the broker keeps working."""

from __future__ import annotations

import asyncio
import logging
import random
import re
from pathlib import Path

import pytest

from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from tests.unit.broker.harness import Broker, FakeChannel, run

KEYS = [
    "topic", "b", "a", "e", "queueId", "consumerGroup", "group", "offset", "commitOffset",
    "queueOffset", "maxMsgNums", "sysFlag", "subscription", "suspendTimeoutMillis", "subVersion",
    "clientID", "producerGroup", "key", "maxNum", "beginTimestamp", "endTimestamp", "timestamp",
    "delayLevel", "isForce", "groupName", "readQueueNums", "writeQueueNums", "perm",
    "topicFilterType", "defaultTopic", "msgId", "clientId", "batch", "m", "properties", "i",
]  # fmt: skip
VALUES = ["", "0", "1", "-1", "T", "G", "x" * 300, "2147483648", "true", "%RETRY%G", "*", "TBW102"]
BODIES = [None, b"", b"{}", b"[]", b"\x00\xff" * 10, b'{"clientID":"c","consumerDataSet":[1]}',
          b"brokerPermission=6\n", b'{"mqSet":[{"topic":"T"}]}', bytes(range(256))]  # fmt: skip


#: SYSTEM_ERROR answers RocketMQ itself gives to *well-formed* requests for things that do not
#: exist or are switched off, kept for its clients (mqadmin and the Java/C++ SDKs read them as
#: "not found"); every other SYSTEM_ERROR fails the test.
ROCKETMQ_SYSTEM_ERRORS = re.compile(
    r"the producer group\[.*\] not exist"
    r"|no consumer for this group, "
    r"|can not find message by (the offset,|id) "
    r"|look message by offset failed, "
    r"|The Consumer <.*> (<.*> not online|Version <.*> too low)"
    r"|Target offset -?\d+ not in consume queue range"
    r"|The stats <.*> <.*> not exist"
    r"|-?\d+@.* is not exist!$"
    r"|The broker does not support consumer to filter message by "
    r"|ACL is not enabled on this broker",
    re.S,
)


def test_random_requests_never_break_the_broker(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    system_errors: list[tuple[int, dict[str, str], str | None]] = []

    async def main() -> None:
        b = await Broker(tmp_path).start()
        codes = sorted(b.c.remoting.dispatcher._processors)
        assert RequestCode.PULL_MESSAGE in codes
        assert RequestCode.HEART_BEAT in codes
        rng = random.Random(1234)
        await b.send("T", b"seed")
        disp = b.c.remoting.dispatcher
        for i in range(3000):
            code = rng.choice(codes)
            if code == RequestCode.UPDATE_BROKER_CONFIG:
                continue  # may legitimately turn the broker read-only
            fields = {rng.choice(KEYS): rng.choice(VALUES) for _ in range(rng.randint(0, 8))}
            request = RemotingCommand.request(code, fields, rng.choice(BODIES))
            ch = FakeChannel(f"127.0.0.1:{i}")
            disp.handle_request(ch, request)  # type: ignore[arg-type]
            if disp.tasks:  # their failures become responses through the dispatcher
                await asyncio.gather(*disp.tasks, return_exceptions=True)
                await asyncio.sleep(0)
            held = b.c.hold.held_count > 0
            assert len(ch.sent) == 1 or (held and not ch.sent), (code, fields, ch.sent)
            for r in ch.sent:
                assert r.is_response
                if r.code != ResponseCode.SUCCESS and r.code not in (19, 20, 21):
                    assert r.remark, f"code {code} answered {r.code} without a remark"
                expected = ROCKETMQ_SYSTEM_ERRORS.match(r.remark or "")
                if r.code == ResponseCode.SYSTEM_ERROR and not expected:
                    system_errors.append((code, fields, r.remark))
            b.c._on_channel_closed(ch)  # type: ignore[arg-type]
        assert b.c.hold.held_count == 0
        assert (await b.send("T", b"still fine")).code == ResponseCode.SUCCESS
        await b.stop()

    run(main())
    # bad input is the client's error, never the broker's: no SYSTEM_ERROR, nothing logged
    # as an error (a broker error log means it thinks something of its own broke)
    assert system_errors == []
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == []
