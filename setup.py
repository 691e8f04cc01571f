"""kspark's build: the modules of ``kspark.compiled.MODULES`` compiled with mypyc when a C
compiler is at hand, pure Python otherwise (metadata in pyproject.toml).

``KSPARK_PURE_PYTHON=1`` at install time skips the compilation. The build record
(``kspark.compiled.BUILD_RECORD``: each compiled source's digest, or why the build is pure
Python) goes where the package is imported from: beside the sources for an editable install,
into the build directory (and so the wheel) otherwise; a wheel's build never changes the source
tree's files.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import runpy
import shutil
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
compiled = runpy.run_path(str(ROOT / "kspark" / "compiled.py"))
MODULES: tuple[str, ...] = compiled["MODULES"]
SOURCES = [str(compiled["source_path"](m, ROOT / "kspark").relative_to(ROOT)) for m in MODULES]
#: stands for the compiled modules until a build translates them (``OptionalBuildExt``)
PLACEHOLDER = Extension("kspark._core__mypyc", sources=[])


def note(message: str) -> None:
    print(f"kspark build: {message}", file=sys.stderr, flush=True)


def pure_reason() -> str | None:
    """Why this build is pure Python before anything is translated, or None."""
    if os.environ.get(compiled["PURE_PYTHON"], "") not in ("", "0"):
        return f"{compiled['PURE_PYTHON']} was set"
    cc = compiled["c_compiler"]()
    if cc and not compiled["has_c_compiler"]():
        return (f"no C compiler found ({cc!r}, from $CC or Python's build configuration): "
                "the per-record core runs slower; to compile it, install a C compiler (e.g. "
                "`apt-get install gcc`) and Python's headers, then reinstall kspark")
    return None


def shortened(text: str, limit: int = 300) -> str:
    """``text``, its middle left out when longer than ``limit`` (a compiler's command line)."""
    return text if len(text) <= limit else f"{text[:limit // 2]} ... {text[-limit // 2:]}"


def write_record(package: Path, record: dict[str, str]) -> None:
    (package / compiled["BUILD_RECORD"]).write_text(json.dumps(record, indent=1) + "\n")


def remove_extensions(package: Path, keep: frozenset[Path] = frozenset()) -> None:
    """Remove the extension modules under ``package`` (an earlier build's) but ``keep``."""
    for suffix in EXTENSION_SUFFIXES:
        for old in package.rglob(f"*{suffix}"):
            if old.resolve() not in keep:
                old.unlink()


def pure(package: Path, reason: str) -> None:
    """Install pure Python from ``package``: no extension of an earlier build left there, and
    the build record saying why."""
    remove_extensions(package)
    write_record(package, {"pure": reason})
    note(f"pure Python: {reason}")


class BuildPy(build_py):
    """Copies the sources (for a wheel into an emptied build directory: nothing an earlier
    build left there goes into it); a build without extension modules also records why."""

    def run(self) -> None:
        if not self.editable_mode:
            shutil.rmtree(Path(self.build_lib) / "kspark", ignore_errors=True)
        super().run()
        reason = pure_reason()
        if reason is not None:
            pure(ROOT / "kspark" if self.editable_mode else Path(self.build_lib) / "kspark",
                 reason)


class OptionalBuildExt(build_ext):
    """Translates the modules with mypyc when a build needs them (not for metadata or a source
    distribution) and compiles them, or none of them: a failed translation or compilation
    installs pure Python. Records each compiled source's digest."""

    translated: list[Extension] | None = None
    failure: str | None = None

    def finalize_options(self) -> None:
        modules = self.distribution.ext_modules
        # asking for metadata or a source distribution (without the generated C) finalizes
        # this command too
        no_build = set(self.distribution.commands) <= {"egg_info", "dist_info", "sdist"}
        if modules and modules[0] is PLACEHOLDER and not no_build:
            self.distribution.ext_modules = self.translate()
        super().finalize_options()

    @classmethod
    def translate(cls) -> list[Extension]:
        if cls.translated is not None:
            return cls.translated
        report = io.StringIO()
        try:
            from mypyc.build import mypycify

            # an isolated build has the modules' dependencies missing: their types are then
            # Any; no incremental cache (after a change of the sources mypyc could fail on a
            # stale one)
            with contextlib.redirect_stdout(report):
                cls.translated = mypycify(
                    ["--ignore-missing-imports", "--cache-dir", os.devnull, *SOURCES],
                    opt_level="3", group_name="kspark._core")
            # the type checker's objects live as long as the build: frozen, the collector no
            # longer scans them, during the build and the collections at exit
            gc.freeze()
        except (Exception, SystemExit) as exc:  # mypy missing, or the type check failed
            errors = " | ".join(report.getvalue().splitlines()[:5])
            cls.failure = (f"mypyc could not translate the modules ({type(exc).__name__}: "
                           f"{exc}; {errors})")[:800]
            cls.translated = []
        return cls.translated

    def package_dir(self) -> Path:
        if self.inplace:
            return Path(self.get_finalized_command("build_py").get_package_dir("kspark"))
        return Path(self.build_lib) / "kspark"

    def run(self) -> None:
        package = self.package_dir()
        if not self.extensions:
            pure(package, self.failure or "no modules to compile")
            return
        try:
            super().run()
        except Exception as exc:  # a missing header, or the compiler failed
            pure(package, f"compiling failed ({type(exc).__name__}: {shortened(str(exc))}); the "
                          "compiler's messages are in the build's output (`pip install -v`)")
            return
        # extensions of modules no longer compiled would shadow their sources
        remove_extensions(package, frozenset(
            Path(self.get_ext_fullpath(ext.name)).resolve() for ext in self.extensions))
        write_record(package, {m: compiled["digest"](ROOT / s) for m, s in zip(MODULES, SOURCES)})
        note(f"{len(MODULES)} modules compiled with mypyc")


setup(ext_modules=[] if pure_reason() else [PLACEHOLDER],
      cmdclass={"build_py": BuildPy, "build_ext": OptionalBuildExt})
