"""Java artifacts from Maven Central, resolved once and cached: the embedded Apache Kafka broker
and Spark's Kafka connector are jars that kspark fetches on first use.

Resolution uses Apache Ivy, which pyspark ships in its ``jars`` folder (no Maven install
needed), or ``mvn`` when Ivy is not there or fails. The jars of a set of coordinates land in
``<cache>/jars/<name>-<digest>/`` with a ``classpath.txt`` written last, so an interrupted
resolution is redone and a finished one costs nothing. The cache is ``$KSPARK_CACHE_DIR``, else
``$XDG_CACHE_HOME/kspark``, else ``~/.cache/kspark``.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

from kspark.errors import KsparkError

log = logging.getLogger("kspark.jvm.maven")

#: the cache directory's environment variable
ENV_CACHE = "KSPARK_CACHE_DIR"
CLASSPATH_FILE = "classpath.txt"


class ResolutionError(KsparkError):
    """Java artifacts could not be fetched from Maven Central."""


def cache_dir() -> Path:
    """kspark's cache directory (see the module's documentation)."""
    explicit = os.environ.get(ENV_CACHE)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kspark"


def _split(coordinate: str) -> tuple[str, str, str]:
    parts = coordinate.split(":")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"Maven coordinate {coordinate!r} is not group:artifact:version")
    return parts[0], parts[1], parts[2]


def resolve(coordinates: Sequence[str], name: str) -> list[str]:
    """The jars of ``coordinates`` (``group:artifact:version``) and all their runtime
    dependencies, fetched on first use and cached; ``name`` names the cache folder."""
    for c in coordinates:
        _split(c)
    digest = hashlib.sha256("\n".join(sorted(coordinates)).encode()).hexdigest()[:12]
    target = cache_dir() / "jars" / f"{name}-{digest}"
    done = target / CLASSPATH_FILE
    if done.is_file():
        return done.read_text().split(os.pathsep)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f".{target.name}.lock"):
        if done.is_file():  # another process resolved it meanwhile
            return done.read_text().split(os.pathsep)
        if target.exists():
            shutil.rmtree(target)
        target.mkdir()
        log.warning("fetching %s from Maven Central (once; cached in %s)", name, target)
        _fetch(list(coordinates), target)
        jars = sorted(str(p) for p in target.glob("*.jar"))
        if not jars:
            raise ResolutionError(f"resolving {', '.join(coordinates)} gave no jars")
        done.write_text(os.pathsep.join(jars))
        return jars


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) across processes."""
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fetch(coordinates: list[str], target: Path) -> None:
    failures = []
    ivy = ivy_jar()
    if ivy is not None:
        try:
            _fetch_with_ivy(ivy, coordinates, target)
            return
        except ResolutionError as exc:
            failures.append(str(exc))
    mvn = shutil.which("mvn")
    if mvn is not None:
        try:
            _fetch_with_maven(mvn, coordinates, target)
            return
        except ResolutionError as exc:
            failures.append(str(exc))
    if ivy is None and mvn is None:
        failures.append("neither pyspark's Ivy jar nor mvn was found")
    raise ResolutionError(
        f"cannot fetch {', '.join(coordinates)} from Maven Central. kspark needs Java 17 and "
        "network access to Maven Central (or a Maven install whose settings reach a mirror of "
        "it) the first time it runs the embedded broker or Spark's Kafka connector.\n"
        + "\n".join(failures)
    )


def ivy_jar() -> str | None:
    """The Apache Ivy jar that pyspark ships, if pyspark is installed."""
    try:
        import pyspark
    except ImportError:
        return None
    found = sorted(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "ivy-*.jar")))
    return found[-1] if found else None


def java() -> str:
    """The ``java`` that Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not found or not os.path.exists(found):
        raise ResolutionError("Java 17 is required and was not found (java on PATH or JAVA_HOME)")
    return found


def _run(command: list[str], what: str, cwd: str | None = None) -> None:
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=1800, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ResolutionError(f"{what}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise ResolutionError(f"{what} failed (exit {done.returncode}):\n{tail}")


def _fetch_with_ivy(ivy: str, coordinates: list[str], target: Path) -> None:
    deps = "\n".join(
        f"    <dependency org={quoteattr(g)} name={quoteattr(a)} rev={quoteattr(v)} "
        'conf="default->default"/>'
        for g, a, v in map(_split, coordinates)
    )
    with tempfile.TemporaryDirectory(prefix="kspark-ivy-") as work:
        module = os.path.join(work, "ivy.xml")
        with open(module, "w") as f:
            f.write(
                '<ivy-module version="2.0">\n  <info organisation="kspark" module="resolve"/>\n'
                '  <configurations><conf name="default"/></configurations>\n'
                f"  <dependencies>\n{deps}\n  </dependencies>\n</ivy-module>\n"
            )
        pattern = str(target / "[organisation]-[artifact]-[revision](-[classifier]).[ext]")
        _run(
            [java(), "-jar", ivy, "-ivy", module, "-confs", "default",
             "-cache", str(cache_dir() / "ivy"), "-retrieve", pattern],
            "Apache Ivy (pyspark's)",
            cwd=work,
        )


def _fetch_with_maven(mvn: str, coordinates: list[str], target: Path) -> None:
    deps = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in map(_split, coordinates)
    )
    with tempfile.TemporaryDirectory(prefix="kspark-mvn-") as work:
        with open(os.path.join(work, "pom.xml"), "w") as f:
            f.write(
                '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
                "  <modelVersion>4.0.0</modelVersion>\n  <groupId>kspark</groupId>\n"
                "  <artifactId>resolve</artifactId>\n  <version>1</version>\n"
                f"  <dependencies>\n{deps}\n  </dependencies>\n</project>\n"
            )
        _run(
            [mvn, "-q", "-B", "dependency:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={target}"],
            "mvn",
            cwd=work,
        )


class BuildError(KsparkError):
    """A Maven project of the repository could not be built (no Maven or Java, or a failure)."""


def build_jar(sources: Path, jar_name: str, cache_name: str,
              announce: str | None = None, *, settings: str | None = None,
              with_dirs: tuple[str, ...] = ()) -> Path:
    """The jar ``jar_name`` that ``mvn -q -B package`` of the Maven project in ``sources``
    (``pom.xml`` and ``src/``) builds, built on first use in a copy of the project (a build
    never writes into the checkout) and cached in ``<cache>/<cache_name>/<hash of the
    sources>/``, with the directories ``with_dirs`` of the build's ``target/`` beside it (a
    runnable jar's ``lib/``). ``settings`` names the project's Maven settings file. A lock
    serialises builds across processes; the jar appears complete or not at all. ``announce``
    is printed before a build."""
    files = [sources / "pom.xml", *sorted(p for p in (sources / "src").rglob("*") if p.is_file())]
    if settings is not None:
        files.append(sources / settings)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(sources)).encode() + b"\0" + path.read_bytes() + b"\0")
    target = cache_dir() / cache_name / digest.hexdigest()[:16]
    jar = target / jar_name
    if jar.is_file():
        return jar
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f".{target.name}.lock"):
        if jar.is_file():  # another process built it meanwhile
            return jar
        mvn = shutil.which("mvn")
        if mvn is None or shutil.which("java") is None:
            raise BuildError(f"building {sources} needs Maven (mvn) and Java 17 on PATH")
        target.mkdir(parents=True, exist_ok=True)
        if announce:
            print(announce, flush=True)
        with tempfile.TemporaryDirectory(prefix="build-", dir=target) as build:
            shutil.copy2(sources / "pom.xml", Path(build) / "pom.xml")
            shutil.copytree(sources / "src", Path(build) / "src")
            options = [] if settings is None else ["-s", str(sources / settings)]
            proc = subprocess.run([mvn, "-q", "-B", *options, "package"], cwd=build,
                                  capture_output=True, text=True, check=False)
            built = Path(build) / "target" / jar_name
            if proc.returncode != 0 or not built.is_file():
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
                raise BuildError(f"mvn -q -B package of {sources} failed "
                                 f"(exit {proc.returncode}):\n{tail}")
            for name in with_dirs:
                shutil.rmtree(target / name, ignore_errors=True)
                shutil.copytree(Path(build) / "target" / name, target / name)
            partial = target / (jar_name + ".part")
            shutil.copy2(built, partial)
            os.replace(partial, jar)
        return jar
