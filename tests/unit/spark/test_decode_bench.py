"""``ariane bench spark-decode``: every way gives the plain path's batch, and the JSON's shape
(no timing is asserted)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyarrow")

from click.testing import CliRunner

from ariane.bench.spark_decode import spark_decode_bench
from ariane.common import record_columns


@pytest.mark.parametrize("mode", ["user", "all", "none"])
def test_every_way_matches_the_plain_batch(mode: str) -> None:
    args = ["--records", "40", "--size", "300", "--rounds", "1", "--properties", mode, "--json"]
    done = CliRunner().invoke(spark_decode_bench, args)
    assert done.exit_code == 0, done.output
    doc = json.loads(done.output.strip().splitlines()[-1])
    ways = ["plain", "numpy", "columns_py"]
    if record_columns.COMPILED:
        ways += ["columns", "compiled", "compiled_bodies", "compiled_join"]
    assert sorted(k for k in doc if k.endswith("_us_per_row")) == sorted(
        f"{w}_us_per_row" for w in ways
    )
    same = {k: v for k, v in doc.items() if k.endswith("_same")}
    assert same == {f"{w}_same": True for w in ways if w not in ("columns_py", "columns")}
    assert (doc["records"], doc["size"], doc["properties"]) == (40, 300, mode)
    assert doc["columns"] == "all"


def test_a_read_schema_s_columns() -> None:
    args = ["--records", "40", "--size", "300", "--rounds", "1", "--columns", "body,msgId"]
    done = CliRunner().invoke(spark_decode_bench, [*args, "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.output.strip().splitlines()[-1])
    assert doc["columns"] == "body,msgId"
    same = {k: v for k, v in doc.items() if k.endswith("_same")}
    assert same
    assert set(same.values()) == {True}
