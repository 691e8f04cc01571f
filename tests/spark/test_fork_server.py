"""The fork server of kspark's local session (``kspark.spark.internals.fork_server``) and its
launcher: a module the server runs is forked from it with the launcher's standard streams,
working directory, environment and arguments, and ends with its launcher; anything else, or
no server at all, runs in Python itself; a malformed request is closed and leaves nothing
open; the server ends with the process that started it. In
the shared Spark session, a query's streaming source runs in a process of the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kspark.spark.internals import fork_server
from kspark.spark.internals.fork_launcher import SOCKET_ENV

HERE = os.path.dirname(os.path.abspath(__file__))


def _wait(condition, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except (FileNotFoundError, ProcessLookupError):  # gone, or going as it was read
        return False


@pytest.fixture(scope="module")
def launcher():
    return fork_server._launcher()


@pytest.fixture
def server(tmp_path):
    """A server that runs ``fork_probe`` (its socket's path, its process)."""
    path = str(tmp_path / "server.sock")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([HERE, *sys.path])}
    process = subprocess.Popen([sys.executable, "-m", "kspark.spark.internals.fork_server",
                                path, str(os.getpid()), "fork_probe"], env=env)
    _wait(lambda: os.path.exists(path))
    yield path, process
    process.kill()
    process.wait()


def _env(socket_path: str | None, **probe: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV}
    env["PYTHONPATH"] = os.pathsep.join([HERE, *sys.path])
    if socket_path is not None:
        env[SOCKET_ENV] = socket_path
    return {**env, **probe}


def test_a_runner_module_is_forked_from_the_server_as_the_launcher_was_started(
        server, launcher, tmp_path):
    path, process = server
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([launcher, "-m", "fork_probe"], cwd=work, capture_output=True,
                          env=_env(path, PROBE_VALUE="x", PROBE_EXIT="3"), timeout=60)
    seen = json.loads(done.stdout)
    assert seen["ppid"] == process.pid  # forked by the server
    assert seen["cwd"] == str(work) and seen["probe"] == "x" and seen["argv"] == []
    assert done.stderr == b"probe stderr\n"
    assert done.returncode == 3


@pytest.mark.parametrize("where", ["other module", "no server", "server gone"])
def test_anything_else_runs_in_python_itself(server, launcher, tmp_path, where):
    path, process = server
    if where == "server gone":
        process.kill()
        process.wait()
    socket_path = None if where == "no server" else path
    module = "platform" if where == "other module" else "fork_probe"
    done = subprocess.run([launcher, "-m", module], capture_output=True, timeout=60,
                          env=_env(socket_path, PROBE_EXIT="4"))
    if module == "platform":
        assert done.returncode == 0 and done.stdout.strip()
        return
    seen = json.loads(done.stdout)
    assert seen["ppid"] == os.getpid()  # the launcher became Python itself
    assert done.returncode == 4


@pytest.mark.parametrize("request_bytes",
                         [b"", b"\x00\x00\x00\x02[]", b"\x00\x00\x00\x09not json!"])
def test_a_malformed_request_leaves_the_server_answering(server, launcher, request_bytes):
    import socket

    path, process = server
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        if request_bytes:
            socket.send_fds(conn, [request_bytes[:4]], [0, 1, 2])
            conn.sendall(request_bytes[4:])
        conn.shutdown(socket.SHUT_WR)
        assert conn.recv(8) == b""  # closed without an answer
    done = subprocess.run([launcher, "-m", "fork_probe"], capture_output=True, timeout=60,
                          env=_env(path))
    assert json.loads(done.stdout)["ppid"] == process.pid
    # its standard streams and its socket: nothing a request passed along was kept open
    assert len(os.listdir(f"/proc/{process.pid}/fd")) == 4


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_the_forked_process_ends_with_its_launcher(server, launcher, how):
    path, _ = server
    started = subprocess.Popen([launcher, "-m", "fork_probe"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=_env(path, PROBE_SLEEP="300"))
    child = json.loads(started.stdout.readline())["pid"]
    assert _alive(child)
    started.send_signal(how)
    code = started.wait(timeout=30)
    assert code == (128 + signal.SIGTERM if how == signal.SIGTERM else -signal.SIGKILL)
    _wait(lambda: not _alive(child))


def test_the_server_ends_with_the_process_that_started_it(tmp_path):
    path = str(tmp_path / "server.sock")
    # a parent that starts the server, prints its pid and leaves
    parent = subprocess.run([sys.executable, "-c", (
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-m', "
        f"'kspark.spark.internals.fork_server', {path!r}, str(__import__('os').getpid())]); "
        "print(p.pid)")], capture_output=True, text=True, timeout=60, check=True)
    server = int(parent.stdout)
    _wait(lambda: not _alive(server))
    assert not os.path.exists(path)


def test_a_querys_file_source_runs_in_a_process_of_the_server(spark, tmp_path):
    from kspark import StreamsBuilder, io, serdes
    from kspark.spark import StreamsApp

    conf = spark.sparkContext.getConf()
    assert conf.get("spark.pyspark.python") == fork_server.start()
    (server, _), = fork_server._STARTED
    (tmp_path / "in").mkdir()
    with open(tmp_path / "in" / "a.jsonl", "w") as f:
        f.write(json.dumps({"key": "k", "value": 1, "timestamp": 5}) + "\n")
    builder = StreamsBuilder()
    builder.stream("in", serdes.String(), serdes.Json()).to("out", serdes.String(),
                                                            serdes.Json())
    out = io.files(str(tmp_path / "out"))
    app = StreamsApp(builder.build(), "fork-test", {"in": io.files(str(tmp_path / "in")),
                                                    "out": out},
                     spark=spark, checkpoint_dir=str(tmp_path / "ck"))
    app.start()
    try:
        app.process_all_available()
        children = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                    if _parent(pid) == server.pid]
        assert children, "no process of the fork server while the query runs"
    finally:
        app.stop()
    assert [json.loads(r["value"])["value"] for r in out.read_records()] == [1]


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None
