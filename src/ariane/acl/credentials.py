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
is the one call both sides make per request. With the compiled build (``ariane._speedups``,
issue 18) it runs as one C function that sorts the keys, joins the UTF-8 values and drives a
copy of the keyed ``hmac`` object (the HMAC itself stays hashlib's OpenSSL one); the pure twins
``canonical_text_py`` / ``content_signature_py`` are the reference, and the identity tests
check that both give the same bytes. ``request_signer`` keys its HMAC once. Pure.
"""

from __future__ import annotations

import hmac
from binascii import b2a_base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ariane.common import native
from ariane.remoting.protocol.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "SessionCredentials",
    "canonical_content",
    "canonical_text",
    "canonical_text_py",
    "content_signature",
    "content_signature_py",
    "hmac_key",
    "request_signer",
    "sign",
    "sign_fields",
    "signature",
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


#: ``content_signature(ext_fields, body, key, skip=None) -> str``: the compiled twin when built
content_signature: Callable[..., str] = (
    getattr(native.speedups, "acl_signature", None) or content_signature_py
)


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
        key = _KEYS[credentials.secret_key] = hmac_key(credentials.secret_key)
    ext_fields[SIGNATURE] = content_signature(ext_fields, body, key, None)


#: secret -> keyed HMAC, so a client computes the key schedule once per secret
_KEYS: dict[str, hmac.HMAC] = {}


def request_signer(credentials: SessionCredentials) -> Callable[[RemotingCommand], None]:
    """A ``RemotingClient`` signer that signs every request with ``credentials`` (what
    ``sign_fields`` does, with the key schedule computed once here)."""
    access_key = credentials.access_key
    token = credentials.security_token
    key = hmac_key(credentials.secret_key)
    content_sig = content_signature

    def signer(request: RemotingCommand) -> None:
        ext = request.ext_fields
        ext[ACCESS_KEY] = access_key
        if token is not None:
            ext[SECURITY_TOKEN] = token
        ext[SIGNATURE] = content_sig(ext, request.body, key, None)

    return signer
