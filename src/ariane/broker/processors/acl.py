"""The plain-ACL administration requests (the ACL part of RocketMQ 4.9/5.1
``AdminBrokerProcessor``): UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51),
GET_BROKER_CLUSTER_ACL_INFO (52), UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) and
GET_BROKER_CLUSTER_ACL_CONFIG (54).

Edits are written to the YAML files atomically and in force before the answer is sent. A
refused edit is answered with RocketMQ's codes (209, 210, 211) and a remark saying why. With
``aclEnable=false`` every one of these is answered SYSTEM_ERROR, naming the setting. When ACL is
on, only admin accounts reach them (``ariane.acl.permission.ADMIN_CODES``), except the version
query 52 that any authenticated account may read.
"""

from __future__ import annotations

from typing import Any, Protocol

from ariane.acl.plain import AclConfig, PlainAccessConfig
from ariane.broker.acl import BrokerAcl
from ariane.broker.context import BrokerContext
from ariane.broker.processors import error, ok
from ariane.errors import AclError
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer

__all__ = [
    "DELETE_ACL_CONFIG_FAILED",
    "UPDATE_AND_CREATE_ACL_CONFIG_FAILED",
    "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED",
    "AclAdminProcessor",
    "AclBrokerContext",
]

#: RocketMQ 4.9/5.1 response codes of refused ACL edits (reused by POP codes in 5.3).
UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
DELETE_ACL_CONFIG_FAILED = 210
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211

_OFF = "ACL is not enabled on this broker (set aclEnable=true in broker.conf and restart)"


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


class AclBrokerContext(BrokerContext, Protocol):
    """The broker as this processor sees it: the usual context plus its ACL shell."""

    #: the ACL files and hook, None when ``aclEnable`` is off.
    acl: BrokerAcl | None


class AclAdminProcessor:
    """Handles the ACL admin requests.

    Args:
        broker: the broker whose ACL files are edited.
    """

    def __init__(self, broker: AclBrokerContext) -> None:
        self.broker = broker

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        table: dict[int, Any] = {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_account,
            RequestCode.DELETE_ACL_CONFIG: self.delete_account,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_version,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white,
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: self.get_config,
        }
        for code, handler in table.items():
            server.register_processor(code, handler)

    @property
    def _acl(self) -> BrokerAcl | None:
        return self.broker.acl

    async def update_account(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_ACL_CONFIG (50)."""
        acl = self._acl
        if acl is None:
            return error(ResponseCode.SYSTEM_ERROR, _OFF)
        header = h.CreateAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        config = PlainAccessConfig(
            access_key=header.access_key,
            secret_key=header.secret_key or "",
            white_remote_address=header.white_remote_address,
            admin=header.admin,
            default_topic_perm=header.default_topic_perm,
            default_group_perm=header.default_group_perm,
            topic_perms=_split(header.topic_perms),
            group_perms=_split(header.group_perms),
        )
        try:
            await acl.update_account(config)
        except AclError as exc:
            return error(UPDATE_AND_CREATE_ACL_CONFIG_FAILED, str(exc))
        return ok()

    async def delete_account(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_ACL_CONFIG (51)."""
        acl = self._acl
        if acl is None:
            return error(ResponseCode.SYSTEM_ERROR, _OFF)
        header = h.DeleteAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        try:
            deleted = await acl.delete_account(header.access_key)
        except AclError as exc:
            return error(DELETE_ACL_CONFIG_FAILED, str(exc))
        if not deleted:
            return error(
                DELETE_ACL_CONFIG_FAILED, f"no ACL file defines accessKey {header.access_key!r}"
            )
        return ok()

    async def update_global_white(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53)."""
        acl = self._acl
        if acl is None:
            return error(ResponseCode.SYSTEM_ERROR, _OFF)
        header = h.UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext_fields(request.ext_fields)
        try:
            await acl.set_global_white(
                _split(header.global_white_addrs), header.acl_file_full_path or None
            )
        except AclError as exc:
            return error(UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(exc))
        return ok()

    def get_version(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_INFO (52): the files' DataVersions."""
        acl = self._acl
        if acl is None:
            return error(ResponseCode.SYSTEM_ERROR, _OFF)
        docs = acl.files.documents
        default = docs.get(acl.paths.default_file)
        version = default.data_version.to_json() if default is not None else {}
        files = {path: doc.data_version.to_json() for path, doc in sorted(docs.items())}
        config = self.broker.config
        ext = h.GetBrokerAclConfigResponseHeader(
            version=fastjson.dumps(version).decode(),
            broker_name=config.broker_name,
            broker_addr=self.broker.broker_addr,
            cluster_name=config.broker_cluster_name,
            all_acl_file_version=fastjson.dumps(files).decode(),
        ).to_ext_fields()
        return ok(ext)

    def get_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54): every account and global white rule."""
        acl = self._acl
        if acl is None:
            return error(ResponseCode.SYSTEM_ERROR, _OFF)
        return ok(body=AclConfig.of(acl.files.rules).encode())
