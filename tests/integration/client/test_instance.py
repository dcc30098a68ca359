"""ClientInstance against real processes: sharing, heartbeats, the inner producer."""

from __future__ import annotations

import pytest

from ariane.client import Admin, ClientConfig, ClientInstance, Message, Producer
from ariane.client._producer import new_producer
from tests.integration.client.conftest import producer_clients, run, wait_for_route
from tests.support.cluster import Cluster
from tests.support.polling import await_for

pytestmark = pytest.mark.integration


def test_clients_of_one_process_share_one_instance_and_its_connections(cluster: Cluster) -> None:
    async def go() -> None:
        async with (
            Producer("pg_share_1", namesrv_addr=cluster.namesrv_addr) as one,
            Producer("pg_share_2", namesrv_addr=cluster.namesrv_addr) as two,
            Admin(namesrv_addr=cluster.namesrv_addr) as admin,
        ):
            assert one.instance is two.instance
            await one.send(Message("InstShared", b"1"))
            await two.send(Message("InstShared", b"2"))
            assert len(one.instance.remoting._channels) == 2  # one NameServer + one broker
            await wait_for_route(admin, "InstShared")

            # pg_share_2 is listed with the client id of pg_share_1's instance
            ids = await await_for(
                lambda: producer_clients(admin, "pg_share_2", "InstShared"),
                lambda i: one.instance.client_id in i,
            )
            assert one.instance.client_id in ids

    run(go())


def test_inner_producer_sends_with_the_instance_and_closes_with_it(cluster: Cluster) -> None:
    async def go() -> None:
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr, instance_name="inner-test")
        async with Producer("pg_owner", client_config=config) as owner:
            instance = owner.instance
            inner = await instance.inner_producer(new_producer)
            assert inner is await instance.inner_producer(new_producer)
            assert inner.instance is instance
            assert "CLIENT_INNER_PRODUCER" in instance.producers
            result = await inner.send(Message("InstInner", b"from the inner producer"))
            assert result.ok
        assert isinstance(instance, ClientInstance)
        assert not instance.started  # the owner's close closed it, inner producer and all
        assert "CLIENT_INNER_PRODUCER" not in instance.producers

    run(go())
