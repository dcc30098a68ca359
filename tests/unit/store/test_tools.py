from pathlib import Path

from click.testing import CliRunner

from ariane.cli import main

from .helpers import msg, open_store


def test_dump_and_verify(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        for i in range(30):
            store.put_message(msg(body=b"x" * 3000, TAGS=f"T{i}"))
    runner = CliRunner()
    out = runner.invoke(main, ["store", "dump", str(tmp_path), "--limit", "3"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0].split()[0] == "0"
    assert "topic=TopicA" in out.output
    assert "3 record(s)" in out.output
    full = runner.invoke(main, ["store", "dump", str(tmp_path)])
    assert "BLANK" in full.output
    ok = runner.invoke(main, ["store", "verify", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    assert "30 record(s)" in ok.output
    # damage: flip a body byte of the first record
    first = sorted((tmp_path / "commitlog").glob("0*"))[0]
    data = bytearray(first.read_bytes())
    data[200] ^= 0xFF
    first.write_bytes(bytes(data))
    bad = runner.invoke(main, ["store", "verify", str(tmp_path)])
    assert bad.exit_code == 1
    assert "DAMAGE" in bad.output
    dumped = runner.invoke(main, ["store", "dump", str(tmp_path)])
    assert "CORRUPT" in dumped.output


def test_verify_detects_consume_queue_mismatch(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        for _ in range(5):
            store.put_message(msg())
    cq = tmp_path / "consumequeue" / "TopicA" / "0" / ("0" * 20)
    data = bytearray(cq.read_bytes())
    data[20:28] = (12345).to_bytes(8, "big")
    cq.write_bytes(bytes(data))
    out = CliRunner().invoke(main, ["store", "verify", str(tmp_path)])
    assert out.exit_code == 1
    assert "consumequeue TopicA/0 entry 1" in out.output
