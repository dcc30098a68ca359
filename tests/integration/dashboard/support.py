"""Helpers of the dashboard tests: a running ``ariane dashboard`` and an HTTP client that
speaks to it like a browser (CSRF cookie and token), plus Debian's Chromium for Playwright."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ariane.client import Admin
from ariane.client.errors import QueryNotFoundError
from tests.support import polling
from tests.support.processes import ServerProcess, start_server

__all__ = [
    "ARTIFACTS",
    "CHROMIUM",
    "DashClient",
    "chromium_or_skip",
    "start_dashboard",
    "wait_for",
    "wait_indexed",
]

#: Screenshots and timings of the browser tests (git-ignored).
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "dashboard"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def start_dashboard(namesrv: str, *extra: str) -> ServerProcess:
    """``ariane dashboard`` on a free port; its address is ``ready['dashboard']``."""
    return start_server(
        ["dashboard", "-n", namesrv, "--port", "0", "--collect-interval-s", "1", *extra],
        name="dashboard",
    )


class DashClient:
    """An HTTP client for one dashboard that keeps cookies like a browser."""

    def __init__(self, addr: str) -> None:
        self.base = f"http://{addr}"
        self.http = httpx.Client(base_url=self.base, timeout=30, follow_redirects=False)

    def close(self) -> None:
        self.http.close()

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=params or None)

    def api(self, path: str, **params: Any) -> Any:
        response = self.get("/api" + path, **params)
        assert response.status_code == 200, response.text
        return response.json()

    def token(self) -> str:
        """The CSRF token (a page visit sets the cookie; forms carry the same value)."""
        page = self.get("/topic")
        match = _TOKEN.search(page.text)
        if match is None:  # a read-only account sees no form: the cookie holds the token
            return str(self.http.cookies["ariane_csrf"])
        assert match.group(1) == self.http.cookies["ariane_csrf"]
        return match.group(1)

    def post(self, path: str, data: dict[str, Any], *, api: bool = True) -> httpx.Response:
        """POST a form with a valid CSRF token."""
        form = {"csrf_token": self.token(), **data}
        return self.http.post(("/api" if api else "") + path, data=form)


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``check`` until true (the dashboard's caches and the consumers move on their
    own); fail naming ``what``."""
    polling.wait_until(check, timeout_s, 0.1, what=what)


def wait_indexed(namesrv: str, topic: str, msg_id: str) -> None:
    """Wait until ``msg_id`` of ``topic`` is found by id: the key index is built after the
    send is answered (RocketMQ's reput), so a query right after a send may miss it."""

    async def found() -> bool:
        async with Admin(namesrv_addr=namesrv) as admin:
            try:
                return (await admin.query_message_by_id(topic, msg_id)).msg_id == msg_id
            except QueryNotFoundError:
                return False

    # a thread of its own: the caller may be inside a running loop (Playwright's sync API)
    with ThreadPoolExecutor(1) as pool:
        wait_for(
            f"{msg_id} in the index of {topic}",
            lambda: pool.submit(asyncio.run, found()).result(),
        )


def _install_chromium() -> str | None:
    """Install Debian's chromium when missing; the reason when it cannot be had."""
    if Path(CHROMIUM).exists():
        return None
    if shutil.which("apt-get") is None:
        return "no apt-get on this machine to install Debian's chromium"
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True, timeout=300)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"],
            check=True, capture_output=True, timeout=600,
            env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )  # fmt: skip
    except (subprocess.SubprocessError, OSError) as exc:
        return f"Debian's chromium could not be installed (apt unreachable?): {exc}"
    return None if Path(CHROMIUM).exists() else "chromium installed but /usr/bin/chromium missing"


def chromium_or_skip() -> None:
    """Skip the calling test, saying why, when Chromium cannot be had."""
    reason = _install_chromium()
    if reason is not None:
        pytest.skip(reason)


@contextmanager
def browser_page(viewport: tuple[int, int] = (1400, 900)) -> Iterator[Any]:
    """A Playwright page of Debian's Chromium with a fresh profile (no downloads)."""
    from playwright.sync_api import sync_playwright

    chromium_or_skip()
    profile = tempfile.mkdtemp(prefix="ariane-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": viewport[0], "height": viewport[1]}, accept_downloads=True,
            )  # fmt: skip
            try:
                page = context.new_page()
                page.set_default_timeout(30_000)
                yield page
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
