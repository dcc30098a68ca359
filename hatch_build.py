"""Build hook: compile ``src/ariane/_speedups.c`` when a C compiler is present (issue 18).

Every compiled function has a pure-Python twin, so the build never fails for want of a
compiler: it prints one line and the package runs on the pure-Python modules. ``ARIANE_PURE=1``
at install time skips the compile; at run time it makes an existing build unused.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # imported by the tests, outside a build
    BuildHookInterface = object

SOURCE = Path("src/ariane/_speedups.c")
#: compile and link flags of the OpenSSL part (libcrypto, the library hashlib uses)
OPENSSL_FLAGS = ["-DARIANE_OPENSSL", "-lcrypto"]


def target_name() -> str:
    """File name of the extension for the interpreter running the build."""
    return "_speedups" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def compile_speedups(root: Path, out_dir: Path) -> tuple[Path | None, str]:
    """Compile the extension into ``out_dir``; (path, "") or (None, why not)."""
    if os.environ.get("ARIANE_PURE", "") not in ("", "0"):
        return None, "ARIANE_PURE is set"
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if not cc or shutil.which(cc[0]) is None:
        return None, f"no C compiler ({cc[0] if cc else 'CC is empty'} not found)"
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        return None, f"no Python headers (Python.h not in {include})"
    out = out_dir / target_name()
    tmp = out.with_suffix(out.suffix + f".{os.getpid()}.tmp")
    flags = ["-O2", "-fPIC", "-shared", "-Wall", "-Werror=implicit-function-declaration"]
    if sys.platform == "darwin":
        flags += ["-undefined", "dynamic_lookup"]
    cmd = [*cc, *flags, f"-I{include}", str(root / SOURCE), "-o", str(tmp)]
    try:
        # with OpenSSL's SHA-1 for the ACL signatures (_speedups_acl.h) when its headers and
        # library are there, else without: those three functions are then absent
        done = subprocess.run(
            [*cmd, *OPENSSL_FLAGS], capture_output=True, text=True, timeout=300, check=False
        )
        if done.returncode != 0:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except OSError as exc:
        return None, f"the C compiler could not run: {exc}"
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = (done.stderr or done.stdout).strip().splitlines()[:1]
        return None, f"the C compiler failed: {first[0] if first else done.returncode}"
    os.replace(tmp, out)
    return out, ""


class SpeedupsHook(BuildHookInterface):  # type: ignore[misc]
    """Compile in place (editable installs import from src/) and ship it in wheels."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name not in ("wheel", "editable"):
            return
        root = Path(self.root)
        editable = self.target_name == "editable" or version == "editable"
        # editable installs import from src/; a wheel gets its own copy from a scratch dir
        out_dir = root / "src" / "ariane" if editable else Path(tempfile.mkdtemp())
        self._scratch = None if editable else out_dir
        built, why = compile_speedups(root, out_dir)
        if built is None:
            if editable:  # never leave an old build behind a newer source
                (out_dir / target_name()).unlink(missing_ok=True)
            sys.stderr.write(f"ariane: {why}; using the pure-Python modules (slower)\n")
            return
        sys.stderr.write(f"ariane: compiled hot path built ({built.name})\n")
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if not editable:
            build_data["force_include"][str(built)] = f"ariane/{built.name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
