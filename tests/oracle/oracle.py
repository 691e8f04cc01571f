"""Kafka Streams as the referee: the Java oracle in ``oracle/``, built once and run as a JVM.

The oracle (``oracle/src/main/java/kspark/oracle/Oracle.java``) runs a topology described as data
(a shape and its parameters, see ``tests/oracle/README.md``) through Kafka Streams 4.3.1's own
``TopologyTestDriver`` and returns every output record and the final contents of its stores as
normalised dicts::

    {"kind": "record", "key": k, "window": [start, end] | None, "value": v, "ts": t,
     "tombstone": bool}
    {"kind": "store", "store": name, "key": k, "window": [start, end] | None, "value": v,
     "ts": t | None}

Building: ``mvn -q -B package`` of a copy of ``oracle/`` (so a build never writes into the
checkout), on first use, into ``<kspark cache>/oracle/<hash of oracle/'s sources>/`` (the kspark
cache is ``$KSPARK_CACHE_DIR``, else ``~/.cache/kspark``). A lock file serialises builds of one
hash across processes; a finished jar is reused by every later run until the sources change.

Running: :class:`Oracle` keeps one JVM in batch mode (one JSON case per line in, one result per
line out) and sends it case after case; :func:`run_single` starts a JVM per call in single mode
(a JSON document in, JSON lines out, exit code 2 on an error).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kspark.jvm.maven import BuildError, build_jar

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "oracle"
JAR_NAME = "kspark-oracle.jar"
#: the JVM runs short cases: the client compiler alone starts and warms up fastest
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m", "-Xshare:auto")


class OracleBuildError(RuntimeError):
    """The oracle jar could not be built (no Maven, no Java, or a failed build)."""


class OracleCaseError(RuntimeError):
    """The oracle refused or failed a case; the message is the oracle's."""


def jar_path() -> Path:
    """The oracle jar, built on first use (see the module's documentation)."""
    try:
        return build_jar(SOURCES, JAR_NAME, "oracle")
    except BuildError as exc:
        raise OracleBuildError(str(exc)) from exc


def _command(jar: Path, *args: str) -> list[str]:
    return ["java", *JVM_OPTIONS, "-jar", str(jar), *args]


def run_single(case: dict[str, Any], jar: Path | None = None) -> tuple[int, list[dict], str]:
    """Run one case in a JVM of its own (single mode): ``(exit code, lines, stderr)``."""
    proc = subprocess.run(
        _command(jar or jar_path()),
        input=json.dumps(case),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, lines, proc.stderr


class Oracle:
    """One JVM in batch mode, serving cases one line at a time."""

    def __init__(self, jar: Path | None = None) -> None:
        self.jar = jar or jar_path()
        self._proc: subprocess.Popen[str] | None = None
        self._next_id = 0
        self.cases_run = 0

    def _start(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                _command(self.jar, "--batch"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        return self._proc

    def run(self, case: dict[str, Any]) -> list[dict]:
        """The oracle's lines for ``case``; :class:`OracleCaseError` if it refused it."""
        (result,) = self.run_many([case])
        if isinstance(result, OracleCaseError):
            raise result
        return result

    def run_many(self, cases: Iterable[dict[str, Any]]) -> list[list[dict] | OracleCaseError]:
        """Each case's lines (or its :class:`OracleCaseError`), in order, in one JVM."""
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        payload = []
        for case in cases:
            payload.append(json.dumps({**case, "id": self._next_id}))
            self._next_id += 1
        if not payload:
            return []
        first = self._next_id - len(payload)
        # a writer thread: the JVM answers while we still send, and pipes are finite
        error: list[BaseException] = []

        def write() -> None:
            try:
                proc.stdin.write("\n".join(payload) + "\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
            except BaseException as exc:
                error.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        results: list[list[dict] | OracleCaseError] = []
        for n in range(len(payload)):
            line = proc.stdout.readline()
            if not line:
                self.close()
                raise OracleCaseError(
                    f"the oracle JVM exited (code {proc.poll()}) before answering case "
                    f"{n + 1} of {len(payload)}" + (f": {error[0]}" if error else "")
                )
            answer = json.loads(line)
            if answer.get("id") != first + n:
                raise OracleCaseError(f"oracle answered {answer.get('id')}, expected {first + n}")
            if "error" in answer:
                results.append(OracleCaseError(answer["error"]))
            else:
                results.append(answer["lines"])
        writer.join()
        self.cases_run += len(payload)
        return results

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(Exception):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
