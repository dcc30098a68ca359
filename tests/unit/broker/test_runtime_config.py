"""The closed admin plane: UPDATE_BROKER_CONFIG changes only safe keys, in range; the saved
overrides file never carries store geometry into a start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ariane.broker.cli import load_config
from ariane.broker.runtime_config import (
    LIVE_KEYS,
    RESTART_KEYS,
    check_wire_update,
    safe_overrides,
)
from ariane.common.javaprops import format_properties, parse_properties
from ariane.errors import ConfigError
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.unit.broker.harness import Broker

REFUSED = [
    "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxIndexNum", "maxHashSlotNum",
    "storePathRootDir", "listenPort", "bindAddress", "namesrvAddr", "brokerRole", "brokerId",
    "brokerName", "brokerClusterName", "flushDiskType", "aclEnable", "rocketmqHome",
    "secretKey", "accessKey", "messageDelayLevel", "brokerIP1", "noSuchKey",
]  # fmt: skip


@pytest.mark.parametrize("key", REFUSED)
def test_unsafe_keys_are_refused_naming_the_key(key: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_wire_update({"brokerPermission": "6", key: "1"})
    assert err.value.key == key
    assert "broker.conf" in str(err.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("fileReservedTime", "0"),
        ("fileReservedTime", "-5"),
        ("diskMaxUsedSpaceRatio", "99"),
        ("brokerPermission", "16"),
        ("deleteWhen", "25"),
        ("deleteWhen", "x"),
        ("shortPollingTimeMills", "abc"),
        ("longPollingEnable", "yes"),
        ("regionId", ""),
        ("maxMessageSize", "0"),
    ],
)
def test_values_are_range_checked(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_wire_update({key: value})
    assert err.value.key == key


def test_plan_splits_live_and_restart_keys() -> None:
    plan = check_wire_update(
        {"fileReservedTime": "48", "brokerPermission": "4", "deleteWhen": "04;16"}
    )
    assert plan.live == ("brokerPermission",)
    assert plan.after_restart == ("deleteWhen", "fileReservedTime")
    assert not set(LIVE_KEYS) & set(RESTART_KEYS)


def test_saved_overrides_are_filtered() -> None:
    kept, dropped = safe_overrides(
        {"mappedFileSizeCommitLog": "33554432", "fileReservedTime": "48", "fileReservedTime2": "1",
         "diskMaxUsedSpaceRatio": "0"}
    )  # fmt: skip
    assert kept == {"fileReservedTime": "48"}
    assert dropped == ["diskMaxUsedSpaceRatio", "fileReservedTime2", "mappedFileSizeCommitLog"]


def test_a_poisoned_overrides_file_never_reaches_the_store(tmp_path: Path) -> None:
    """An older version stored any key from the wire; the next start ignores the unsafe ones."""
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    (root / "config" / "broker.properties").write_text(
        format_properties({"mappedFileSizeCommitLog": "33554432", "fileReservedTime": "48"})
    )
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={root}\nmappedFileSizeCommitLog=1073741824\n")
    loaded = load_config(str(conf), {}, environ={})
    assert loaded.store.mapped_file_size_commit_log == 1073741824
    assert loaded.store.file_reserved_time_hours == 48


def test_the_wire_cannot_store_geometry_and_reports_restart_keys(tmp_path: Path) -> None:
    async def main() -> None:
        b = await Broker(tmp_path).start()
        try:
            before = b.c.store_config
            body = b"mappedFileSizeCommitLog=33554432\n"
            r = await b.answer(RequestCode.UPDATE_BROKER_CONFIG, None, body)
            assert r.code == ResponseCode.NO_PERMISSION
            assert "mappedFileSizeCommitLog" in (r.remark or "")
            assert not (tmp_path / "config" / "broker.properties").exists()
            r = await b.answer(RequestCode.UPDATE_BROKER_CONFIG, None, b"fileReservedTime=0\n")
            assert r.code == ResponseCode.INVALID_PARAMETER
            assert "fileReservedTime" in (r.remark or "")
            r = await b.answer(
                RequestCode.UPDATE_BROKER_CONFIG,
                None,
                b"fileReservedTime=48\nlongPollingEnable=false\n",
            )
            assert r.code == ResponseCode.SUCCESS
            assert r.remark == "saved, applies after a restart: fileReservedTime"
            assert b.c.store_config is before  # the running store is untouched
            assert not b.c.config.long_polling_enable  # applied at once
            saved = parse_properties((tmp_path / "config" / "broker.properties").read_text())
            assert saved == {"fileReservedTime": "48", "longPollingEnable": "false"}
        finally:
            await b.stop()

    asyncio.run(main())
