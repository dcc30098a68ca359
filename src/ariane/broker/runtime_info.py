"""The GET_BROKER_RUNTIME_INFO table (RocketMQ ``AdminBrokerProcessor.prepareRuntimeInfo``
plus ``DefaultMessageStore.getRuntimeInfo``): what ``mqadmin brokerStatus`` prints and
``mqadmin clusterList`` reads (``putTps``, ``getTransferredTps``, the ``msgPutTotal*`` /
``msgGetTotal*`` day totals, ``commitLogDiskRatio``...). All values are strings.
"""

from __future__ import annotations

import math
import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["human_readable_bytes", "runtime_info"]


def human_readable_bytes(n: int) -> str:
    """``MixAll.humanReadableByteCount(n, false)``: ``"512 B"``, ``"1.5 GiB"``."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def runtime_info(broker: BrokerContext) -> dict[str, str]:
    """Everything GET_BROKER_RUNTIME_INFO answers for ``broker``."""
    store = broker.store
    stats = broker.stats
    info = store.runtime_info()
    info.update(stats.runtime_rates())
    behind = max(0, store.commit_log.max_offset - store.commit_log.flushed_where)
    info.update(
        {
            "brokerVersionDesc": "V5_3_3",
            "brokerVersion": "479",
            "brokerName": broker.config.broker_name,
            "brokerAddr": broker.broker_addr,
            "brokerActive": "true",
            "brokerPermission": str(broker.config.broker_permission),
            "msgPutTotalYesterdayMorning": str(stats.msg_put_total_yesterday_morning),
            "msgPutTotalTodayMorning": str(stats.msg_put_total_today_morning),
            "msgPutTotalTodayNow": str(stats.msg_put_total_today_now()),
            "msgGetTotalYesterdayMorning": str(stats.msg_get_total_yesterday_morning),
            "msgGetTotalTodayMorning": str(stats.msg_get_total_today_morning),
            "msgGetTotalTodayNow": str(stats.get_total),
            "getTransferedTps": info["getTransferredTps"],  # RocketMQ 4.x spelling
            "remainHowManyDataToFlush": human_readable_bytes(behind),
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueSize": str(broker.hold.held_count),
            "pullThreadPoolQueueCapacity": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": "0",
            "earliestMessageTimeStamp": str(broker.earliest_message_time()),
            "startAcceptSendRequestTimeStamp": "0",
            "pullHoldRequests": str(broker.hold.held_count),
            "clientConnections": str(len(broker.remoting.channels)),
        }
    )
    try:
        usage = shutil.disk_usage(store.config.store_path_root_dir)
    except OSError:
        pass
    else:
        info["commitLogDirCapacity"] = (
            f"Total : {human_readable_bytes(usage.total)}, "
            f"Free : {human_readable_bytes(usage.free)}."
        )
    info.update(broker.schedule.running_stats())
    info.update(broker.timer.runtime_info())
    info.update(broker.replication.runtime_info())
    return info
