"""The server-side ACL hook (the ``RPCHook`` a RocketMQ broker registers when ``aclEnable`` is
on: ``validator.validate(validator.parse(request, remoteAddr))``).

How it works: ``AclHook.before_request`` parses the request (``parse_request``), decides
(``decide``) against the rules it holds, and answers a refused request itself with the answer
RocketMQ's broker gives: SYSTEM_ERROR (1) and the remark
``org.apache.rocketmq.acl.common.AclException: <reason>``, so Java tools that look for the
exception name keep working. The request never reaches its processor; the connection stays
open and every other request is served as usual.

The hot requests (sends and pulls) take a fast path: whether the account may do this to this
topic and group (``fast_grant``) is remembered per (code, account, topic, group) until the
rules change, and only the signature is computed per request: ``fast_check`` (one C call in a
compiled build) looks the grant up and verifies the signature.

The server shell swaps ``rules`` when its files change (one attribute assignment, so a request
sees the old or the new rules whole, and the remembered grants go with the old ones) and may
narrow the checked codes (``codes``: the NameServer checks only its write requests).
``on_refused`` lets the shell log refusals. No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable

from ariane.acl.credentials import SigningKey, verify_signature
from ariane.acl.plain import AclRules
from ariane.acl.resources import parse_request
from ariane.acl.validator import Decision, FastKey, decide, fast_check, fast_grant, fast_key
from ariane.remoting.channel import Channel
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand, make_response_for

__all__ = [
    "ACL_EXCEPTION",
    "AclHook",
    "RefusalThrottle",
    "refusal_remark",
    "throttled_refusal_log",
]

#: The Java exception name RocketMQ puts in front of an ACL refusal's remark.
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"

RefusalListener = Callable[[Channel, RemotingCommand, Decision], None]

#: most fast-path grants remembered per rules (one per account, code, topic and group seen)
_MAX_GRANTS = 4096


def refusal_remark(reason: str) -> str:
    """The remark of a refused request."""
    return f"{ACL_EXCEPTION}: {reason}"


class AclHook:
    """Checks every request against ``rules`` before it is processed (its ``after_response``
    does nothing: ``observes_responses = False`` spares the dispatcher that call).

    Args:
        rules: the rules in force.
        codes: only these request codes are checked (None: all).
        on_refused: called with each refusal (for logging and counting).

    Attributes:
        refused: how many requests were refused.
    """

    observes_responses = False

    def __init__(
        self,
        rules: AclRules,
        *,
        codes: frozenset[int] | None = None,
        on_refused: RefusalListener | None = None,
    ) -> None:
        self._rules = rules
        self.codes = codes
        self.on_refused = on_refused
        self.refused = 0
        self._grants: dict[FastKey, SigningKey | None] = {}

    @property
    def rules(self) -> AclRules:
        """The rules in force; assigning new ones forgets every remembered fast-path grant."""
        return self._rules

    @rules.setter
    def rules(self, rules: AclRules) -> None:
        self._grants = {}
        self._rules = rules

    def _grant(self, key: FastKey) -> SigningKey | None:
        grants = self._grants
        if len(grants) >= _MAX_GRANTS:  # many topics or forged fields: start over
            grants = self._grants = {}
        mac = grants[key] = fast_grant(self._rules, key)
        return mac

    def check(self, remote_addr: str, request: RemotingCommand) -> Decision:
        """The decision for one request (no side effects)."""
        parsed = parse_request(request.code, request.ext_fields, request.body, remote_addr)
        return decide(self.rules, parsed)

    def before_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """Answer a refused request; let an allowed one through."""
        code = request.code
        if self.codes is not None and code not in self.codes:
            return None
        ext = request.ext_fields
        # sends and pulls of signed accounts: no request record, one call when the grant is known
        verified = fast_check(self._grants, code, ext, request.body)
        if verified is None:
            need = fast_key(code, ext)
            mac = self._grant(need) if need is not None else None
            verified = mac is not None and verify_signature(ext, request.body, mac)
        if verified:
            return None
        decision = self.check(channel.remote_addr, request)
        if decision.allowed:
            return None
        self.refused += 1
        if self.on_refused is not None:
            self.on_refused(channel, request, decision)
        return make_response_for(
            request, ResponseCode.SYSTEM_ERROR, refusal_remark(decision.reason)
        )

    def after_response(
        self, channel: Channel, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        """Nothing to do after a response."""


class RefusalThrottle:
    """Decides which refusals a server logs: the first of each (client IP, reason) at once,
    then at most one line per ``period_ms`` carrying how many were refused meanwhile, so a
    misconfigured client cannot flood the log. Time comes in as an argument.

    Args:
        period_ms: the quiet period per (IP, reason).
        max_keys: most (IP, reason) pairs remembered; the table is cleared when full.
    """

    def __init__(self, period_ms: int = 60_000, max_keys: int = 10_000) -> None:
        self.period_ms = period_ms
        self.max_keys = max_keys
        self._last: dict[tuple[str, str], tuple[int, int]] = {}

    def note(self, ip: str, reason: str, now_ms: int) -> int | None:
        """Count one refusal; return how many to report now (None: stay quiet)."""
        key = (ip, reason)
        last = self._last.get(key)
        if last is None or now_ms - last[0] >= self.period_ms:
            if len(self._last) >= self.max_keys:
                self._last.clear()
            self._last[key] = (now_ms, 0)
            return 1 + (last[1] if last is not None else 0)
        self._last[key] = (last[0], last[1] + 1)
        return None

    def log_line(
        self, remote_addr: str, request: RemotingCommand, reason: str, now_ms: int
    ) -> str | None:
        """The line to log for one refusal, or None while its (IP, reason) is quiet."""
        ip = remote_addr.rpartition(":")[0] or remote_addr
        count = self.note(ip, reason, now_ms)
        if count is None:
            return None
        try:
            what = f"{RequestCode(request.code).name}({request.code})"
        except ValueError:
            what = f"request code {request.code}"
        return f"ACL refused {what} from {remote_addr} ({count} in the last minute): {reason}"


def throttled_refusal_log(log: Callable[[str], None], now_ms: Callable[[], int]) -> RefusalListener:
    """An ``AclHook.on_refused`` that passes ``RefusalThrottle`` lines to ``log`` (a server's
    logger); the clock comes in as ``now_ms``."""
    throttle = RefusalThrottle()

    def on_refused(channel: Channel, request: RemotingCommand, decision: Decision) -> None:
        line = throttle.log_line(channel.remote_addr, request, decision.reason, now_ms())
        if line is not None:
            log(line)

    return on_refused
