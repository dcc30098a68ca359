"""Checking filter subscriptions with the brokers when a consumer starts (RocketMQ
``MQClientInstance.checkClientInBroker``).

How it works: a SQL92 subscription is compiled by the broker, not by the client, so a typo or
a broker without ``enablePropertyFilter`` would only show as pull errors logged for ever.
``check_subscriptions`` sends CHECK_CLIENT_CONFIG for every non-tag subscription to one broker
of each broker group hosting the topic (the master when there is one); a topic without a route
yet is checked with the brokers the client instance knows, else with every broker of the
NameServer's cluster table. A refusal raises ``SubscriptionRefusedError`` with the broker's
reason; a broker that cannot be reached is skipped (it answers the same error to pulls
later, and the heartbeat logs it), so a broker being down never stops a consumer starting.
Tag subscriptions need no check: every broker filters tags.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from ariane.client._instance import ClientInstance
from ariane.client.errors import SubscriptionRefusedError
from ariane.errors import ArianeError, BrokerResponseError
from ariane.remoting.protocol.client_bodies import SubscriptionData

__all__ = ["check_subscriptions"]

logger = logging.getLogger(__name__)


async def _brokers_for(instance: ClientInstance, topic: str) -> list[str]:
    """One address per broker group: of the topic's route, else every known broker group."""
    route = instance.topic_route_table.get(topic)
    if route is not None:
        datas = route.broker_datas
    elif instance.broker_addr_table:
        return sorted(
            table.get(0) or table[min(table)] for table in instance.broker_addr_table.values()
        )
    else:
        try:
            datas = list((await instance.api.get_cluster_info()).broker_addr_table.values())
        except ArianeError as exc:
            logger.info("cannot list brokers to check subscriptions with: %s", exc)
            return []
    return sorted({addr for bd in datas if (addr := bd.select_broker_addr()) is not None})


async def check_subscriptions(
    instance: ClientInstance, group: str, subscriptions: Iterable[SubscriptionData]
) -> None:
    """CHECK_CLIENT_CONFIG every non-tag subscription with the brokers that would serve it.

    Raises:
        SubscriptionRefusedError: a broker refused one (its remark says why).
    """
    for sd in subscriptions:
        if sd.is_tag_type:
            continue
        addrs = await _brokers_for(instance, sd.topic)
        if not addrs:
            logger.warning(
                "subscription of %s to %s (%s) not checked: no broker known yet",
                group, sd.topic, sd.expression_type,
            )  # fmt: skip
        answers = await asyncio.gather(
            *(
                instance.api.check_client_config(addr, group, instance.client_id, sd)
                for addr in addrs
            ),
            return_exceptions=True,
        )
        for addr, answer in zip(addrs, answers, strict=True):
            if isinstance(answer, BrokerResponseError):
                raise SubscriptionRefusedError(
                    group, sd.topic, sd.sub_string, addr, answer.code, answer.remark
                ) from answer
            if isinstance(answer, ArianeError):
                logger.warning(
                    "subscription of %s to %s not checked with %s: %s", group, sd.topic, addr,
                    answer,
                )  # fmt: skip
            elif isinstance(answer, BaseException):
                raise answer
