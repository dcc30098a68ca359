"""A SparkSession for Ariane's pipelines, with the connector available to executors.

How it works: ``spark_session`` builds (or reuses) a session for a master URL, sets the
session time zone to UTC (archives are partitioned by UTC date), registers the ``ariane``
format, and, when the master is not ``local``, ships the ``ariane`` package to the executors
as a zip through ``SparkContext.addPyFile`` (what ``spark.submit.pyFiles`` does). The
executors still need Ariane's pure-Python dependencies (``pip install 'ariane[spark]'`` on
the cluster's Python, or a ``--py-files``/conda archive of them), see ``docs/spark.md``.
``register`` then checks that the workers can import the package (``ariane.spark.workers``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from ariane.spark import register

__all__ = ["package_zip", "spark_session"]


def package_zip(dest_dir: Path) -> Path:
    """Zip the installed ``ariane`` package (its ``.py`` files) into ``dest_dir``."""
    import ariane

    root = Path(ariane.__file__).resolve().parent
    target = dest_dir / "ariane.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if (
                path.is_file()
                and path.suffix in (".py", ".typed")
                and "__pycache__" not in path.parts
            ):
                zf.write(path, Path("ariane") / path.relative_to(root))
    return target


def spark_session(
    master: str = "local[*]",
    app_name: str = "ariane",
    conf: Mapping[str, str] | None = None,
    *,
    ship_package: bool | None = None,
) -> SparkSession:
    """A session on ``master`` with the ``ariane`` format registered.

    Args:
        master: Spark master URL (``local[*]``, ``spark://host:7077``, ``yarn``...).
        app_name: the application name.
        conf: extra Spark settings.
        ship_package: add the ``ariane`` package to the executors' Python path (default:
            when the master is not local).
    """
    # the workers' interpreter is fixed when the SparkContext starts, from PYSPARK_PYTHON:
    # spark.pyspark.python (which only spark-submit reads) wins, else this interpreter
    # (local executors then see the same installed packages)
    python = dict(conf or {}).get("spark.pyspark.python")
    if python:
        os.environ["PYSPARK_PYTHON"] = python
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if ship_package is None:
        ship_package = not master.startswith("local")
    # once per SparkContext: getOrCreate may return a running session, and Spark refuses a
    # second "ariane.zip" from another path
    if ship_package and "ariane.zip" not in (spark.sparkContext._python_includes or ()):
        spark.sparkContext.addPyFile(str(package_zip(Path(tempfile.mkdtemp(prefix="ariane-")))))
    register(spark)  # checks that the workers can import ariane (ariane.spark.workers)
    return spark
