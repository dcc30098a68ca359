"""The plain-ACL administration requests of ``ClientAPI`` (RocketMQ ``MQClientAPIImpl``'s
``createPlainAccessConfig``, ``deletePlainAccessConfig``, ``updateGlobalWhiteAddrsConfig``,
``getBrokerClusterAclInfo``, ``getBrokerClusterConfig``).

A broker refuses these with UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209),
DELETE_ACL_CONFIG_FAILED (210) or UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED (211) and a remark
that says why; the methods raise ``BrokerResponseError`` with that remark.
"""

from __future__ import annotations

from typing import NamedTuple

from ariane.acl.plain import AclConfig, PlainAccessConfig
from ariane.client._rpc import RpcBase
from ariane.errors import RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.bodies import DataVersion
from ariane.remoting.protocol.codes import RequestCode

__all__ = ["AclRequests", "AclVersionInfo"]


class AclVersionInfo(NamedTuple):
    """One broker's ACL versions (``ClusterAclVersionInfo``).

    Attributes:
        broker_name: the broker.
        broker_addr: its address.
        cluster_name: its cluster.
        version: the DataVersion of its ``plain_acl.yml``.
        file_versions: every ACL file it loaded -> its DataVersion.
    """

    broker_name: str
    broker_addr: str
    cluster_name: str
    version: DataVersion
    file_versions: dict[str, DataVersion]


def _version(text: str | None) -> DataVersion:
    if not text:
        return DataVersion()
    return DataVersion.from_json(fastjson.loads(text))


class AclRequests(RpcBase):
    """The ACL admin requests (mixed into ``ClientAPI``)."""

    async def update_acl_config(
        self, broker_addr: str, config: PlainAccessConfig, timeout_ms: int | None = None
    ) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: create or update one account."""
        header = h.CreateAccessConfigRequestHeader(
            access_key=config.access_key,
            secret_key=config.secret_key or None,
            white_remote_address=config.white_remote_address,
            admin=config.admin,
            default_topic_perm=config.default_topic_perm,
            default_group_perm=config.default_group_perm,
            topic_perms=",".join(config.topic_perms) or None,
            group_perms=",".join(config.group_perms) or None,
        )
        await self.call(
            broker_addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header, timeout_ms=timeout_ms
        )

    async def delete_acl_config(
        self, broker_addr: str, access_key: str, timeout_ms: int | None = None
    ) -> None:
        """DELETE_ACL_CONFIG: delete one account."""
        header = h.DeleteAccessConfigRequestHeader(access_key=access_key)
        await self.call(broker_addr, RequestCode.DELETE_ACL_CONFIG, header, timeout_ms=timeout_ms)

    async def update_global_white_addrs(
        self,
        broker_addr: str,
        addrs: list[str],
        acl_file_full_path: str | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: replace a file's global white rules."""
        header = h.UpdateGlobalWhiteAddrsConfigRequestHeader(
            global_white_addrs=",".join(addrs), acl_file_full_path=acl_file_full_path
        )
        await self.call(
            broker_addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header, timeout_ms=timeout_ms
        )

    async def get_acl_version(
        self, broker_addr: str, timeout_ms: int | None = None
    ) -> AclVersionInfo:
        """GET_BROKER_CLUSTER_ACL_INFO: the broker's ACL file versions."""
        response = await self.call(
            broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, timeout_ms=timeout_ms
        )
        header = h.GetBrokerAclConfigResponseHeader.from_ext_fields(response.ext_fields)
        try:
            files = fastjson.loads(header.all_acl_file_version or "{}")
            if not isinstance(files, dict):
                raise RemoteProtocolError("allAclFileVersion is not a JSON object")
            versions = {str(k): DataVersion.from_json(v) for k, v in files.items()}
            version = _version(header.version)
        except (ValueError, TypeError) as exc:
            raise RemoteProtocolError(f"GetBrokerAclConfigResponseHeader: {exc}") from None
        return AclVersionInfo(
            header.broker_name, header.broker_addr, header.cluster_name, version, versions
        )

    async def get_acl_config(self, broker_addr: str, timeout_ms: int | None = None) -> AclConfig:
        """GET_BROKER_CLUSTER_ACL_CONFIG: every account (with secrets) and white address."""
        response = await self.call(
            broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, timeout_ms=timeout_ms
        )
        return AclConfig.decode(response.body or b"{}")
