"""Metric families with common labels and a cardinality limit.

``Families`` builds prometheus-client metric families for one scrape. Every family carries the
process's common labels first (RocketMQ puts ``cluster``, ``node_type`` and ``node_id`` on
every broker metric, plus the ``metricsLabel`` extras), then its own. Each family takes at
most ``limit`` series; further series are dropped and counted per metric, and the count is
itself exported as ``ariane_metrics_series_dropped`` so a truncated scrape is visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from ariane.common.histogram import Histogram

__all__ = ["Families", "parse_metrics_label"]


def parse_metrics_label(text: str) -> dict[str, str]:
    """RocketMQ's ``metricsLabel`` (``"k1:v1,k2:v2"``) as a dict; malformed pairs are
    skipped, as RocketMQ does."""
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition(":")
        if sep and key and value and ":" not in value:
            out[key.strip()] = value.strip()
    return out


class Families:
    """Metric families of one scrape.

    Args:
        common: labels added to every series (name -> value), in order.
        limit: most series per metric.
    """

    def __init__(self, common: Mapping[str, str], limit: int) -> None:
        self.common_names = list(common)
        self.common_values = list(common.values())
        self.limit = limit
        self.metrics: list[Metric] = []
        self.dropped: dict[str, int] = {}
        self._count: dict[str, int] = {}

    def _room(self, name: str) -> bool:
        n = self._count.get(name, 0)
        if n >= self.limit:
            self.dropped[name] = self.dropped.get(name, 0) + 1
            return False
        self._count[name] = n + 1
        return True

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> _Family:
        """A new gauge family."""
        fam = GaugeMetricFamily(name, doc, labels=[*self.common_names, *labels])
        self.metrics.append(fam)
        return _Family(self, fam, name)

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> _Family:
        """A new counter family (``name`` ends with ``_total``)."""
        fam = CounterMetricFamily(name, doc, labels=[*self.common_names, *labels])
        self.metrics.append(fam)
        return _Family(self, fam, name)

    def histogram(self, name: str, doc: str, labels: Sequence[str] = ()) -> _Histograms:
        """A new histogram family."""
        fam = HistogramMetricFamily(name, doc, labels=[*self.common_names, *labels])
        self.metrics.append(fam)
        return _Histograms(self, fam, name)

    def finish(self) -> list[Metric]:
        """All families, plus ``ariane_metrics_series_dropped`` for truncated ones."""
        dropped = GaugeMetricFamily(
            "ariane_metrics_series_dropped",
            "Series left out of this scrape because a metric reached the cardinality limit",
            labels=[*self.common_names, "metric"],
        )
        for name, n in sorted(self.dropped.items()):
            dropped.add_metric([*self.common_values, name], n)
        return [*self.metrics, dropped]


def _le(bound: float) -> str:
    """A bucket bound as Prometheus writes it (``+Inf``, ``0.5``, ``100.0``)."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


class _Family:
    __slots__ = ("families", "metric", "name")

    def __init__(
        self, families: Families, metric: GaugeMetricFamily | CounterMetricFamily, name: str
    ) -> None:
        self.families = families
        self.metric = metric
        self.name = name

    def add(self, labels: Sequence[str], value: float) -> None:
        """One series (label values after the common ones)."""
        if self.families._room(self.name):
            self.metric.add_metric([*self.families.common_values, *labels], value)


class _Histograms:
    __slots__ = ("families", "metric", "name")

    def __init__(self, families: Families, metric: HistogramMetricFamily, name: str) -> None:
        self.families = families
        self.metric = metric
        self.name = name

    def add(self, labels: Sequence[str], hist: Histogram) -> None:
        """One histogram series."""
        if self.families._room(self.name):
            buckets = [(_le(le), float(n)) for le, n in hist.cumulative()]
            self.metric.add_metric([*self.families.common_values, *labels], buckets, hist.sum)
