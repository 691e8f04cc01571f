"""kspark's per-record core, compiled with mypyc, and the way back to pure Python.

Installing kspark (``pip install``, ``./dev``) compiles the modules of :data:`MODULES` with
mypyc, the compiler of the mypy project, into C extension modules when a C compiler is at
hand (``setup.py``): the same source, type-checked, run as C. Each extension sits beside its
source and Python's import system prefers it. Without a compiler the install is pure Python.

The compiled modules are not used, and all of :data:`MODULES` run as pure Python, when

- ``KSPARK_PURE_PYTHON=1`` is set (Python tracebacks with line numbers, a debugger), or
- the source of a compiled module differs from the one it was built from (an editable install
  whose code is being changed): one warning names the source and how to rebuild.

The choice is made once, when :mod:`kspark` is imported, for all of them together: the
compiled modules call each other directly, so they are never mixed with pure ones.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shlex
import shutil
import sys
import sysconfig
import warnings
from pathlib import Path
from types import ModuleType

#: the modules compiled with mypyc: what every record goes through
MODULES: tuple[str, ...] = (
    "kspark._json_codec",
    "kspark.records",
    "kspark.windows",
    "kspark.serdes.internals.shortcuts",
    "kspark.serdes.core",
    "kspark.processor.api",
    "kspark.processor.punctuation",
    "kspark.runtime.changelog_entries",
    "kspark.runtime.commit",
    "kspark.runtime.context",
    "kspark.runtime.forwarding",
    "kspark.runtime.punctuator",
    "kspark.runtime.serialized",
    "kspark.runtime.task",
    "kspark.state.internals.base",
    "kspark.state.internals.segments",
    "kspark.state.key_value",
    "kspark.state.session",
    "kspark.state.window",
    "kspark.state.join_stores",
    "kspark.state.versioned",
    "kspark.dsl.internals.processors",
    "kspark.dsl.internals.joins.stream_stream",
    "kspark.dsl.internals.joins.stream_table",
    "kspark.dsl.internals.joins.table_table",
    "kspark.dsl.internals.stateless",
    "kspark.dsl.internals.windowing.common",
    "kspark.dsl.internals.windowing.pending_closes",
    "kspark.dsl.internals.windowing.session",
    "kspark.dsl.internals.windowing.session_merge",
    "kspark.dsl.internals.windowing.sliding",
    "kspark.dsl.internals.windowing.time_windows",
    "kspark.testing.driver",
    "kspark.testing.internals.chunked_queue",
)

#: the environment variable that turns the compiled modules off
PURE_PYTHON = "KSPARK_PURE_PYTHON"
#: the build's record of each compiled module's source digest, written by ``setup.py``
BUILD_RECORD = "_compiled_sources.json"

_ROOT = Path(__file__).resolve().parent
_state: dict[str, str] = {"mode": "pure", "reason": "not decided yet"}


def source_path(module: str, root: Path = _ROOT) -> Path:
    """The ``.py`` file of ``module`` (a name of :data:`MODULES`) under package root ``root``."""
    return root.joinpath(*module.split(".")[1:]).with_suffix(".py")


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def c_compiler() -> str:
    """The C compiler command a build of :data:`MODULES` runs: ``$CC``, else the one Python
    was built with; ``""`` where Python names none (Windows)."""
    words = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "")
    return words[0] if words else ""


def has_c_compiler() -> bool:
    """Whether :func:`c_compiler` names a command that is found."""
    command = c_compiler()
    return bool(command) and shutil.which(command) is not None


def changed_sources(record: dict[str, str], root: Path = _ROOT) -> list[str]:
    """The modules of ``record`` (module -> source digest at build time) whose source under
    ``root`` differs now, or is gone."""
    changed = []
    for module, built in sorted(record.items()):
        path = source_path(module, root)
        if not path.exists() or digest(path) != built:
            changed.append(module)
    return changed


def _extension(module: str, root: Path) -> Path | None:
    """The compiled extension file of ``module``, if there is one."""
    base = source_path(module, root).with_suffix("")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = base.with_name(base.name + suffix)
        if candidate.exists():
            return candidate
    return None


class _PureFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`MODULES` as their ``.py`` sources, never as extensions."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname, self.root))


def install(root: Path = _ROOT) -> None:
    """Decide, before any of :data:`MODULES` is imported, whether they run compiled; install
    the pure-Python finder if not. Called by :mod:`kspark` on import."""
    record_path = root / BUILD_RECORD
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    if "pure" in record:
        _state.update(mode="pure", reason=f"installed so: {record['pure']}")
        return
    if not any(_extension(m, root) for m in MODULES):
        _state.update(mode="pure", reason="not compiled at install")
        return
    reason = None
    if os.environ.get(PURE_PYTHON, "") not in ("", "0"):
        reason = f"{PURE_PYTHON} is set"
    else:
        changed = changed_sources(record, root) if record else ["(no build record)"]
        if changed:
            reason = f"changed since they were compiled: {', '.join(changed)}"
            warnings.warn(
                f"kspark runs pure Python: its compiled modules are out of date ({reason}); "
                "rebuild them with ./dev or `pip install -e .`", RuntimeWarning, stacklevel=3)
    if reason is None:
        _state.update(mode="compiled", reason=f"{len(record)} modules compiled with mypyc")
        return
    _state.update(mode="pure", reason=reason)
    if not any(isinstance(f, _PureFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PureFinder(root))


def status() -> str:
    """``"compiled"`` or ``"pure"``, and why: e.g. ``"pure (KSPARK_PURE_PYTHON is set)"``."""
    return f"{_state['mode']} ({_state['reason']})"


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from a compiled extension."""
    spec = module.__spec__
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)
