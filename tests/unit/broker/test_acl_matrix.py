"""The ACL matrix: every request code the broker and the NameServer serve x (no credentials,
a wrong signature, an account without permission, an account with permission, an admin, a
white-listed address), each with its expected answer.

The expectations are written out here per code family (not recomputed with the validator):
data-path codes name the topics and groups they touch, admin codes need ``admin: true``,
every other broker code needs an authenticated account, and NameServer reads need nothing.
Refusals are checked through the server's real dispatcher (the processor never runs); passes
are checked on the registered hook, so no request mutates the servers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ariane.acl.credentials import SessionCredentials, sign_fields
from ariane.acl.hook import AclHook
from ariane.namesrv.config import NamesrvConfig
from ariane.namesrv.server import NameServer
from ariane.remoting.protocol.client_bodies import (
    ConsumerData,
    HeartbeatData,
    LockBatchRequestBody,
    MessageQueue,
    SubscriptionData,
)
from ariane.remoting.protocol.codes import RequestCode as C
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody
from tests.unit.broker.harness import Broker, FakeChannel

TOPIC, GROUP = "MatrixTopic", "MatrixGroup"
RULES = {
    "globalWhiteRemoteAddresses": ["10.77.*"],
    "accounts": [
        {"accessKey": "adminuser", "secretKey": "admin-secret", "admin": True},
        {
            "accessKey": "limited1",
            "secretKey": "limited-secret",
            "topicPerms": [f"{TOPIC}=PUB|SUB"],
            "groupPerms": [f"{GROUP}=SUB"],
        },
        {
            "accessKey": "nothing1",
            "secretKey": "nothing-secret",
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "DENY",
        },
    ],
}
ADMIN = SessionCredentials("adminuser", "admin-secret")
LIMITED = SessionCredentials("limited1", "limited-secret")
NOTHING = SessionCredentials("nothing1", "nothing-secret")
FORGED = SessionCredentials("limited1", "not-the-secret")
CASES = ["anonymous", "bad_signature", "no_permission", "permitted", "admin", "white_listed"]


def _heartbeat() -> bytes:
    sub = SubscriptionData(topic=TOPIC, sub_string="*")
    consumer = ConsumerData(group_name=GROUP, subscription_data_set=[sub])
    return HeartbeatData("cid", consumer_data_set=[consumer]).encode()


def _lock() -> bytes:
    return LockBatchRequestBody(GROUP, "cid", [MessageQueue(TOPIC, "broker-a", 0)]).encode()


def _batch_ack() -> bytes:
    ack = BatchAck(GROUP, TOPIC, "0", 0, 0, 0, 1, 30_000, (0,))
    return BatchAckMessageRequestBody("broker-a", [ack]).encode()


_POP = {"topic": TOPIC, "consumerGroup": GROUP}
#: code -> (ext fields, body, what "no_permission" is refused for) of the data-path codes
DATA_PATH: dict[int, tuple[dict[str, str], bytes | None, str]] = {
    C.SEND_MESSAGE: ({"topic": TOPIC, "producerGroup": "PG"}, b"m", f"topic:{TOPIC}"),
    C.SEND_MESSAGE_V2: ({"b": TOPIC, "a": "PG"}, b"m", f"topic:{TOPIC}"),
    C.SEND_BATCH_MESSAGE: ({"b": TOPIC, "a": "PG"}, b"m", f"topic:{TOPIC}"),
    C.SEND_REPLY_MESSAGE: ({"topic": TOPIC, "producerGroup": "PG"}, b"m", f"topic:{TOPIC}"),
    C.SEND_REPLY_MESSAGE_V2: ({"b": TOPIC, "a": "PG"}, b"m", f"topic:{TOPIC}"),
    C.PULL_MESSAGE: ({"topic": TOPIC, "consumerGroup": GROUP}, None, f"topic:{TOPIC}"),
    C.LITE_PULL_MESSAGE: ({"topic": TOPIC, "consumerGroup": GROUP}, None, f"topic:{TOPIC}"),
    C.ARIANE_BULK_PULL_MESSAGE: ({"topic": TOPIC, "consumerGroup": GROUP}, None, f"topic:{TOPIC}"),
    C.QUERY_MESSAGE: ({"topic": TOPIC, "key": "k"}, None, f"topic:{TOPIC}"),
    C.HEART_BEAT: ({}, _heartbeat(), f"group:{GROUP}"),
    C.UNREGISTER_CLIENT: ({"clientID": "c", "consumerGroup": GROUP}, None, f"group:{GROUP}"),
    C.GET_CONSUMER_LIST_BY_GROUP: ({"consumerGroup": GROUP}, None, f"group:{GROUP}"),
    C.QUERY_CONSUMER_OFFSET: ({"consumerGroup": GROUP, "topic": TOPIC}, None, f"topic:{TOPIC}"),
    C.UPDATE_CONSUMER_OFFSET: ({"consumerGroup": GROUP, "topic": TOPIC}, None, f"topic:{TOPIC}"),
    C.CONSUMER_SEND_MSG_BACK: ({"group": GROUP, "originTopic": TOPIC}, None, f"group:{GROUP}"),
    C.LOCK_BATCH_MQ: ({}, _lock(), f"group:{GROUP}"),
    C.UNLOCK_BATCH_MQ: ({}, _lock(), f"group:{GROUP}"),
    C.END_TRANSACTION: ({"producerGroup": "PG", "topic": TOPIC}, None, f"topic:{TOPIC}"),
    C.GET_MAX_OFFSET: ({"topic": TOPIC, "queueId": "0"}, None, f"topic:{TOPIC}"),
    C.GET_MIN_OFFSET: ({"topic": TOPIC, "queueId": "0"}, None, f"topic:{TOPIC}"),
    C.SEARCH_OFFSET_BY_TIMESTAMP: ({"topic": TOPIC, "queueId": "0"}, None, f"topic:{TOPIC}"),
    C.GET_EARLIEST_MSG_STORETIME: ({"topic": TOPIC, "queueId": "0"}, None, f"topic:{TOPIC}"),
    C.POP_MESSAGE: (_POP, None, f"topic:{TOPIC}"),
    C.ACK_MESSAGE: (_POP, None, f"topic:{TOPIC}"),
    C.BATCH_ACK_MESSAGE: ({}, _batch_ack(), f"topic:{TOPIC}"),
    C.PEEK_MESSAGE: (_POP, None, f"topic:{TOPIC}"),
    C.CHANGE_MESSAGE_INVISIBLETIME: (_POP, None, f"topic:{TOPIC}"),
    C.NOTIFICATION: (_POP, None, f"topic:{TOPIC}"),
    C.POLLING_INFO: (_POP, None, f"topic:{TOPIC}"),
}

#: RocketMQ's five admin codes plus Ariane's (cluster changes, secrets, offset resets)
ADMIN_ONLY = {
    C.UPDATE_AND_CREATE_TOPIC, C.UPDATE_BROKER_CONFIG, C.DELETE_TOPIC_IN_BROKER,
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, C.DELETE_SUBSCRIPTIONGROUP,
    C.UPDATE_AND_CREATE_TOPIC_LIST, C.UPDATE_AND_CREATE_ACL_CONFIG, C.DELETE_ACL_CONFIG,
    C.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, C.GET_BROKER_CLUSTER_ACL_CONFIG,
    C.INVOKE_BROKER_TO_RESET_OFFSET, C.CLONE_GROUP_OFFSET, C.TRIGGER_DELETE_FILES,
    C.CLEAN_EXPIRED_CONSUMEQUEUE, C.CLEAN_UNUSED_TOPIC, C.RESUME_CHECK_HALF_MESSAGE,
    C.UPDATE_NAMESRV_CONFIG, C.PUT_KV_CONFIG, C.DELETE_KV_CONFIG, C.DELETE_TOPIC_IN_NAMESRV,
    C.REGISTER_TOPIC_IN_NAMESRV, C.WIPE_WRITE_PERM_OF_BROKER, C.ADD_WRITE_PERM_OF_BROKER,
    C.REGISTER_BROKER, C.UNREGISTER_BROKER, C.BROKER_HEARTBEAT,
}  # fmt: skip
NAMESRV_WRITES = {
    C.REGISTER_BROKER, C.UNREGISTER_BROKER, C.BROKER_HEARTBEAT, C.PUT_KV_CONFIG,
    C.DELETE_KV_CONFIG, C.UPDATE_NAMESRV_CONFIG, C.WIPE_WRITE_PERM_OF_BROKER,
    C.ADD_WRITE_PERM_OF_BROKER, C.DELETE_TOPIC_IN_NAMESRV, C.REGISTER_TOPIC_IN_NAMESRV,
}  # fmt: skip


def _request(code: int, case: str) -> tuple[RemotingCommand, str]:
    ext, body, _ = DATA_PATH.get(code, ({"topic": TOPIC, "consumerGroup": GROUP}, None, ""))
    fields = dict(ext)
    creds = {
        "bad_signature": FORGED, "no_permission": NOTHING, "permitted": LIMITED, "admin": ADMIN
    }.get(case)  # fmt: skip
    if creds is not None:
        sign_fields(fields, body, creds)
    addr = "10.77.3.4:5000" if case == "white_listed" else "127.0.0.1:5000"
    return RemotingCommand.request(code, fields, body), addr


def _expected(code: int, case: str, *, namesrv: bool) -> str | None:
    """The refusal reason expected, or None for "let through"."""
    if namesrv and code not in NAMESRV_WRITES:
        return None
    if case in ("admin", "white_listed"):
        return None
    if case == "anonymous":
        return "No accessKey is configured"
    if case == "bad_signature":
        return "Check signature failed for accessKey=limited1"
    account = "nothing1" if case == "no_permission" else "limited1"
    if code in ADMIN_ONLY:
        return f"Need admin permission for request code={code}, but accessKey={account} is not"
    if code in DATA_PATH and case == "no_permission":
        return f"No default permission for {DATA_PATH[code][2]} (accessKey=nothing1)"
    return None


def _check(hook: AclHook, dispatch: object, code: int, case: str, *, namesrv: bool) -> None:
    request, addr = _request(code, case)
    expected = _expected(code, case, namesrv=namesrv)
    channel = FakeChannel(addr)
    if expected is None:
        assert hook.before_request(channel, request) is None, (code, case)  # type: ignore[arg-type]
        return
    dispatch.handle_request(channel, request)  # type: ignore[attr-defined]
    (response,) = channel.sent
    assert response.code == 1, (code, case)
    assert response.remark == f"org.apache.rocketmq.acl.common.AclException: {expected}", (
        code, case
    )  # fmt: skip


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home" / "conf").mkdir(parents=True)
    (tmp_path / "home" / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(RULES))
    return tmp_path / "home"


def _codes(dispatcher: object) -> Iterator[int]:
    yield from sorted(dispatcher._processors)  # type: ignore[attr-defined]


def test_broker_matrix(tmp_path: Path, home: Path) -> None:
    async def go() -> None:
        broker = await Broker(tmp_path / "b", acl_enable=True, rocketmq_home=str(home)).start()
        try:
            acl = broker.c.acl
            assert acl is not None
            dispatcher = broker.c.remoting.dispatcher
            assert acl.hook in dispatcher.hooks
            codes = list(_codes(dispatcher))
            assert set(DATA_PATH) <= set(codes) | {C.SEND_REPLY_MESSAGE, C.SEND_REPLY_MESSAGE_V2}
            for code in codes:
                for case in CASES:
                    _check(acl.hook, dispatcher, code, case, namesrv=False)
            assert acl.hook.refused > 0
        finally:
            await broker.stop()

    asyncio.run(go())


def test_namesrv_matrix(tmp_path: Path, home: Path) -> None:
    async def go() -> None:
        config = NamesrvConfig(
            listen_port=0,
            kv_config_path=str(tmp_path / "kv.json"),
            rocketmq_home=str(home),
            acl_enable=True,
        )
        server = NameServer(config)
        server._start_acl()
        try:
            acl = server.acl
            assert acl is not None
            dispatcher = server.remoting.dispatcher
            assert acl.hook in dispatcher.hooks
            codes = list(_codes(dispatcher))
            assert set(codes) >= NAMESRV_WRITES
            for code in codes:
                for case in CASES:
                    _check(acl.hook, dispatcher, code, case, namesrv=True)
        finally:
            await acl.stop()

    asyncio.run(go())
