"""The client process's collector (issue 18): the first client instance to start collects and
freezes what is alive (``ClientConfig.gc_freeze_on_start``, on by default), once per process;
False leaves the collector alone, for the asyncio classes and the blocking wrappers alike."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ariane
import ariane.client._instance as instance_module
from ariane.client._instance import ClientInstance
from ariane.client.config import ClientConfig


def _start_and_close(config: ClientConfig) -> None:
    async def go() -> None:
        instance = ClientInstance.acquire(config)
        await instance.start()
        await instance.start()  # idempotent
        await instance.release()

    asyncio.run(go())


def test_starting_an_instance_settles_the_collector_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(instance_module, "settle_client_process", lambda: calls.append("s"))
    _start_and_close(ClientConfig(namesrv_addr="127.0.0.1:9876", instance_name="a"))
    assert calls == ["s"]
    _start_and_close(
        ClientConfig(namesrv_addr="127.0.0.1:9876", instance_name="b", gc_freeze_on_start=False)
    )
    assert calls == ["s"]


def test_the_option_is_on_by_default_and_not_part_of_the_identity() -> None:
    on = ClientConfig(namesrv_addr="127.0.0.1:9876")
    off = ClientConfig(namesrv_addr="127.0.0.1:9876", gc_freeze_on_start=False)
    assert on.gc_freeze_on_start is True
    assert on == off


_CHILD = textwrap.dedent(
    """
    import asyncio, gc, json, sys
    from ariane.client._instance import ClientInstance
    from ariane.client.config import ClientConfig
    from ariane.client.sync import SyncProducer

    freeze = sys.argv[1] == "on"
    counts = [gc.get_freeze_count()]

    async def go(name):
        config = ClientConfig(namesrv_addr="127.0.0.1:9", instance_name=name,
                              gc_freeze_on_start=freeze)
        instance = ClientInstance.acquire(config)
        await instance.start()
        counts.append(gc.get_freeze_count())
        await instance.release()

    asyncio.run(go("first"))
    asyncio.run(go("second"))  # another instance, another loop: nothing more is frozen
    producer = SyncProducer("G", client_config=ClientConfig(
        namesrv_addr="127.0.0.1:9", instance_name="sync", gc_freeze_on_start=freeze))
    producer.start()
    counts.append(gc.get_freeze_count())
    producer.shutdown()
    print(json.dumps(counts))
    """
)


_SRC = str(Path(ariane.__file__).resolve().parent.parent)


def _child_counts(mode: str) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode],
        env={**os.environ, "PYTHONPATH": _SRC},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_fresh_process_freezes_its_start_up_objects_once() -> None:
    before, first, second, blocking = _child_counts("on")
    assert before == 0
    assert first > 10_000  # the imports: ~30,000 objects
    assert second <= first
    assert blocking <= first


def test_opting_out_freezes_nothing_in_the_asyncio_classes_and_the_blocking_wrappers() -> None:
    assert _child_counts("off") == [0, 0, 0, 0]
