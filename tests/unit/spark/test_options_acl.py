"""The Spark source and sink take an ACL account (``accessKey``/``secretKey``)."""

from __future__ import annotations

import pickle

import pytest

from ariane.acl.credentials import SessionCredentials
from ariane.errors import InvalidArgumentError
from ariane.spark.options import SinkOptions, SourceOptions


def test_source_and_sink_take_credentials() -> None:
    source = SourceOptions.parse(
        {"nameserver": "h:9876", "topic": "T", "accessKey": "reader1", "secretKey": "secret-1"}
    )
    assert source.credentials == SessionCredentials("reader1", "secret-1")
    sink = SinkOptions.parse({"NAMESERVER": "h:9876", "ACCESSKEY": "writer1", "SECRETKEY": "s-2"})
    assert sink.credentials == SessionCredentials("writer1", "s-2")
    assert pickle.loads(pickle.dumps(sink)) == sink  # shipped to executors
    assert SourceOptions.parse({"nameserver": "h:9876", "topic": "T"}).credentials is None


@pytest.mark.parametrize("given", [{"accessKey": "a1"}, {"secretKey": "s1"}])
def test_one_without_the_other_is_refused(given: dict[str, str]) -> None:
    with pytest.raises(InvalidArgumentError, match="accessKey and secretKey"):
        SinkOptions.parse({"nameserver": "h:9876", **given})
