"""Replication status (RocketMQ 5 ``AdminBrokerProcessor.getBrokerHaStatus``):
GET_BROKER_HA_STATUS answers the ``HARuntimeInfo`` JSON (``mqadmin haStatus``): for a master
its end offset and each slave's acknowledged offset, gap and transfer rate; for a slave its
master address, state and offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ariane.broker.processors import ok
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["HAStatusProcessor"]


class HAStatusProcessor:
    """Handles GET_BROKER_HA_STATUS.

    Args:
        broker: the broker asked.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    def register(self, server: RemotingServer) -> None:
        """Register the handler on ``server``."""
        server.register_processor(RequestCode.GET_BROKER_HA_STATUS, self.ha_status)

    def ha_status(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_HA_STATUS (907)."""
        return ok(body=fastjson.dumps(self.broker.replication.ha_status()))
