"""What a broker's GET_BROKER_RUNTIME_INFO table (``brokerStatus``) says, as the numbers
admin tools show per broker (``clusterList``'s columns, the dashboard's Cluster page): the TPS
strings' first value, today's and yesterday's totals, hours of data kept. Pure functions.
"""

from __future__ import annotations

from typing import Any

__all__ = ["add_replication_lag", "broker_row", "first_float", "int_of"]


def first_float(text: str | None) -> float:
    """The first number of a ``"1.0 2.0 3.0"`` TPS string (0 when absent or bad)."""
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def int_of(text: str | None) -> int:
    """An integer value of the table (0 when absent or bad)."""
    try:
        return int(text or "0")
    except ValueError:
        return 0


def broker_row(
    cluster: str, name: str, bid: int, addr: str, rt: dict[str, str] | None, now_ms: int
) -> dict[str, Any]:
    """One ``clusterList`` row from a broker's GET_BROKER_RUNTIME_INFO table (``None``: the
    broker did not answer)."""
    row: dict[str, Any] = {"cluster": cluster, "brokerName": name, "brokerId": bid, "addr": addr}
    if rt is None:
        row["reachable"] = False
        return row
    earliest = int_of(rt.get("earliestMessageTimeStamp"))
    row.update(
        reachable=True,
        version=rt.get("brokerVersionDesc", ""),
        inTps=first_float(rt.get("putTps")),
        outTps=first_float(rt.get("getTransferredTps") or rt.get("getTransferedTps")),
        sendQueueSize=int_of(rt.get("sendThreadPoolQueueSize")),
        sendQueueHeadWaitMs=int_of(rt.get("sendThreadPoolQueueHeadWaitTimeMills")),
        pullQueueSize=int_of(rt.get("pullThreadPoolQueueSize")),
        pageCacheLockTimeMs=int_of(rt.get("pageCacheLockTimeMills")),
        hoursOfData=round((now_ms - earliest) / 3_600_000, 2) if earliest > 0 else 0.0,
        commitLogDiskRatio=first_float(rt.get("commitLogDiskRatio")),
        activated=rt.get("brokerActive", "true") == "true",
        brokerPermission=int_of(rt.get("brokerPermission")),
        inTotalYesterday=int_of(rt.get("msgPutTotalTodayMorning"))
        - int_of(rt.get("msgPutTotalYesterdayMorning")),
        outTotalYesterday=int_of(rt.get("msgGetTotalTodayMorning"))
        - int_of(rt.get("msgGetTotalYesterdayMorning")),
        inTotalToday=int_of(rt.get("msgPutTotalTodayNow"))
        - int_of(rt.get("msgPutTotalTodayMorning")),
        outTotalToday=int_of(rt.get("msgGetTotalTodayNow"))
        - int_of(rt.get("msgGetTotalTodayMorning")),
        role=rt.get("brokerRole") or ("ASYNC_MASTER" if bid == 0 else "SLAVE"),
        maxOffset=int_of(rt.get("commitLogMaxOffset")),
    )
    if "dLegerRole" in rt:  # a DLedger node: its Raft role and term (issue 14)
        row.update(raftRole=rt["dLegerRole"], raftTerm=int_of(rt.get("dLegerTerm")))
    return row


def add_replication_lag(rows: list[dict[str, Any]]) -> None:
    """Give every reachable slave's row ``behindBytes``: how far its CommitLog ends before its
    master's (None while the master does not answer)."""
    masters = {
        (r["cluster"], r["brokerName"]): r for r in rows if r["brokerId"] == 0 and r["reachable"]
    }
    for r in rows:
        if r["brokerId"] == 0 or not r["reachable"]:
            continue
        master = masters.get((r["cluster"], r["brokerName"]))
        r["behindBytes"] = None if master is None else max(0, master["maxOffset"] - r["maxOffset"])
