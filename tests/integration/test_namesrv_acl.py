"""NameServer ACL: its write requests need an admin account, brokers sign their
registrations, reads stay open."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from ariane.client import AccessDeniedError, Admin, ClientConfig, SessionCredentials
from ariane.client._instance import ClientInstance
from tests.support.cluster import start_broker, start_namesrv
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration

RULES = {
    "accounts": [
        {"accessKey": "brokeradmin", "secretKey": "broker-secret", "admin": True},
        {"accessKey": "plainuser", "secretKey": "plain-secret", "defaultTopicPerm": "PUB|SUB"},
    ]
}


def test_writes_need_an_admin_account_and_brokers_sign_registrations(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(RULES), encoding="utf-8")
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"aclEnable=true\nrocketmqHome={home}\naclWatchIntervalMs=100\n")
    ns = start_namesrv(tmp_path / "ns", "-c", str(conf))
    brokers = []
    try:
        addr = ns.ready["namesrv"]
        signed = start_broker(
            tmp_path / "a", addr, {"brokerName": "signed-a", "accessKey": "brokeradmin",
                                   "secretKey": "broker-secret"},
        )  # fmt: skip
        brokers.append(signed)
        unsigned = start_broker(tmp_path / "b", addr, {"brokerName": "unsigned-b"})
        brokers.append(unsigned)

        async def names() -> set[str]:
            async with Admin(namesrv_addr=addr) as admin:  # reads need no account
                info = await admin.api.get_cluster_info()
            return set(info.broker_addr_table)

        assert wait_until(lambda: asyncio.run(names()) == {"signed-a"}, timeout_s=10)
        assert wait_until(lambda: "No accessKey is configured" in unsigned.output(), 10)

        async def kv(creds: SessionCredentials | None) -> None:
            config = ClientConfig(namesrv_addr=addr, instance_name=f"kv{id(creds)}",
                                  credentials=creds)  # fmt: skip
            instance = ClientInstance(config)
            try:
                await instance.api.put_kv_config("NS", "k", "v")
            finally:
                await instance.close()

        with pytest.raises(AccessDeniedError, match="No accessKey is configured"):
            asyncio.run(kv(None))
        with pytest.raises(AccessDeniedError, match="Need admin permission for request code=100"):
            asyncio.run(kv(SessionCredentials("plainuser", "plain-secret")))
        asyncio.run(kv(SessionCredentials("brokeradmin", "broker-secret")))
    finally:
        for proc in brokers:
            proc.stop()
        ns.stop()
