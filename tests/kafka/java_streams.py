"""Kafka Streams applications in a JVM of their own (``oracle/.../EventCounts.java``, run from the
oracle's jar, which holds Kafka Streams and the Kafka 4.3.1 clients): seed 004's event counter,
or a read-only copy of its store restored from a changelog, each answering window fetches of
its own interactive queries over a line protocol (one JSON command per line, one answer)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ORACLE = Path(__file__).resolve().parents[1] / "oracle" / "oracle.py"
MAIN_CLASS = "kspark.oracle.EventCounts"
#: Kafka Streams settings of the test applications: commit often; process a partition's records
#: at once (the default ``max.task.idle.ms=0`` held the last record of a partition for ~25 s here)
TEST_CONFIG = {"commit.interval.ms": "100", "max.task.idle.ms": "-1"}


def oracle_jar() -> Path:
    """The oracle's jar (built on first use, see ``tests/oracle/oracle.py``)."""
    spec = importlib.util.spec_from_file_location("kspark_test_oracle_build", _ORACLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.jar_path()


class JavaStreamsError(RuntimeError):
    """A command the JVM answered with an error (its message), or a JVM that stopped."""


class JavaStreams:
    """One JVM; :meth:`request` sends a command and waits for its answer."""

    def __init__(self, jar: Path) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self._proc = subprocess.Popen(
            ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m",
             "-cp", str(jar), MAIN_CLASS],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True, name="java-streams-stdout").start()
        self._lock = threading.Lock()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def request(self, command: dict[str, Any], timeout: float = 120.0) -> Any:
        with self._lock:
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(command) + "\n")
            self._proc.stdin.flush()
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise JavaStreamsError(f"no answer to {command} within {timeout} s") from None
        if line is None:
            raise JavaStreamsError(f"the JVM exited (code {self._proc.wait()}):\n{self.log()}")
        answer = json.loads(line)
        if "error" in answer:
            raise JavaStreamsError(answer["error"])
        return answer["ok"]

    def count(self, app: str, bootstrap: str, events: str) -> None:
        """Start seed 004's counter ``app`` on the JSON events topic ``events``."""
        self.request({"cmd": "count", "app": app, "bootstrap": bootstrap, "events": events,
                      "config": TEST_CONFIG})

    def restore(self, app: str, bootstrap: str, changelog: str) -> None:
        """Start ``app`` with a read-only copy of the store restored from ``changelog``."""
        self.request({"cmd": "restore", "app": app, "bootstrap": bootstrap,
                      "changelog": changelog, "config": TEST_CONFIG})

    def fetch(self, app: str, key: str, time_from: int, time_to: int) -> list[tuple]:
        """``(start, count, timestamp)`` of ``key``'s windows starting in the range."""
        return [tuple(x) for x in self.request(
            {"cmd": "fetch", "app": app, "key": key, "from": time_from, "to": time_to})]

    def fetch_all(self, app: str, time_from: int, time_to: int) -> list[tuple]:
        """``(key, start, count, timestamp)`` of every window starting in the range, sorted."""
        return sorted(tuple(x) for x in self.request(
            {"cmd": "fetch_all", "app": app, "from": time_from, "to": time_to}))

    def stats(self, app: str) -> dict[str, int]:
        """``{"restored": n, "updated": m}``: records Kafka Streams' state restoration put into
        ``app``'s store, and records its updater processor wrote (since the JVM started)."""
        return dict(self.request({"cmd": "stats", "app": app}))

    def stop(self, app: str) -> None:
        """Stop ``app`` (it leaves its group) and delete its local state."""
        self.request({"cmd": "stop", "app": app})

    def log(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()


def wait_until(condition: Callable[[], Any], timeout: float, what: str,
               interval: float = 0.3) -> Any:
    """Poll ``condition`` until it returns something true; its last value on timeout is in the
    error. Errors of an application not ready yet (e.g. a store being restored) are retried."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = condition()
            if last:
                return last
        except JavaStreamsError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what} (last: {last!r:.2000})")
        time.sleep(interval)
