"""The ``ariane`` PySpark data source: batch and streaming reads and writes of topics.

How it works (PySpark Python Data Source API, 4.2+): ``ArianeDataSource`` parses its options
on the driver and hands out readers and writers, all plain picklable objects.

* Batch read: ``partitions()`` (driver) resolves start and end offsets of every readable
  queue (``earliest``/``latest``/JSON/timestamps) and returns one ``InputPartition`` per
  queue range, split for ``minPartitions``; ``read()`` (executors) pulls the range and
  yields one Arrow record batch per pull. A user schema that is a subset of the fixed one
  (``ariane.spark.read_schema``) makes both readers build only those columns. With the option
  ``pushFilters`` the batch reader takes Spark's filters on ``queueId``/``queueOffset``
  (``ariane.spark.pushdown``) and plans only the offsets they admit.
* Streaming read: offsets ``{topic: {broker: {queueId: offset}}}`` live in Spark's
  checkpoint. ``latestOffset(start, limit)`` reads every queue's max offset (re-reading the
  route, so queues added later are picked up from their earliest offset), caps it at the
  ``Trigger.AvailableNow`` target and at ``maxOffsetsPerTrigger`` (``getDefaultReadLimit``).
  ``partitions(start, end)`` is a pure function of the two offsets (plus the min offset of a
  queue new in ``end``), so a replayed micro-batch reads the same messages. ``commit(end)``
  optionally stores ``end`` as a consumer group's offsets for lag dashboards.
* Writes (batch and streaming, Arrow input): ``ariane.spark._sender`` sends the rows; each
  row's ``UNIQ_KEY`` is derived from (query id, batch id, partition, row).

The stream reader object lives in a long-running driver worker and may keep state; readers'
``read`` and writers' ``write`` run on pickled copies in executor workers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ariane.errors import DataLossError, InvalidArgumentError
from ariane.spark.ids import MessageIdSequence
from ariane.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    QueueKey,
    SinkOptions,
    SourceOptions,
    decodes_trace,
    offsets_from_nested,
    offsets_to_nested,
)
from ariane.spark.planning import QueueRange, plan_ranges, rate_limit, split_ranges
from ariane.spark.pushdown import OffsetBounds, narrow, push_filters
from ariane.spark.read_schema import ReadColumns, select_columns

if TYPE_CHECKING:
    import pyarrow as pa

    from ariane.spark._cluster import ClusterOffsets

# The modules that pull, decode and send (the client, numpy, pyarrow) are imported where they
# are used: Spark's planner workers (write_into_data_source, commit_data_source_write...) each
# start a fresh process that imports this module to unpickle the data source, its writer and
# commit messages, and need none of them (~1 s of CPU each on the shared 2-vCPU machine, on
# the write's critical path).

__all__ = [
    "ArianeBatchReader",
    "ArianeBatchWriter",
    "ArianeDataSource",
    "ArianeFilteringBatchReader",
    "ArianeStreamReader",
    "ArianeStreamWriter",
    "SentRows",
    "register",
]

logger = logging.getLogger(__name__)

#: Local properties Spark's micro-batch execution sets on every task of a batch.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def register(spark: SparkSession) -> None:
    """Register the ``ariane`` format with ``spark`` (``spark.read.format("ariane")``)."""
    spark.dataSource.register(ArianeDataSource)


def _check_read_schema(schema: StructType, opts: SourceOptions) -> ReadColumns | None:
    """The columns a user schema selects (``None``: all of them).

    Raises:
        InvalidArgumentError: the schema is not a subset of the source's columns.
    """
    return select_columns(schema, opts.decode_trace)


class ArianeDataSource(DataSource):
    """``spark.read.format("ariane")`` / ``df.write.format("ariane")`` (see docs/spark.md)."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``ariane``."""
        return "ariane"

    def schema(self) -> str:
        """The fixed read schema (DDL): messages, or trace records with ``decode=trace``."""
        if decodes_trace(self.options):
            from ariane.spark._trace import TRACE_SCHEMA_DDL

            return TRACE_SCHEMA_DDL
        from ariane.spark._arrow import SCHEMA_DDL

        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader."""
        opts = SourceOptions.parse(self.options)
        kind = ArianeFilteringBatchReader if opts.push_filters else ArianeBatchReader
        return kind(opts, _check_read_schema(schema, opts))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A micro-batch stream reader."""
        opts = SourceOptions.parse(self.options)
        return ArianeStreamReader(opts, _check_read_schema(schema, opts))

    def writer(self, schema: StructType, overwrite: bool) -> ArianeBatchWriter:
        """A batch writer (append only: a topic cannot be overwritten)."""
        from ariane.spark._arrow import check_sink_schema

        if overwrite:
            raise InvalidArgumentError("a topic can only be appended to (mode 'append')")
        check_sink_schema(schema.fieldNames())
        opts = SinkOptions.parse(self.options)
        return ArianeBatchWriter(opts, opts.id_namespace or str(uuid.uuid4()))

    def streamWriter(self, schema: StructType, overwrite: bool) -> ArianeStreamWriter:
        """A streaming writer (output mode append)."""
        from ariane.spark._arrow import check_sink_schema

        check_sink_schema(schema.fieldNames())
        return ArianeStreamWriter(SinkOptions.parse(self.options))


# -- reading ------------------------------------------------------------------------------------


#: Raw pull bodies are decoded into one Arrow batch once they hold this many bytes (a few
#: thousand 1 KiB rows: big enough that per-batch costs vanish, small enough for the
#: Python worker's memory).
BATCH_BYTES = 4 * 1024 * 1024


def read_range(
    opts: SourceOptions, rng: QueueRange, selected: ReadColumns | None = None
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the messages (or, ``decode=trace``, the trace records) of one queue
    range (executors); with ``selected``, of those columns only."""
    from ariane.spark._cluster import QueueReader
    from ariane.spark._columns import records_to_batch

    reader = QueueReader(opts)
    columns = selected.columns if selected is not None else None
    rename = selected.rename if selected is not None else (lambda b: b)
    if opts.decode_trace:
        from ariane.spark._trace import trace_messages_to_batch

        for msgs in reader.read(rng):
            yield rename(trace_messages_to_batch(msgs, rng.broker, columns))
        return
    tags = opts.subscription.tags

    def batch_of(bodies: list[bytes | bytearray]) -> pa.RecordBatch:
        mode = opts.properties
        return records_to_batch(bodies, rng.broker, mode, rng.start, rng.end, tags, columns)

    bodies: list[bytes | bytearray] = []
    size = 0
    for body in reader.read_raw(rng):
        bodies.append(body)
        size += len(body)
        if size < BATCH_BYTES:
            continue
        batch = batch_of(bodies)
        # the batch holds copies of the records (every path of records_to_batch copies), so
        # the next answers may be read into these bodies
        reader.recycle(bodies)
        bodies, size = [], 0
        if batch.num_rows:
            yield rename(batch)
    if bodies:
        batch = batch_of(bodies)
        if batch.num_rows:
            yield rename(batch)


def _partitions(opts: SourceOptions, ranges: list[QueueRange]) -> list[InputPartition]:
    return [InputPartition(r) for r in split_ranges(ranges, opts.min_partitions)]


class ArianeBatchReader(DataSourceReader):
    """Reads fixed offset ranges, planned once on the driver."""

    def __init__(self, opts: SourceOptions, selected: ReadColumns | None = None) -> None:
        self.opts = opts
        self.selected = selected
        self.bounds: OffsetBounds | None = None

    def plan(self) -> list[QueueRange]:
        """The queue ranges of the read (driver; asks the cluster for offsets)."""
        from ariane.spark._cluster import ClusterOffsets

        opts = self.opts
        cluster = ClusterOffsets(opts)
        keys = list(cluster.queues())
        mins, maxs = cluster.bounds(keys)
        if opts.starting_timestamp_ms is not None:
            start = cluster.offsets_for_time(opts.starting_timestamp_ms, mins, maxs)
        else:
            spec = opts.starting or OffsetSpec(EARLIEST)
            start = {k: spec.resolve(k, mins[k], maxs[k]) for k in keys}
        if opts.ending_timestamp_ms is not None:
            end = cluster.offsets_for_time(opts.ending_timestamp_ms, mins, maxs)
        else:
            end = {k: opts.ending.resolve(k, mins[k], maxs[k]) for k in keys}
        for k in keys:
            if end[k] > maxs[k]:
                logger.warning(
                    "endingOffsets %s of %s is past the queue's end %s", end[k], k, maxs[k]
                )
                end[k] = maxs[k]
        if self.bounds is not None:
            start, end = narrow(self.bounds, start, end)
        return plan_ranges(start, end)

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per queue range (more with ``minPartitions``)."""
        return _partitions(self.opts, self.plan())

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The messages of one range as Arrow batches."""
        rng = partition.value
        if not isinstance(rng, QueueRange):
            return
        yield from read_range(self.opts, rng, self.selected)


class ArianeFilteringBatchReader(ArianeBatchReader):
    """A batch reader that takes Spark's filters on ``queueId``/``queueOffset`` (option
    ``pushFilters``; Spark calls it only with ``spark.sql.python.filterPushdown.enabled``,
    and refuses a reader that has it without that setting, hence a class of its own)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Keep the filters that narrow the planned offsets; return the others."""
        self.bounds, rest = push_filters(filters, self.bounds)
        return rest


class ArianeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; offsets are ``{topic: {broker: {queueId: offset}}}``."""

    def __init__(self, opts: SourceOptions, selected: ReadColumns | None = None) -> None:
        self.opts = opts
        self.selected = selected
        self._cluster: ClusterOffsets | None = None
        self._target: dict[QueueKey, int] | None = None
        self._latest: dict[QueueKey, int] | None = None
        self._mins: dict[QueueKey, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        # executors get a copy without the driver's client state
        return {
            "opts": self.opts,
            "selected": self.selected,
            "_cluster": None,
            "_target": None,
            "_latest": None,
            "_mins": {},
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def cluster(self) -> ClusterOffsets:
        """The driver's cluster view (created on first use)."""
        if self._cluster is None:
            from ariane.spark._cluster import ClusterOffsets

            self._cluster = ClusterOffsets(self.opts)
        return self._cluster

    def _bounds(self) -> tuple[dict[QueueKey, int], dict[QueueKey, int]]:
        keys = list(self.cluster.queues())
        mins, maxs = self.cluster.bounds(keys)
        self._mins.update(mins)
        return mins, maxs

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: ``startingTimestamp``, else ``startingOffsets`` (default
        ``latest``)."""
        opts = self.opts
        mins, maxs = self._bounds()
        if opts.starting_timestamp_ms is not None:
            start = self.cluster.offsets_for_time(opts.starting_timestamp_ms, mins, maxs)
        else:
            spec = opts.starting or OffsetSpec(LATEST)
            start = {k: spec.resolve(k, mins[k], maxs[k]) for k in maxs}
        return offsets_to_nested(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when the option is set."""
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Record the current end of every queue as the target of an AvailableNow run."""
        _, maxs = self._bounds()
        self._target = maxs

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """End of the next micro-batch (``start`` itself when there is nothing new).

        Raises:
            DataLossError: a queue is now shorter than ``start`` and ``failOnDataLoss`` holds.
        """
        begin = offsets_from_nested(start, "start offset")
        mins, maxs = self._bounds()
        self._latest = dict(maxs)
        end: dict[QueueKey, int] = dict(begin)  # queues gone from the route stay where they are
        for key, top in maxs.items():
            if self._target is not None:
                if key not in self._target:
                    continue  # appeared after the AvailableNow target was taken
                top = min(top, self._target[key])
            if key in begin and top < begin[key]:
                if self.opts.fail_on_data_loss:
                    raise DataLossError(
                        f"{key}: the queue ends at {top}, before the checkpointed offset "
                        f"{begin[key]} (was it recreated?); set failOnDataLoss=false to go on"
                    )
                logger.warning("queue %s moved back from %s to %s", key, begin[key], top)
            end[key] = top
        if isinstance(limit, ReadMaxRows):
            from_offsets = {k: begin.get(k, mins.get(k, 0)) for k in end}
            limited = rate_limit(from_offsets, end, limit.max_rows)
            end = {k: v for k, v in limited.items() if k in begin or v > from_offsets[k]}
        return offsets_to_nested(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The queues' true ends at the last ``latestOffset`` call (for lag metrics)."""
        return offsets_to_nested(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """The queue ranges between two checkpointed offsets."""
        begin = offsets_from_nested(start, "start offset")
        stop = offsets_from_nested(end, "end offset")
        new = [k for k in stop if k not in begin]
        if new:
            missing = [k for k in new if k not in self._mins]
            if missing:
                self._bounds()
            for k in new:
                begin[k] = self._mins.get(k, 0)
        return _partitions(self.opts, plan_ranges(begin, stop))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The messages of one range as Arrow batches (deterministic for a range)."""
        rng = partition.value
        if not isinstance(rng, QueueRange):
            return
        yield from read_range(self.opts, rng, self.selected)

    def commit(self, end: dict[str, Any]) -> None:
        """Everything up to ``end`` is processed: store it as ``commitOffsetsToGroup``'s
        consumer offsets when that option is set."""
        group = self.opts.commit_offsets_to_group
        if group:
            offsets = offsets_from_nested(end, "end offset")
            if not self.cluster.addrs:
                self.cluster.queues()
            self.cluster.commit_to_group(group, offsets)

    def stop(self) -> None:
        """Nothing to release: the process's shared client outlives queries."""


# -- writing ------------------------------------------------------------------------------------


@dataclass
class SentRows(WriterCommitMessage):
    """What one write task sent."""

    partition: int
    rows: int


def write_partition(
    opts: SinkOptions, iterator: Iterator[pa.RecordBatch], namespace: str, batch_id: int
) -> SentRows:
    """Send every row of one task; ids from (namespace, batch id, partition, row)."""
    from ariane.spark._arrow import batch_to_rows
    from ariane.spark._sender import RowSender

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    ids = MessageIdSequence(namespace, batch_id, partition)
    sender = RowSender(opts)
    for batch in iterator:
        if sender.add_batch(batch, ids):
            continue
        for row in batch_to_rows(batch):
            sender.add(sender.message(row, ids.next()), row.sharding_key)
    return SentRows(partition, sender.finish())


class ArianeBatchWriter(DataSourceArrowWriter):
    """Batch write; ids are namespaced by ``idNamespace`` (default: a UUID per write job)."""

    def __init__(self, opts: SinkOptions, namespace: str) -> None:
        self.opts = opts
        self.namespace = namespace

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentRows:
        """Send one partition's rows."""
        return write_partition(self.opts, iterator, self.namespace, 0)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task succeeded."""
        rows = sum(m.rows for m in messages if isinstance(m, SentRows))
        logger.info("ariane write %s committed: %d rows", self.namespace, rows)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Some task failed; what was sent stays sent (at-least-once)."""
        rows = sum(m.rows for m in messages if isinstance(m, SentRows))
        logger.warning("ariane write %s aborted after %d rows were sent", self.namespace, rows)


class ArianeStreamWriter(DataSourceStreamArrowWriter):
    """Streaming write; ids are namespaced by the query id and the micro-batch id."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentRows:
        """Send one partition of a micro-batch.

        Raises:
            InvalidArgumentError: not running inside a streaming query.
        """
        ctx = TaskContext.get()
        query = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
        batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        if not query or batch is None:
            raise InvalidArgumentError("the streaming writer runs only inside a streaming query")
        namespace = self.opts.id_namespace or query
        return write_partition(self.opts, iterator, namespace, int(batch))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """The micro-batch is written."""
        rows = sum(m.rows for m in messages if isinstance(m, SentRows))
        logger.info("ariane stream batch %d committed: %d rows", batchId, rows)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """A task of the micro-batch failed; Spark will replay it with the same ids."""
        logger.warning("ariane stream batch %d aborted", batchId)
