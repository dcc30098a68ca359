"""Which broker settings may change over the wire (UPDATE_BROKER_CONFIG), and within which
bounds: the closed admin plane of issue 11.

How it works: RocketMQ copies any property of an UPDATE_BROKER_CONFIG body onto its live
config objects and persists it, so one request can move the store root, change the CommitLog
file size (the next start then sets every CommitLog file aside), turn ACL off or point the
broker at another NameServer. Ariane accepts only the keys listed here:

* ``LIVE_KEYS`` take effect at once (the broker reads them on every use);
* ``RESTART_KEYS`` are store tunables that are safe to change but are read when the store
  starts: they are saved and apply after a restart, and the answer says so;

each with a range (``fileReservedTime=0`` would delete every file at the next check). Every
other key (store geometry, paths, identity, network, role, flush type, ``aclEnable``,
credentials...) is refused with an error naming it and saying to edit ``broker.conf``.
``safe_overrides`` applies the same rule to the saved file at start, so a value stored by an
older version that took anything never reaches the store. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ariane.errors import ConfigError

__all__ = [
    "LIVE_KEYS",
    "RESTART_KEYS",
    "RESTART_REMARK",
    "UpdatePlan",
    "check_wire_update",
    "is_wire_key",
    "safe_overrides",
]

Check = Callable[[str], str | None]  # the raw value -> a problem, or None


def _int_in(low: int, high: int) -> Check:
    def check(raw: str) -> str | None:
        try:
            value = int(raw.strip())
        except ValueError:
            return f"must be an integer in {low}..{high}"
        return None if low <= value <= high else f"must be {low}..{high}, got {value}"

    return check


def _bool(raw: str) -> str | None:
    return None if raw.strip().lower() in ("true", "false") else "must be true or false"


def _text(raw: str) -> str | None:
    return None if raw.strip() and len(raw) <= 256 else "must be 1..256 characters"


_HOURS = re.compile(r"\s*([01]?\d|2[0-3])(\s*;\s*([01]?\d|2[0-3]))*\s*")


def _hours(raw: str) -> str | None:
    return None if _HOURS.fullmatch(raw) else "must be hours 00..23 separated by ';' (e.g. 04)"


_DAY_MS = 86_400_000

#: Broker settings applied at once, with their bounds.
LIVE_KEYS: Mapping[str, Check] = {
    "brokerPermission": _int_in(0, 15),
    "autoCreateTopicEnable": _bool,
    "autoCreateSubscriptionGroup": _bool,
    "longPollingEnable": _bool,
    "shortPollingTimeMills": _int_in(100, 60_000),
    "channelExpiredTimeout": _int_in(10_000, _DAY_MS),
    "rebalanceLockMaxLiveTime": _int_in(1_000, _DAY_MS),
    "rejectTransactionMessage": _bool,
    "notifyConsumerIdsChangedEnable": _bool,
    "traceOn": _bool,
    "regionId": _text,
    "enablePropertyFilter": _bool,
    "filterSupportRetry": _bool,
    "rejectPullConsumerEnable": _bool,
    "useServerSideResetOffset": _bool,
    "transactionTimeOut": _int_in(0, _DAY_MS),
    "transactionCheckInterval": _int_in(1_000, _DAY_MS),
    "transactionCheckMax": _int_in(0, 10_000),
    "flushDelayOffsetInterval": _int_in(1_000, 3_600_000),
    "forceRegister": _bool,
    "registerBrokerTimeoutMills": _int_in(1_000, 60_000),
    "registerNameServerPeriod": _int_in(10_000, 60_000),
    "autoCreateTopicLimit": _int_in(0, 1_000_000),
    "autoCreateSubscriptionGroupLimit": _int_in(0, 1_000_000),
    "maxClientsPerGroup": _int_in(1, 100_000),
}

#: Settings that are safe to change but read when the store (or the broker) starts.
RESTART_KEYS: Mapping[str, Check] = {
    "fileReservedTime": _int_in(1, 24 * 3650),
    "deleteWhen": _hours,
    "diskMaxUsedSpaceRatio": _int_in(10, 95),
    "diskSpaceWarningLevelRatio": _int_in(10, 99),
    "diskSpaceCleanForciblyRatio": _int_in(10, 99),
    "cleanFileForciblyEnable": _bool,
    "cleanResourceInterval": _int_in(1_000, 3_600_000),
    "deleteCommitLogFilesInterval": _int_in(0, 60_000),
    "destroyMapedFileIntervalForcibly": _int_in(1_000, 3_600_000),
    "maxMessageSize": _int_in(1_024, 64 * 1024 * 1024),
    "flushIntervalCommitLog": _int_in(1, 10_000),
    "flushCommitLogLeastPages": _int_in(0, 1_024),
    "flushCommitLogThoroughInterval": _int_in(1, 600_000),
    "flushIntervalConsumeQueue": _int_in(1, 10_000),
    "flushConsumeQueueLeastPages": _int_in(0, 1_024),
    "flushConsumeQueueThoroughInterval": _int_in(1, 600_000),
    "syncFlushTimeout": _int_in(100, 60_000),
    "maxTransferBytesOnMessageInMemory": _int_in(1_024, 64 * 1024 * 1024),
    "maxTransferCountOnMessageInMemory": _int_in(1, 65_535),
    "maxTransferBytesOnMessageInDisk": _int_in(1_024, 64 * 1024 * 1024),
    "maxTransferCountOnMessageInDisk": _int_in(1, 65_535),
    "accessMessageInMemoryMaxRatio": _int_in(0, 100),
    "defaultQueryMaxNum": _int_in(1, 65_535),
    "checkCRCOnRecover": _bool,
    # broker settings read once at start
    "flushConsumerOffsetInterval": _int_in(100, 600_000),
}


#: How the answer to UPDATE_BROKER_CONFIG names the keys that apply after a restart.
RESTART_REMARK = "saved, applies after a restart: "


def is_wire_key(key: str) -> bool:
    """Whether UPDATE_BROKER_CONFIG may change ``key`` at all."""
    return key in LIVE_KEYS or key in RESTART_KEYS


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    """What an accepted update does.

    Attributes:
        live: keys applied at once.
        after_restart: keys saved that apply at the next start.
    """

    live: tuple[str, ...]
    after_restart: tuple[str, ...]


def _refusal() -> str:
    return (
        "cannot be changed over the wire (store geometry, paths, identity, network, role and "
        "security settings are read from broker.conf at start: edit it and restart)"
    )


def check_wire_update(props: Mapping[str, str]) -> UpdatePlan:
    """Check an UPDATE_BROKER_CONFIG body whole (nothing changes unless all of it passes).

    Raises:
        ConfigError: a key may not change over the wire, or a value is out of bounds (names
            the key).
    """
    live: list[str] = []
    later: list[str] = []
    for key in sorted(props):
        check = LIVE_KEYS.get(key) or RESTART_KEYS.get(key)
        if check is None:
            raise ConfigError(key, _refusal())
        problem = check(props[key])
        if problem is not None:
            detail = problem if "got" in problem else f"{problem}, got {props[key]!r}"
            raise ConfigError(key, detail)
        (live if key in LIVE_KEYS else later).append(key)
    return UpdatePlan(tuple(live), tuple(later))


def safe_overrides(saved: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The entries of a saved overrides file that the wire may set, and the keys dropped."""
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for key, value in saved.items():
        check = LIVE_KEYS.get(key) or RESTART_KEYS.get(key)
        if check is None or check(value) is not None:
            dropped.append(key)
        else:
            kept[key] = value
    return kept, sorted(dropped)
