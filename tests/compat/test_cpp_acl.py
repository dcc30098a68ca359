"""The real C++ client (PyPI ``rocketmq==0.4.4``, ``set_session_credentials``) against a
broker with ACL on: an account limited to its topic and group produces and consumes every
message exactly once; a wrong secret and a missing account are refused, and the broker's
log names why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ariane.client import Admin, SessionCredentials
from tests.compat.conftest import CppClient
from tests.integration.client.conftest import run, wait_for_route
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.compat, pytest.mark.integration]

RULES = {
    "accounts": [
        {"accessKey": "adminuser", "secretKey": "admin-secret", "admin": True},
        {
            "accessKey": "cppclient",
            "secretKey": "cpp-secret-1",
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "DENY",
            "topicPerms": ["CppAcl=PUB|SUB"],
            "groupPerms": ["CG_CPP_ACL=SUB", "PG_CPP_ACL=PUB"],
        },
    ]
}


@pytest.fixture
def acl_cluster(tmp_path: Path) -> Iterator[Cluster]:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(RULES), encoding="utf-8")
    cluster = Cluster(tmp_path / "cluster")
    try:
        cluster.start(aclEnable="true", rocketmqHome=home)

        async def create() -> None:
            creds = SessionCredentials("adminuser", "admin-secret")
            async with Admin(namesrv_addr=cluster.namesrv_addr, credentials=creds) as admin:
                await admin.create_topic("CppAcl", read_queue_nums=4, write_queue_nums=4)
                await wait_for_route(admin, "CppAcl")

        run(create())
        yield cluster
    finally:
        cluster.stop()


def test_cpp_client_with_session_credentials(acl_cluster: Cluster, cpp: CppClient) -> None:
    ns = acl_cluster.namesrv_addr
    creds = ["--access-key", "cppclient", "--secret-key", "cpp-secret-1"]
    n = 200
    sent = cpp.run(
        "producer.py",
        ["--namesrv", ns, "--topic", "CppAcl", "--group", "PG_CPP_ACL", "--count", str(n),
         "--tags", "TagA", "--keys-prefix", "k-", *creds],
    )  # fmt: skip
    done = sent.of("done")
    assert done, sent.tail()
    assert done[0]["errors"] == 0, sent.tail()
    assert len(sent.of("sent")) == n
    consumer = cpp.spawn(
        "consumer.py",
        ["--namesrv", ns, "--topic", "CppAcl", "--group", "CG_CPP_ACL", "--expect", str(n),
         "--linger", "2", *creds],
    )  # fmt: skip
    consumer.wait(180)
    bodies = [m["body"] for m in consumer.of("msg")]
    assert sorted(bodies) == sorted(f"body-{i}" for i in range(n)), consumer.tail()

    wrong = cpp.run(
        "producer.py",
        ["--namesrv", ns, "--topic", "CppAcl", "--group", "PG_CPP_ACL", "--count", "1",
         "--timeout-ms", "3000", "--access-key", "cppclient", "--secret-key", "wrong-secret"],
    )  # fmt: skip
    assert wrong.of("done")[0]["errors"] == 1, wrong.tail()
    anonymous = cpp.run(
        "producer.py",
        ["--namesrv", ns, "--topic", "CppAcl", "--group", "PG_CPP_ACL", "--count", "1",
         "--timeout-ms", "3000"],
    )  # fmt: skip
    assert anonymous.of("done")[0]["errors"] == 1, anonymous.tail()
    log = acl_cluster.brokers["broker-a"].output()
    assert "Check signature failed for accessKey=cppclient" in log
    assert "No accessKey is configured" in log
