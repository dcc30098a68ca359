"""A stand-in for an asyncio transport under a ``Channel`` (unit tests: no sockets)."""

from __future__ import annotations

from typing import Any

__all__ = ["RecordingTransport"]


class RecordingTransport:
    """Records what a channel writes: ``writes`` holds one entry per write call (the
    buffers of a ``writelines``, or the one of a ``write``), ``data`` every byte in order."""

    def __init__(self, peer: tuple[str, int] = ("127.0.0.1", 1)) -> None:
        self.peer = peer
        self.writes: list[list[bytes]] = []

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peer if name in ("peername", "sockname") else default

    def write(self, data: bytes) -> None:
        self.writes.append([bytes(data)])

    def writelines(self, data: list[bytes]) -> None:
        self.writes.append([bytes(part) for part in data])

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    @property
    def data(self) -> bytes:
        """Every byte written so far, in order."""
        return b"".join(b"".join(call) for call in self.writes)

    def sent(self) -> list[bytes]:
        """The bytes of each write call."""
        return [b"".join(call) for call in self.writes]

    def take(self) -> list[bytes]:
        """``sent()``, then forget them."""
        out = self.sent()
        self.writes.clear()
        return out
