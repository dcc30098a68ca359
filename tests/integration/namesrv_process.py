"""A real ``ariane namesrv`` child process on a free port, stopped by PID (test helper)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

START_TIMEOUT_S = 30.0


class NamesrvProcess:
    """One ``ariane namesrv`` child process (stopped by PID)."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ariane",
                "namesrv",
                "-p",
                "0",
                "--data-dir",
                str(data_dir),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr_lines: list[str] = []
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()
        self.port = self._wait_for_port()
        self.addr = f"127.0.0.1:{self.port}"

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
        except (ValueError, OSError):  # closed by kill() while a line was being read
            pass

    def _wait_for_port(self) -> int:
        assert self.proc.stdout is not None
        found: list[int] = []

        def read() -> None:
            assert self.proc.stdout is not None
            try:
                for line in self.proc.stdout:
                    if "boot success" in line:
                        found.append(int(line.rsplit(":", 1)[1]))
                        return
            except (ValueError, OSError):  # closed by kill() after a failed start
                return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not found:
            self.kill()
            raise AssertionError("namesrv did not start: " + "".join(self.stderr_lines))
        return found[0]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.alive:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        finally:
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._drain.join(5)  # the process is gone: its stderr is at EOF
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
