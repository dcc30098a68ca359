"""The compiled twins a test compares with their pure-Python references."""

from __future__ import annotations

import os
import shutil
import sysconfig
from typing import Any

import pytest

from ariane.common import native

__all__ = ["compiled"]


def compiled(name: str | None = None) -> Any:
    """``ariane._speedups.<name>`` (the module itself when ``name`` is None).

    Skips the test on the pure-Python build (``ARIANE_PURE``, or no C compiler); fails it
    when a C compiler is present but that twin is not built.
    """
    module = native.speedups
    fast = module if name is None or module is None else getattr(module, name, None)
    if fast is None:
        cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
        if native.PURE_REQUESTED or shutil.which(cc.split()[0]) is None:
            pytest.skip(f"pure-Python build ({native.build_name()}): nothing compiled to compare")
        what = "ariane._speedups" + (f".{name}" if name else "")
        pytest.fail(f"a C compiler is present but {what} is not built: run `make install`")
    return fast
