"""Login and request forgery protection (rocketmq-dashboard's ``loginRequired`` users file and
its CSRF token).

How it works: with ``--auth FILE`` every page needs a login. The file has one
``user=password[,1]`` line per account (``1``: an admin, who may change things; others only
look), as rocketmq-dashboard's ``users.properties``; a password may also be stored as
``pbkdf2_sha256$<iterations>$<salt>$<hex digest>``. The file is read again when it changes.
A login is kept in a signed cookie (itsdangerous) that expires after ``SESSION_MAX_AGE_S``.

Forgery: every response carries a random token in a ``SameSite=Strict`` cookie; every form
posts it back in ``csrf_token`` (scripts send the ``X-CSRF-Token`` header) and a POST whose
token does not match the cookie is refused, as is one whose ``Origin`` names another site.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from itsdangerous import BadSignature, URLSafeTimedSerializer

from ariane.common.javaprops import parse_properties
from ariane.errors import ConfigError

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "SESSION_MAX_AGE_S",
    "SessionSigner",
    "User",
    "UserStore",
    "csrf_ok",
    "hash_password",
    "new_token",
]

logger = logging.getLogger(__name__)

CSRF_COOKIE = "ariane_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SESSION_COOKIE = "ariane_session"
SESSION_MAX_AGE_S = 12 * 3600
_PBKDF2 = "pbkdf2_sha256"


@dataclass(frozen=True, slots=True)
class User:
    """A dashboard account; only admins may change the cluster."""

    name: str
    admin: bool


def new_token() -> str:
    """A fresh random CSRF token."""
    return secrets.token_urlsafe(32)


def csrf_ok(cookie: str | None, submitted: str | None) -> bool:
    """Whether the submitted token matches the cookie's (both present)."""
    if not cookie or not submitted:
        return False
    return hmac.compare_digest(cookie.encode(), submitted.encode())


def hash_password(password: str, *, iterations: int = 200_000, salt: str | None = None) -> str:
    """The ``pbkdf2_sha256$...`` form of ``password`` for the users file."""
    salt = salt or secrets.token_hex(8)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations)
    return f"{_PBKDF2}${iterations}${salt}${digest.hex()}"


def _password_ok(stored: str, given: str) -> bool:
    if stored.startswith(_PBKDF2 + "$"):
        try:
            _, iterations, salt, _digest = stored.split("$", 3)
            expected = hash_password(given, iterations=int(iterations), salt=salt)
        except ValueError:
            return False
        return hmac.compare_digest(expected.encode(), stored.encode())
    return hmac.compare_digest(stored.encode(), given.encode())


class UserStore:
    """The accounts of a users file, read again when the file changes.

    Args:
        path: the ``user=password[,1]`` file.

    Raises:
        ConfigError: the file cannot be read or has no account.
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._mtime: float | None = None
        self._users: dict[str, tuple[str, bool]] = {}
        self._load(strict=True)

    def _load(self, *, strict: bool) -> None:
        try:
            mtime = self.path.stat().st_mtime
            if mtime == self._mtime:
                return
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            if strict:
                raise ConfigError("auth", f"cannot read users file {self.path}: {exc}") from None
            logger.warning("users file %s unreadable, keeping the accounts read before", self.path)
            return
        users: dict[str, tuple[str, bool]] = {}
        for name, value in parse_properties(text).items():
            password, _, flag = value.partition(",")
            if name.strip() and password:
                users[name.strip()] = (password.strip(), flag.strip() == "1")
        if not users and strict:
            raise ConfigError("auth", f"users file {self.path} has no user=password line")
        self._users, self._mtime = users, mtime

    def check(self, name: str, password: str) -> User | None:
        """The account if ``password`` is right, else ``None``."""
        self._load(strict=False)
        entry = self._users.get(name)
        if entry is None:
            _password_ok("x" * 16, password)  # same work whether the name exists or not
            return None
        stored, admin = entry
        return User(name, admin) if _password_ok(stored, password) else None

    def get(self, name: str) -> User | None:
        """The account named ``name`` (still in the file), else ``None``."""
        self._load(strict=False)
        entry = self._users.get(name)
        return None if entry is None else User(name, entry[1])


class SessionSigner:
    """Signs and checks the login cookie.

    Args:
        secret: signing key (random per process by default: a restart logs everyone out).
    """

    def __init__(self, secret: bytes | None = None) -> None:
        self._serializer = URLSafeTimedSerializer(secret or os.urandom(32), salt="ariane-login")

    def dumps(self, user: str) -> str:
        """Cookie value for ``user``."""
        return self._serializer.dumps({"u": user})

    def loads(self, value: str | None) -> str | None:
        """The user of a cookie value, ``None`` when absent, forged or expired."""
        if not value:
            return None
        try:
            data = self._serializer.loads(value, max_age=SESSION_MAX_AGE_S)
        except BadSignature:
            return None
        user = data.get("u") if isinstance(data, dict) else None
        return user if isinstance(user, str) else None
