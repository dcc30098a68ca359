"""The request families every server exports: ``rocketmq_rpc_latency`` (histogram, ms) and
``ariane_rpc_oneway_requests_total``."""

from __future__ import annotations

from ariane.observability.families import Families
from ariane.remoting.metrics import RpcSnapshot, request_code_name, response_code_name

__all__ = ["add_rpc_families", "label_bool"]


def label_bool(flag: bool) -> str:
    """RocketMQ's boolean label values."""
    return "true" if flag else "false"


def add_rpc_families(fam: Families, rpc: RpcSnapshot) -> None:
    """Add the request families of one ``RpcMetrics`` snapshot."""
    hist = fam.histogram(
        "rocketmq_rpc_latency",
        "Time from receiving a request to answering it in milliseconds",
        ["protocol_type", "request_code", "response_code", "is_long_polling", "result"],
    )
    for (req, resp, long_polling), h in sorted(rpc.latency.items()):
        labels = [
            "remoting",
            request_code_name(req),
            response_code_name(resp),
            label_bool(long_polling),
            "success",
        ]
        hist.add(labels, h)
    one = fam.counter(
        "ariane_rpc_oneway_requests_total", "One-way requests received", ["request_code"]
    )
    for code, n in sorted(rpc.oneway.items()):
        one.add([request_code_name(code)], n)
