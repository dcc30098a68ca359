"""What a request asks for (RocketMQ ``PlainAccessValidator.parse`` /
``PlainAccessResource.parse``).

How it works: ``parse_request(code, ext_fields, body, remote_addr)`` reads the credentials
(``AccessKey``, ``Signature``, ``SecurityToken``; an empty ``AccessKey``, which the C++ client
sends when it has no credentials, counts as none), the client IP (the remote address up to its
last ``:``) and the resources the request touches, each with the permission it needs. Groups
are resources named ``%RETRY%<group>``.

The table follows RocketMQ 4.9's ``parse`` and adds the codes RocketMQ 5 checks (batch sends,
END_TRANSACTION with a topic, QUERY_CONSUMER_OFFSET, LOCK/UNLOCK_BATCH_MQ) plus the other data
reads a consumer makes, so no data-path request escapes its topic's permission:

==========================================  ===========================================
SEND_MESSAGE, SEND_MESSAGE_V2/_BATCH,       topic -> PUB; a ``%RETRY%`` topic (a retry
SEND_REPLY_MESSAGE(_V2)                     resend) -> its group SUB
CONSUMER_SEND_MSG_BACK                      group -> SUB (upstream's code asks no PUB on
                                            the original topic, whatever the book says)
PULL_MESSAGE, LITE_PULL_MESSAGE,            topic -> SUB, group -> SUB
ARIANE_BULK_PULL_MESSAGE
QUERY_MESSAGE, VIEW_MESSAGE_BY_ID*          topic -> SUB (* none: the id has no topic)
HEART_BEAT                                  each consumer group -> SUB, each subscribed
                                            topic -> SUB
UNREGISTER_CLIENT, GET_CONSUMER_LIST...     group -> SUB
QUERY/UPDATE_CONSUMER_OFFSET                group -> SUB, topic -> SUB
LOCK_BATCH_MQ, UNLOCK_BATCH_MQ              group -> SUB, each queue's topic -> SUB
POP_MESSAGE, ACK_MESSAGE, PEEK_MESSAGE,     topic -> SUB, group -> SUB; a POP retry topic
CHANGE_MESSAGE_INVISIBLETIME,               (``%RETRY%<group>_<topic>``/``+<topic>``, what
NOTIFICATION, POLLING_INFO                  acks of retried messages name) -> its topic
BATCH_ACK_MESSAGE                           each ack's topic and group, as above
END_TRANSACTION                             topic -> PUB when the header names one
GET_MAX/MIN_OFFSET, SEARCH_OFFSET...,       topic -> SUB
GET_EARLIEST_MSG_STORETIME
==========================================  ===========================================

A body that does not decode is a refusal ("cannot parse the request"), never an exception.
``content`` is what the signature must cover (``credentials.canonical_content``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ariane.acl.address import client_ip
from ariane.acl.credentials import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE
from ariane.acl.permission import PUB, SUB
from ariane.common.pop import original_topic
from ariane.common.topics import RETRY_PREFIX
from ariane.errors import ArianeError
from ariane.remoting.protocol.client_bodies import HeartbeatData, LockBatchRequestBody
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.pop_bodies import BatchAckMessageRequestBody

__all__ = ["AccessRequest", "parse_request", "retry_topic"]

#: extFields key the Java client adds to QUERY_MESSAGE after 4.9.3 (and signs); older brokers
#: left it out of the content, so both forms are accepted.
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


_EMPTY: Mapping[str, str] = MappingProxyType({})


def retry_topic(group: str) -> str:
    """The resource name of a group (``PlainAccessResource.getRetryTopic``)."""
    return group if group.startswith(RETRY_PREFIX) else RETRY_PREFIX + group


class AccessRequest:
    """One request as the validator sees it (``PlainAccessResource`` of the request).

    Attributes:
        code: the request code.
        ip: the client address (text, as the peer connected).
        access_key: the ``AccessKey`` sent, None when absent or empty.
        signature: the ``Signature`` sent.
        security_token: the ``SecurityToken`` sent.
        resources: resource -> needed permission bits.
        ext_fields: the request's fields (for the signature).
        body: the request body (for the signature).
        parse_error: why the resources could not be read (the request is then refused).
    """

    __slots__ = (
        "access_key", "body", "code", "ext_fields", "ip", "parse_error", "resources",
        "security_token", "signature",
    )  # fmt: skip

    def __init__(self, code: int, ip: str) -> None:  # a plain class: built once per request
        self.code = code
        self.ip = ip
        self.access_key: str | None = None
        self.signature: str | None = None
        self.security_token: str | None = None
        self.resources: dict[str, int] = {}
        self.ext_fields: Mapping[str, str] = _EMPTY
        self.body: bytes | None = None
        self.parse_error: str | None = None

    def need(self, resource: str | None, perm: int) -> None:
        """Add a needed permission (a blank resource is skipped, as upstream skips null);
        needing the same resource twice asks for both bits."""
        if resource:
            self.resources[resource] = self.resources.get(resource, 0) | perm


def _send(req: AccessRequest, topic: str | None, group: str | None) -> None:
    if topic and topic.startswith(RETRY_PREFIX):
        req.need(retry_topic(group) if group else topic, SUB)
    else:
        req.need(topic, PUB)


def _group_and_topic(req: AccessRequest, ext: Mapping[str, str]) -> None:
    group = ext.get("consumerGroup")
    topic = ext.get("topic")
    if topic and not (group and topic == retry_topic(group)):
        req.need(topic, SUB)  # the topic first: a refusal names it before the group
    req.need(retry_topic(group) if group else None, SUB)


def _pop(req: AccessRequest, topic: str | None, group: str | None) -> None:
    """A POP-family request: the group, and the topic a POP retry topic stands for."""
    if topic and group:
        topic = original_topic(topic, group)
    _group_and_topic(req, {"topic": topic or "", "consumerGroup": group or ""})


def _batch_ack(req: AccessRequest, body: bytes | None) -> None:
    for ack in BatchAckMessageRequestBody.decode(body or b"{}").acks:
        _pop(req, ack.topic, ack.consumer_group)


def _heartbeat(req: AccessRequest, body: bytes | None) -> None:
    if not body:
        return
    data = HeartbeatData.decode(body)
    for consumer in data.consumer_data_set:
        req.need(retry_topic(consumer.group_name), SUB)
        for sub in consumer.subscription_data_set:
            if not sub.topic.startswith(RETRY_PREFIX):
                req.need(sub.topic, SUB)


def _lock(req: AccessRequest, body: bytes | None) -> None:
    data = LockBatchRequestBody.decode(body or b"{}")
    req.need(retry_topic(data.consumer_group) if data.consumer_group else None, SUB)
    for mq in data.mq_set:
        if not mq.topic.startswith(RETRY_PREFIX):
            req.need(mq.topic, SUB)


_TOPIC_READS = frozenset(
    int(c)
    for c in (
        RequestCode.QUERY_MESSAGE,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        RequestCode.GET_EARLIEST_MSG_STORETIME,
    )
)
_GROUP_ONLY = frozenset(
    int(c)
    for c in (
        RequestCode.UNREGISTER_CLIENT,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
    )
)
_GROUP_AND_TOPIC = frozenset(
    int(c)
    for c in (
        RequestCode.PULL_MESSAGE,
        RequestCode.LITE_PULL_MESSAGE,
        RequestCode.ARIANE_BULK_PULL_MESSAGE,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
    )
)
_POP_FAMILY = frozenset(
    int(c)
    for c in (
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.PEEK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        RequestCode.NOTIFICATION,
        RequestCode.POLLING_INFO,
    )
)
_SEND_V1 = frozenset(int(c) for c in (RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE))
_SEND_V2 = frozenset(
    int(c)
    for c in (
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.SEND_REPLY_MESSAGE_V2,
    )
)


def _resources(req: AccessRequest, code: int, ext: Mapping[str, str], body: bytes | None) -> None:
    if code in _SEND_V2:
        _send(req, ext.get("b"), ext.get("a"))
    elif code in _SEND_V1:
        _send(req, ext.get("topic"), ext.get("group") or ext.get("producerGroup"))
    elif code in _GROUP_AND_TOPIC:
        _group_and_topic(req, ext)
    elif code in _POP_FAMILY:
        _pop(req, ext.get("topic"), ext.get("consumerGroup"))
    elif code == RequestCode.BATCH_ACK_MESSAGE:
        _batch_ack(req, body)
    elif code in _TOPIC_READS:
        req.need(ext.get("topic"), SUB)
    elif code in _GROUP_ONLY:
        group = ext.get("consumerGroup")
        req.need(retry_topic(group) if group else None, SUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        group = ext.get("group")
        req.need(retry_topic(group) if group else None, SUB)
    elif code == RequestCode.HEART_BEAT:
        _heartbeat(req, body)
    elif code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        _lock(req, body)
    elif code == RequestCode.END_TRANSACTION:
        req.need(ext.get("topic"), PUB)


def parse_request(
    code: int, ext_fields: Mapping[str, str] | None, body: bytes | None, remote_addr: str
) -> AccessRequest:
    """Read credentials, client IP and needed resources out of a request (see the module
    docstring). Never raises: a request that cannot be read gets ``parse_error``."""
    req = AccessRequest(code, client_ip(remote_addr))
    if not ext_fields:
        return req  # only IP rules can let it in
    ext = ext_fields
    req.access_key = ext.get(ACCESS_KEY) or None
    req.signature = ext.get(SIGNATURE)
    req.security_token = ext.get(SECURITY_TOKEN)
    req.ext_fields = ext
    req.body = body
    try:
        _resources(req, code, ext, body)
    except (ArianeError, ValueError, TypeError, KeyError, RecursionError) as exc:
        req.parse_error = f"cannot parse the request (code {code}): {exc}"
    return req
