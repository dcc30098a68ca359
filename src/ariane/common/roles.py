"""Broker roles (RocketMQ ``BrokerRole``) and broker ids.

A broker group (one ``brokerName``) has one master, broker id 0, and slaves with ids > 0. A
master is ASYNC_MASTER (answers a send once the message is stored locally; slaves copy it in
the background) or SYNC_MASTER (answers once a slave also has it). A SLAVE copies the
master's CommitLog, serves reads and refuses writes. A broker's role can change while it runs
(a DLedger group elects a new leader; an operator promotes a slave), so code asks the broker
for its current role instead of reading it from the start-up configuration.
"""

from __future__ import annotations

import enum

__all__ = ["MASTER_ID", "BrokerRole", "parse_role"]

#: ``MixAll.MASTER_ID``: the broker id of a group's master.
MASTER_ID = 0


class BrokerRole(enum.Enum):
    """``brokerRole``."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"

    @property
    def is_master(self) -> bool:
        """True for both master roles."""
        return self is not BrokerRole.SLAVE

    @property
    def is_slave(self) -> bool:
        """True for SLAVE."""
        return self is BrokerRole.SLAVE


def parse_role(text: str) -> BrokerRole:
    """The role named by ``text`` (case-insensitive, surrounding blanks ignored).

    Raises:
        ValueError: not a role name.
    """
    try:
        return BrokerRole(text.strip().upper())
    except ValueError:
        raise ValueError(f"must be ASYNC_MASTER, SYNC_MASTER or SLAVE, got {text!r}") from None
