"""Summary of an ACL on/off run of ``tools/acl_onoff.sh`` (issue 11's benchmark bar).

Reads the lines the driver writes, one per ``ariane bench producer`` run::

    <round> <workload> <off|on> <sent> <seconds> <client CPU s> <broker CPU s> <failed>

and prints per workload: the on/off throughput ratio of every round (the two runs of a round
are back to back, their order alternating), the median of those ratios with a
distribution-free interval of at least 90 % where the rounds allow it (order statistics), the pooled ratio (all
messages over all seconds, on over off), how many rounds meet the bar, and the client's and
the broker's CPU per message off and on (pooled: CPU seconds over messages).

    python3 tools/acl_onoff_summary.py RUNS_FILE [BAR]    # BAR: default 0.90
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    """One ``ariane bench producer`` run."""

    round: int
    workload: str
    mode: str
    sent: int
    seconds: float
    client_cpu_s: float
    broker_cpu_s: float
    failed: int


def parse(lines: list[str]) -> list[Run]:
    """The runs of the driver's lines (lines that are not eight fields are skipped)."""
    runs = []
    for line in lines:
        f = line.split()
        if len(f) != 8 or f[2] not in ("off", "on"):
            continue
        runs.append(
            Run(int(f[0]), f[1], f[2], int(f[3]), float(f[4]), float(f[5]), float(f[6]), int(f[7]))
        )
    return runs


def coverage(n: int, k: int) -> float:
    """How often the k-th smallest and k-th largest of n samples enclose the true median."""
    return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(k)) / float(2**n)


def median_interval(values: list[float], level: float = 0.90) -> tuple[float, float, float]:
    """A distribution-free interval for the median: (low, high, coverage), the k-th smallest
    and k-th largest value, k the largest rank whose coverage is still at least ``level``
    (k = 1, the whole range, when even that falls short: few rounds)."""
    xs = sorted(values)
    n = len(xs)
    k = 1
    for j in range(2, n // 2 + 1):
        if coverage(n, j) >= level:
            k = j
    return xs[k - 1], xs[n - k], coverage(n, k)


def _rate(runs: list[Run]) -> float:
    seconds = sum(r.seconds for r in runs)
    return sum(r.sent for r in runs) / seconds if seconds else 0.0


def _per_msg(runs: list[Run], attr: str) -> float:
    sent = sum(r.sent for r in runs)
    return sum(getattr(r, attr) for r in runs) * 1e6 / sent if sent else 0.0


def workload_summary(runs: list[Run], bar: float = 0.90) -> list[str]:
    """The lines printed for one workload's runs."""
    pairs: dict[int, dict[str, Run]] = {}
    for run in runs:
        pairs.setdefault(run.round, {})[run.mode] = run
    ratios = []
    for number in sorted(pairs):
        pair = pairs[number]
        if "on" in pair and "off" in pair and pair["off"].sent and pair["on"].seconds:
            off, on = pair["off"], pair["on"]
            ratios.append((on.sent / on.seconds) / (off.sent / off.seconds))
    off_runs = [r for r in runs if r.mode == "off"]
    on_runs = [r for r in runs if r.mode == "on"]
    if not ratios:
        return ["  no complete round"]
    low, high, level = median_interval(ratios)
    pooled = _rate(on_runs) / _rate(off_runs) if _rate(off_runs) else 0.0
    met = sum(1 for r in ratios if r >= bar)
    cpu = {
        side: (_per_msg(off_runs, f"{side}_cpu_s"), _per_msg(on_runs, f"{side}_cpu_s"))
        for side in ("client", "broker")
    }
    both_off, both_on = cpu["client"][0] + cpu["broker"][0], cpu["client"][1] + cpu["broker"][1]
    return [
        "  on/off per round: " + ", ".join(f"{r:.2f}" for r in ratios),
        f"  median {statistics.median(ratios):.3f} ({level:.0%} interval {low:.2f}-{high:.2f}),"
        f" pooled {pooled:.3f}, rounds >= {bar:.2f}: {met}/{len(ratios)}",
        f"  msg/s pooled off {_rate(off_runs):,.0f}, on {_rate(on_runs):,.0f};"
        f" failed off {sum(r.failed for r in off_runs)}, on {sum(r.failed for r in on_runs)}",
        f"  CPU µs/msg off -> on: client {cpu['client'][0]:.2f} -> {cpu['client'][1]:.2f}"
        f" ({cpu['client'][1] - cpu['client'][0]:+.2f}), broker {cpu['broker'][0]:.2f} ->"
        f" {cpu['broker'][1]:.2f} ({cpu['broker'][1] - cpu['broker'][0]:+.2f}),"
        f" both {both_off:.2f} -> {both_on:.2f}"
        f" (x{both_on / both_off if both_off else 0.0:.3f})",
    ]


def summary(runs: list[Run], bar: float = 0.90) -> list[str]:
    """The whole report, workloads in order of first appearance."""
    lines = []
    for workload in dict.fromkeys(r.workload for r in runs):
        lines.append(f"{workload}:")
        lines.extend(workload_summary([r for r in runs if r.workload == workload], bar))
    return lines


def main(argv: list[str]) -> None:
    with open(argv[1], encoding="utf-8") as f:
        runs = parse(f.read().splitlines())
    bar = float(argv[2]) if len(argv) > 2 else 0.90
    print("\n".join(summary(runs, bar)))


if __name__ == "__main__":
    main(sys.argv)
