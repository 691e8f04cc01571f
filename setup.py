"""kspark's build: the modules of ``kspark.compiled.MODULES`` compiled with mypyc when a C
compiler is at hand, pure Python otherwise (metadata in pyproject.toml).

``KSPARK_PURE_PYTHON=1`` at install time skips the compilation.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
compiled = runpy.run_path(str(ROOT / "kspark" / "compiled.py"))
MODULES: tuple[str, ...] = compiled["MODULES"]
SOURCES = [str(compiled["source_path"](m, ROOT / "kspark").relative_to(ROOT)) for m in MODULES]


def note(message: str) -> None:
    print(f"kspark build: {message}", file=sys.stderr, flush=True)


def pure(reason: str) -> None:
    """Install pure Python: no extension of an earlier build left beside a source, and the
    build record saying why."""
    for suffix in EXTENSION_SUFFIXES:
        for old in (ROOT / "kspark").rglob(f"*{suffix}"):
            old.unlink()
    record = ROOT / "kspark" / compiled["BUILD_RECORD"]
    record.write_text(json.dumps({"pure": reason}) + "\n")
    note(f"pure Python: {reason}")


class OptionalBuildExt(build_ext):
    """Builds the compiled modules, or none of them (a failed compilation installs pure
    Python); records each compiled source's digest (``kspark.compiled.BUILD_RECORD``)."""

    def run(self) -> None:
        if not self.extensions:  # pure Python, already recorded
            return
        try:
            super().run()
        except Exception as exc:  # a missing compiler or header
            for ext in self.extensions:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            pure(f"compiling failed ({type(exc).__name__}: {exc})"[:500])
            return
        package = Path(self.get_finalized_command("build_py").get_package_dir("kspark"))
        if self.inplace:  # extensions of modules no longer compiled would shadow their sources
            built = {Path(self.get_ext_fullpath(ext.name)).resolve() for ext in self.extensions}
            for suffix in EXTENSION_SUFFIXES:
                for old in package.rglob(f"*{suffix}"):
                    if old.resolve() not in built:
                        old.unlink()
        target = package if self.inplace else Path(self.build_lib) / "kspark"
        record = {m: compiled["digest"](ROOT / s) for m, s in zip(MODULES, SOURCES)}
        (target / compiled["BUILD_RECORD"]).write_text(json.dumps(record, indent=1) + "\n")
        note(f"{len(MODULES)} modules compiled with mypyc")


def extensions() -> list:
    if os.environ.get(compiled["PURE_PYTHON"], "") not in ("", "0"):
        pure(f"{compiled['PURE_PYTHON']} was set")
        return []
    report = io.StringIO()
    try:
        from mypyc.build import mypycify

        # an isolated build has the modules' dependencies missing: their types are then Any;
        # no incremental cache (after a change of the sources mypyc could fail on a stale one)
        with contextlib.redirect_stdout(report):
            return mypycify(["--ignore-missing-imports", "--cache-dir", os.devnull, *SOURCES],
                            opt_level="3", group_name="kspark._core")
    except (Exception, SystemExit) as exc:  # mypy missing, or the type check failed
        errors = " | ".join(report.getvalue().splitlines()[:5])
        pure(f"mypyc could not translate the modules ({type(exc).__name__}: {exc}; {errors})"
             [:800])
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
