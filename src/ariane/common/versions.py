"""RocketMQ version ordinals as names (``MQVersion.getVersionDesc``), no I/O.

From 4.0.0 on, Java's ``MQVersion.Version`` enum lists, per minor version, ten patch versions
each as ``_SNAPSHOT`` then release: ``V4_0_0_SNAPSHOT`` is ordinal 212, ``V4_0_0`` 213 and
``V5_3_3`` 479. Older ordinals are shown as numbers.
"""

from __future__ import annotations

__all__ = ["version_desc"]

_V4_0_0_SNAPSHOT = 212


def version_desc(code: int) -> str:
    """``479`` -> ``"V5_3_3"``; ``478`` -> ``"V5_3_3_SNAPSHOT"``; older -> ``"#<code>"``."""
    if code < _V4_0_0_SNAPSHOT:
        return f"#{code}"
    n = code - _V4_0_0_SNAPSHOT
    minor_index, rest = divmod(n, 20)
    major, minor = 4 + minor_index // 10, minor_index % 10
    patch, release = divmod(rest, 2)
    return f"V{major}_{minor}_{patch}" + ("" if release else "_SNAPSHOT")
