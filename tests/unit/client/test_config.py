"""Client configuration and ids."""

from __future__ import annotations

import os

import pytest

from ariane.client.config import ClientConfig, parse_namesrv_addr
from ariane.errors import ConfigError


def test_namesrv_addresses_split_on_semicolons_and_commas() -> None:
    assert parse_namesrv_addr(" a:1;b:2 ,c:3;") == ("a:1", "b:2", "c:3")


@pytest.mark.parametrize("text", ["", ";", "host", "host:", "host:x", "host:0", "h:70000"])
def test_bad_namesrv_addresses(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_namesrv_addr(text)


def test_client_id_is_ip_at_instance_name() -> None:
    cfg = ClientConfig(namesrv_addr="n:1", client_ip="10.0.0.5")
    assert cfg.build_client_id() == f"10.0.0.5@{os.getpid()}"
    named = ClientConfig(namesrv_addr="n:1", client_ip="10.0.0.5", instance_name="i", unit_name="u")
    assert named.build_client_id() == "10.0.0.5@i@u"


@pytest.mark.parametrize(
    "kwargs", [{"instance_name": ""}, {"instance_name": "a@b"}, {"api_timeout_ms": 0}]
)
def test_bad_settings(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ClientConfig(namesrv_addr="n:1", **kwargs)  # type: ignore[arg-type]
