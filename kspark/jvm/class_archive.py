"""Class data sharing archives (Java's AppCDS) for the JVMs kspark starts: its local Spark
session and its embedded Kafka broker.

A JVM spends most of its start loading and verifying classes. The first JVM of a kind (the same
``java``, class path and options) is started with ``-XX:ArchiveClassesAtExit``: when it exits
normally it writes the classes it loaded to ``<cache>/jvm/<kind>-<key>.<id>.dump``. Java writes
an archive's header last, so a dump whose file starts with the archive's magic number is whole;
the next start of that kind checks that ``java`` starts with it mapped, writes it to disk and
makes it ``<kind>-<key>.jsa`` (a hard link: never replacing one a running JVM maps), and every
start after it maps the archive with ``-XX:SharedArchiveFile``
(docs/performance.md, "A class archive for kspark's JVMs"). The key covers the JVM, the class
path's jars (names, sizes, times) and the options, and Java itself refuses an archive that does
not match its class path, so a stale archive costs a start without it, never a wrong class.

A dump killed before its header was written is removed once it is older than
:data:`STALE_DUMP_S`; an archive of another key unused for :data:`UNUSED_S` is removed. Setting
:data:`ENV_OFF` to ``0`` leaves the options out.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from kspark.jvm.maven import cache_dir

log = logging.getLogger(__name__)

#: the environment variable that turns the archives off (``0``)
ENV_OFF = "KSPARK_CLASS_ARCHIVE"
#: the first bytes of a finished dynamic archive (HotSpot's magic ``0xf00baba8``, little-endian)
MAGIC = (0xF00BABA8).to_bytes(4, "little")
#: a dump without its header this old was killed while it was written
STALE_DUMP_S = 600.0
#: an archive of another key not used for this long (a Spark or Java upgraded since) is removed
UNUSED_S = 14 * 86400.0
#: Java's messages about classes it cannot archive (signed jars, old class files) and about
#: an archive it cannot use, which would otherwise reach the app's console
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def archive_key(java: str, classpath: Sequence[str], options: Sequence[str]) -> str:
    """The key of a JVM's archive: ``java`` (its file), each class path entry (a directory's
    jars, a file's size and time) and ``options``."""
    digest = hashlib.sha256()

    def add(path: str) -> None:
        st = os.stat(path)
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())

    add(os.path.realpath(java))
    for entry in classpath:
        if os.path.isdir(entry):
            for name in sorted(n for n in os.listdir(entry) if n.endswith(".jar")):
                add(os.path.join(entry, name))
        elif os.path.exists(entry):
            add(entry)
        else:
            digest.update(f"{entry}\0missing\n".encode())
    digest.update("\0".join(options).encode())
    return digest.hexdigest()[:16]


def archive_options(kind: str, java: str, classpath: Sequence[str], options: Sequence[str],
                    directory: Path | None = None) -> list[str]:
    """The options that give a JVM of ``kind`` (started with ``java``, ``classpath`` and
    ``options``) its class archive: map it, or write it at exit if there is none yet. No
    options when :data:`ENV_OFF` is ``0`` or the cache directory cannot be written."""
    if os.environ.get(ENV_OFF) == "0":
        return []
    folder = directory if directory is not None else cache_dir() / "jvm"
    try:
        name = f"{kind}-{archive_key(java, classpath, options)}"
        folder.mkdir(parents=True, exist_ok=True)
        archive = folder / f"{name}.jsa"
        _tidy(java, folder, name, archive)
        if archive.exists():
            os.utime(archive)  # its last use, for _tidy
            return [f"-XX:SharedArchiveFile={archive}", *QUIET]
        dump = folder / f"{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.dump"
        return [f"-XX:ArchiveClassesAtExit={dump}", *QUIET]
    except OSError as exc:
        log.debug("no class archive for the %s JVM: %s", kind, exc)
        return []


def _tidy(java: str, folder: Path, name: str, archive: Path) -> None:
    """Make a whole dump of ``name`` that ``java`` maps its archive; remove the other dumps of
    ``name`` once whole or stale, and other keys' archives unused for :data:`UNUSED_S`."""
    now = time.time()
    for path in folder.iterdir():
        with contextlib.suppress(FileNotFoundError):  # another process tidied it first
            if path.name.startswith(f"{name}.") and path.suffix == ".dump":
                with path.open("rb") as f:
                    whole = f.read(len(MAGIC)) == MAGIC
                if whole and _usable(java, path):
                    _sync(path)
                    with contextlib.suppress(FileExistsError):
                        os.link(path, archive)
                    path.unlink()
                elif whole:
                    log.info("class archive %s: Java cannot map it; removed", path)
                    path.unlink()
                elif now - path.stat().st_mtime > STALE_DUMP_S:
                    path.unlink()
            elif path.suffix == ".jsa" and path != archive and (
                    now - path.stat().st_mtime > UNUSED_S):
                path.unlink()


def _usable(java: str, dump: Path) -> bool:
    """Whether ``java`` starts with ``dump`` mapped (a damaged archive that still has its
    header crashes the JVM that maps it, every time)."""
    try:
        done = subprocess.run(
            [java, f"-XX:SharedArchiveFile={dump}", *QUIET, "-XX:ErrorFile=/dev/null",
             "-version"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _sync(path: Path) -> None:
    """Write ``path`` to disk before it is linked as an archive (its header went last)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
