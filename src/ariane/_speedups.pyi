"""Types of the compiled twins in ``_speedups.c`` (see ``ariane.common.native``)."""

from collections.abc import Mapping
from typing import Any

ABI: int

def encode_properties(props: Mapping[str, str], /) -> str: ...
def decode_properties(text: str, /) -> dict[str, str]: ...
def decode_batch(data: bytes | bytearray | memoryview, entry_cls: Any, /) -> list[Any]: ...
