"""``ariane bench recovery`` runs end to end on a small CommitLog and times both starts."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ariane.bench.recovery import recovery_bench


def test_bench_recovery_times_a_crashed_and_a_clean_start(tmp_path: Path) -> None:
    args = ["--size-mb", "3", "--file-mb", "1", "--size", "512", "--dir", str(tmp_path), "--json"]
    result = CliRunner().invoke(recovery_bench, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output.strip().splitlines()[-1])
    assert out["max_offset"] >= 3 << 20
    assert out["messages"] > 3 * (1 << 20) // 1024
    assert out["abnormal_recovery_s"] > 0
    assert out["normal_recovery_s"] > 0
    assert "abnormal recovery (abort file)" in result.output
    assert list(tmp_path.iterdir()) == []  # the bench removes its store


def test_bench_recovery_refuses_bad_sizes() -> None:
    result = CliRunner().invoke(recovery_bench, ["--size-mb", "0"])
    assert result.exit_code == 2
    assert "Invalid value for '--size-mb': 0 is not in the range 1<=x<=2147483647." in (
        result.output
    )
