"""Prometheus exposition shared by the broker and the NameServer: the HTTP exporter
(:mod:`~ariane.observability.exporter`) and the bounded metric-family builder
(:mod:`~ariane.observability.families`). See ``docs/metrics.md`` for the metric list."""
