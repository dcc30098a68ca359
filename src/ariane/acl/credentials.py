"""Client credentials and request signing (RocketMQ ``SessionCredentials``, ``AclClientRPCHook``,
``AclUtils.combineRequestContent``, ``AclSigner``).

How it works: the signed content is the values of the request's ``extFields`` in key order
(byte order of the keys, which is Java's ``TreeMap`` order for ASCII keys), concatenated with no
separator and encoded as UTF-8, followed by the body. The ``Signature`` field itself is left
out. The signature is ``Base64(HmacSHA1(key=UTF-8(secretKey), content))``. A client adds
``AccessKey`` (and ``SecurityToken`` when it has one) *before* computing it, so the server,
which recomputes over every field it received but ``Signature``, covers the same bytes.

The C++ client (``ClientRPCHook``) signs its declared header fields plus ``AccessKey`` and
``OnsChannel`` and then sends exactly those, so the same server rule holds for it; header values
it sends as JSON numbers arrive as their decimal strings, which is what it signed.

Speed (issue 11's bar: a signed send costs at most 10 % of throughput): ``content_signature``
(client) and ``verify_signature`` (broker) are the one call each side makes per request, with a
key from ``signing_key`` computed once per secret. Built with OpenSSL (``ariane._speedups``,
``_speedups_acl.h``), the key is the two SHA-1 states after the HMAC key blocks and one C call
sorts the keys, feeds the UTF-8 values and the body to OpenSSL's SHA-1 from a copy of them,
finishes the HMAC and base64 (and compares); without OpenSSL the compiled ``acl_signature``
drives a copy of a keyed ``hmac`` object. The pure twins ``canonical_text_py`` /
``content_signature_py`` / ``verify_signature_py`` over ``hmac_key`` are the reference, and
the identity tests check that every build gives the same bytes. Pure.
"""

from __future__ import annotations

import hmac
from binascii import b2a_base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TypeAlias

from ariane.common import native
from ariane.remoting.protocol.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "SessionCredentials",
    "SigningKey",
    "canonical_content",
    "canonical_text",
    "canonical_text_py",
    "content_signature",
    "content_signature_py",
    "hmac_key",
    "request_signer",
    "sign",
    "sign_fields",
    "sign_request",
    "sign_request_py",
    "signature",
    "signing_key",
    "verify_signature",
    "verify_signature_py",
]

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An ACL account's credentials, as a client holds them.

    Attributes:
        access_key: the account name (``accessKey``).
        secret_key: the shared secret; never sent.
        security_token: optional token sent as ``SecurityToken`` (and signed).
    """

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.access_key, str) or not isinstance(self.secret_key, str):
            raise TypeError("access_key and secret_key must be strings")

    def __repr__(self) -> str:  # never print the secret
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"


def canonical_text_py(ext_fields: Mapping[str, str], skip: str | None = None) -> bytes:
    """The header part of the signed content: the values of ``ext_fields`` but ``Signature``
    (and ``skip``) in key order, UTF-8."""
    keys = sorted(ext_fields)
    if SIGNATURE in ext_fields:
        keys.remove(SIGNATURE)
    if skip is not None and skip != SIGNATURE and skip in ext_fields:
        keys.remove(skip)
    return "".join(map(ext_fields.__getitem__, keys)).encode("utf-8")


_compiled_canonical = getattr(native.speedups, "acl_canonical", None)  # absent: stale build


def canonical_text(ext_fields: Mapping[str, str], skip: str | None = None) -> bytes:
    """The header part of the signed content: the values of ``ext_fields`` but ``Signature``
    (and ``skip``) in key order, UTF-8 (the compiled twin when built)."""
    if _compiled_canonical is not None:
        return _compiled_canonical(ext_fields, skip)  # type: ignore[no-any-return]
    return canonical_text_py(ext_fields, skip)


def canonical_content(
    ext_fields: Mapping[str, str], body: bytes | None, skip: str | None = None
) -> bytes:
    """The bytes a signature covers: ``canonical_text`` then ``body``."""
    content = canonical_text(ext_fields, skip)
    return content + body if body else content


#: hashlib releases the GIL while hashing 2048 bytes or more; each release lets the store's
#: threads take the interpreter for up to a switch interval (5 ms), so signing and checking
#: feed the HMAC below that size, keeping the request on its thread.
_GIL_SAFE_CHUNK = 2047


def hmac_key(secret_key: str | bytes) -> hmac.HMAC:
    """An HMAC-SHA1 keyed with ``secret_key``, to ``copy()`` per signature (the key schedule
    is computed once)."""
    key = secret_key.encode("utf-8") if isinstance(secret_key, str) else secret_key
    return hmac.new(key, digestmod="sha1")


def _feed(mac: hmac.HMAC, data: bytes) -> None:
    if len(data) <= _GIL_SAFE_CHUNK:
        mac.update(data)
        return
    view = memoryview(data)
    for start in range(0, len(data), _GIL_SAFE_CHUNK):
        mac.update(view[start : start + _GIL_SAFE_CHUNK])


def signature(text: bytes, body: bytes | None, key: hmac.HMAC) -> str:
    """``Base64(HmacSHA1(key, text + body))`` without joining the two."""
    mac = key.copy()
    _feed(mac, text)
    if body:
        _feed(mac, body)
    return b2a_base64(mac.digest(), newline=False).decode("ascii")


def content_signature_py(
    ext_fields: Mapping[str, str], body: bytes | None, key: hmac.HMAC, skip: str | None = None
) -> str:
    """The signature of a request: ``signature(canonical_text_py(ext_fields, skip), body,
    key)`` (``key`` from ``hmac_key``)."""
    return signature(canonical_text_py(ext_fields, skip), body, key)


def verify_signature_py(ext_fields: Mapping[str, str], body: bytes | None, key: hmac.HMAC) -> bool:
    """Whether ``ext_fields["Signature"]`` is a non-empty ASCII text equal to
    ``content_signature_py(ext_fields, body, key)`` (compared in constant time)."""
    got = ext_fields.get(SIGNATURE)
    if not isinstance(got, str) or not got or not got.isascii():
        return False
    return hmac.compare_digest(content_signature_py(ext_fields, body, key, None), got)


#: An account's or a client's secret made ready for ``content_signature``: the compiled key
#: schedule (opaque bytes, ``acl_hmac_key``) when built with OpenSSL, else a keyed ``hmac``.
SigningKey: TypeAlias = "hmac.HMAC | bytes"

_sp = native.speedups
_compiled_key: Callable[[bytes], bytes] | None = getattr(_sp, "acl_hmac_key", None)


def signing_key(secret_key: str | bytes) -> SigningKey:
    """``secret_key`` made ready for ``content_signature`` / ``verify_signature`` (computed
    once per secret: the HMAC key schedule)."""
    if _compiled_key is None:
        return hmac_key(secret_key)
    key = secret_key.encode("utf-8") if isinstance(secret_key, str) else secret_key
    return _compiled_key(key)


def _verify_with(sign_: Callable[..., str]) -> Callable[..., bool]:
    def verify(ext_fields: Mapping[str, str], body: bytes | None, key: SigningKey) -> bool:
        got = ext_fields.get(SIGNATURE)
        if not isinstance(got, str) or not got or not got.isascii():
            return False
        return hmac.compare_digest(sign_(ext_fields, body, key, None), got)

    return verify


#: ``content_signature(ext_fields, body, key, skip=None) -> str`` with a ``signing_key`` key:
#: the OpenSSL twin (``acl_sign``), else the compiled hmac-object twin, else the pure one
content_signature: Callable[..., str]
#: ``verify_signature(ext_fields, body, key) -> bool`` with a ``signing_key`` key
verify_signature: Callable[..., bool]
if _compiled_key is not None:
    content_signature = _sp.acl_sign  # type: ignore[union-attr]
    verify_signature = _sp.acl_verify  # type: ignore[union-attr]
else:
    content_signature = getattr(_sp, "acl_signature", None) or content_signature_py
    verify_signature = _verify_with(content_signature)


def sign(content: bytes, secret_key: str | bytes) -> str:
    """``Base64(HmacSHA1(secret_key, content))`` (``AclSigner.calSignature``)."""
    return signature(content, None, hmac_key(secret_key))


def sign_fields(
    ext_fields: dict[str, str], body: bytes | None, credentials: SessionCredentials
) -> None:
    """Sign a request in place the way ``AclClientRPCHook.doBeforeRequest`` does: add
    ``AccessKey`` (and ``SecurityToken``), then ``Signature`` over every field."""
    ext_fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext_fields[SECURITY_TOKEN] = credentials.security_token
    key = _KEYS.get(credentials.secret_key)
    if key is None:
        if len(_KEYS) > 64:
            _KEYS.clear()
        key = _KEYS[credentials.secret_key] = signing_key(credentials.secret_key)
    ext_fields[SIGNATURE] = content_signature(ext_fields, body, key, None)


#: secret -> signing key, so a client computes the key schedule once per secret
_KEYS: dict[str, SigningKey] = {}


def sign_request_py(
    key: SigningKey, access_key: str, token: str | None, request: RemotingCommand
) -> None:
    """Sign ``request`` in place: ``AccessKey`` (and ``SecurityToken`` unless ``token`` is
    None), then ``Signature`` over every field and the body (``key`` from ``signing_key``).
    The pure twin of the compiled ``acl_sign_request``."""
    ext = request.ext_fields
    ext[ACCESS_KEY] = access_key
    if token is not None:
        ext[SECURITY_TOKEN] = token
    ext[SIGNATURE] = content_signature(ext, request.body, key, None)


#: ``sign_request(key, access_key, token, request)``: the compiled twin when built with OpenSSL
sign_request: Callable[[SigningKey, str, str | None, RemotingCommand], None] = (
    getattr(_sp, "acl_sign_request", None) if _compiled_key is not None else None
) or sign_request_py


def request_signer(credentials: SessionCredentials) -> Callable[[RemotingCommand], None]:
    """A ``RemotingClient`` signer that signs every request with ``credentials`` (what
    ``sign_fields`` does, with the key schedule computed once here): ``sign_request`` with
    the account's arguments bound, so a compiled build signs a request in one C call."""
    key = signing_key(credentials.secret_key)
    return partial(sign_request, key, credentials.access_key, credentials.security_token)
