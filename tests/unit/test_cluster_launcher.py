"""``ariane cluster``'s layout: names, ids, roles, ports and per-member options."""

from __future__ import annotations

import click
import pytest

from ariane.cluster import _apply_member_options, group_name, plan_members


def test_group_names() -> None:
    assert [group_name(i) for i in (0, 1, 25, 26, 27)] == [
        "broker-a", "broker-b", "broker-z", "broker-aa", "broker-ab",
    ]  # fmt: skip


def test_plan_masters_first_with_rocketmq_ports() -> None:
    members = plan_members(
        groups=2, slaves=1, cluster_name="C", master_role="SYNC_MASTER", base_port=10911,
        common={"flushDiskType": "SYNC_FLUSH", "brokerId": "7"},
    )  # fmt: skip
    assert [m.key for m in members] == ["broker-a/0", "broker-b/0", "broker-a/1", "broker-b/1"]
    a0, b0, a1, _ = members
    assert a0.props["brokerRole"] == "SYNC_MASTER"
    assert a1.props["brokerRole"] == "SLAVE"
    assert a1.props["brokerId"] == "1"  # identity wins over the common properties
    assert (a0.props["listenPort"], a0.props["haListenPort"]) == ("10911", "10912")
    assert b0.props["listenPort"] == "11011"
    assert a1.props["listenPort"] == "10921"
    assert a0.props["flushDiskType"] == "SYNC_FLUSH"
    free = plan_members(
        groups=1, slaves=2, cluster_name="C", master_role="ASYNC_MASTER", base_port=0, common={}
    )
    assert {(m.props["listenPort"], m.props["haListenPort"]) for m in free} == {("0", "0")}


def test_member_options() -> None:
    members = plan_members(
        groups=1, slaves=1, cluster_name="C", master_role="ASYNC_MASTER", base_port=0, common={}
    )
    _apply_member_options(members, ("broker-a/1:haMasterAddress=127.0.0.1:7",))
    assert members[1].props["haMasterAddress"] == "127.0.0.1:7"
    assert "haMasterAddress" not in members[0].props
    with pytest.raises(click.BadParameter, match="names no member"):
        _apply_member_options(members, ("broker-z/0:a=b",))
    with pytest.raises(click.BadParameter, match="KEY=VALUE"):
        _apply_member_options(members, ("broker-a/0:novalue",))
    with pytest.raises(click.BadParameter, match="ports past 65535"):
        plan_members(
            groups=3, slaves=1, cluster_name="C", master_role="ASYNC_MASTER", base_port=65500,
            common={},
        )  # fmt: skip
