"""``tools/acl_onoff_summary.py``, the summary of the ACL on/off benchmark driver: per-round
ratios, their median and distribution-free interval, the pooled ratio and CPU per message."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parents[3] / "tools" / "acl_onoff_summary.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("acl_onoff_summary", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


summary_tool = _tool()

LINES = [
    "1 w1 off 1000 1.0 0.020 0.030 0",
    "1 w1 on 900 1.0 0.020 0.030 0",
    "2 w1 on 1200 2.0 0.030 0.040 1",
    "2 w1 off 1000 2.0 0.020 0.030 0",
    "round 3 w1 off: no result",
    "1 w3 off 6400 1.0 0.010 0.020 0",
]


def test_parse_keeps_only_run_lines() -> None:
    runs = summary_tool.parse(LINES)
    assert [(r.round, r.workload, r.mode, r.sent, r.failed) for r in runs] == [
        (1, "w1", "off", 1000, 0),
        (1, "w1", "on", 900, 0),
        (2, "w1", "on", 1200, 1),
        (2, "w1", "off", 1000, 0),
        (1, "w3", "off", 6400, 0),
    ]


def test_summary_ratios_pooled_and_cpu() -> None:
    lines = summary_tool.summary(summary_tool.parse(LINES))
    assert lines == [
        "w1:",
        "  on/off per round: 0.90, 1.20",
        "  median 1.050 (50% interval 0.90-1.20), pooled 1.050, rounds >= 0.90: 2/2",
        "  msg/s pooled off 667, on 700; failed off 0, on 1",
        "  CPU µs/msg off -> on: client 20.00 -> 23.81 (+3.81), broker 30.00 -> 33.33 (+3.33),"
        " both 50.00 -> 57.14 (x1.143)",
        "w3:",
        "  no complete round",
    ]


def test_median_interval_order_statistics() -> None:
    twelve = [float(x) for x in range(1, 13)]
    low, high, level = summary_tool.median_interval(twelve)
    assert (low, high) == (3.0, 10.0)
    assert level == 1 - 2 * (1 + 12 + 66) / 4096
    assert summary_tool.median_interval([2.0, 1.0]) == (1.0, 2.0, 0.5)
    assert summary_tool.median_interval([float(x) for x in range(15)])[:2] == (3.0, 11.0)
