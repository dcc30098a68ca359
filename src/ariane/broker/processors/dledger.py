"""DLedger operations on a broker (an Ariane extension; RocketMQ has DLedger's own tools):
ARIANE_DLEDGER_TRANSFER_LEADERSHIP asks the group's leader to hand over to another node
(``mqadmin transferLeadership``). The answer says the transfer started, or why it cannot:
the node is not a DLedger broker or not the leader, the transferee is unknown or too far
behind, a transfer is already under way."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ariane.broker.dledger import DLedgerReplication
from ariane.broker.processors import error, ok
from ariane.errors import HeaderFieldError
from ariane.raft import Code
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["DLedgerProcessor"]

_WHY = {
    Code.NOT_LEADER: "this node is not the group's leader; ask the master (brokerId 0)",
    Code.UNKNOWN_MEMBER: "no such node in dLegerPeers",
    Code.FALL_BEHIND_TOO_MUCH: "the node is too far behind; try again once it caught up",
    Code.LEADER_TRANSFERRING: "a transfer is already under way",
}


class DLedgerProcessor:
    """Handles ARIANE_DLEDGER_TRANSFER_LEADERSHIP.

    Args:
        broker: the broker asked.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    def register(self, server: RemotingServer) -> None:
        """Register the handler on ``server``."""
        server.register_processor(RequestCode.ARIANE_DLEDGER_TRANSFER_LEADERSHIP, self.transfer)

    def transfer(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """ARIANE_DLEDGER_TRANSFER_LEADERSHIP (90011)."""
        replication = self.broker.replication
        if not isinstance(replication, DLedgerReplication):
            return error(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                "not a DLedger broker (enableDLegerCommitLog=false)",
            )
        try:
            header = h.TransferLeadershipRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderFieldError as exc:
            return error(ResponseCode.INVALID_PARAMETER, str(exc))
        code = replication.transfer_leadership(header.transferee_id)
        if code is Code.SUCCESS:
            return ok(remark=f"leadership goes to {header.transferee_id}")
        why = _WHY.get(code, "refused")
        answer = (
            ResponseCode.INVALID_PARAMETER
            if code is Code.UNKNOWN_MEMBER
            else ResponseCode.ILLEGAL_OPERATION
        )
        return error(answer, f"DLedger {code.name}: {why}")
