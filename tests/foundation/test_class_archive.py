"""The class archives of kspark's JVMs (``kspark.jvm.class_archive``), with a real ``java``: the
first JVM of a kind writes its archive as it exits, the next start checks it and maps it; a dump
cut short or damaged is never mapped; the key follows the JVM, the jars and the options."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kspark.jvm import class_archive
from kspark.jvm.class_archive import (
    ENV_OFF,
    MAGIC,
    STALE_DUMP_S,
    UNUSED_S,
    archive_key,
    archive_options,
)

JAVA = shutil.which("java")
pytestmark = pytest.mark.skipif(JAVA is None, reason="no java on PATH")


def run_java(options: list[str]) -> subprocess.CompletedProcess[str]:
    assert JAVA is not None
    return subprocess.run([JAVA, *options, "-version"], capture_output=True, text=True,
                          timeout=120, check=False)


def options_for(folder: Path, options: tuple[str, ...] = ("-Xmx64m",)) -> list[str]:
    assert JAVA is not None
    return archive_options("test", JAVA, [], options, directory=folder)


def maps_archive(options: list[str]) -> bool:
    return any(o.startswith("-XX:SharedArchiveFile=") for o in options)


def dump_path(options: list[str]) -> Path:
    (option,) = [o for o in options if o.startswith("-XX:ArchiveClassesAtExit=")]
    return Path(option.split("=", 1)[1])


def test_the_first_jvm_writes_the_archive_the_next_ones_map(tmp_path):
    first = options_for(tmp_path)
    assert not maps_archive(first)
    dump = dump_path(first)
    assert dump.parent == tmp_path and dump.name.startswith("test-")
    done = run_java(["-Xmx64m", *first])
    assert done.returncode == 0, done.stderr
    assert "cds" not in done.stdout + done.stderr  # Java's archive messages are kept quiet
    assert dump.read_bytes()[:4] == MAGIC

    second = options_for(tmp_path)
    assert maps_archive(second)
    archive = Path(second[0].split("=", 1)[1])
    assert archive.exists() and not dump.exists()  # the dump became the archive
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]
    mapped = run_java(["-Xmx64m", *second, "-Xshare:on"])  # fails if Java cannot map it
    assert mapped.returncode == 0, mapped.stderr
    assert options_for(tmp_path) == second  # every later start maps the same archive


def test_a_damaged_or_unfinished_dump_is_never_mapped(tmp_path):
    done = run_java(["-Xmx64m", *options_for(tmp_path)])
    assert done.returncode == 0, done.stderr
    (dump,) = tmp_path.iterdir()
    whole = dump.read_bytes()
    # damaged: its header but not all of its classes (Java would crash mapping it)
    dump.chmod(0o644)
    dump.write_bytes(whole[:len(whole) // 3])
    again = options_for(tmp_path)
    assert not maps_archive(again) and not dump.exists()
    # unfinished (the JVM killed while it wrote the file: no header yet): left while it may
    # still be written, removed once stale
    unfinished = tmp_path / f"{dump_path(again).stem.split('.')[0]}.1-abc.dump"
    unfinished.write_bytes(bytes(4096))
    assert not maps_archive(options_for(tmp_path)) and unfinished.exists()
    old = time.time() - STALE_DUMP_S - 60
    os.utime(unfinished, (old, old))
    assert not maps_archive(options_for(tmp_path)) and not unfinished.exists()


def test_archives_of_other_keys_go_once_unused_for_two_weeks(tmp_path):
    run_java(["-Xmx64m", *options_for(tmp_path)])
    archive = Path(options_for(tmp_path)[0].split("=", 1)[1])
    other = options_for(tmp_path, ("-Xmx96m",))  # another key: its own archive
    assert not maps_archive(other)
    old = time.time() - UNUSED_S - 60
    os.utime(archive, (old, old))
    assert options_for(tmp_path)[0] == f"-XX:SharedArchiveFile={archive}"  # a use, just now
    options_for(tmp_path, ("-Xmx96m",))
    assert archive.exists()
    os.utime(archive, (old, old))
    options_for(tmp_path, ("-Xmx96m",))
    assert not archive.exists()


def test_the_key_follows_the_java_the_jars_and_the_options(tmp_path):
    assert JAVA is not None
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "a.jar").write_bytes(b"a")
    (jars / "notes.txt").write_bytes(b"not on the class path")
    single = tmp_path / "b.jar"
    single.write_bytes(b"b")
    key = archive_key(JAVA, [str(jars), str(single)], ["-Xmx1g"])
    assert archive_key(JAVA, [str(jars), str(single)], ["-Xmx1g"]) == key
    (jars / "notes.txt").write_bytes(b"changed")
    assert archive_key(JAVA, [str(jars), str(single)], ["-Xmx1g"]) == key
    assert archive_key(JAVA, [str(jars), str(single)], ["-Xmx2g"]) != key
    assert archive_key(JAVA, [str(jars)], ["-Xmx1g"]) != key
    (jars / "a.jar").write_bytes(b"a2")  # a jar replaced
    assert archive_key(JAVA, [str(jars), str(single)], ["-Xmx1g"]) != key
    (jars / "c.jar").write_bytes(b"c")
    newer = archive_key(JAVA, [str(jars), str(single)], ["-Xmx1g"])
    (jars / "c.jar").unlink()
    assert archive_key(JAVA, [str(jars), str(single)], ["-Xmx1g"]) not in (key, newer)


def test_switched_off_or_without_a_writable_cache_no_options(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_OFF, "0")
    assert options_for(tmp_path) == []
    monkeypatch.delenv(ENV_OFF)
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache's folder would be")
    assert options_for(blocked / "jvm") == []
    assert class_archive.QUIET[0] in options_for(tmp_path / "jvm")
