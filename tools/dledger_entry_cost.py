"""In-process CPU per replicated entry of a DLedger group (issue 14): three stores in one
process (``tests/unit/dledger/group.py``), messages moved by hand, every Raft frame encoded and
decoded as the transport does. Prints, best of ROUNDS, the thread CPU µs per entry of

* the leader's puts (``submit_message``: prepare, propose, write, seal),
* the leader's Raft traffic (taking its outbox: reading and encoding the pushes; stepping the
  followers' answers: quorum, completions),
* a follower's Raft connection (decoding the push frames, stepping them: header and CRC
  check, copy, the record's dispatch request, encoding the answer),

for N messages of 128 bytes put in bursts of K (about K entries per push).

    PYTHONPATH=src .venv/bin/python tools/dledger_entry_cost.py N K ROUNDS

The reput threads' dispatch (ConsumeQueue and index) is not counted (other threads).
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.dledger.group import Group, message

from ariane.common import native
from ariane.dledger.config import DLedgerConfig
from ariane.dledger.wire import decode_frame, encode_frame
from ariane.raft import PushRequest


class _Group(Group):
    """The test group with files of a real size (one index file for the whole run)."""

    def dledger(self, node: str) -> DLedgerConfig:
        return dataclasses.replace(
            super().dledger(node), mapped_file_size_for_entry_index=32 * 1024 * 1024
        )


def _round(n: int, k: int) -> dict[str, float]:
    spent: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory() as root:
        g = _Group(
            root,
            3,
            mapped_file_size_commit_log=64 * 1024 * 1024,
            max_index_num=400_000,
            max_hash_slot_num=100_000,
            mapped_file_size_consume_queue=20 * 300_000,
        )
        try:
            leader = g.elect("n0")
            lrep = g.stores[leader].commit_log.replica

            def wire(msg: object) -> object:
                decoded = decode_frame(encode_frame(msg))  # type: ignore[arg-type]
                assert decoded is not None
                return decoded[0]

            def pump() -> None:
                for _ in range(1000):
                    moved = False
                    for node, store in g.stores.items():
                        rep = store.commit_log.replica
                        t = time.thread_time()
                        out = rep.take_outbox()
                        spent[f"{node}.outbox"] += time.thread_time() - t
                        for msg in out:
                            moved = True
                            t = time.thread_time()
                            frame = wire(msg)
                            g.stores[msg.remote_id].commit_log.replica.step(frame)  # type: ignore[arg-type]
                            key = "push" if isinstance(msg, PushRequest) else "answer"
                            spent[f"{msg.remote_id}.{key}"] += time.thread_time() - t
                    if not moved:
                        return

            body = b"x" * 128
            sent = 0
            while sent < n:
                t = time.thread_time()
                for i in range(k):
                    g.stores[leader].submit_message(
                        message("BenchTopic", body + str(sent + i).encode())
                    )
                spent["leader.put"] += time.thread_time() - t
                sent += k
                t = time.thread_time()
                lrep.tick()  # the transport's timer: entries go out on the next tick
                spent["n0.outbox"] += time.thread_time() - t
                pump()
            assert lrep.node is not None
            for _ in range(10):
                if lrep.node.log.committed == lrep.node.log.end:
                    break
                lrep.tick()
                pump()
            assert lrep.node.log.committed == lrep.node.log.end
        finally:
            g.close()
    return {key: value * 1e6 / n for key, value in spent.items()}


def main(n: int, k: int, rounds: int) -> None:
    best: dict[str, float] = {}
    for _ in range(rounds):
        for key, value in _round(n, k).items():
            best[key] = min(best.get(key, value), value)
    print(
        f"{native.build_name()} build, {n} entries in bursts of {k}, best of {rounds} (µs per entry):"
    )
    rows = {
        "leader puts": best.get("leader.put", 0.0),
        "leader Raft (tick, outbox, answers)": best.get("n0.outbox", 0.0)
        + best.get("n0.answer", 0.0),
        "follower n1 (pushes + answers out)": best.get("n1.push", 0.0) + best.get("n1.outbox", 0.0),
        "follower n2 (pushes + answers out)": best.get("n2.push", 0.0) + best.get("n2.outbox", 0.0),
    }
    for name, value in rows.items():
        print(f"  {name:36s} {value:7.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
