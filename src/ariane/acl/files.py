"""The set of ACL files a server loads (RocketMQ 4.9 ``PlainPermissionManager.load``: the
default ``conf/plain_acl.yml`` plus every ``*.yml``/``*.yaml`` under ``conf/acl``), as a pure
state machine over file contents.

How it works: the server shell reads the files (``AclPaths`` says which) and hands their
contents to ``AclFileSet.refresh``. A file whose bytes did not change is skipped; a changed file
is parsed; a file that fails to parse keeps its previous rules (or none if it never loaded) and
its error is reported once, until its bytes change again; a file that disappeared is dropped.
When anything changed, the merged ``AclRules`` is rebuilt whole (the default file first, then
the others in path order), so a request sees the old or the new rules, never a mix. Pure: no
file is opened here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ariane.acl.plain import AclDocument, AclRules, parse_document
from ariane.errors import AclError

__all__ = ["ACL_SUFFIXES", "AclFileSet", "AclPaths", "RefreshReport"]

#: File name endings loaded from the ACL directory.
ACL_SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True, slots=True)
class AclPaths:
    """Where a server's ACL files are.

    Attributes:
        home: ``rocketmqHome``.
        default_file: ``{home}/conf/plain_acl.yml`` (global white rules and new accounts).
        acl_dir: ``{home}/conf/acl``, read recursively.
    """

    home: str
    default_file: str
    acl_dir: str

    @classmethod
    def of(cls, home: str, plain_file: str = "conf/plain_acl.yml") -> AclPaths:
        """The paths under ``home`` (made absolute, as the file reader reports them)."""
        root = os.path.abspath(home)
        return cls(root, os.path.join(root, plain_file), os.path.join(root, "conf", "acl"))

    def owns(self, path: str) -> bool:
        """Whether ``path`` is an ACL file location of this home (the default file or a YAML
        file under the ACL directory); admin requests may only name such files."""
        full = os.path.abspath(path)
        if full == self.default_file:
            return True
        return full.startswith(self.acl_dir + os.sep) and full.endswith(ACL_SUFFIXES)


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What one refresh did.

    Attributes:
        loaded: files (re)loaded.
        removed: files that disappeared.
        errors: file -> why it was not loaded (reported once per content).
        warnings: non-fatal findings of the new rules (only when something changed).
    """

    loaded: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether the rules were rebuilt."""
        return bool(self.loaded or self.removed)

    def log_records(self, accounts: int) -> list[tuple[int, str]]:
        """What a server should log about this refresh: (``logging`` level, line) pairs."""
        records = [
            (logging.ERROR, f"ACL file not loaded, its previous rules stay: {why}")
            for why in self.errors.values()
        ]
        if self.changed:
            records.extend((logging.WARNING, f"ACL: {w}") for w in self.warnings)
            files = ", ".join(self.loaded + self.removed)
            records.append((logging.INFO, f"ACL rules loaded ({files}): {accounts} account(s)"))
        return records


class AclFileSet:
    """The loaded ACL files and the rules built from them.

    Args:
        paths: where the files are.

    Attributes:
        rules: the rules in force.
    """

    def __init__(self, paths: AclPaths) -> None:
        self.paths = paths
        self.rules = AclRules()
        self._seen: dict[str, bytes] = {}
        self._docs: dict[str, AclDocument] = {}
        self._broken: dict[str, str] = {}

    @property
    def broken(self) -> dict[str, str]:
        """Files whose current content does not load -> why (their old rules stay)."""
        return dict(self._broken)

    @property
    def documents(self) -> dict[str, AclDocument]:
        """The loaded documents by path."""
        return dict(self._docs)

    def document_of(self, access_key: str) -> AclDocument | None:
        """The document that defines ``access_key``."""
        account = self.rules.accounts.get(access_key)
        return self._docs.get(account.source) if account is not None else None

    def refresh(
        self, contents: Mapping[str, bytes], unreadable: Mapping[str, str] = {}
    ) -> RefreshReport:
        """Take in the files as they are now.

        Args:
            contents: path -> bytes of every ACL file that exists.
            unreadable: path -> why a file that exists could not be read (its old rules stay).
        """
        unreadable = unreadable or {}
        loaded: list[str] = []
        errors: dict[str, str] = {}
        for path, data in contents.items():
            if self._seen.get(path) == data:
                continue
            self._seen[path] = data
            try:
                self._docs[path] = parse_document(data, path)
            except AclError as exc:
                errors[path] = self._broken[path] = str(exc)
                continue
            self._broken.pop(path, None)
            loaded.append(path)
        for path, why in unreadable.items():
            if self._seen.get(path) != b"\0unreadable":
                self._seen[path] = b"\0unreadable"
                errors[path] = self._broken[path] = f"{path}: cannot read: {why}"
        removed = [p for p in self._docs if p not in contents and p not in unreadable]
        for path in removed:
            del self._docs[path]
        for path in [p for p in self._seen if p not in contents and p not in unreadable]:
            del self._seen[path]
            self._broken.pop(path, None)
        if not (loaded or removed):
            return RefreshReport(errors=errors)
        default = self.paths.default_file
        order = sorted(self._docs, key=lambda p: (p != default, p))
        self.rules = AclRules.merge(self._docs[p] for p in order)
        return RefreshReport(tuple(loaded), tuple(removed), errors, self.rules.warnings)
