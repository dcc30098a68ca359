"""Operating a DLedger group started by ``ariane cluster --dledger 3``: ``mqadmin
clusterList`` shows each node's Raft role and term, ``mqadmin transferLeadership`` hands the
group to a chosen node, which the NameServers then have as the master."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.dledger.cluster import FAST_RAFT
from tests.support.processes import start_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def mqadmin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ariane", "admin", *args], capture_output=True, text=True, timeout=60
    )


def cluster_rows(namesrv: str) -> list[dict[str, object]]:
    out = mqadmin("clusterList", "-n", namesrv, "--json")
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, object]] = json.loads(out.stdout)["brokers"]
    return rows


def test_cluster_list_and_transfer_leadership(tmp_path: Path) -> None:
    options = [x for k, v in FAST_RAFT.items() for x in ("-o", f"{k}={v}")]
    proc = start_server(
        [
            "cluster", "--dledger", "3", "--groups", "1", "--base-port", "0", "--namesrv-port",
            "0", "--data-dir", str(tmp_path / "c"), *options,
        ],
        name="cluster",
    )  # fmt: skip
    try:
        namesrv = proc.ready["namesrv"]
        doc = json.loads(Path(proc.ready["cluster"]).read_text())
        assert [b["dLegerSelfId"] for b in doc["brokers"]] == ["n0", "n1", "n2"]
        rows: list[dict[str, object]] = []
        for _ in range(100):
            rows = cluster_rows(namesrv)
            if sorted(r.get("raftRole", "") for r in rows) == [
                "FOLLOWER",
                "FOLLOWER",
                "LEADER",
            ] and any(r["brokerId"] == 0 for r in rows):
                break
        leader = next(r for r in rows if r.get("raftRole") == "LEADER")
        assert leader["brokerId"] == 0
        assert leader["role"] == "SYNC_MASTER"
        assert {r["raftTerm"] for r in rows} == {leader["raftTerm"]}
        text = mqadmin("clusterList", "-n", namesrv)
        assert "Raft(Term)" in text.stdout
        assert f"LEADER({leader['raftTerm']})" in text.stdout
        by_addr = {b["addr"]: b["dLegerSelfId"] for b in doc["brokers"]}
        target = next(by_addr[str(r["addr"])] for r in rows if r.get("raftRole") == "FOLLOWER")
        moved = mqadmin(
            "transferLeadership", "-n", namesrv, "-g", "broker-a", "-t", str(target), "--json",
            "-w", "60",  # the tool's 10 s default ran out once in a loaded CI: bounds a hang
        )  # fmt: skip
        assert moved.returncode == 0, moved.stdout + moved.stderr
        result = json.loads(moved.stdout)
        assert result["dLegerSelfId"] == target
        assert by_addr[result["master"]] == target
        assert int(result["dLegerTerm"]) > int(str(leader["raftTerm"]))
        refused = mqadmin("transferLeadership", "-n", namesrv, "-g", "broker-a", "-t", "n7")
        assert refused.returncode == 1
        assert "UNKNOWN_MEMBER" in refused.stderr + refused.stdout
    finally:
        proc.stop()
