"""A broker wired to a real store in a temp directory, driven through its dispatcher with fake
connections (no sockets)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from ariane.broker.config import BrokerConfig
from ariane.broker.controller import BrokerController
from ariane.common.batch import encode_batch
from ariane.common.clock import ManualClock
from ariane.common.properties import encode_properties
from ariane.errors import ConnectionClosedError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import (
    ConsumerData,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import LanguageCode, MQVersion, RemotingCommand
from tests.unit.store.helpers import small_config

_ids = itertools.count(1)


class FakeChannel:
    """Just enough of ``Channel`` for the dispatcher and the broker."""

    def __init__(self, addr: str = "127.0.0.1:50000") -> None:
        self.id = next(_ids)
        self.remote_addr = addr
        self.attributes: dict[str, Any] = {}
        self.sent: list[RemotingCommand] = []
        self.oneway: list[RemotingCommand] = []
        self.is_active = True

    def send(self, cmd: RemotingCommand) -> bool:
        if not self.is_active:
            return False
        self.sent.append(cmd)
        return True

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        if not self.is_active:
            raise ConnectionClosedError("closed")
        cmd.mark_oneway()
        self.oneway.append(cmd)

    def close(self) -> None:
        self.is_active = False

    def begin_async(self) -> None:
        pass

    def end_async(self) -> None:
        pass


class Broker:
    """A BrokerController with its processors registered, no network."""

    def __init__(self, root: Path, **config: Any) -> None:
        self.clock = ManualClock()
        store_overrides = config.pop("store", {})
        cfg = BrokerConfig(broker_name="broker-a", listen_port=10911, **config)
        self.c = BrokerController(cfg, small_config(root, **store_overrides), clock=self.clock)
        self.channel = FakeChannel()

    async def start(self) -> Broker:
        await self.c.load()
        self.c.serve(10911)
        return self

    async def stop(self) -> None:
        await self.c.hold.stop()
        await self.c.registration.stop()  # a topic created by a test schedules one
        self.c.timer.shutdown()
        for file in (self.c.topics.file, self.c.groups.file):
            if file._task is not None:
                await file._task
        self.c.store.shutdown()

    async def call(
        self,
        code: int,
        ext: dict[str, str] | h.CommandHeader | None = None,
        body: bytes | None = None,
        channel: FakeChannel | None = None,
        *,
        version: int = MQVersion.V5_3_3,
        language: LanguageCode = LanguageCode.JAVA,
        expect_answer: bool = True,
    ) -> RemotingCommand | None:
        """Dispatch one request; return its answer (waiting for async processors)."""
        ch = channel or self.channel
        fields = ext.to_ext_fields() if isinstance(ext, h.CommandHeader) else dict(ext or {})
        request = RemotingCommand.request(code, fields, body)
        request.version = version
        request.language = language
        before = len(ch.sent)
        self.c.remoting.dispatcher.handle_request(ch, request)  # type: ignore[arg-type]
        for _ in range(200):
            if len(ch.sent) > before:
                break
            await asyncio.sleep(0)
            tasks = self.c.remoting.dispatcher.tasks
            if tasks:
                await asyncio.gather(*tasks)
        if not expect_answer:
            assert len(ch.sent) == before, "expected no answer yet"
            return None
        (response,) = ch.sent[before:]
        assert response.opaque == request.opaque
        return response

    async def answer(self, *args: Any, **kwargs: Any) -> RemotingCommand:
        response = await self.call(*args, **kwargs)
        assert response is not None
        return response

    def send_header(
        self, topic: str, queue_id: int = 0, properties: str = "", **extra: Any
    ) -> h.SendMessageRequestHeader:
        return h.SendMessageRequestHeader(
            producer_group="PG",
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=queue_id,
            sys_flag=0,
            born_timestamp=self.clock.now_ms(),
            flag=0,
            properties=properties,
            **extra,
        )

    async def send(
        self,
        topic: str,
        body: bytes = b"hello",
        *,
        queue_id: int = 0,
        tags: str | None = None,
        keys: str | None = None,
        props: dict[str, str] | None = None,
        reconsume_times: int | None = None,
        v2: bool = True,
        channel: FakeChannel | None = None,
    ) -> RemotingCommand:
        p = dict(props or {})
        if tags is not None:
            p["TAGS"] = tags
        if keys is not None:
            p["KEYS"] = keys
        header = self.send_header(
            topic, queue_id, encode_properties(p), reconsume_times=reconsume_times
        )
        if v2:
            r = await self.answer(RequestCode.SEND_MESSAGE_V2, header.to_v2(), body, channel)
        else:
            r = await self.answer(RequestCode.SEND_MESSAGE, header, body, channel)
        self.c.store.wait_dispatched()  # make it visible to pulls at once
        return r

    async def send_batch(
        self, topic: str, bodies: list[bytes], queue_id: int = 0
    ) -> RemotingCommand:
        header = self.send_header(topic, queue_id, batch=True).to_v2()
        body = encode_batch((b, 0, {"UNIQ_KEY": f"U{i}"}) for i, b in enumerate(bodies))
        r = await self.answer(RequestCode.SEND_BATCH_MESSAGE, header, body)
        self.c.store.wait_dispatched()
        return r

    def pull_header(
        self,
        topic: str,
        group: str = "G",
        *,
        queue_id: int = 0,
        offset: int = 0,
        sys_flag: int = 0x4 | 0x2,
        subscription: str = "*",
        suspend_ms: int = 15000,
        commit_offset: int = 0,
        max_nums: int = 32,
    ) -> h.PullMessageRequestHeader:
        return h.PullMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_timeout_millis=suspend_ms,
            sub_version=0,
            subscription=subscription,
        )

    async def heartbeat(
        self,
        client_id: str,
        group: str = "G",
        topics: tuple[str, ...] = ("T",),
        channel: FakeChannel | None = None,
        *,
        model: MessageModel = MessageModel.CLUSTERING,
        producer_group: str | None = None,
    ) -> RemotingCommand:
        data = HeartbeatData(
            client_id,
            [ProducerData(producer_group)] if producer_group else [],
            [
                ConsumerData(
                    group,
                    message_model=model,
                    subscription_data_set=[SubscriptionData.build(t, "*") for t in topics],
                )
            ]
            if group
            else [],
        )
        return await self.answer(RequestCode.HEART_BEAT, None, data.encode(), channel)


def run(coro: Any) -> Any:
    return asyncio.run(coro)
