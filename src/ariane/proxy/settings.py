"""The Telemetry settings exchange (RocketMQ proxy's ``GrpcClientSettingsManager`` and
``ClientActivity#processAndWriteClientSettings``).

How it works: a client opens Telemetry and writes its ``Settings``; the server answers with
``TelemetryCommand{status OK, settings}`` where ``settings`` is the client's own settings
merged with what the server decides: for producers the retry policy (an *exponential*
backoff: the Node.js and Java producers never finish starting without one) and the largest
body; for consumers the batch size, long-polling time, FIFO flag of the group and the group's
retry policy (max attempts = ``retryMaxTimes`` + 1, customized or exponential backoff). Pure
functions; the stored settings are what ReceiveMessage and Heartbeat consult later.
"""

from __future__ import annotations

from typing import Any

from ariane.proxy.config import ProxyConfig
from ariane.proxy.convert import to_duration
from ariane.proxy.status import ProxyError
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig

__all__ = ["DEFAULT_RETRY_DELAYS_MS", "effective_settings", "retry_delay_ms"]

#: RocketMQ's default customized retry policy (the 18 delay levels from 1 s).
DEFAULT_RETRY_DELAYS_MS: tuple[int, ...] = (
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
    420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
)  # fmt: skip
_PRODUCER_ATTEMPTS = 3
_PRODUCER_BACKOFF_MS = (10, 1_000, 2.0)
_CONSUMER_EXP_BACKOFF_MS = (5_000, 7_200_000, 2.0)


def _group_policy(group: SubscriptionGroupConfig | None) -> tuple[str, dict[str, Any]]:
    policy = (group.group_retry_policy if group is not None else None) or {}
    kind = str(policy.get("type", "CUSTOMIZED")).upper()
    if kind == "EXPONENTIAL":
        return kind, dict(policy.get("exponentialRetryPolicy") or {})
    return "CUSTOMIZED", dict(policy.get("customizedRetryPolicy") or {})


def retry_delay_ms(group: SubscriptionGroupConfig | None, reconsume_times: int) -> int:
    """How long a message of ``group`` stays invisible before its next attempt."""
    kind, policy = _group_policy(group)
    if kind == "EXPONENTIAL":
        initial = int(policy.get("initial", _CONSUMER_EXP_BACKOFF_MS[0]))
        top = int(policy.get("max", _CONSUMER_EXP_BACKOFF_MS[1]))
        multiplier = float(policy.get("multiplier", _CONSUMER_EXP_BACKOFF_MS[2]))
        return int(min(top, initial * multiplier ** max(0, reconsume_times)))
    delays = [int(x) for x in policy.get("next") or DEFAULT_RETRY_DELAYS_MS]
    return delays[min(max(0, reconsume_times), len(delays) - 1)]


def _exponential(initial_ms: int, max_ms: int, multiplier: float) -> pb.ExponentialBackoff:
    return pb.ExponentialBackoff(
        initial=to_duration(initial_ms), max=to_duration(max_ms), multiplier=multiplier
    )


def effective_settings(
    client: pb.Settings,
    cfg: ProxyConfig,
    group: SubscriptionGroupConfig | None,
) -> pb.Settings:
    """The settings the server answers a client's ``client`` settings with.

    Args:
        client: what the client sent.
        cfg: the proxy configuration.
        group: the consumer group's configuration (consumers), if it exists.

    Raises:
        ProxyError: neither publishing nor subscription is set (BAD_REQUEST).
    """
    out = pb.Settings()
    out.CopyFrom(client)
    kind = client.WhichOneof("pub_sub")
    if kind == "publishing":
        initial, top, multiplier = _PRODUCER_BACKOFF_MS
        out.backoff_policy.Clear()
        out.backoff_policy.max_attempts = _PRODUCER_ATTEMPTS
        out.backoff_policy.exponential_backoff.CopyFrom(
            _exponential(int(initial), int(top), float(multiplier))
        )
        out.publishing.max_body_size = cfg.max_message_size
        out.publishing.validate_message_type = cfg.enable_topic_message_type_check
    elif kind == "subscription":
        sub = out.subscription
        sub.receive_batch_size = cfg.max_batch_size
        sub.long_polling_timeout.CopyFrom(to_duration(cfg.max_long_polling_ms))
        sub.fifo = bool(group is not None and group.consume_message_orderly)
        out.backoff_policy.Clear()
        retry_max = group.retry_max_times if group is not None else 16
        out.backoff_policy.max_attempts = retry_max + 1
        policy_kind, policy = _group_policy(group)
        if policy_kind == "EXPONENTIAL":
            out.backoff_policy.exponential_backoff.CopyFrom(
                _exponential(
                    int(policy.get("initial", _CONSUMER_EXP_BACKOFF_MS[0])),
                    int(policy.get("max", _CONSUMER_EXP_BACKOFF_MS[1])),
                    float(policy.get("multiplier", _CONSUMER_EXP_BACKOFF_MS[2])),
                )
            )
        else:
            delays = [int(x) for x in policy.get("next") or DEFAULT_RETRY_DELAYS_MS]
            out.backoff_policy.customized_backoff.next.extend(to_duration(d) for d in delays)
    else:
        raise ProxyError(pb.BAD_REQUEST, "there is no publishing or subscription data in settings")
    out.metric.Clear()
    out.metric.on = False
    return out
