"""Request parsing per code (PlainAccessValidator.parse) and the decision (validate/checkPerm)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.acl.credentials import SessionCredentials, sign_fields
from ariane.acl.hook import AclHook
from ariane.acl.permission import ANY, DENY, PUB, SUB, check_permission, parse_perm, perm_name
from ariane.acl.plain import AclRules, parse_document
from ariane.acl.resources import parse_request
from ariane.acl.validator import check_access, decide
from ariane.remoting.protocol.client_bodies import (
    ConsumerData,
    HeartbeatData,
    LockBatchRequestBody,
    MessageQueue,
    SubscriptionData,
)
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.pop_bodies import BatchAck, BatchAckMessageRequestBody

RULES_TEXT = """
globalWhiteRemoteAddresses: ['10.99.*']
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Orders=PUB, Audit=DENY]
  - accessKey: consumer1
    secretKey: consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Orders=SUB]
    groupPerms: [Blocked=DENY]
  - accessKey: adminuser
    secretKey: admin-secret
    admin: true
  - accessKey: whiteuser
    secretKey: white-secret
    whiteRemoteAddress: 192.168.7.*
"""
RULES = AclRules.merge([parse_document(RULES_TEXT, "plain_acl.yml")])
PRODUCER = SessionCredentials("producer1", "producer-secret")
CONSUMER = SessionCredentials("consumer1", "consumer-secret")
ADMIN = SessionCredentials("adminuser", "admin-secret")


def signed(
    code: int, ext: dict[str, str], body: bytes | None, creds: SessionCredentials | None
) -> RemotingCommand:
    ext = dict(ext)
    if creds is not None:
        sign_fields(ext, body, creds)
    return RemotingCommand.request(code, ext, body)


def verdict(cmd: RemotingCommand, addr: str = "127.0.0.1:4000") -> str:
    decision = decide(RULES, parse_request(cmd.code, cmd.ext_fields, cmd.body, addr))
    return "ok" if decision.allowed else decision.reason


def test_check_permission_table() -> None:
    assert not check_permission(PUB, DENY)
    assert not check_permission(PUB, DENY | PUB)
    assert check_permission(ANY, PUB)
    assert check_permission(ANY, SUB)
    assert not check_permission(ANY, 0)
    assert check_permission(PUB, PUB | SUB)
    assert not check_permission(SUB, PUB)
    assert [parse_perm(w) for w in ("PUB", " SUB ", "PUB|SUB", "SUB|PUB", "DENY", "x", None)] == [
        PUB,
        SUB,
        PUB | SUB,
        PUB | SUB,
        DENY,
        DENY,
        DENY,
    ]
    assert [perm_name(b) for b in (PUB, SUB, PUB | SUB, DENY, 0)] == [
        "PUB",
        "SUB",
        "PUB|SUB",
        "DENY",
        "DENY",
    ]


def _heartbeat(group: str, topics: list[str]) -> bytes:
    subs = [SubscriptionData(topic=t, sub_string="*") for t in topics]
    return HeartbeatData(
        "cid", consumer_data_set=[ConsumerData(group_name=group, subscription_data_set=subs)]
    ).encode()


def _lock(group: str, topics: list[str]) -> bytes:
    return LockBatchRequestBody(group, "cid", [MessageQueue(t, "b", 0) for t in topics]).encode()


def _pop(topic: str) -> dict[str, str]:
    return {"topic": topic, "consumerGroup": "G", "queueId": "0", "extraInfo": "x", "offset": "1"}


def _batch_ack(*acks: tuple[str, str]) -> bytes:
    return BatchAckMessageRequestBody(
        "b", [BatchAck(g, t, "0", 0, 0, 0, 1, 30_000, (0,)) for g, t in acks]
    ).encode()


@pytest.mark.parametrize(
    ("code", "ext", "body", "resources"),
    [
        (RequestCode.SEND_MESSAGE, {"topic": "T", "producerGroup": "P"}, None, {"T": PUB}),
        (
            RequestCode.SEND_MESSAGE,
            {"topic": "%RETRY%G", "producerGroup": "G"},
            None,
            {"%RETRY%G": SUB},
        ),
        (RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "P"}, None, {"T": PUB}),
        (RequestCode.SEND_BATCH_MESSAGE, {"b": "T", "a": "P"}, None, {"T": PUB}),
        (RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%G", "a": "G"}, None, {"%RETRY%G": SUB}),
        (
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {"group": "G", "originTopic": "T"},
            None,
            {"%RETRY%G": SUB},
        ),
        (
            RequestCode.PULL_MESSAGE,
            {"topic": "T", "consumerGroup": "G"},
            None,
            {"T": SUB, "%RETRY%G": SUB},
        ),
        (
            RequestCode.PULL_MESSAGE,
            {"topic": "%RETRY%G", "consumerGroup": "G"},
            None,
            {"%RETRY%G": SUB},
        ),
        (RequestCode.QUERY_MESSAGE, {"topic": "T"}, None, {"T": SUB}),
        (
            RequestCode.HEART_BEAT,
            {},
            _heartbeat("G", ["T", "%RETRY%G"]),
            {"%RETRY%G": SUB, "T": SUB},
        ),
        (
            RequestCode.UNREGISTER_CLIENT,
            {"clientID": "c", "consumerGroup": "G"},
            None,
            {"%RETRY%G": SUB},
        ),
        (RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "P"}, None, {}),
        (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}, None, {"%RETRY%G": SUB}),
        (
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "1"},
            None,
            {"%RETRY%G": SUB, "T": SUB},
        ),
        (
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "T", "queueId": "0"},
            None,
            {"%RETRY%G": SUB, "T": SUB},
        ),
        (
            RequestCode.LOCK_BATCH_MQ,
            {},
            _lock("G", ["T", "U"]),
            {"%RETRY%G": SUB, "T": SUB, "U": SUB},
        ),
        (RequestCode.UNLOCK_BATCH_MQ, {}, _lock("G", ["T"]), {"%RETRY%G": SUB, "T": SUB}),
        (RequestCode.END_TRANSACTION, {"producerGroup": "P", "topic": "T"}, None, {"T": PUB}),
        (RequestCode.END_TRANSACTION, {"producerGroup": "P"}, None, {}),
        (RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"}, None, {"T": SUB}),
        (
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            {"topic": "T", "queueId": "0", "timestamp": "1"},
            None,
            {"T": SUB},
        ),
        (RequestCode.GET_BROKER_RUNTIME_INFO, {}, None, {}),
        (
            RequestCode.POP_MESSAGE,
            {"topic": "T", "consumerGroup": "G", "queueId": "-1"},
            None,
            {"T": SUB, "%RETRY%G": SUB},
        ),
        # acks and invisible-time changes of retried messages name the POP retry topic
        (RequestCode.ACK_MESSAGE, _pop("%RETRY%G_T"), None, {"T": SUB, "%RETRY%G": SUB}),
        (
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            _pop("%RETRY%G+T"),
            None,
            {"T": SUB, "%RETRY%G": SUB},
        ),
        (RequestCode.ACK_MESSAGE, _pop("%RETRY%G"), None, {"%RETRY%G": SUB}),
        (RequestCode.PEEK_MESSAGE, _pop("T"), None, {"T": SUB, "%RETRY%G": SUB}),
        (RequestCode.NOTIFICATION, _pop("T"), None, {"T": SUB, "%RETRY%G": SUB}),
        (RequestCode.POLLING_INFO, _pop("T"), None, {"T": SUB, "%RETRY%G": SUB}),
        (
            RequestCode.BATCH_ACK_MESSAGE,
            {},
            _batch_ack(("G", "T"), ("H", "%RETRY%H+U")),
            {"T": SUB, "%RETRY%G": SUB, "U": SUB, "%RETRY%H": SUB},
        ),
    ],
)
def test_resources_per_code(
    code: int, ext: dict[str, str], body: bytes | None, resources: dict[str, int]
) -> None:
    parsed = parse_request(code, {**ext, "AccessKey": "x"}, body, "1.2.3.4:5")
    assert parsed.parse_error is None
    assert parsed.resources == resources
    assert parsed.ip == "1.2.3.4"


def test_bad_bodies_are_parse_errors_never_exceptions() -> None:
    for code in (RequestCode.HEART_BEAT, RequestCode.LOCK_BATCH_MQ, RequestCode.BATCH_ACK_MESSAGE):
        parsed = parse_request(code, {"AccessKey": "x"}, b"{not json", "1.2.3.4:5")
        assert parsed.parse_error is not None
        assert str(int(code)) in parsed.parse_error


def test_the_decision_flow() -> None:
    send = {"b": "Orders", "a": "P"}
    assert (
        verdict(signed(RequestCode.SEND_MESSAGE_V2, send, b"m", None))
        == "No accessKey is configured"
    )
    empty_ak = signed(RequestCode.SEND_MESSAGE_V2, {**send, "AccessKey": ""}, b"m", None)
    assert verdict(empty_ak) == "No accessKey is configured"  # the C++ client without credentials
    stranger = SessionCredentials("stranger1", "whatever1")
    assert (
        verdict(signed(RequestCode.SEND_MESSAGE_V2, send, b"m", stranger))
        == "No acl config for stranger1"
    )
    wrong = SessionCredentials("producer1", "not-the-secret")
    assert (
        verdict(signed(RequestCode.SEND_MESSAGE_V2, send, b"m", wrong))
        == "Check signature failed for accessKey=producer1"
    )
    assert verdict(signed(RequestCode.SEND_MESSAGE_V2, send, b"m", PRODUCER)) == "ok"
    tampered = signed(RequestCode.SEND_MESSAGE_V2, send, b"m", PRODUCER)
    tampered.body = b"other"
    assert verdict(tampered) == "Check signature failed for accessKey=producer1"
    other_topic = signed(RequestCode.SEND_MESSAGE_V2, {"b": "Audit", "a": "P"}, b"m", PRODUCER)
    assert verdict(other_topic) == "No permission for topic:Audit (accessKey=producer1)"
    unlisted = signed(RequestCode.SEND_MESSAGE_V2, {"b": "Else", "a": "P"}, b"m", PRODUCER)
    assert verdict(unlisted) == "No default permission for topic:Else (accessKey=producer1)"
    create = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "X"}, None, PRODUCER)
    assert (
        verdict(create)
        == "Need admin permission for request code=17, but accessKey=producer1 is not"
    )
    assert verdict(signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "X"}, None, ADMIN)) == "ok"
    # an admin without resource entries passes every resource check
    assert verdict(signed(RequestCode.SEND_MESSAGE_V2, {"b": "Any", "a": "P"}, b"m", ADMIN)) == "ok"


def test_consumer_rights() -> None:
    pull = {"topic": "Orders", "consumerGroup": "G1", "queueId": "0"}
    assert verdict(signed(RequestCode.PULL_MESSAGE, pull, None, CONSUMER)) == "ok"
    blocked = {**pull, "consumerGroup": "Blocked"}
    assert (
        verdict(signed(RequestCode.PULL_MESSAGE, blocked, None, CONSUMER))
        == "No permission for group:Blocked (accessKey=consumer1)"
    )
    send = {"b": "Orders", "a": "G1"}
    assert "topic:Orders" in verdict(signed(RequestCode.SEND_MESSAGE_V2, send, b"x", CONSUMER))
    retry = {"b": "%RETRY%G1", "a": "G1"}
    assert verdict(signed(RequestCode.SEND_MESSAGE_V2, retry, b"x", CONSUMER)) == "ok"


def test_white_lists_skip_signature_and_permissions() -> None:
    anonymous = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "X"}, None, None)
    assert verdict(anonymous, "10.99.1.2:3") == "ok"
    assert verdict(anonymous, "10.98.1.2:3") == "No accessKey is configured"
    unsigned = RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "X", "AccessKey": "whiteuser"}
    )
    assert verdict(unsigned, "192.168.7.20:1") == "ok"
    assert verdict(unsigned, "192.168.8.20:1") == "Check signature failed for accessKey=whiteuser"


def test_query_signed_with_or_without_the_unique_key_flag() -> None:
    ext = {
        "topic": "Orders",
        "key": "k",
        "maxNum": "32",
        "beginTimestamp": "0",
        "endTimestamp": "1",
    }
    newer = dict(ext, _UNIQUE_KEY_QUERY="true")
    assert verdict(signed(RequestCode.QUERY_MESSAGE, newer, None, CONSUMER)) == "ok"
    older = signed(RequestCode.QUERY_MESSAGE, ext, None, CONSUMER)
    older.ext_fields["_UNIQUE_KEY_QUERY"] = "true"  # added after signing
    assert verdict(older) == "ok"


def test_trace_topic_sends_need_no_permission() -> None:
    trace = {"b": "RMQ_SYS_TRACE_TOPIC", "a": "P"}
    assert verdict(signed(RequestCode.SEND_MESSAGE_V2, trace, b"t", PRODUCER)) == "ok"


def test_check_access_for_other_front_ends() -> None:
    assert check_access(RULES, "producer1", {"Orders": PUB}, "1.1.1.1").allowed
    refused = check_access(RULES, "producer1", {"Orders": SUB}, "1.1.1.1")
    assert refused.reason == "No permission for topic:Orders (accessKey=producer1)"
    assert not check_access(RULES, None, {}, "1.1.1.1").allowed
    assert check_access(RULES, None, {}, "10.99.0.1").allowed
    assert not check_access(RULES, "producer1", {}, "1.1.1.1", admin_needed=True).allowed
    assert not check_access(RULES, "producer1", {}, "1.1.1.1", authenticated=False).allowed
    assert check_access(RULES, "whiteuser", {}, "192.168.7.1", authenticated=False).allowed


class _Chan:
    remote_addr = "127.0.0.1:1234"


def test_hook_answers_refusals_like_a_rocketmq_broker() -> None:
    seen: list[str] = []
    hook = AclHook(RULES, on_refused=lambda ch, req, d: seen.append(d.reason))
    refused = hook.before_request(
        _Chan(), signed(RequestCode.SEND_MESSAGE_V2, {"b": "Orders"}, b"", None)
    )  # type: ignore[arg-type]
    assert refused is not None
    assert refused.code == 1
    assert (
        refused.remark == "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
    )
    assert seen == ["No accessKey is configured"]
    assert hook.refused == 1
    ok = signed(RequestCode.SEND_MESSAGE_V2, {"b": "Orders", "a": "P"}, b"", PRODUCER)
    assert hook.before_request(_Chan(), ok) is None  # type: ignore[arg-type]
    narrow = AclHook(RULES, codes=frozenset({int(RequestCode.REGISTER_BROKER)}))
    assert (
        narrow.before_request(
            _Chan(), RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
        )
        is None
    )  # type: ignore[arg-type]
    assert (
        narrow.before_request(_Chan(), RemotingCommand.request(RequestCode.REGISTER_BROKER, {}))
        is not None
    )  # type: ignore[arg-type]


codes = st.sampled_from([int(c) for c in RequestCode])
ext_maps = st.dictionaries(
    st.sampled_from(
        ["topic", "b", "a", "group", "consumerGroup", "AccessKey", "Signature", "x", "queueId"]
    ),
    st.text(max_size=10),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(
    codes,
    ext_maps,
    st.one_of(
        st.none(),
        st.binary(max_size=60),
        st.sampled_from([b"{}", b"[]", b'{"consumerDataSet": 5}', b'{"mqSet": [{}]}']),
    ),
    st.text(max_size=30),
)
def test_parsing_any_request_never_raises(
    code: int, ext: dict[str, str], body: bytes | None, addr: str
) -> None:
    parsed = parse_request(code, ext, body, addr)
    decision = decide(RULES, parsed)
    assert isinstance(decision.reason, str)
    if not ext.get("AccessKey") and not addr.startswith("10.99."):
        assert not decision.allowed


fast_topics = st.sampled_from(["Orders", "Audit", "Else", "%RETRY%G1", "RMQ_SYS_TRACE_TOPIC", ""])
fast_creds = st.sampled_from(
    [PRODUCER, CONSUMER, ADMIN, SessionCredentials("producer1", "bad-secret1"), None]
)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(
        [
            int(RequestCode.SEND_MESSAGE_V2),
            int(RequestCode.SEND_BATCH_MESSAGE),
            int(RequestCode.PULL_MESSAGE),
        ]
    ),
    fast_topics,
    st.sampled_from(["G1", "Blocked", ""]),
    fast_creds,
    st.binary(max_size=3000),
    st.booleans(),
)
def test_the_fast_path_agrees_with_decide(
    code: int, topic: str, group: str, creds: SessionCredentials | None, body: bytes, white: bool
) -> None:
    from ariane.acl.validator import allows_fast

    rules = AclRules.merge(
        [
            parse_document(
                RULES_TEXT.replace("['10.99.*']", "[]") if not white else RULES_TEXT, "p.yml"
            )
        ]
    )
    ext = (
        {"b": topic, "a": "P"}
        if code != RequestCode.PULL_MESSAGE
        else {"topic": topic, "consumerGroup": group}
    )
    cmd = signed(code, ext, body, creds)
    decided = decide(rules, parse_request(code, cmd.ext_fields, cmd.body, "127.0.0.1:1"))
    if allows_fast(rules, code, cmd.ext_fields, cmd.body):
        assert decided.allowed


def test_the_fast_path_takes_signed_sends_and_pulls() -> None:
    from ariane.acl.validator import allows_fast

    rules = AclRules.merge([parse_document(RULES_TEXT.replace("['10.99.*']", "[]"), "p.yml")])
    send = signed(RequestCode.SEND_MESSAGE_V2, {"b": "Orders", "a": "P"}, b"m" * 5000, PRODUCER)
    assert allows_fast(rules, send.code, send.ext_fields, send.body)
    pull = signed(
        RequestCode.PULL_MESSAGE, {"topic": "Orders", "consumerGroup": "G1"}, None, CONSUMER
    )
    assert allows_fast(rules, pull.code, pull.ext_fields, pull.body)
    assert not allows_fast(RULES, send.code, send.ext_fields, send.body)  # global white rules
    denied = signed(RequestCode.SEND_MESSAGE_V2, {"b": "Audit", "a": "P"}, b"m", PRODUCER)
    assert not allows_fast(rules, denied.code, denied.ext_fields, denied.body)


def test_the_hook_remembers_grants_until_the_rules_change() -> None:
    no_white = RULES_TEXT.replace("['10.99.*']", "[]")
    hook = AclHook(AclRules.merge([parse_document(no_white, "p.yml")]))
    send = signed(RequestCode.SEND_MESSAGE_V2, {"b": "Orders", "a": "P"}, b"m", PRODUCER)
    assert hook.before_request(_Chan(), send) is None  # type: ignore[arg-type]
    assert hook.before_request(_Chan(), send) is None  # type: ignore[arg-type]  # remembered
    # a remembered grant still checks every request's signature
    forged = signed(RequestCode.SEND_MESSAGE_V2, {"b": "Orders", "a": "P"}, b"m", PRODUCER)
    forged.body = b"changed"
    refused = hook.before_request(_Chan(), forged)  # type: ignore[arg-type]
    assert refused is not None
    assert refused.remark == (
        "org.apache.rocketmq.acl.common.AclException: "
        "Check signature failed for accessKey=producer1"
    )
    # new rules (a reload): Orders is no longer granted, and the hook forgets its grant
    hook.rules = AclRules.merge([parse_document(no_white.replace("Orders=PUB", "Orders=SUB"), "p")])
    refused = hook.before_request(_Chan(), send)  # type: ignore[arg-type]
    assert refused is not None
    assert refused.remark == (
        "org.apache.rocketmq.acl.common.AclException: "
        "No permission for topic:Orders (accessKey=producer1)"
    )
    # and back: granted again
    hook.rules = AclRules.merge([parse_document(no_white, "p.yml")])
    assert hook.before_request(_Chan(), send) is None  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE]),
            st.sampled_from(["Orders", "Audit", "Other", "%RETRY%G1", "RMQ_SYS_TRACE_TOPIC"]),
            st.sampled_from(["G1", "Blocked", ""]),
            st.sampled_from([PRODUCER, CONSUMER, ADMIN, None]),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    ),
    st.booleans(),
)
def test_the_hook_answers_what_decide_answers(
    requests: list[tuple[int, str, str, SessionCredentials | None, bool]], white: bool
) -> None:
    text = RULES_TEXT if white else RULES_TEXT.replace("['10.99.*']", "[]")
    rules = AclRules.merge([parse_document(text, "p.yml")])
    hook = AclHook(rules)
    for code, topic, group, creds, tamper in requests:  # repeated: remembered grants
        ext = {"b": topic, "a": "P"} if code != RequestCode.PULL_MESSAGE else {"topic": topic}
        if code == RequestCode.PULL_MESSAGE and group:
            ext["consumerGroup"] = group
        cmd = signed(code, ext, b"body", creds)
        if tamper:
            cmd.body = b"other"
        decided = decide(rules, parse_request(code, cmd.ext_fields, cmd.body, "127.0.0.1:1234"))
        answer = hook.before_request(_Chan(), cmd)  # type: ignore[arg-type]
        if decided.allowed:
            assert answer is None
        else:
            assert answer is not None
            assert answer.remark == f"org.apache.rocketmq.acl.common.AclException: {decided.reason}"
