"""The broker rows of ``ariane bench micro``: a whole send request through the server's path.

How it works: :class:`InProcessBroker` loads a ``BrokerController`` on a temporary store
(ASYNC_FLUSH, 128 MiB CommitLog files, everything else default) in its own event loop, wires
its processors as a served broker does (``serve``: no socket is opened) and opens one server
``Channel`` on a transport that only counts what it is given. A timed call hands that channel
the bytes of one encoded request (``Channel.data_received``), so one call is the server's
whole work for it on the event-loop thread: frame decode, dispatcher and hooks, send
processor, store put, answer encode and the channel's write. The store's dispatch thread
(ConsumeQueue and index) runs meanwhile, as in a broker; its CPU is not counted (the rows
are timed with this thread's CPU clock, ``time.thread_time``). ``close()`` stops the store
and removes the directory.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from ariane.broker.config import BrokerConfig
from ariane.broker.controller import BrokerController
from ariane.remoting.channel import Channel
from ariane.remoting.eventloop import loop_factory
from ariane.remoting.protocol.codec import FrameDecoder, encode
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.store.config import StoreConfig

__all__ = ["CountingTransport", "InProcessBroker", "RequestCall", "request_call"]

_PORT = 10911


class CountingTransport(asyncio.Transport):
    """A transport that keeps the last frames written (to check the answers) and counts
    the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.last: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes += 1
        self.last = [bytes(data)]

    def writelines(self, list_of_data: Any) -> None:
        self.writes += 1
        self.last = [bytes(d) for d in list_of_data]

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", _PORT)}.get(
            name, default
        )

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def answers(self) -> list[RemotingCommand]:
        """The commands of the last write."""
        return FrameDecoder().feed(b"".join(self.last))


class InProcessBroker:
    """A broker with a store in a temporary directory and one open server channel.

    Args:
        store_overrides: ``StoreConfig`` fields (tests use small files).
    """

    def __init__(self, **store_overrides: Any) -> None:
        self.root = tempfile.mkdtemp(prefix="ariane-micro-broker-")
        values: dict[str, Any] = {
            "store_path_root_dir": self.root,
            "mapped_file_size_commit_log": 128 * 1024 * 1024,
            "disk_space_warning_level_ratio": 0.99,
            "disk_space_clean_forcibly_ratio": 0.98,
        }
        values.update(store_overrides)
        self.loop = loop_factory()()
        config = BrokerConfig(broker_name="broker-a", listen_port=_PORT)
        self.controller = BrokerController(config, StoreConfig(**values))
        self.transport = CountingTransport()
        self.channel = self.loop.run_until_complete(self._start())
        self._closed = False

    async def _start(self) -> Channel:
        await self.controller.load()
        self.controller.serve(_PORT)
        channel = self.controller.remoting._new_channel()
        assert isinstance(channel, Channel)
        channel.connection_made(self.transport)
        return channel

    def feed(self, data: bytes) -> None:
        """Hand the channel received bytes (the timed step)."""
        self.channel.data_received(data)

    def request(self, request: RemotingCommand) -> RemotingCommand:
        """Send one request and return its answer (set-up and checks, not timed)."""
        self.feed(encode(request))
        (answer,) = self.transport.answers()
        if answer.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"the in-process broker refused the request: {answer.remark}")
        return answer

    def close(self) -> None:
        """Stop the store and remove its directory."""
        if self._closed:
            return
        self._closed = True
        controller = self.controller

        async def stop() -> None:
            await controller.hold.stop()
            await controller.registration.stop()
            controller.timer.shutdown()
            for file in (controller.topics.file, controller.groups.file):
                if file._task is not None:
                    await file._task

        try:
            self.loop.run_until_complete(stop())
            controller.store.shutdown()
        finally:
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)


class RequestCall:
    """The timed call of a broker row: feeds ``frame`` to the broker; ``close()`` after."""

    #: rows of this kind are timed on this thread's CPU clock
    timer: Callable[[], float] = time.thread_time

    def __init__(self, broker: InProcessBroker, frame: bytes) -> None:
        self.broker = broker
        self.frame = frame

    def __call__(self) -> list[bytes]:
        self.broker.feed(self.frame)
        return self.broker.transport.last

    def answers(self) -> list[RemotingCommand]:
        """The answers of the last call, decoded."""
        return self.broker.transport.answers()

    def close(self) -> None:
        self.broker.close()


def request_call(request: RemotingCommand, **store_overrides: Any) -> RequestCall:
    """A broker row's call: a new in-process broker answers ``request`` once (it creates the
    topic), then each call feeds the broker the same encoded request again."""
    broker = InProcessBroker(**store_overrides)
    try:
        broker.request(request)
    except BaseException:
        broker.close()
        raise
    return RequestCall(broker, encode(request))
