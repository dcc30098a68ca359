"""Apache Spark integration: the ``ariane`` PySpark data source and pipelines built on it.

``pyspark`` (4.2 or newer) is imported only by :mod:`ariane.spark.source` and the pipeline
commands; install the ``spark`` extra (``pip install 'ariane[spark]'``)::

    from ariane.spark import register

    register(spark)
    df = (spark.read.format("ariane")
          .option("nameserver", "127.0.0.1:9876").option("topic", "Orders").load())

The option parsing, offset JSON, partition planning and id derivation modules
(``options``, ``planning``, ``ids``) import neither Spark nor the network. ``register``
first checks that Spark's Python workers can import Ariane (``ariane.spark.workers``). See
``docs/spark.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register"]


def register(spark: SparkSession, *, check_workers: bool = True) -> None:
    """Register the ``ariane`` format with ``spark``.

    With ``check_workers`` (the default), first check that Spark's Python workers can import
    Ariane with the driver's Python minor version (one small job, once per application and
    worker interpreter), and raise :class:`~ariane.errors.WorkerPythonError` naming
    ``PYSPARK_PYTHON``/``spark.pyspark.python`` and the fix when they cannot.
    """
    from ariane.spark.source import register as _register

    if check_workers:
        from ariane.spark.workers import check_workers as _check

        _check(spark)
    _register(spark)
