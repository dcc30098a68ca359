"""The driver of the exactly-once kill test (tests/spark/test_exactly_once.py), run as a child
process: a streaming query from topic A through a transformation (``t:`` + body, the key
kept) to topic B, with a checkpoint, on ``local[2,4]`` (a failed task is retried up to 4
times, as on a cluster).

Usage: python eo_driver.py NAMESRV SOURCE TARGET CHECKPOINT
"""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery


def transform(df: DataFrame) -> DataFrame:
    """What the query does to each row (deterministic, so a replayed batch is the same)."""
    return df.select(F.concat(F.lit(b"t:"), F.col("body")).alias("body"), F.col("keys"))


def start(
    spark: SparkSession, ns: str, source: str, target: str, checkpoint: str, *, once: bool
) -> StreamingQuery:
    """The query: micro-batches of at most 30 rows every 0.2 s (``once``: a batch left
    uncommitted is replayed from the checkpoint, then the rest in one batch, then stop), sent
    8 rows per batch request so a task is killed between sends."""
    reader = (
        spark.readStream.format("ariane")
        .option("nameserver", ns)
        .option("topic", source)
        .option("startingOffsets", "earliest")
    )
    if not once:
        reader = reader.option("maxOffsetsPerTrigger", "30")
    writer = (
        transform(reader.load())
        .writeStream.format("ariane")
        .option("nameserver", ns)
        .option("topic", target)
        .option("batchRows", "8")
        .option("checkpointLocation", checkpoint)
    )
    if once:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime="200 milliseconds").start()


def main(argv: list[str]) -> None:
    from ariane.spark.session import spark_session

    ns, source, target, checkpoint = argv[1:5]
    spark = spark_session(
        "local[2,4]",
        "ariane-eo-driver",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "512m",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    start(spark, ns, source, target, checkpoint, once=False).awaitTermination()


if __name__ == "__main__":
    main(sys.argv)
