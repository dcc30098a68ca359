"""The replication block of broker.conf: roles, ids, HA ports and limits."""

from __future__ import annotations

import pytest

from ariane.broker.config import load_properties
from ariane.common.roles import BrokerRole, parse_role
from ariane.errors import ConfigError


def test_roles_and_ids() -> None:
    slave = load_properties({"brokerRole": "slave", "brokerId": "2", "listenPort": "10921"})
    assert slave.broker.role is BrokerRole.SLAVE
    assert slave.broker.effective_ha_listen_port == 10922
    assert slave.unknown == []
    assert slave.ignored == []
    sync = load_properties({"brokerRole": "SYNC_MASTER", "haListenPort": "20000"})
    assert sync.broker.role is BrokerRole.SYNC_MASTER
    assert sync.broker.role.is_master
    assert sync.broker.effective_ha_listen_port == 20000
    free = load_properties({"listenPort": "0"})
    assert free.broker.role is BrokerRole.ASYNC_MASTER
    assert free.broker.effective_ha_listen_port == 0
    props = slave.broker.to_properties()
    assert props["brokerRole"] == "SLAVE"
    assert props["haMasterAddress"] == ""
    assert load_properties(props).broker == slave.broker


@pytest.mark.parametrize(
    ("props", "key", "text"),
    [
        ({"brokerRole": "LEADER"}, "brokerRole", "ASYNC_MASTER, SYNC_MASTER or SLAVE"),
        ({"brokerRole": "SLAVE"}, "brokerId", "a SLAVE needs a brokerId > 0"),
        ({"brokerRole": "SYNC_MASTER", "brokerId": "1"}, "brokerId", "brokerRole=SLAVE"),
        ({"haListenPort": "-2"}, "haListenPort", "-1"),
        ({"haTransferBatchSize": "0"}, "haTransferBatchSize", "1..64 MiB"),
        ({"inSyncReplicas": "0"}, "inSyncReplicas", ">= 1"),
        ({"haMasterAddress": "nohost"}, "haMasterAddress", "bad address"),
        ({"slaveSynchronizeInterval": "0"}, "slaveSynchronizeInterval", "> 0"),
    ],
)
def test_bad_replication_values_name_their_key(props: dict[str, str], key: str, text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_properties(props)
    assert info.value.key == key
    assert text in str(info.value)


def test_parse_role() -> None:
    assert parse_role(" sync_master ") is BrokerRole.SYNC_MASTER
    assert BrokerRole.SLAVE.is_slave
    assert not BrokerRole.SLAVE.is_master
    with pytest.raises(ValueError, match="got 'x'"):
        parse_role("x")
