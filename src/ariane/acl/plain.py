"""``plain_acl.yml`` documents (RocketMQ ``PlainPermissionManager.load`` /
``buildPlainAccessResource``, ``PlainAccessConfig``, ``AclConfig``) and their edits.

How it works: ``parse_document(text, path)`` turns one file's text into an ``AclDocument``:
its global white rules, its accounts compiled into ``Account`` records (permission bits, IP
rule, resource table with groups stored as ``%RETRY%<group>``) and its ``dataVersion``. Every
problem that upstream rejects raises ``AclError`` naming the file and the account: YAML that
does not parse or is not a mapping, keys of 6 characters or fewer, a ``topic=PERM`` entry that
does not split in two, a malformed IP rule, a value of the wrong type. Unknown permission words
count as DENY (as upstream) and are reported in ``warnings``.

``AclRules.merge(documents)`` builds what the validator reads: accounts from every file (an
access key defined in two files keeps the first, with a warning), global white rules from every
file. Nothing is shared between rule sets, so a server swaps a whole ``AclRules`` at once.

The edit functions (``update_account``, ``delete_account``, ``set_global_white``) take a
document's mapping and return a new one with ``dataVersion`` advanced; ``dump_document`` renders
it as YAML. They check their input as the admin API must (``checkPlainAccessConfig``,
``Permission.checkResourcePerms``), so a bad request never produces a file that fails to load.
Pure: text in, records and text out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ariane.acl.address import IpRule, parse_ip_rule
from ariane.acl.credentials import SessionCredentials, SigningKey, signing_key
from ariane.acl.permission import DENY, is_valid_perm_word, parse_perm
from ariane.common.topics import RETRY_PREFIX
from ariane.errors import AclError, RemoteProtocolError
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol._jsonfields import parse_object
from ariane.remoting.protocol.bodies import DataVersion

__all__ = [
    "KEY_MIN_LENGTH",
    "Account",
    "AclConfig",
    "AclDocument",
    "AclRules",
    "PlainAccessConfig",
    "credentials_from_tools_yml",
    "delete_account",
    "dump_document",
    "load_yaml_mapping",
    "parse_document",
    "set_global_white",
    "update_account",
]

#: accessKey and secretKey must be longer than this (``AclConstants.ACCESS_KEY_MIN_LENGTH``).
KEY_MIN_LENGTH = 6

_ACCOUNT_KEYS = frozenset(
    {
        "accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
        "defaultGroupPerm", "topicPerms", "groupPerms",
    }
)  # fmt: skip
_TOP_KEYS = frozenset({"globalWhiteRemoteAddresses", "accounts", "dataVersion"})


@dataclass(frozen=True, slots=True)
class PlainAccessConfig:
    """One account as written in the file and carried by the admin requests
    (``PlainAccessConfig``).

    Attributes:
        access_key: the account name.
        secret_key: its secret.
        white_remote_address: an IP rule that lets the account in without a signature.
        admin: whether it may send admin requests.
        default_topic_perm: permission word for topics not listed.
        default_group_perm: permission word for groups not listed.
        topic_perms: ``"topic=PERM"`` entries.
        group_perms: ``"group=PERM"`` entries.
    """

    access_key: str
    secret_key: str
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The fastjson property map of ``PlainAccessConfig`` (GET_BROKER_CLUSTER_ACL_CONFIG)."""
        out: dict[str, Any] = {"accessKey": self.access_key, "admin": self.admin}
        if self.default_group_perm is not None:
            out["defaultGroupPerm"] = self.default_group_perm
        if self.default_topic_perm is not None:
            out["defaultTopicPerm"] = self.default_topic_perm
        out["groupPerms"] = list(self.group_perms)
        out["secretKey"] = self.secret_key
        out["topicPerms"] = list(self.topic_perms)
        if self.white_remote_address is not None:
            out["whiteRemoteAddress"] = self.white_remote_address
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], where: str = "account") -> PlainAccessConfig:
        """Build from a YAML/JSON mapping (the file's or the wire's keys).

        Raises:
            AclError: a value has the wrong type.
        """
        return cls(
            access_key=_text(obj.get("accessKey"), where, "accessKey") or "",
            secret_key=_text(obj.get("secretKey"), where, "secretKey") or "",
            white_remote_address=_text(obj.get("whiteRemoteAddress"), where, "whiteRemoteAddress"),
            admin=_flag(obj.get("admin"), where),
            default_topic_perm=_text(obj.get("defaultTopicPerm"), where, "defaultTopicPerm"),
            default_group_perm=_text(obj.get("defaultGroupPerm"), where, "defaultGroupPerm"),
            topic_perms=_texts(obj.get("topicPerms"), where, "topicPerms"),
            group_perms=_texts(obj.get("groupPerms"), where, "groupPerms"),
        )


@dataclass(frozen=True, slots=True)
class Account:
    """A compiled account (``PlainAccessResource`` as the validator owns it).

    Attributes:
        config: the account as written.
        white_rule: its ``whiteRemoteAddress`` rule.
        default_topic_perm: bits for unlisted topics.
        default_group_perm: bits for unlisted groups.
        perms: resource -> bits; groups under ``%RETRY%<group>``.
        source: the file it came from.
        mac: the secret's HMAC-SHA1 key schedule (``signing_key``), for ``content_signature``.
    """

    config: PlainAccessConfig
    white_rule: IpRule
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int]
    source: str
    mac: SigningKey | None = None

    @property
    def access_key(self) -> str:
        """The account name."""
        return self.config.access_key

    @property
    def secret_key(self) -> str:
        """The account secret."""
        return self.config.secret_key

    @property
    def admin(self) -> bool:
        """Whether the account may send admin requests."""
        return self.config.admin


@dataclass(frozen=True, slots=True)
class AclDocument:
    """One parsed ACL file.

    Attributes:
        path: where it came from (used in messages and as its key).
        mapping: the YAML content as loaded (what the edit functions change).
        global_white: the ``globalWhiteRemoteAddresses`` rules.
        accounts: the accounts, in file order.
        data_version: the first ``dataVersion`` entry, or all zeros.
        warnings: non-fatal findings (unknown keys, unknown permission words).
    """

    path: str
    mapping: Mapping[str, Any]
    global_white: tuple[IpRule, ...]
    accounts: tuple[Account, ...]
    data_version: DataVersion
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AclRules:
    """Every loaded file merged: what one validation reads.

    Attributes:
        documents: the files, in load order (the default file first).
        accounts: access key -> account (the first file defining a key wins).
        global_white: global white rules of every file.
        warnings: everything the documents and the merge reported.
    """

    documents: tuple[AclDocument, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    global_white: tuple[IpRule, ...] = ()
    warnings: tuple[str, ...] = ()

    @classmethod
    def merge(cls, documents: Iterable[AclDocument]) -> AclRules:
        """Merge documents in order (see the module docstring)."""
        docs = tuple(documents)
        accounts: dict[str, Account] = {}
        white: list[IpRule] = []
        warnings: list[str] = []
        for doc in docs:
            warnings.extend(doc.warnings)
            white.extend(doc.global_white)
            for account in doc.accounts:
                first = accounts.get(account.access_key)
                if first is not None:
                    warnings.append(
                        f"{doc.path}: accessKey {account.access_key!r} is already defined in "
                        f"{first.source}; this definition is ignored"
                    )
                    continue
                accounts[account.access_key] = account
        return cls(docs, accounts, tuple(white), tuple(warnings))

    def document(self, path: str) -> AclDocument | None:
        """The loaded document of ``path``."""
        return next((d for d in self.documents if d.path == path), None)

    def all_configs(self) -> tuple[list[str], list[PlainAccessConfig]]:
        """Global white addresses and accounts of every file (``getAllAclConfig``)."""
        white = [rule.text for rule in self.global_white]
        return white, [account.config for account in self.accounts.values()]


# -- parsing ------------------------------------------------------------------------------------


def load_yaml_mapping(text: str | bytes, path: str) -> dict[str, Any]:
    """Parse YAML text that must hold a mapping (an empty file is an empty mapping).

    Raises:
        AclError: the text is not YAML or not a mapping.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise AclError(f"{path}: not valid YAML: {detail}") from None
    except (ValueError, RecursionError) as exc:  # odd scalars, absurd nesting
        raise AclError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AclError(f"{path}: the top level must be a mapping, not {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def parse_document(text: str | bytes, path: str) -> AclDocument:
    """Parse one ACL file (see the module docstring).

    Raises:
        AclError: the file is malformed (the message names the file and what).
    """
    mapping = load_yaml_mapping(text, path)
    return document_from_mapping(mapping, path)


def document_from_mapping(mapping: Mapping[str, Any], path: str) -> AclDocument:
    """``parse_document`` after the YAML step.

    Raises:
        AclError: the content is malformed.
    """
    warnings = [f"{path}: unknown key {k!r} ignored" for k in mapping if k not in _TOP_KEYS]
    white_texts = _texts(
        mapping.get("globalWhiteRemoteAddresses"), path, "globalWhiteRemoteAddresses"
    )
    white = tuple(_rule(t, path) for t in white_texts)
    raw_accounts = mapping.get("accounts")
    if raw_accounts is None:
        raw_accounts = []
    if not isinstance(raw_accounts, list):
        raise AclError(f"{path}: 'accounts' must be a list")
    accounts: list[Account] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_accounts):
        where = f"{path}: accounts[{index}]"
        if not isinstance(raw, dict):
            raise AclError(f"{where} must be a mapping")
        warnings.extend(
            f"{where}: unknown key {k!r} ignored" for k in raw if k not in _ACCOUNT_KEYS
        )
        account = build_account(PlainAccessConfig.from_json(raw, where), path, where, warnings)
        if account.access_key in seen:
            warnings.append(f"{where}: accessKey {account.access_key!r} repeated; first kept")
            continue
        seen.add(account.access_key)
        accounts.append(account)
    return AclDocument(
        path, dict(mapping), white, tuple(accounts), _data_version(mapping, path), tuple(warnings)
    )


def build_account(
    config: PlainAccessConfig,
    source: str,
    where: str = "account",
    warnings: list[str] | None = None,
) -> Account:
    """Compile one account (``buildPlainAccessResource``).

    Raises:
        AclError: a key is too short, a resource entry is malformed or the IP rule is bad.
    """
    check_keys(config, where)
    perms: dict[str, int] = {}
    for is_topic, entries in ((False, config.group_perms), (True, config.topic_perms)):
        for entry in entries:
            name, word = _split_resource(entry, "topic" if is_topic else "group", where)
            if warnings is not None and not is_valid_perm_word(word):
                warnings.append(f"{where}: permission {word!r} of {name!r} is not a word; DENY")
            perms[name if is_topic else RETRY_PREFIX + name] = parse_perm(word)
    for label, default in (
        ("defaultTopicPerm", config.default_topic_perm),
        ("defaultGroupPerm", config.default_group_perm),
    ):
        if warnings is not None and default is not None and not is_valid_perm_word(default):
            warnings.append(f"{where}: {label} {default!r} is not a permission word; DENY")
    return Account(
        config,
        _rule(config.white_remote_address, where),
        parse_perm(config.default_topic_perm) if config.default_topic_perm else DENY,
        parse_perm(config.default_group_perm) if config.default_group_perm else DENY,
        perms,
        source,
        signing_key(config.secret_key),
    )


def check_keys(config: PlainAccessConfig, where: str = "account") -> None:
    """``checkPlainAccessConfig``: both keys present and longer than 6 characters.

    Raises:
        AclError: they are not.
    """
    for label, value in (("accessKey", config.access_key), ("secretKey", config.secret_key)):
        if len(value) <= KEY_MIN_LENGTH:
            raise AclError(
                f"{where}: {label} must be longer than {KEY_MIN_LENGTH} characters"
                + (f" (accessKey {config.access_key!r})" if label == "secretKey" else "")
            )
        if value != value.strip() or any(ord(c) < 32 for c in value):
            raise AclError(f"{where}: {label} has blanks or control characters")


def check_resource_perms(entries: Sequence[str], kind: str) -> None:
    """``Permission.checkResourcePerms``: ``name=PERM`` with a real permission word.

    Raises:
        AclError: an entry is malformed.
    """
    for entry in entries:
        _name, word = _split_resource(entry, kind, f"{kind}Perms")
        if not is_valid_perm_word(word):
            raise AclError(
                f"{kind} permission {entry!r}: the permission must be PUB, SUB, PUB|SUB, "
                f"SUB|PUB or DENY"
            )


def _split_resource(entry: str, kind: str, where: str) -> tuple[str, str]:
    parts = [p for p in entry.split("=") if p]  # StringUtils.split drops empty tokens
    if len(parts) != 2 or not parts[0].strip():
        raise AclError(
            f"{where}: parse resource permission failed for {kind}: {entry!r} "
            f"(expected {kind}Name=PERM, e.g. {'topicA' if kind == 'topic' else 'groupA'}=SUB)"
        )
    return parts[0].strip(), parts[1].strip()


def _rule(text: str | None, where: str) -> IpRule:
    try:
        return parse_ip_rule(text)
    except AclError as exc:
        raise AclError(f"{where}: {exc}") from None


def _text(value: Any, where: str, key: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bool, dict, list)):
        raise AclError(f"{where}: {key} must be a string, got {value!r}")
    return str(value)


def _texts(value: Any, where: str, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    if not isinstance(value, list):
        raise AclError(f"{where}: {key} must be a list")
    out = []
    for item in value:
        if item is None:
            continue
        if isinstance(item, (dict, list, bool)):
            raise AclError(f"{where}: {key} entries must be strings, got {item!r}")
        out.append(str(item))
    return tuple(out)


def _flag(value: Any, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclError(f"{where}: admin must be true or false, got {value!r}")


def _data_version(mapping: Mapping[str, Any], path: str) -> DataVersion:
    raw = mapping.get("dataVersion")
    if not raw:
        return DataVersion()
    first = raw[0] if isinstance(raw, list) else raw
    if not isinstance(first, dict):
        raise AclError(f"{path}: dataVersion must be a list of {{timestamp, counter}}")
    try:
        return DataVersion(
            int(first.get("stateVersion", 0) or 0),
            int(first.get("timestamp", 0) or 0),
            int(first.get("counter", 0) or 0),
        )
    except (TypeError, ValueError):
        raise AclError(f"{path}: dataVersion values must be integers") from None


# -- edits ---------------------------------------------------------------------------------------


def _next_version(mapping: dict[str, Any], path: str, now_ms: int) -> None:
    version = _data_version(mapping, path).next_version(now_ms)
    mapping["dataVersion"] = [{"counter": version.counter, "timestamp": version.timestamp}]


def update_account(
    mapping: Mapping[str, Any], config: PlainAccessConfig, path: str, now_ms: int
) -> dict[str, Any]:
    """Create or replace ``config``'s account in a document (``updateAccessConfig``).

    Fields left ``None``/empty in ``config`` keep their old value when the account exists, as
    upstream's ``createAclAccessConfigMap`` does; ``admin`` is always written.

    Raises:
        AclError: the keys are too short, a permission entry or word is malformed, or the IP
            rule does not parse.
    """
    check_keys(config)
    check_resource_perms(config.topic_perms, "topic")
    check_resource_perms(config.group_perms, "group")
    for label, word in (
        ("defaultTopicPerm", config.default_topic_perm),
        ("defaultGroupPerm", config.default_group_perm),
    ):
        if word and not is_valid_perm_word(word):
            raise AclError(f"{label} {word!r} must be PUB, SUB, PUB|SUB, SUB|PUB or DENY")
    _rule(config.white_remote_address, "whiteRemoteAddress")
    out = dict(mapping)
    accounts = [dict(a) for a in (out.get("accounts") or []) if isinstance(a, dict)]
    entry: dict[str, Any] = next(
        (a for a in accounts if str(a.get("accessKey")) == config.access_key), {}
    )
    if not entry:
        accounts.append(entry)
    entry["accessKey"] = config.access_key
    entry["secretKey"] = config.secret_key
    if config.white_remote_address is not None:
        entry["whiteRemoteAddress"] = config.white_remote_address
    entry["admin"] = config.admin
    if config.default_topic_perm:
        entry["defaultTopicPerm"] = config.default_topic_perm
    if config.default_group_perm:
        entry["defaultGroupPerm"] = config.default_group_perm
    if config.topic_perms:
        entry["topicPerms"] = list(config.topic_perms)
    if config.group_perms:
        entry["groupPerms"] = list(config.group_perms)
    out["accounts"] = accounts
    _next_version(out, path, now_ms)
    document_from_mapping(out, path)  # what we write must load
    return out


def delete_account(
    mapping: Mapping[str, Any], access_key: str, path: str, now_ms: int
) -> dict[str, Any] | None:
    """The document without ``access_key``'s account, or None if it has none."""
    accounts = [a for a in (mapping.get("accounts") or []) if isinstance(a, dict)]
    kept = [a for a in accounts if str(a.get("accessKey")) != access_key]
    if len(kept) == len(accounts):
        return None
    out = dict(mapping)
    out["accounts"] = kept
    _next_version(out, path, now_ms)
    return out


def set_global_white(
    mapping: Mapping[str, Any], rules: Sequence[str], path: str, now_ms: int
) -> dict[str, Any]:
    """The document with ``globalWhiteRemoteAddresses`` replaced by ``rules``.

    Raises:
        AclError: a rule does not parse.
    """
    cleaned = [r.strip() for r in rules if r.strip()]
    for rule in cleaned:
        _rule(rule, "globalWhiteRemoteAddresses")
    out = dict(mapping)
    out["globalWhiteRemoteAddresses"] = cleaned
    _next_version(out, path, now_ms)
    return out


def dump_document(mapping: Mapping[str, Any]) -> str:
    """A document as YAML text (keys in RocketMQ's order, block style)."""
    order = ["globalWhiteRemoteAddresses", "accounts", "dataVersion"]
    ordered = {k: mapping[k] for k in order if k in mapping}
    ordered.update({k: v for k, v in mapping.items() if k not in ordered})
    return yaml.safe_dump(ordered, sort_keys=False, default_flow_style=False, allow_unicode=True)


# -- wire bodies ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AclConfig:
    """Every account and global white address a server holds (``AclConfig``, the body of
    GET_BROKER_CLUSTER_ACL_CONFIG).

    Attributes:
        global_white_addrs: the global white rules as written.
        accounts: the accounts as written (secrets included: admin only).
    """

    global_white_addrs: tuple[str, ...] = ()
    accounts: tuple[PlainAccessConfig, ...] = ()

    @classmethod
    def of(cls, rules: AclRules) -> AclConfig:
        """What ``rules`` hold."""
        white, configs = rules.all_configs()
        return cls(tuple(white), tuple(configs))

    def encode(self) -> bytes:
        """The JSON body (``GetBrokerClusterAclConfigResponseBody``)."""
        return fastjson.dumps(
            {
                "globalWhiteAddrs": list(self.global_white_addrs),
                "plainAccessConfigs": [a.to_json() for a in self.accounts],
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> AclConfig:
        """Parse the JSON body.

        Raises:
            RemoteProtocolError: the body is not such an object.
        """
        obj = parse_object(body, "AclConfig")
        try:
            white = _texts(obj.get("globalWhiteAddrs"), "AclConfig", "globalWhiteAddrs")
            raw = obj.get("plainAccessConfigs") or []
            if not isinstance(raw, list):
                raise AclError("plainAccessConfigs must be a list")
            accounts = tuple(
                PlainAccessConfig.from_json(a, "AclConfig") for a in raw if isinstance(a, dict)
            )
        except AclError as exc:
            raise RemoteProtocolError(f"AclConfig: {exc}") from None
        return cls(white, accounts)


def credentials_from_tools_yml(text: str | bytes, path: str) -> SessionCredentials | None:
    """The account of RocketMQ's ``conf/tools.yml`` (``accessKey``/``secretKey`` at the top
    level, as ``AclUtils.getAclRPCHook`` reads it); None when either is blank.

    Raises:
        AclError: the text is not a YAML mapping.
    """
    data = load_yaml_mapping(text, path)
    ak, sk = data.get("accessKey"), data.get("secretKey")
    if ak is None or sk is None or not str(ak).strip() or not str(sk).strip():
        return None
    return SessionCredentials(str(ak).strip(), str(sk).strip())
