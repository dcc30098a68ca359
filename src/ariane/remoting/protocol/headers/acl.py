"""Custom headers of the plain-ACL administration requests (RocketMQ 4.9/5.1
``CreateAccessConfigRequestHeader`` and friends)."""

from __future__ import annotations

from ariane.remoting.protocol.headers._base import CommandHeader, header

__all__ = [
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
]


@header()
class CreateAccessConfigRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG (50); ``topicPerms``/``groupPerms`` are comma lists of
    ``name=PERM``."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@header()
class DeleteAccessConfigRequestHeader(CommandHeader):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str


@header()
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): a comma list of IP rules and, optionally, the
    file to change (default: ``plain_acl.yml``)."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@header()
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """Answer to GET_BROKER_CLUSTER_ACL_INFO (52): ``version`` is the DataVersion JSON of
    ``plain_acl.yml``, ``allAclFileVersion`` a JSON map of file path -> DataVersion."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None
