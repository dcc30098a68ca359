"""``ariane standalone`` sizes its broker's store for development (every store file has its
blocks reserved when created), unless the broker.conf it is given says otherwise."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ariane import standalone
from ariane.broker.config import load_properties
from ariane.standalone import DEV_STORE_SIZES, _broker_args


def _overrides(args: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for i, a in enumerate(args) if i and args[i - 1] == "-o")


def test_development_sizes_are_passed_and_reserve_little(tmp_path: Path) -> None:
    args = _broker_args("127.0.0.1:9876", tmp_path, 0, None, None, [], None)
    props = _overrides(args)
    assert {k: int(props[k]) for k in DEV_STORE_SIZES} == DEV_STORE_SIZES
    store = load_properties(props).store
    index = 40 + store.max_hash_slot_num * 4 + store.max_index_num * 20
    first_start = store.mapped_file_size_commit_log + index
    assert first_start < 100 * 1024 * 1024  # RocketMQ's defaults: about 1.5 GB


def test_a_broker_conf_keeps_its_own_sizes(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=1073741824\n")
    props = _overrides(_broker_args("127.0.0.1:9876", tmp_path, 0, str(conf), None, [], None))
    assert "mappedFileSizeCommitLog" not in props
    assert props["maxIndexNum"] == str(DEV_STORE_SIZES["maxIndexNum"])


def test_grpc_default_port_taken_falls_back_to_a_free_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two standalones with set broker ports (as the peer harness starts them) must not both
    claim the default gRPC port: the second takes a free one (issue 18's peer run)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setattr(standalone, "DEFAULT_GRPC_PORT", port)
        props = _overrides(_broker_args("127.0.0.1:9876", tmp_path, 10911, None, None, [], None))
        assert props["grpcServerPort"] == "0"
    props = _overrides(_broker_args("127.0.0.1:9876", tmp_path, 10911, None, None, [], None))
    assert props["grpcServerPort"] == str(port)  # free again: the default is kept


def test_the_ha_port_is_a_free_one_unless_the_conf_sets_it(tmp_path: Path) -> None:
    """The broker's HA port would default to its port + 1, which another process may hold when
    the broker port was picked free (the peer harness could not start a standalone so): a
    standalone binds a free HA port instead, and a broker.conf's haListenPort is kept."""
    props = _overrides(_broker_args("127.0.0.1:9876", tmp_path, 10911, None, None, [], None))
    assert props["haListenPort"] == "0"
    assert load_properties(props).broker.effective_ha_listen_port == 0
    conf = tmp_path / "broker.conf"
    conf.write_text("haListenPort=10912\n")
    props = _overrides(_broker_args("127.0.0.1:9876", tmp_path, 10911, str(conf), None, [], None))
    assert "haListenPort" not in props
