"""``describe_error``: one readable line per failed broker request of a cluster-wide call."""

from __future__ import annotations

from ariane.client._admin_bulk import describe_error
from ariane.errors import ArianeError, RequestTimeoutError


def test_both_timeouts_read_the_same() -> None:
    # the caller's wait_for and the request's own deadline run out together; before, the
    # request's won on a busy loop and the dashboard showed a different text for the same
    # timeout (a flaky integration test)
    assert describe_error(TimeoutError(), 500) == "no answer within 500 ms"
    late = RequestTimeoutError("no response from 127.0.0.1:1 within 500 ms (opaque 8)")
    assert describe_error(late, 500) == "no answer within 500 ms"


def test_other_errors_keep_their_text_or_name() -> None:
    assert describe_error(ConnectionRefusedError("refused"), 500) == "refused"
    assert describe_error(ArianeError(" "), 500) == "ArianeError"
