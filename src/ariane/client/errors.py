"""Client errors: one ``BrokerResponseError`` subclass per response code, and the client's own.

``error_for(code, remark)`` turns a response code into the matching exception (aiokafka's
``for_code``), so callers can ``except TopicNotExistError`` instead of comparing numbers.
``retriable`` says whether trying again (possibly on another broker) can help; the producer
retries sends on the codes RocketMQ's ``DefaultMQProducer.retryResponseCodes`` names::

    ArianeError
    ├── BrokerResponseError (code, remark)        ariane.errors
    │   ├── BrokerSystemError            1  SYSTEM_ERROR           retriable
    │   │   └── AccessDeniedError        1  an ACL refusal (AclException remark), not retried
    │   ├── BrokerBusyError              2  SYSTEM_BUSY            retriable
    │   ├── RequestCodeNotSupportedError 3
    │   ├── TransactionFailedError       4
    │   ├── MessageIllegalError         13
    │   ├── ServiceNotAvailableError    14                         retriable
    │   ├── VersionNotSupportedError    15
    │   ├── NoPermissionError           16                         retriable
    │   ├── TopicNotExistError          17                         retriable
    │   ├── TopicExistAlreadyError      18
    │   ├── QueryNotFoundError          22
    │   ├── SubscriptionParseFailedError 23
    │   ├── SubscriptionRefusedError        a broker refused a consumer's filter at start()
    │   ├── SubscriptionNotExistError   24
    │   ├── SubscriptionNotLatestError  25
    │   ├── SubscriptionGroupNotExistError 26
    │   ├── InvalidParameterError       29
    │   ├── NoBuyerIdError             204                         retriable
    │   ├── NotInCurrentUnitError      205                         retriable
    │   ├── ConsumerNotOnlineError     206
    │   ├── ConsumeMessageTimeoutError 207
    │   ├── FlowControlError           215                         retriable
    │   └── IllegalOperationError      604
    ├── NoRouteError                   no route for a topic (MQClientException "No route info")
    │   └── TopicNotWritableError      a route, but no writable queue (topic or broker perm)
    ├── BrokerNotFoundError            a broker name has no known master address
    ├── SendError                      every attempt of one send failed (cause chained)
    └── ClientStateError               not started, closed, or called from the wrong thread

Codes without a subclass give a plain ``BrokerResponseError``.
"""

from __future__ import annotations

from typing import ClassVar

from ariane.errors import ArianeError, BrokerResponseError
from ariane.remoting.protocol.codes import ResponseCode

__all__ = [
    "AccessDeniedError",
    "BrokerBusyError",
    "BrokerNotFoundError",
    "BrokerResponseError",
    "BrokerSystemError",
    "ClientStateError",
    "ConsumeMessageTimeoutError",
    "ConsumerNotOnlineError",
    "FlowControlError",
    "IllegalOperationError",
    "InvalidParameterError",
    "MessageIllegalError",
    "NoBuyerIdError",
    "NoPermissionError",
    "NoRouteError",
    "NotInCurrentUnitError",
    "QueryNotFoundError",
    "RequestCodeNotSupportedError",
    "SendError",
    "ServiceNotAvailableError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionParseFailedError",
    "SubscriptionRefusedError",
    "TopicExistAlreadyError",
    "TopicNotExistError",
    "TopicNotWritableError",
    "TransactionFailedError",
    "VersionNotSupportedError",
    "error_for",
]

_REGISTRY: dict[int, type[BrokerResponseError]] = {}


class _CodedError(BrokerResponseError):
    """A ``BrokerResponseError`` for one response code; subclasses register themselves."""

    CODE: ClassVar[int] = -1

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if "CODE" in cls.__dict__ and cls.CODE >= 0:  # refinements (AccessDeniedError) don't
            _REGISTRY[cls.CODE] = cls

    def __init__(self, code: int | None = None, remark: str | None = None) -> None:
        super().__init__(self.CODE if code is None else code, remark)


class BrokerSystemError(_CodedError):
    """SYSTEM_ERROR (1): the server failed to process the request."""

    CODE = ResponseCode.SYSTEM_ERROR
    retriable = True


#: What a RocketMQ server puts in the remark of an ACL refusal.
_ACL_MARK = "AclException:"


class AccessDeniedError(BrokerSystemError):
    """A server's ACL refused the request: SYSTEM_ERROR (1) with an ``AclException`` remark
    that says what was missing (no account, a bad signature, no permission on a topic or
    group, an admin-only request). Not retried: the same credentials get the same answer.

    Attributes:
        reason: the remark without the Java exception name.
    """

    retriable = False

    @property
    def reason(self) -> str:
        """Why the request was refused."""
        remark = self.remark or ""
        return remark.split(_ACL_MARK, 1)[1].strip() if _ACL_MARK in remark else remark


class BrokerBusyError(_CodedError):
    """SYSTEM_BUSY (2): the broker is overloaded (page cache busy, queue full)."""

    CODE = ResponseCode.SYSTEM_BUSY
    retriable = True


class RequestCodeNotSupportedError(_CodedError):
    """REQUEST_CODE_NOT_SUPPORTED (3): the server does not implement this request."""

    CODE = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class TransactionFailedError(_CodedError):
    """TRANSACTION_FAILED (4)."""

    CODE = ResponseCode.TRANSACTION_FAILED


class MessageIllegalError(_CodedError):
    """MESSAGE_ILLEGAL (13): the message is too large, has bad properties or topic."""

    CODE = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(_CodedError):
    """SERVICE_NOT_AVAILABLE (14): the broker cannot store now (disk full, shutting down)."""

    CODE = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class VersionNotSupportedError(_CodedError):
    """VERSION_NOT_SUPPORTED (15)."""

    CODE = ResponseCode.VERSION_NOT_SUPPORTED


class NoPermissionError(_CodedError):
    """NO_PERMISSION (16): the broker or topic refuses writes or reads."""

    CODE = ResponseCode.NO_PERMISSION
    retriable = True


class TopicNotExistError(_CodedError):
    """TOPIC_NOT_EXIST (17)."""

    CODE = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class TopicExistAlreadyError(_CodedError):
    """TOPIC_EXIST_ALREADY (18)."""

    CODE = ResponseCode.TOPIC_EXIST_ALREADY


class QueryNotFoundError(_CodedError):
    """QUERY_NOT_FOUND (22): no message, offset or index entry matched."""

    CODE = ResponseCode.QUERY_NOT_FOUND


class SubscriptionParseFailedError(_CodedError):
    """SUBSCRIPTION_PARSE_FAILED (23): the filter expression does not compile."""

    CODE = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExistError(_CodedError):
    """SUBSCRIPTION_NOT_EXIST (24)."""

    CODE = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionNotLatestError(_CodedError):
    """SUBSCRIPTION_NOT_LATEST (25)."""

    CODE = ResponseCode.SUBSCRIPTION_NOT_LATEST


class SubscriptionGroupNotExistError(_CodedError):
    """SUBSCRIPTION_GROUP_NOT_EXIST (26)."""

    CODE = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class InvalidParameterError(_CodedError):
    """INVALID_PARAMETER (29): a request field is illegal (queue id, topic name...)."""

    CODE = ResponseCode.INVALID_PARAMETER


class NoBuyerIdError(_CodedError):
    """NO_BUYER_ID (204)."""

    CODE = ResponseCode.NO_BUYER_ID
    retriable = True


class NotInCurrentUnitError(_CodedError):
    """NOT_IN_CURRENT_UNIT (205)."""

    CODE = ResponseCode.NOT_IN_CURRENT_UNIT
    retriable = True


class ConsumerNotOnlineError(_CodedError):
    """CONSUMER_NOT_ONLINE (206): the group has no connected consumer."""

    CODE = ResponseCode.CONSUMER_NOT_ONLINE


class ConsumeMessageTimeoutError(_CodedError):
    """CONSUME_MSG_TIMEOUT (207): a relayed request to a client timed out."""

    CODE = ResponseCode.CONSUME_MSG_TIMEOUT


class FlowControlError(_CodedError):
    """FLOW_CONTROL (215)."""

    CODE = ResponseCode.FLOW_CONTROL
    retriable = True


class IllegalOperationError(_CodedError):
    """ILLEGAL_OPERATION (604): e.g. END_TRANSACTION outside its time window."""

    CODE = ResponseCode.ILLEGAL_OPERATION


def error_for(code: int, remark: str | None = None) -> BrokerResponseError:
    """The exception for a non-success response ``code`` (a plain ``BrokerResponseError`` for
    codes without a subclass).

    Args:
        code: the response code.
        remark: the response's remark.
    """
    if code == ResponseCode.SYSTEM_ERROR and remark and _ACL_MARK in remark:
        return AccessDeniedError(code, remark)
    cls = _REGISTRY.get(code)
    return BrokerResponseError(code, remark) if cls is None else cls(code, remark)


class SubscriptionRefusedError(BrokerResponseError):
    """A broker refused a consumer's subscription when the consumer started (CHECK_CLIENT_CONFIG,
    Java's ``checkClientInBroker``): an invalid SQL92 expression (``code`` 23) or a broker
    without ``enablePropertyFilter`` (``code`` 1). ``remark`` is the broker's reason.

    Args:
        group: the consumer group.
        topic: the subscribed topic.
        expression: the filter expression.
        broker_addr: the broker that refused it.
        code: its response code.
        remark: its reason.
    """

    def __init__(
        self,
        group: str,
        topic: str,
        expression: str,
        broker_addr: str,
        code: int,
        remark: str | None,
    ) -> None:
        ArianeError.__init__(
            self,
            f"consumer group {group!r} cannot subscribe {topic!r} with {expression!r}: "
            f"broker {broker_addr} refused it: {remark or f'code {code}'}",
        )
        self.code = code
        self.remark = remark
        self.group = group
        self.topic = topic
        self.expression = expression
        self.broker_addr = broker_addr


class NoRouteError(ArianeError):
    """The NameServer has no route for the topic, and the auto-create template none either.

    Args:
        topic: the topic.
    """

    retriable = True

    def __init__(self, topic: str, detail: str = "") -> None:
        super().__init__(f"no route info of topic {topic!r}{': ' + detail if detail else ''}")
        self.topic = topic


class TopicNotWritableError(NoRouteError):
    """The topic has a route, but no queue of it may be written: the topic's permission, its
    brokers' ``brokerPermission`` or a ``wipeWritePerm`` forbids sends (RocketMQ clients say
    only "No route info of this topic").

    Args:
        topic: the topic.
        route: the route that grants no write (for the message).
        template: the auto-create template whose route it is, when the topic has none.
    """

    retriable = False

    def __init__(self, topic: str, route: object = None, template: str | None = None) -> None:
        perms = sorted(
            {f"{qd.broker_name}:perm={qd.perm}" for qd in getattr(route, "queue_datas", [])}
        )
        where = f" ({', '.join(perms)})" if perms else ""
        if template is not None:
            detail = (
                f"it has no route yet and the auto-create template {template} is read-only"
                f"{where}: a broker's brokerPermission or wipeWritePerm forbids writes"
            )
        else:
            detail = (
                f"every queue of its route is read-only{where}: the topic's perm, its brokers' "
                "brokerPermission or wipeWritePerm forbids writes"
            )
        ArianeError.__init__(self, f"topic {topic!r} is not writable: {detail}")
        self.topic = topic


class BrokerNotFoundError(ArianeError):
    """A broker name has no known master address (the route lost it)."""

    retriable = True

    def __init__(self, broker_name: str) -> None:
        super().__init__(f"broker {broker_name!r} has no known address")
        self.broker_name = broker_name


class SendError(ArianeError):
    """Every attempt of one send failed; the last failure is ``__cause__``.

    Args:
        message: summary ("send 3 times, still failed...").
        attempts: how many attempts were made.
        timed_out: whether the send timeout ran out before the retries did.
    """

    def __init__(self, message: str, *, attempts: int, timed_out: bool = False) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.timed_out = timed_out


class ClientStateError(ArianeError):
    """The client is not started, already closed, or was used from the wrong thread."""
