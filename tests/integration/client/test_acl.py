"""Plain ACL on a real broker process: signed producers and consumers, refusals with the
broker's reason, the ACL admin requests, hot reload and a broken file."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ariane.admin.cli import admin as admin_cli
from ariane.client import (
    AccessDeniedError,
    Admin,
    ClientConfig,
    Message,
    PlainAccessConfig,
    Producer,
    PushConsumer,
    SessionCredentials,
    SimpleConsumer,
    TopicNotWritableError,
)
from ariane.client._pop_api import receipt_handle_of
from ariane.common.pop import RETRY_FLAG_NORMAL
from tests.integration.client.conftest import run, wait_for_route
from tests.integration.client.consumer_support import Collector, fast_config
from tests.support.cluster import Cluster
from tests.support.polling import await_until

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("acl-broker")]

ADMIN = SessionCredentials("adminuser", "admin-secret")
PRODUCER = SessionCredentials("producer1", "producer-secret")
CONSUMER = SessionCredentials("consumer1", "consumer-secret")

RULES = {
    "globalWhiteRemoteAddresses": [],
    "accounts": [
        {"accessKey": "adminuser", "secretKey": "admin-secret", "admin": True},
        {
            "accessKey": "producer1",
            "secretKey": "producer-secret",
            "defaultTopicPerm": "DENY",
            "topicPerms": ["AclOrders=PUB", "AclAudit=DENY", "AclPush=PUB", "AclPop=PUB"],
        },
        {
            "accessKey": "consumer1",
            "secretKey": "consumer-secret",
            "defaultGroupPerm": "DENY",
            "topicPerms": ["AclOrders=SUB", "AclPush=SUB", "AclPop=SUB"],
            "groupPerms": ["acl_consumers=SUB"],
        },
    ],
}


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    root = tmp_path_factory.mktemp("acl-cluster")
    home = root / "home"
    (home / "conf" / "acl").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(RULES), encoding="utf-8")
    cluster = Cluster(root / "cluster")
    try:
        cluster.start(aclEnable="true", rocketmqHome=home, aclWatchIntervalMs=100)
        run(_create_topics(cluster))
        yield cluster, home
    finally:
        cluster.stop()


async def _create_topics(cluster: Cluster) -> None:
    async with Admin(namesrv_addr=cluster.namesrv_addr, credentials=ADMIN) as admin:
        # AclPush and AclPop are each read by one test that checks it gets exactly what it
        # sent: the other tests send to AclOrders, in whatever order the tests run
        for topic in ("AclOrders", "AclAudit", "AclPush", "AclPop"):
            await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
            await wait_for_route(admin, topic)


def _config(cluster: Cluster, instance: str, creds: SessionCredentials | None) -> ClientConfig:
    return dataclasses.replace(fast_config(cluster, instance), credentials=creds)


async def _refusal(cluster: Cluster, creds: SessionCredentials | None, topic: str) -> str:
    producer = Producer("acl_pg", client_config=_config(cluster, f"r{id(creds)}{topic}", creds))
    async with producer:
        with pytest.raises(AccessDeniedError) as info:
            await producer.send(Message(topic, b"x"))
    assert info.value.code == 1
    assert info.value.remark == f"org.apache.rocketmq.acl.common.AclException: {info.value.reason}"
    return info.value.reason


def test_signed_clients_produce_and_consume_exactly(acl_cluster: tuple[Cluster, Path]) -> None:
    cluster, _ = acl_cluster

    async def go() -> None:
        bodies = [f"order-{i}".encode() for i in range(20)]
        async with Producer("acl_pg", client_config=_config(cluster, "p", PRODUCER)) as producer:
            results = [await producer.send(Message("AclPush", b)) for b in bodies]
        sent = {r.msg_id: b for r, b in zip(results, bodies, strict=True)}
        collector = Collector()
        consumer = PushConsumer("acl_consumers", client_config=_config(cluster, "c", CONSUMER))
        consumer.subscribe("AclPush", "*")
        consumer.register_message_listener(collector)
        await consumer.start()
        try:
            await await_until(lambda: len(collector.got) >= len(bodies), what="20 messages")
        finally:
            await consumer.close()
        assert {m.msg_id: m.body for m in collector.got} == sent

    run(go())


def _simple(cluster: Cluster, group: str, creds: SessionCredentials | None) -> SimpleConsumer:
    return SimpleConsumer(
        group, {"AclPop": "*"}, client_config=_config(cluster, f"s{group}{id(creds)}", creds),
        await_duration_ms=500, consume_from_max=False,
    )  # fmt: skip


def test_simple_consumer_pops_under_acl(acl_cluster: tuple[Cluster, Path]) -> None:
    """POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME are signed and checked: the
    topic and the group need SUB (the redelivered message's ack names the POP retry topic,
    which stands for AclPop); accounts without them are refused and see nothing."""
    cluster, _ = acl_cluster

    async def go() -> None:
        # refused first, so nothing of this test's messages can leak to them
        for group, creds, reason in (
            ("acl_consumers", None, "No accessKey is configured"),
            ("acl_consumers", PRODUCER, "No permission for topic:AclPop (accessKey=producer1)"),
            (
                "acl_strangers",
                CONSUMER,
                "No default permission for group:acl_strangers (accessKey=consumer1)",
            ),
        ):
            async with _simple(cluster, group, creds) as refused:
                with pytest.raises(AccessDeniedError) as info:
                    await refused.receive(8)
                assert info.value.reason == reason
        bodies = [f"pop-{i}".encode() for i in range(6)]
        async with Producer("acl_pg", client_config=_config(cluster, "pp", PRODUCER)) as producer:
            results = [await producer.send(Message("AclPop", b)) for b in bodies]
        sent = {r.msg_id: b for r, b in zip(results, bodies, strict=True)}
        async with _simple(cluster, "acl_consumers", CONSUMER) as consumer:
            got: dict[str, bytes] = {}
            retried: list[str] = []
            kept = None
            deadline = time.monotonic() + 60
            while len(got) < len(sent):
                assert time.monotonic() < deadline, f"received {len(got)} of {len(sent)}"
                for msg in await consumer.receive(8, invisible_duration_ms=20_000):
                    if msg.msg_id in sent and kept is None:
                        kept = msg  # given back: comes again through the POP retry topic
                        await consumer.change_invisible_duration(msg, 0)
                        continue
                    got[msg.msg_id] = msg.body
                    if receipt_handle_of(msg).retry_flag != RETRY_FLAG_NORMAL:
                        retried.append(msg.msg_id)
                    await consumer.ack(msg)
            assert got == sent
            assert kept is not None
            assert retried == [kept.msg_id]
            assert await consumer.receive(8) == []

    run(go())


def test_refusals_name_what_was_missing(acl_cluster: tuple[Cluster, Path]) -> None:
    cluster, _ = acl_cluster

    async def go() -> None:
        assert await _refusal(cluster, None, "AclOrders") == "No accessKey is configured"
        stranger = SessionCredentials("stranger1", "whatever1")
        assert await _refusal(cluster, stranger, "AclOrders") == "No acl config for stranger1"
        wrong = SessionCredentials("producer1", "not-the-secret")
        assert (
            await _refusal(cluster, wrong, "AclOrders")
            == "Check signature failed for accessKey=producer1"
        )
        assert (
            await _refusal(cluster, PRODUCER, "AclAudit")
            == "No permission for topic:AclAudit (accessKey=producer1)"
        )
        assert (
            await _refusal(cluster, CONSUMER, "AclOrders")
            == "No permission for topic:AclOrders (accessKey=consumer1)"
        )
        # the broker kept serving everyone else
        async with Producer("acl_pg", client_config=_config(cluster, "p2", PRODUCER)) as producer:
            assert (await producer.send(Message("AclOrders", b"still fine"))).ok
        async with Admin(namesrv_addr=cluster.namesrv_addr, credentials=PRODUCER) as admin:
            with pytest.raises(AccessDeniedError) as info:
                await admin.create_topic("AclNew", broker_addr=cluster.broker_addr())
            assert info.value.reason == (
                "Need admin permission for request code=17, but accessKey=producer1 is not"
            )

    run(go())


def test_admin_requests_edit_the_file_and_take_effect(acl_cluster: tuple[Cluster, Path]) -> None:
    cluster, home = acl_cluster
    addr = cluster.broker_addr()
    fresh = SessionCredentials("newproducer", "new-secret-1")

    async def go() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr, credentials=ADMIN) as admin:
            before = await admin.acl_version(addr)
            await admin.update_acl_account(
                addr,
                PlainAccessConfig("newproducer", "new-secret-1", topic_perms=("AclOrders=PUB",)),
            )
            after = await admin.acl_version(addr)
            assert after.version.counter == before.version.counter + 1
            plain = str(home / "conf" / "plain_acl.yml")
            assert after.file_versions[plain].counter == after.version.counter
            config = await admin.acl_config(addr)
            assert {a.access_key for a in config.accounts} == {
                "adminuser", "producer1", "consumer1", "newproducer"
            }  # fmt: skip
            async with Producer("acl_pg", client_config=_config(cluster, "np", fresh)) as p:
                assert (await p.send(Message("AclOrders", b"new account"))).ok
            with pytest.raises(Exception, match="must be PUB, SUB"):
                await admin.update_acl_account(
                    addr, PlainAccessConfig("badperm1", "12345678", topic_perms=("T=ALL",))
                )
            await admin.delete_acl_account(addr, "newproducer")
            assert await _refusal(cluster, fresh, "AclOrders") == "No acl config for newproducer"
            await admin.update_global_white_addrs(addr, ["127.0.0.*"])
            async with Producer("acl_pg", client_config=_config(cluster, "anon", None)) as p:
                assert (await p.send(Message("AclAudit", b"white listed"))).ok
            await admin.update_global_white_addrs(addr, [])
            assert await _refusal(cluster, None, "AclOrders") == "No accessKey is configured"
        saved = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text(encoding="utf-8"))
        assert saved["globalWhiteRemoteAddresses"] == []
        assert "newproducer" not in {a["accessKey"] for a in saved["accounts"]}
        assert saved["dataVersion"][0]["counter"] == after.version.counter + 3
        async with Admin(namesrv_addr=cluster.namesrv_addr, credentials=PRODUCER) as admin:
            with pytest.raises(
                AccessDeniedError, match="Need admin permission for request code=54"
            ):
                await admin.acl_config(addr)

    run(go())


def test_hand_edits_reload_and_a_broken_file_keeps_the_old_rules(
    acl_cluster: tuple[Cluster, Path],
) -> None:
    cluster, home = acl_cluster
    extra = home / "conf" / "acl" / "team.yml"
    team = SessionCredentials("teamuser", "team-secret")

    async def can_send(creds: SessionCredentials) -> bool:
        producer = Producer("acl_pg", client_config=_config(cluster, f"t{time.monotonic()}", creds))
        async with producer:
            try:
                return (await producer.send(Message("AclOrders", b"t"))).ok
            except AccessDeniedError:
                return False

    async def eventually(expected: bool, creds: SessionCredentials) -> None:
        # the broker looks every 100 ms; the deadline only bounds a broken run (a loaded
        # machine may take seconds to start the producers probing here)
        deadline = time.monotonic() + 20.0
        while await can_send(creds) != expected:
            assert time.monotonic() < deadline, f"still {not expected} after 20 s"
            await asyncio.sleep(0.05)

    def broken_file_seen() -> bool:
        return "team.yml: not valid YAML" in cluster.brokers["broker-a"].output()

    async def go() -> None:
        account = {
            "accessKey": "teamuser",
            "secretKey": "team-secret",
            "topicPerms": ["AclOrders=PUB"],
        }
        extra.write_text(yaml.safe_dump({"accounts": [account]}), encoding="utf-8")
        await eventually(True, team)
        extra.write_text("accounts: [ {accessKey: teamuser", encoding="utf-8")  # broken
        await await_until(broken_file_seen, what="the broker to read the broken file")
        assert await can_send(team)  # the old rules of that file stay
        changed = dataclasses.replace(team, secret_key="team-secret-2")
        account["secretKey"] = changed.secret_key
        extra.write_text(yaml.safe_dump({"accounts": [account]}), encoding="utf-8")
        await eventually(True, changed)
        assert not await can_send(team)
        extra.unlink()
        await eventually(False, changed)

    run(go())


def test_sends_refused_by_permission_say_why(acl_cluster: tuple[Cluster, Path]) -> None:
    """Issue 20 item 6: never a bare "no route info" when a permission forbids the send."""
    cluster, _ = acl_cluster

    async def go() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr, credentials=ADMIN) as admin:
            await admin.create_topic("AclReadOnly", read_queue_nums=2, write_queue_nums=2, perm=4)
            await wait_for_route(admin, "AclReadOnly")
        async with Producer("acl_pg", client_config=_config(cluster, "ro", ADMIN)) as producer:
            with pytest.raises(TopicNotWritableError) as info:
                await producer.send(Message("AclReadOnly", b"x"))
        assert str(info.value) == (
            "topic 'AclReadOnly' is not writable: every queue of its route is read-only "
            "(broker-a:perm=4): the topic's perm, its brokers' brokerPermission or "
            "wipeWritePerm forbids writes"
        )
        assert "no route info" not in str(info.value).lower()

    run(go())


def _mqadmin(home: Path | None, *args: str) -> tuple[int, str, str]:
    env = {"ROCKETMQ_HOME": str(home)} if home is not None else {"ROCKETMQ_HOME": ""}
    result = CliRunner().invoke(admin_cli, list(args), prog_name="mqadmin", env=env)
    return result.exit_code, result.stdout, result.stderr


def test_mqadmin_acl_commands_with_flags_and_tools_yml(
    acl_cluster: tuple[Cluster, Path], tmp_path: Path
) -> None:
    cluster, home = acl_cluster
    ns = ["-n", cluster.namesrv_addr]
    flags = ["--ak", "adminuser", "--sk", "admin-secret"]
    code, out, err = _mqadmin(None, "clusterAclConfigVersion", "-c", "DefaultCluster", *ns)
    assert code == 1
    assert err.strip().endswith("No accessKey is configured")
    assert len(err.strip().splitlines()) == 1
    code, out, err = _mqadmin(
        None, "updateAclConfig", "-c", "DefaultCluster", "-a", "cliaccount", "-s", "cli-secret-1",
        "-t", "AclOrders=PUB,AclAudit=DENY", "-u", "SUB", "-m", "false", *ns, *flags,
    )  # fmt: skip
    assert code == 0, err
    assert f"create or update plain access config to {cluster.broker_addr()} success." in out
    assert "cli-secret-1" not in out
    # tools.yml holds the admin account: no flags needed
    tools_home = tmp_path / "tools-home"
    (tools_home / "conf").mkdir(parents=True)
    (tools_home / "conf" / "tools.yml").write_text(
        "accessKey: adminuser\nsecretKey: admin-secret\n"
    )
    code, out, err = _mqadmin(
        tools_home, "getAclConfig", "-b", cluster.broker_addr(), "--json", *ns
    )
    assert code == 0, err
    accounts = {
        a["accessKey"]: a for a in json.loads(out)["brokers"][cluster.broker_addr()]["accounts"]
    }
    assert accounts["cliaccount"]["topicPerms"] == ["AclOrders=PUB", "AclAudit=DENY"]
    assert accounts["cliaccount"]["defaultGroupPerm"] == "SUB"
    code, out, err = _mqadmin(
        tools_home, "clusterAclConfigVersion", "-c", "DefaultCluster", "--json", *ns
    )
    assert code == 0, err
    versions = json.loads(out)["versions"]
    assert {v["aclFilePath"] for v in versions} >= {str(home / "conf" / "plain_acl.yml")}
    code, out, err = _mqadmin(
        tools_home, "updateGlobalWhiteAddr", "-b", cluster.broker_addr(), "-g", "10.1.1.*,fe80::*", *ns
    )  # fmt: skip
    assert code == 0, err
    code, out, err = _mqadmin(
        tools_home, "updateGlobalWhiteAddr", "-b", cluster.broker_addr(), "-g", "", "-p", "/etc/x.yml", *ns
    )  # fmt: skip
    assert code == 1
    assert "is not an ACL file of this broker" in err
    code, out, err = _mqadmin(
        tools_home, "updateGlobalWhiteAddr", "-b", cluster.broker_addr(), "-g", "", *ns
    )
    assert code == 0, err
    code, out, err = _mqadmin(
        tools_home, "deleteAclConfig", "-c", "DefaultCluster", "-a", "cliaccount", *ns
    )
    assert code == 0, err
    assert "account's accesskey is:cliaccount" in out
    code, out, err = _mqadmin(
        tools_home, "deleteAclConfig", "-c", "DefaultCluster", "-a", "cliaccount", *ns
    )
    assert code == 1
    assert "no ACL file defines accessKey 'cliaccount'" in err
    code, out, err = _mqadmin(None, "getAclConfig", "-b", cluster.broker_addr(), "--ak", "x", *ns)
    assert code == 2
    assert "give both --ak and --sk" in err
    # a plain account is refused the admin requests
    code, out, err = _mqadmin(
        None, "getAclConfig", "-b", cluster.broker_addr(), "--aclAccessKey", "producer1",
        "--aclSecretKey", "producer-secret", *ns,
    )  # fmt: skip
    assert code == 1
    assert "Need admin permission for request code=54" in err
