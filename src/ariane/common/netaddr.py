"""Small facts about listen addresses (pure)."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` is reachable from this machine only
    (``127.0.0.0/8``, ``::1``, ``localhost``); ``0.0.0.0``, ``::`` and names are not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
