"""Pulling: PULL_MESSAGE and LITE_PULL_MESSAGE (RocketMQ ``PullMessageProcessor`` and
``DefaultPullMessageResultHandler``).

How it works: check the broker and the topic may be read, the group exists (auto-created by
default) and may consume, and the queue id; take the tag filter from the request
(SUBSCRIPTION flag) or from the subscription the group registered by heartbeat, compiled once
into a TAG or SQL92 filter (:mod:`ariane.broker.filters`; SQL92 needs
``enablePropertyFilter``, a bad expression is answered SUBSCRIPTION_PARSE_FAILED); jump to an
offset an administrator reset (server-side reset) unless the pull already asks for it; read
from the store and map its status to
the answer (FOUND -> SUCCESS with the stored records joined as they are, never decoded;
caught up -> PULL_NOT_FOUND; filtered out -> PULL_RETRY_IMMEDIATELY; out of range ->
PULL_OFFSET_MOVED with the offset to continue from). A PULL_NOT_FOUND for a request with the
SUSPEND flag is held by the :class:`~ariane.broker.long_polling.PullRequestHoldService`
instead of answered, and re-run later without the right to be held again. The offset the
consumer piggy-backs (COMMIT_OFFSET flag) is committed on the first run only, and never on a
slave. Replication (book §19): with ``slaveReadEnable`` the answer's ``suggestWhichBrokerId``
sends a consumer reading messages no longer in memory to the group's
``whichBrokerWhenConsumeSlowly`` (else to its ``brokerId``); without it every answer, a
slave's included, points back to the master. A slave that replicates from its master right
now (so the master is up) points every read that is not cold back to the master, as RocketMQ
5 does, and holds a pull that finds nothing at most ``shortPollingTimeMills``: a consumer that
caught up on the slave returns to the master within a second (RocketMQ 5 answers it
PULL_RETRY_IMMEDIATELY at once, which makes a client whose route lacks the returned master
pull in a tight loop). While the master is down, a slave serves and holds pulls like a master. A slave without ``offsetCheckInSlave`` never
moves a consumer's offset (it may just be behind): PULL_OFFSET_MOVED becomes
PULL_RETRY_IMMEDIATELY at the same offset.

ARIANE_BULK_PULL_MESSAGE (an Ariane request code, for bulk readers such as the Spark source)
is a PULL_MESSAGE with the same header, checks (ACL included) and answer, but never held and
never committing, whose size is bounded by the broker's ``bulkPullMaxMessages`` and
``bulkPullMaxBytes`` instead of the per-pull transfer limits (32 records, 256 KiB in memory),
so a reader takes a queue range in a few megabyte-sized answers; the store copies such a run
of back-to-back records once (``StoreReads._read_run``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ariane.broker.filters import FilterFactory, PullFilter, RetryPullFilter
from ariane.broker.processors import error
from ariane.common.roles import MASTER_ID
from ariane.common.sysflag import (
    PERM_READ,
    PULL_COMMIT_OFFSET,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
)
from ariane.common.topics import DLQ_PREFIX, RETRY_PREFIX
from ariane.errors import InvalidArgumentError
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.client_bodies import MessageModel
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer
from ariane.store import GetResult, GetStatus, ReadLimits

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["PullMessageProcessor"]

_NOT_FOUND = ResponseCode.PULL_NOT_FOUND
_STATUS_CODE: dict[GetStatus, int] = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: _NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: _NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
#: Upper bound of ``maxMsgNums``: it also bounds how many queue entries one pull may scan.
_MAX_MSG_NUMS = 1024


class PullMessageProcessor:
    """Handles PULL_MESSAGE.

    Args:
        broker: the broker whose store, topics, groups and offsets are used.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.store = broker.store
        self.filters = FilterFactory()

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        server.register_processor(RequestCode.PULL_MESSAGE, self.pull)
        server.register_processor(RequestCode.LITE_PULL_MESSAGE, self.pull)
        server.register_processor(RequestCode.ARIANE_BULK_PULL_MESSAGE, self.bulk_pull)

    def pull(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """A fresh pull (may be held)."""
        return self.process(ctx, request, True)

    def bulk_pull(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """ARIANE_BULK_PULL_MESSAGE: a pull under the bulk limits, never held."""
        cfg = self.broker.config
        limits = ReadLimits(cfg.bulk_pull_max_messages, cfg.bulk_pull_max_bytes)
        return self.process(ctx, request, False, limits)

    def pull_again(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """Re-run a held pull (never held again)."""
        return self.process(ctx, request, False)

    def message_filter(
        self, expression: str | None, expression_type: str | None
    ) -> PullFilter | RemotingCommand:
        """The (cached) filter of a subscription, or the error answer for it."""
        try:
            flt = self.filters.build(expression, expression_type)
        except InvalidArgumentError as exc:
            return error(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"parse the consumer's subscription[{expression}] failed: {exc}",
            )
        if flt.is_sql and not self.broker.config.enable_property_filter:
            return error(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {expression_type}",
            )
        return flt

    def _retry_filter(self, group: str, inner: PullFilter) -> PullFilter:
        """``filterSupportRetry``: also apply the group's filter of the original topic."""
        info = self.broker.clients.consumer_group(group)

        def original(topic: str) -> PullFilter | None:
            sub = info.subscriptions.get(topic) if info is not None else None
            if sub is None:
                return None
            return self.filters.try_build(sub.sub_string, sub.expression_type)

        return RetryPullFilter(inner, original)

    def process(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        allow_suspend: bool,
        limits: ReadLimits | None = None,
    ) -> RemotingCommand | None:
        """``processRequest(channel, request, brokerAllowSuspend)``: check access, build the
        filter, honour a server-side reset, commit the piggy-backed offset, read (under
        ``limits`` when given: a bulk pull), and answer (or hold the request)."""
        header = h.PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        checked = self._check_access(ctx, header)
        if isinstance(checked, RemotingCommand):
            return checked
        flt = self._filter_of(header, checked)
        if isinstance(flt, RemotingCommand):
            return flt
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        offsets = self.broker.offsets
        if self.broker.config.use_server_side_reset_offset:
            reset = offsets.take_reset(group, topic, queue_id)
            if reset is not None and reset != header.queue_offset:
                return self._moved(topic, queue_id, reset)
        slave = self.broker.role.is_slave
        if allow_suspend and header.sys_flag & PULL_COMMIT_OFFSET and not slave:
            offsets.commit(group, topic, queue_id, header.commit_offset)
        top = _MAX_MSG_NUMS if limits is None else limits.messages
        max_nums = min(max(header.max_msg_nums, 1), top)
        res = self.store.get_message(
            group, topic, queue_id, header.queue_offset, max_nums, flt, limits
        )
        answer = self._code_and_body(header, res)
        if isinstance(answer, RemotingCommand):
            return answer
        code, body = answer
        next_begin = res.next_begin_offset
        keep_offset = slave and not self.broker.config.offset_check_in_slave
        if code == ResponseCode.PULL_OFFSET_MOVED and keep_offset:
            # a slave behind its master must not move consumers: retry at the same offset
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            next_begin = header.queue_offset
        suggest = self._suggest(checked, res)
        hold_ms = header.suspend_timeout_millis
        if slave and not res.suggest_pulling_from_slave and self.broker.replication.master_alive:
            # a slave sends a consumer that is not reading cold messages back to its live
            # master (RocketMQ 5), and holds an empty pull no longer than a short poll, so a
            # consumer that caught up here returns soon, without spinning if its route does
            # not know the master yet
            suggest = MASTER_ID
            hold_ms = min(hold_ms, self.broker.config.short_polling_time_ms)
        offsets.record_pull(group, topic, queue_id, next_begin)
        if code == _NOT_FOUND and allow_suspend and self._hold(ctx, request, header, flt, hold_ms):
            return None
        ext = {
            "suggestWhichBrokerId": str(suggest),
            "nextBeginOffset": str(next_begin),
            "minOffset": str(res.min_offset),
            "maxOffset": str(res.max_offset),
        }
        return RemotingCommand.response(code, res.status.value, ext, body)

    def _suggest(self, cfg: SubscriptionGroupConfig, res: GetResult) -> int:
        """``suggestWhichBrokerId``: with ``slaveReadEnable``, the group's
        ``whichBrokerWhenConsumeSlowly`` for reads of messages no longer in memory, else its
        ``brokerId``; without it, always the master."""
        if not self.broker.config.slave_read_enable:
            return MASTER_ID
        if res.suggest_pulling_from_slave:
            return cfg.which_broker_when_consume_slowly
        return cfg.broker_id

    def _check_access(
        self, ctx: RequestContext, header: h.PullMessageRequestHeader
    ) -> SubscriptionGroupConfig | RemotingCommand:
        """The group's configuration when the broker, the group, the topic and the queue id
        allow this pull; else the error answer."""
        broker = self.broker
        if not broker.config.broker_permission & PERM_READ:
            return error(
                ResponseCode.NO_PERMISSION,
                f"the broker[{broker.broker_addr}] pulling message is forbidden",
            )
        group = header.consumer_group
        cfg = broker.groups.find(group)
        if cfg is None:
            return error(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if not cfg.consume_enable:
            return error(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        topic = header.topic
        tc = broker.topics.table.get(topic)
        if tc is None:
            return error(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not tc.perm & PERM_READ and not _admin_reads_dlq(header.consumer_group, topic):
            return error(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        queue_id = header.queue_id
        if not 0 <= queue_id < tc.read_queue_nums:
            return error(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{ctx.remote_addr}]",
            )
        return cfg

    def _filter_of(
        self, header: h.PullMessageRequestHeader, cfg: SubscriptionGroupConfig
    ) -> PullFilter | RemotingCommand:
        """The filter of the pull: from the request (SUBSCRIPTION flag) or from the
        subscription the group registered by heartbeat; wrapped for retry topics."""
        group, topic = header.consumer_group, header.topic
        if header.sys_flag & PULL_SUBSCRIPTION:
            flt = self.message_filter(header.subscription, header.expression_type)
        else:
            group_info = self.broker.clients.consumer_group(group)
            if group_info is None:
                return error(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's group info not exist, group: {group}",
                )
            if (
                group_info.message_model is MessageModel.BROADCASTING
                and not cfg.consume_broadcast_enable
            ):
                return error(
                    ResponseCode.NO_PERMISSION,
                    f"the consumer group[{group}] can not consume by broadcast way",
                )
            sub = group_info.subscriptions.get(topic)
            if sub is None:
                return error(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's subscription not exist, group: {group}, topic: {topic}",
                )
            if sub.sub_version < header.sub_version:
                return error(
                    ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
                )
            flt = self.message_filter(sub.sub_string, sub.expression_type)
        if isinstance(flt, RemotingCommand):
            return flt
        if self.broker.config.filter_support_retry and topic.startswith(RETRY_PREFIX):
            flt = self._retry_filter(group, flt)
        return flt

    def _code_and_body(
        self, header: h.PullMessageRequestHeader, res: GetResult
    ) -> tuple[int, bytes | None] | RemotingCommand:
        """The answer code and body for a store read (the records joined as stored)."""
        status = res.status
        if status is GetStatus.FOUND:
            self.broker.stats.on_get(header.consumer_group, header.topic, len(res.messages))
            joined = res.joined
            return ResponseCode.SUCCESS, b"".join(res.messages) if joined is None else joined
        code = _STATUS_CODE.get(status, -1)
        if code == -1:
            if status is GetStatus.SERVICE_NOT_AVAILABLE:
                return error(ResponseCode.SYSTEM_ERROR, "store getMessage return null")
            # NO_MATCHED_LOGIC_QUEUE / NO_MESSAGE_IN_QUEUE
            code = ResponseCode.PULL_OFFSET_MOVED if header.queue_offset != 0 else _NOT_FOUND
        return code, None

    def _hold(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: h.PullMessageRequestHeader,
        flt: PullFilter,
        hold_ms: int,
    ) -> bool:
        """Hand a caught-up pull with the SUSPEND flag to the hold service for up to
        ``hold_ms``; True if held."""
        if not header.sys_flag & PULL_SUSPEND:
            return False
        return self.broker.hold.suspend(
            ctx, request, header.topic, header.queue_id, header.queue_offset, flt, hold_ms
        )

    def _moved(self, topic: str, queue_id: int, offset: int) -> RemotingCommand:
        ext = h.PullMessageResponseHeader(
            suggest_which_broker_id=0,
            next_begin_offset=offset,
            min_offset=self.store.get_min_offset_in_queue(topic, queue_id),
            max_offset=self.store.get_max_offset_in_queue(topic, queue_id),
        ).to_ext_fields()
        return RemotingCommand.response(ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET", ext)


#: The group admin tools pull with (``MixAll.TOOLS_CONSUMER_GROUP``).
_TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"


def _admin_reads_dlq(group: str, topic: str) -> bool:
    """A DLQ topic is write-only, so no consumer group takes its messages again; admin tools
    (the dashboard's DLQ page, ``printMsg``) may still read it with ``TOOLS_CONSUMER``, which
    commits nothing (issue 17)."""
    return group == _TOOLS_CONSUMER_GROUP and topic.startswith(DLQ_PREFIX)
