"""The ACL file set: reloads, broken files keep their old rules, removed files, order."""

from __future__ import annotations

import logging

from ariane.acl.files import AclFileSet, AclPaths
from ariane.acl.hook import RefusalThrottle

PATHS = AclPaths.of("/opt/rmq")
DEFAULT = PATHS.default_file
TEAM = "/opt/rmq/conf/acl/team.yml"


def _account(ak: str, sk: str = "secret-123") -> bytes:
    return f"accounts:\n  - {{accessKey: {ak}, secretKey: {sk}}}\n".encode()


def test_paths_and_ownership() -> None:
    assert DEFAULT == "/opt/rmq/conf/plain_acl.yml"
    assert PATHS.acl_dir == "/opt/rmq/conf/acl"
    assert PATHS.owns(DEFAULT)
    assert PATHS.owns("/opt/rmq/conf/acl/sub/x.yaml")
    assert not PATHS.owns("/opt/rmq/conf/acl/x.txt")
    assert not PATHS.owns("/etc/passwd")
    assert not PATHS.owns("/opt/rmq/conf/acl/../../../etc/x.yml")


def test_refresh_loads_changes_keeps_broken_and_drops_removed() -> None:
    files = AclFileSet(PATHS)
    report = files.refresh({TEAM: _account("teamuser"), DEFAULT: _account("defaultuser")})
    assert report.changed
    assert list(files.rules.accounts) == ["defaultuser", "teamuser"]  # the default file first
    assert not files.refresh({TEAM: _account("teamuser"), DEFAULT: _account("defaultuser")}).changed
    broken = files.refresh({TEAM: b"accounts: [", DEFAULT: _account("defaultuser")})
    assert not broken.changed
    assert TEAM in broken.errors
    assert "teamuser" in files.rules.accounts  # the old rules of the broken file stay
    assert TEAM in files.broken
    again = files.refresh({TEAM: b"accounts: [", DEFAULT: _account("defaultuser")})
    assert again.errors == {}  # reported once per content
    fixed = files.refresh({TEAM: _account("teamuser2"), DEFAULT: _account("defaultuser")})
    assert fixed.loaded == (TEAM,)
    assert set(files.rules.accounts) == {"defaultuser", "teamuser2"}
    assert files.broken == {}
    gone = files.refresh({DEFAULT: _account("defaultuser")})
    assert gone.removed == (TEAM,)
    assert set(files.rules.accounts) == {"defaultuser"}
    unreadable = files.refresh({}, {DEFAULT: "Permission denied"})
    assert "Permission denied" in unreadable.errors[DEFAULT]
    assert set(files.rules.accounts) == {"defaultuser"}


def test_log_records() -> None:
    files = AclFileSet(PATHS)
    report = files.refresh(
        {
            DEFAULT: _account("defaultuser"),
            TEAM: b"x: [",
            "/opt/rmq/conf/acl/b.yml": _account("defaultuser"),
        }
    )
    levels = [level for level, _ in report.log_records(1)]
    assert logging.ERROR in levels
    assert logging.WARNING in levels  # the repeated key
    assert levels[-1] == logging.INFO


def test_refusal_throttle() -> None:
    throttle = RefusalThrottle(period_ms=1000, max_keys=3)
    assert throttle.note("1.1.1.1", "r", 0) == 1
    assert throttle.note("1.1.1.1", "r", 10) is None
    assert throttle.note("1.1.1.1", "r", 20) is None
    assert throttle.note("2.2.2.2", "r", 30) == 1
    assert throttle.note("1.1.1.1", "r", 1000) == 3  # itself plus the two held back
    for i in range(5):
        throttle.note(f"9.9.9.{i}", "r", 1000)
    assert len(throttle._last) <= 3
