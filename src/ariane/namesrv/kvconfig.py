"""The NameServer's namespaced key/value config (RocketMQ ``KVConfigManager``).

State is ``namespace -> {key -> value}``; RocketMQ itself uses the namespace ORDER_TOPIC_CONFIG
(ordered-topic queue layouts). It is persisted as ``{"configTable": {...}}`` — the same file
RocketMQ writes to ``kvConfig.json`` — atomically: written to a temporary file in the same
directory, fsynced, renamed over the old file, and the directory fsynced, so a crash leaves
either the old or the new file, never a torn one. A file that exists but does not parse stops
the NameServer from starting (rather than being silently replaced and lost).
"""

from __future__ import annotations

from ariane.common.fileio import write_file_atomically
from ariane.errors import ConfigError, RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import as_object

__all__ = ["ORDER_TOPIC_CONFIG", "KVConfigManager", "write_file_atomically"]

#: ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``.
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    """Namespaced string table."""

    def __init__(self) -> None:
        self.config_table: dict[str, dict[str, str]] = {}

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set a value (creating the namespace)."""
        self.config_table.setdefault(namespace, {})[key] = value

    def count(self) -> int:
        """Entries over every namespace."""
        return sum(len(table) for table in self.config_table.values())

    def has(self, namespace: str, key: str) -> bool:
        """Whether ``namespace``/``key`` exists."""
        return key in self.config_table.get(namespace, {})

    def get(self, namespace: str, key: str) -> str | None:
        """A value, or ``None``."""
        table = self.config_table.get(namespace)
        return None if table is None else table.get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Remove a key (the namespace stays, possibly empty, as in RocketMQ)."""
        table = self.config_table.get(namespace)
        if table is not None:
            table.pop(key, None)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace, or ``None`` if it never existed."""
        table = self.config_table.get(namespace)
        return None if table is None else dict(table)

    def encode(self) -> bytes:
        """The persisted form, ``{"configTable": {...}}``."""
        return fastjson.dumps({"configTable": self.config_table})

    @classmethod
    def decode(cls, data: bytes) -> KVConfigManager:
        """Parse the persisted form.

        Raises:
            RemoteProtocolError: the text is not a KV config table.
        """
        manager = cls()
        root = as_object(fastjson.loads(data), "kvConfig")
        for namespace, table in as_object(root.get("configTable") or {}, "configTable").items():
            entries = as_object(table or {}, f"configTable.{namespace}")
            manager.config_table[str(namespace)] = {
                str(k): v if isinstance(v, str) else fastjson.dumps(v).decode()
                for k, v in entries.items()
                if v is not None
            }
        return manager

    @classmethod
    def load(cls, path: str) -> KVConfigManager:
        """Read the persisted table; a missing or empty file gives an empty table.

        Raises:
            ConfigError: the file exists but cannot be read or parsed (names ``kvConfigPath``).
        """
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise ConfigError("kvConfigPath", f"cannot read {path}: {exc}") from None
        if not data.strip():
            return cls()
        try:
            return cls.decode(data)
        except RemoteProtocolError as exc:
            raise ConfigError("kvConfigPath", f"{path} is not a KV config file: {exc}") from None
