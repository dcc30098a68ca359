"""The ACL page against a broker with plain ACL on: the dashboard signs its requests with an
admin account, lists the accounts without their secrets, and creates and deletes one on the
broker; in Chromium, a dashboard with ``--auth`` sends to its login page, then shows the
accounts (screenshots of both under test-artifacts/dashboard/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.dashboard.support import (
    ARTIFACTS,
    DashClient,
    browser_page,
    start_dashboard,
    wait_for,
)
from tests.support.cluster import Cluster
from tests.support.processes import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dashboard-acl")]
RULES = {
    "globalWhiteRemoteAddresses": ["10.10.*"],
    "accounts": [
        {"accessKey": "dashadmin", "secretKey": "dash-secret-1", "admin": True},
        {"accessKey": "orders_app", "secretKey": "orders-secret", "topicPerms": ["Orders=PUB"]},
    ],
}


@pytest.fixture(scope="module")
def acl_dashboard(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Cluster, ServerProcess]]:
    root = tmp_path_factory.mktemp("dash-acl")
    home = root / "home"
    (home / "conf" / "acl").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(RULES), encoding="utf-8")
    cluster = Cluster(root / "cluster")
    try:
        cluster.start(aclEnable="true", rocketmqHome=home, aclWatchIntervalMs=100,
                      mappedFileSizeConsumeQueue=20 * 1024)  # fmt: skip
        proc = start_dashboard(
            cluster.namesrv_addr, "--access-key", "dashadmin", "--secret-key", "dash-secret-1"
        )
        try:
            yield cluster, proc
        finally:
            proc.stop()
    finally:
        cluster.stop()


def _file_accounts(cluster: Cluster) -> dict[str, dict[str, object]]:
    home = Path(str(cluster.broker_confs["broker-a"]["rocketmqHome"]))
    rules = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text(encoding="utf-8"))
    return {a["accessKey"]: a for a in rules["accounts"]}


def test_accounts_listed_created_and_deleted(acl_dashboard: tuple[Cluster, ServerProcess]) -> None:
    cluster, proc = acl_dashboard
    client = DashClient(proc.ready["dashboard"])
    try:
        page = client.api("/acl")
        assert page["aclDisabledOn"] == []
        assert [a["accessKey"] for a in page["accounts"]] == ["dashadmin", "orders_app"]
        assert all("secretKey" not in a for a in page["accounts"])
        assert page["globalWhiteAddrs"] == ["10.10.*"]
        html = client.get("/acl").text
        assert "orders-secret" not in html
        assert "Orders=PUB" in html
        assert client.api("/cluster")["brokers"][0]["reachable"] is True

        made = client.post(
            "/acl/createOrUpdate",
            {"accessKey": "audit_app", "secretKey": "audit-secret", "defaultTopicPerm": "SUB",
             "topicPerms": "Audit=PUB|SUB\nOrders=DENY", "groupPerms": "audit_g=SUB"},
        )  # fmt: skip
        assert made.status_code == 200, made.text
        wait_for("the new account in the file", lambda: "audit_app" in _file_accounts(cluster))
        written = _file_accounts(cluster)["audit_app"]
        assert written["secretKey"] == "audit-secret"
        assert written["topicPerms"] == ["Audit=PUB|SUB", "Orders=DENY"]
        assert written["defaultTopicPerm"] == "SUB"
        assert "audit_app" in [a["accessKey"] for a in client.api("/acl")["accounts"]]

        gone = client.post("/acl/delete", {"accessKey": "audit_app", "confirm": "audit_app"})
        assert gone.status_code == 200, gone.text
        wait_for("the account removed", lambda: "audit_app" not in _file_accounts(cluster))
    finally:
        client.close()


@pytest.mark.browser
@pytest.mark.slow
def test_login_then_accounts_in_the_browser(
    acl_dashboard: tuple[Cluster, ServerProcess], tmp_path: Path
) -> None:
    cluster, _ = acl_dashboard
    users = tmp_path / "users.properties"
    users.write_text("admin=s3cret,1\n", encoding="utf-8")
    proc = start_dashboard(
        cluster.namesrv_addr, "--auth", str(users),
        "--access-key", "dashadmin", "--secret-key", "dash-secret-1",
    )  # fmt: skip
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        with browser_page() as page:
            base = f"http://{proc.ready['dashboard']}"
            page.goto(f"{base}/acl")
            assert page.url == f"{base}/login?next=/acl"
            page.screenshot(path=str(ARTIFACTS / "login.png"), full_page=True)
            page.fill("input[name=username]", "admin")
            page.fill("input[name=password]", "s3cret")
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/acl")
            text = page.inner_text("main")
            assert ("orders_app" in text, "Orders=PUB" in text, "orders-secret" in text) == (
                True, True, False,
            )  # fmt: skip
            page.screenshot(path=str(ARTIFACTS / "acl.png"), full_page=True)
    finally:
        proc.stop()
