"""Builders shared by tests."""

from __future__ import annotations

import zlib

from click.testing import Result

from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand

DEFAULT_TOPICS = (TopicConfig("T", 4, 4, 6), TopicConfig("TBW102", 8, 8, 7))


def register_broker_command(
    *,
    broker_name: str = "broker-a",
    broker_addr: str = "127.0.0.1:10911",
    broker_id: int = 0,
    cluster_name: str = "DefaultCluster",
    topics: tuple[TopicConfig, ...] = DEFAULT_TOPICS,
    data_version: DataVersion | None = None,
    compressed: bool = False,
) -> RemotingCommand:
    """A REGISTER_BROKER request as a broker sends it (body CRC included)."""
    wrapper = TopicConfigSerializeWrapper(
        {t.topic_name: t for t in topics}, data_version or DataVersion(0, 5, 1)
    )
    body = RegisterBrokerBody(wrapper).encode(compress=compressed)
    header = h.RegisterBrokerRequestHeader(
        broker_name=broker_name,
        broker_addr=broker_addr,
        cluster_name=cluster_name,
        ha_server_addr="127.0.0.1:10912",
        broker_id=broker_id,
        compressed=compressed,
        body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
    )
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)


def one_line_error(result: Result, exit_code: int | None = 2) -> str:
    """The single line a CLI printed on bad input (``exit_code``, or any non-zero exit when
    None), checked to be no traceback and no more than one line."""
    if exit_code is None:
        assert result.exit_code != 0, result.output
    else:
        assert result.exit_code == exit_code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]
