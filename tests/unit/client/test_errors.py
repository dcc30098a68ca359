"""The response-code exception registry."""

from __future__ import annotations

import pytest

from ariane.client import errors as e
from ariane.errors import ArianeError, BrokerResponseError
from ariane.remoting.protocol.codes import ResponseCode


@pytest.mark.parametrize(
    ("code", "cls", "retriable"),
    [
        (ResponseCode.SYSTEM_ERROR, e.BrokerSystemError, True),
        (ResponseCode.SYSTEM_BUSY, e.BrokerBusyError, True),
        (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, e.RequestCodeNotSupportedError, False),
        (ResponseCode.MESSAGE_ILLEGAL, e.MessageIllegalError, False),
        (ResponseCode.SERVICE_NOT_AVAILABLE, e.ServiceNotAvailableError, True),
        (ResponseCode.NO_PERMISSION, e.NoPermissionError, True),
        (ResponseCode.TOPIC_NOT_EXIST, e.TopicNotExistError, True),
        (ResponseCode.QUERY_NOT_FOUND, e.QueryNotFoundError, False),
        (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, e.SubscriptionGroupNotExistError, False),
        (ResponseCode.INVALID_PARAMETER, e.InvalidParameterError, False),
        (ResponseCode.NO_BUYER_ID, e.NoBuyerIdError, True),
        (ResponseCode.NOT_IN_CURRENT_UNIT, e.NotInCurrentUnitError, True),
        (ResponseCode.CONSUMER_NOT_ONLINE, e.ConsumerNotOnlineError, False),
        (ResponseCode.ILLEGAL_OPERATION, e.IllegalOperationError, False),
    ],
)
def test_error_for_maps_codes_to_subclasses(code: int, cls: type, retriable: bool) -> None:
    error = e.error_for(code, "why")
    assert type(error) is cls
    assert isinstance(error, BrokerResponseError)
    assert isinstance(error, ArianeError)
    assert (error.code, error.remark, error.retriable) == (code, "why", retriable)
    assert "why" in str(error)


def test_unknown_codes_give_a_plain_broker_response_error() -> None:
    error = e.error_for(12345, None)
    assert type(error) is BrokerResponseError
    assert error.code == 12345
    assert not error.retriable


def test_subclasses_can_be_raised_without_a_code() -> None:
    error = e.TopicNotExistError(remark="no route")
    assert error.code == ResponseCode.TOPIC_NOT_EXIST


def test_client_errors() -> None:
    assert e.NoRouteError("T").retriable
    assert "T" in str(e.NoRouteError("T"))
    send = e.SendError("failed", attempts=3, timed_out=True)
    assert (send.attempts, send.timed_out) == (3, True)
    assert e.BrokerNotFoundError("b").broker_name == "b"
