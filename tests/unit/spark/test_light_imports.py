"""``ariane.spark.source`` imports only what Spark's planner workers need: each of them
(write_into_data_source, commit_data_source_write, create_data_source...) is a fresh process
that imports the module to unpickle the data source, its writer and its commit messages, so the
client, the ACL package, numpy and pyarrow are imported where the tasks use them. The
worker probe (``ariane.spark.workers``) imports those task modules instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ariane
from ariane.acl.credentials import SessionCredentials
from ariane.spark import workers
from ariane.spark.options import SinkOptions, SourceOptions

_SRC = str(Path(ariane.__file__).resolve().parent.parent)
#: modules a planner worker must not pay for (the first, ``import ariane.spark.source``)
_HEAVY = (
    "ariane.client",
    "ariane.acl",
    "ariane.remoting",
    "ariane.spark._cluster",
    "ariane.spark._columns",
    "ariane.spark._sender",
    "ariane.spark._trace",
    "ariane.spark._arrow",
    "numpy",
    "pyarrow",
    "yaml",
)


def _new_modules(code: str) -> set[str]:
    """The modules ``code`` imports in a fresh interpreter after the commit worker's own."""
    prog = (
        "import sys\n"
        "import pyspark.sql.worker.commit_data_source_write\n"
        "before = set(sys.modules)\n"
        + code
        + "\nprint(' '.join(sorted(set(sys.modules) - before)))"
    )
    env = {**os.environ, "PYTHONPATH": _SRC}
    done = subprocess.run(
        [sys.executable, "-c", prog], env=env, capture_output=True, timeout=120, check=True
    )
    return set(done.stdout.decode().split())


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in _HEAVY))


def test_the_source_module_imports_no_client_numpy_nor_pyarrow() -> None:
    loaded = _new_modules("import ariane.spark.source")
    assert "ariane.spark.source" in loaded
    assert _heavy(loaded) == []


def test_unpickling_a_writer_and_its_commit_messages_stays_light() -> None:
    code = (
        "import pickle\n"
        "from ariane.spark.source import ArianeBatchWriter, SentRows\n"
        "from ariane.spark.options import SinkOptions\n"
        "writer = ArianeBatchWriter(SinkOptions.parse({'nameserver': 'h:1', 'topic': 'T'}), 'ns')\n"
        "blob = pickle.dumps((writer, [SentRows(0, 3), SentRows(1, 4)]))\n"
        "w, msgs = pickle.loads(blob)\n"
        "w.commit(msgs)\n"
        "assert w.namespace == 'ns' and [m.rows for m in msgs] == [3, 4]"
    )
    assert _heavy(_new_modules(code)) == []


def test_the_task_modules_are_what_the_probe_imports() -> None:
    loaded = _new_modules(
        "import importlib\n"
        f"for name in {workers._TASK_MODULES!r}:\n"
        "    importlib.import_module(name)"
    )
    assert {
        "ariane.client",
        "ariane.spark._cluster",
        "ariane.spark._columns",
        "ariane.spark._sender",
        "ariane.spark._trace",
        "numpy",
        "pyarrow",
    } <= loaded


def test_credentials_are_still_parsed_into_session_credentials() -> None:
    base = {"nameserver": "h:1", "topic": "T"}
    assert SinkOptions.parse(base).credentials is None
    for opts in (
        SinkOptions.parse({**base, "accessKey": "ak", "secretKey": "sk"}),
        SourceOptions.parse({**base, "accessKey": "ak", "secretKey": "sk"}),
    ):
        assert opts.credentials == SessionCredentials("ak", "sk")
