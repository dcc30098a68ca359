"""broker.conf loading: RocketMQ names, store mapping, precedence, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ariane.broker.cli import load_config
from ariane.broker.config import BrokerConfig, load_properties, store_to_properties
from ariane.errors import ConfigError
from ariane.store import FlushDiskType


def test_rocketmq_names_map_onto_broker_and_store() -> None:
    loaded = load_properties(
        {
            "brokerClusterName": "C1",
            "brokerName": "b-1",
            "brokerId": "0",
            "namesrvAddr": "127.0.0.1:9876;127.0.0.1:9877",
            "listenPort": "0",
            "storePathRootDir": "/tmp/x",
            "flushDiskType": "sync_flush",
            "autoCreateTopicEnable": "false",
            "deleteWhen": "03;04",
            "fileReservedTime": "48",
            "diskMaxUsedSpaceRatio": "80",
            "diskSpaceWarningLevelRatio": "95",
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
            "sendMessageThreadPoolNums": "16",
            "someTypo": "1",
        }
    )
    b, s = loaded.broker, loaded.store
    assert (b.broker_cluster_name, b.broker_name, b.listen_port) == ("C1", "b-1", 0)
    assert b.namesrv_addresses == ["127.0.0.1:9876", "127.0.0.1:9877"]
    assert not b.auto_create_topic_enable
    assert s.store_path_root_dir == "/tmp/x"
    assert s.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert (s.delete_when, s.file_reserved_time_hours) == ("03;04", 48)
    assert s.disk_space_warning_level_ratio == pytest.approx(0.95)
    assert loaded.unknown == ["someTypo"]
    assert loaded.ignored == ["sendMessageThreadPoolNums"]
    props = store_to_properties(s)
    assert props["diskSpaceWarningLevelRatio"] == "95"
    assert props["flushDiskType"] == "SYNC_FLUSH"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("listenPort", "70000"),
        ("listenPort", "ten"),
        ("brokerId", "-1"),
        ("brokerId", "1"),
        ("brokerPermission", "99"),
        ("defaultTopicQueueNums", "0"),
        ("namesrvAddr", "nohostport"),
        ("brokerName", "bad name"),
        ("autoCreateTopicEnable", "yes"),
        ("flushDiskType", "SOMETIMES"),
        ("deleteWhen", "25"),
        ("diskSpaceWarningLevelRatio", "300"),
        ("mappedFileSizeCommitLog", "1024"),
        ("fileReservedTime", "-3"),
    ],
)
def test_bad_values_name_their_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_properties({key: value})
    expected = "mappedFileSizeCommitLog" if key == "mappedFileSizeCommitLog" else key
    assert str(info.value).startswith(expected) or info.value.key == expected


def test_advertised_host() -> None:
    assert BrokerConfig().advertised_host == "127.0.0.1"
    assert BrokerConfig(bind_address="0.0.0.0").advertised_host == "127.0.0.1"
    assert BrokerConfig(bind_address="0.0.0.0", broker_ip1="10.1.1.1").advertised_host == "10.1.1.1"


def test_precedence_file_env_overrides_flags(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    root = tmp_path / "store"
    conf.write_text(f"storePathRootDir={root}\nbrokerPermission=6\nlistenPort=1234\n")
    loaded = load_config(str(conf), {}, {"NAMESRV_ADDR": "127.0.0.1:1"})
    assert loaded.broker.namesrv_addr == "127.0.0.1:1"
    (root / "config").mkdir(parents=True)
    (root / "config" / "broker.properties").write_text(
        "brokerPermission=4\nstorePathRootDir=/elsewhere\n"
    )
    loaded = load_config(str(conf), {"listenPort": "0"}, {})
    assert loaded.broker.broker_permission == 4  # saved at runtime, wins over the file
    assert loaded.store.store_path_root_dir == str(root)  # the root itself is never overridden
    assert loaded.broker.listen_port == 0  # flags win


def test_missing_or_unreadable_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(str(tmp_path / "nope.conf"), {}, {})
    bad = tmp_path / "bad.conf"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(bad), {}, {})
