"""TCP proxies in front of DLedger nodes' Raft ports, able to cut links (in one direction).

Every node reaches a peer at the address ``dLegerPeers`` gives it, which here is the peer's
proxy; the peer listens behind it (``dLegerListenPort``). A node sends everything for a peer
on its own connection, opened with a Hello naming it, so the proxy in front of ``to`` knows
each connection's sender: blocking the link ``a -> b`` closes a's connections through b's
proxy and refuses new ones. The proxies run on their own event loop in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from ariane.dledger.wire import Hello, decode_frame


class RaftProxies:
    """One proxy per node: ``listen_ports[node]`` forwards to ``target_ports[node]``."""

    def __init__(self, listen_ports: dict[str, int], target_ports: dict[str, int]) -> None:
        self.listen_ports = listen_ports
        self.target_ports = target_ports
        self.blocked: set[tuple[str, str]] = set()
        self._conns: dict[tuple[str, str], set[asyncio.StreamWriter]] = {}
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        for node in listen_ports:
            self._call(self._serve(node))

    def _call(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    async def _serve(self, node: str) -> None:
        server = await asyncio.start_server(
            lambda r, w: self._handle(node, r, w), "127.0.0.1", self.listen_ports[node]
        )
        self._servers.append(server)

    async def _handle(
        self, to: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        buffered = b""
        hello = None
        while hello is None:
            chunk = await reader.read(65536)
            if not chunk:
                writer.close()
                return
            buffered += chunk
            decoded = decode_frame(buffered)
            if decoded is not None:
                hello = decoded[0]
        sender = hello.node_id if isinstance(hello, Hello) else "?"
        link = (sender, to)
        if link in self.blocked:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_ports[to])
        except OSError:
            writer.close()
            return
        conns = self._conns.setdefault(link, set())
        conns.update({writer, up_writer})
        up_writer.write(buffered)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        conns.discard(writer)
        conns.discard(up_writer)

    def block(self, *links: tuple[str, str]) -> None:
        """Cut ``a -> b`` for every given pair (messages from a no longer reach b)."""

        async def go() -> None:
            for link in links:
                self.blocked.add(link)
                for w in list(self._conns.get(link, ())):
                    w.close()

        self._call(go())

    def isolate(self, node: str) -> None:
        """Cut every link to and from ``node``."""
        others = [n for n in self.listen_ports if n != node]
        self.block(*[(node, o) for o in others], *[(o, node) for o in others])

    def heal(self) -> None:
        """Let everything through again."""

        async def go() -> None:
            self.blocked.clear()

        self._call(go())

    def close(self) -> None:
        async def go() -> None:
            for server in self._servers:
                server.close()
                await server.wait_closed()
            for conns in self._conns.values():
                for w in conns:
                    w.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._call(go())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
