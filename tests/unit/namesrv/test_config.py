"""NamesrvConfig and the launcher's config assembly."""

from __future__ import annotations

from pathlib import Path

import pytest

from ariane.errors import ConfigError
from ariane.namesrv.cli import load_config
from ariane.namesrv.config import NamesrvConfig


def test_defaults_follow_rocketmq() -> None:
    config = NamesrvConfig()
    assert config.listen_port == 9876
    assert config.bind_address == "127.0.0.1"
    assert config.scan_not_active_broker_interval_ms == 10_000
    assert config.broker_channel_expired_time_ms == 120_000
    assert config.server_channel_max_idle_time_seconds == 120
    assert config.kv_config_path.endswith("namesrv/kvConfig.json")
    assert config.black_listed() == {
        "aclEnable",  # never from the wire (issue 11)
        "configBlackList",
        "configStorePath",
        "kvConfigPath",
        "rocketmqHome",
    }


def test_file_then_flags(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text(
        "listenPort=19876\nscanNotActiveBrokerInterval=500\nbrokerChannelExpiredTime=2000\n"
        "serverWorkerThreads=8\norderMessageEnable=true\nconfigBlackList=listenPort;x\n"
    )
    config = load_config(str(conf), data_dir=str(tmp_path / "data"))
    assert config.listen_port == 19876
    assert config.scan_not_active_broker_interval_ms == 500
    assert config.broker_channel_expired_time_ms == 2000
    assert config.order_message_enable
    assert config.kv_config_path == str(tmp_path / "data" / "kvConfig.json")
    assert "listenPort" in config.black_listed()
    config = load_config(str(conf), listen_port=0, host="127.0.0.2")
    assert (config.listen_port, config.bind_address) == (0, "127.0.0.2")
    conf.write_text(f"kvConfigPath={tmp_path}/elsewhere.json\n")
    assert (
        load_config(str(conf), data_dir=str(tmp_path)).kv_config_path
        == f"{tmp_path}/elsewhere.json"
    )


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("listenPort=abc", "listenPort"),
        ("listenPort=70000", "listenPort"),
        ("scanNotActiveBrokerInterval=0", "scanNotActiveBrokerInterval"),
        ("orderMessageEnable=maybe", "orderMessageEnable"),
        ("serverChannelMaxIdleTimeSeconds=-1", "serverChannelMaxIdleTimeSeconds"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, line: str, key: str) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text(line + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(conf))
    assert info.value.key == key


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.properties: config file not found$"):
        load_config(str(tmp_path / "missing.properties"))
