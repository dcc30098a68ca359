"""Which build runs: the compiled twins of ``ariane._speedups`` or the pure-Python modules.

How it works (issue 18): a few per-message functions have a C twin in ``src/ariane/_speedups.c``,
compiled by ``hatch_build.py`` during ``pip install`` when a C compiler is present. The pure
modules stay the reference and are used whenever the extension is missing (no compiler on the
machine that installed it) or ``ARIANE_PURE=1`` is set in the environment (read once, at import:
it is the one switch that must act before any module binds its functions). The identity tests
(``tests/unit/common/test_native_identity.py``) run both builds on the same inputs.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["COMPILED", "PURE_REQUESTED", "build_name", "speedups"]

#: ``ARIANE_PURE`` set to anything but "" or "0": use the pure-Python modules.
PURE_REQUESTED: bool = os.environ.get("ARIANE_PURE", "") not in ("", "0")


def _load() -> ModuleType | None:
    if PURE_REQUESTED:
        return None
    try:
        # by name: ``from ariane import _speedups`` would make this layer import the package
        return importlib.import_module("ariane._speedups")
    except ImportError:
        return None


#: the compiled module, or None when the pure-Python twins run
speedups: ModuleType | None = _load()
COMPILED: bool = speedups is not None


def build_name() -> str:
    """One line for logs and benchmark output: which build this process runs."""
    if COMPILED:
        return "compiled"
    if PURE_REQUESTED:
        return "pure (ARIANE_PURE=1)"
    return "pure (not compiled: no C compiler at install; install one and rerun make install)"
