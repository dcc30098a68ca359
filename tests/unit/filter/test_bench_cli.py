import orjson
from click.testing import CliRunner

from ariane.bench.cli import bench
from ariane.bench.filter import CASES


def test_bench_filter_json() -> None:
    result = CliRunner().invoke(bench, ["filter", "--iterations", "200", "--json"])
    assert result.exit_code == 0, result.output
    out = orjson.loads(result.output.strip().splitlines()[-1])
    assert [c["expression"] for c in out["cases"]] == [e for _, e in CASES]
    assert [c["result"] for c in out["cases"]] == [True, True, True, True, True, None, None]
    assert all(c["evals_per_s"] > 0 and c["compile_us"] > 0 for c in out["cases"])


def test_bench_filter_text() -> None:
    result = CliRunner().invoke(bench, ["filter", "--iterations", "50"])
    assert result.exit_code == 0, result.output
    assert "evals/s" in result.output
