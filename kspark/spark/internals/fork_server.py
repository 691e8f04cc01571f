"""A fork server for the Python processes Spark's driver starts afresh for each query.

Spark runs each Python streaming source of a query in a process of its own (``python -m
pyspark.sql.streaming.python_streaming_source_runner``) and, while planning the query's first
micro-batch, one more for ``transformWithStateInPandas`` (``...transform_with_state_driver_
worker``), each started with ``python -m``, not from the worker daemon: each imports pyspark,
pyarrow and pandas before it answers, some tenths of a second per process and query
(docs/performance.md, "A query's first second"). kspark's local session gives Spark a launcher
(:mod:`kspark.spark.internals.fork_launcher`) as its Python executable; the launcher asks this
server, which has imported those modules once, for a forked process instead. Any other module
(the workers' daemon among them) is left to Python itself.

The server is single-threaded (it forks), lives as long as the process that started it, and
kills a forked process whose launcher has gone.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from typing import Any

from kspark.spark.internals.fork_launcher import EXIT, PID, REQUEST, SOCKET_ENV, read_exactly

#: the modules the server runs (and imports before it listens)
RUNNERS = (
    "pyspark.sql.streaming.python_streaming_source_runner",
    "pyspark.sql.streaming.transform_with_state_driver_worker",
)
#: what those processes import next (kspark's sources and stage), imported by the server too
_PRELOADED = ("pandas", "pyarrow", "kspark.spark.internals.file_source",
              "kspark.spark.internals.kafka_source", "kspark.spark.internals.stage")
#: seconds between the server's checks of its children and of its parent
_TICK = 0.05


def _request(conn: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """A launcher's request and the standard streams it passed (``None``: not one; whatever
    came with it closed)."""
    head, fds, _, _ = socket.recv_fds(conn, REQUEST.size, 3)
    try:
        if len(head) != REQUEST.size or len(fds) != 3:
            raise ValueError("not a request")
        body = read_exactly(conn, REQUEST.unpack(head)[0])
        request = None if body is None else json.loads(body)
        if not isinstance(request, dict) or not isinstance(request.get("argv"), list):
            raise ValueError("not a request")
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        return None
    return request, fds


def _run(request: dict[str, Any], fds: list[int], closing: list[socket.socket]) -> None:
    """In the forked process: become ``python -m module`` of the request, then exit."""
    code = 1
    try:
        for conn in closing:
            conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        os.chdir(request["cwd"])
        env: dict[str, str] = request["env"]
        os.environ.clear()
        os.environ.update(env)
        for path in reversed(env.get("PYTHONPATH", "").split(os.pathsep)):
            if path and path not in sys.path:
                sys.path.insert(0, path)
        argv: list[str] = request["argv"]
        sys.argv = [argv[0], *argv[3:]]
        code = 0
        sys.modules.pop(argv[2], None)  # imported to import what it imports: run afresh
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def serve(path: str, parent: int, runners: tuple[str, ...] = RUNNERS) -> None:
    """Answer launchers on the Unix socket ``path`` until process ``parent`` is gone, forking
    a process for each module of ``runners``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    for module in (*runners, *_PRELOADED):
        with contextlib.suppress(ImportError):  # the process imports it then, or fails to
            __import__(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"{path}.tmp")
    os.rename(f"{path}.tmp", path)  # launchers find the socket once it listens
    listener.listen(16)
    children: dict[int, socket.socket] = {}
    try:
        while os.getppid() == parent:
            readable, _, _ = select.select([listener, *children.values()], [], [], _TICK)
            for conn in readable:
                if conn is listener:
                    _accept(listener, children, runners)
                else:  # a launcher gone before its process: the process goes too
                    pid = next(p for p, c in children.items() if c is conn)
                    _kill(pid)
            while children:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                done = children.pop(pid, None)
                if done is not None:
                    with contextlib.suppress(OSError):
                        done.sendall(EXIT.pack(os.waitstatus_to_exitcode(status)))
                    done.close()
    finally:
        for pid in children:
            _kill(pid)
        listener.close()
        with contextlib.suppress(OSError):  # its folder may be gone with its parent
            os.unlink(path)


def _accept(listener: socket.socket, children: dict[int, socket.socket],
            runners: tuple[str, ...]) -> None:
    """Take a launcher's request: fork a process for it, or decline it."""
    conn, _ = listener.accept()
    try:
        got = _request(conn)
    except OSError:
        got = None
    if got is None:
        conn.close()
        return
    request, fds = got
    argv = request["argv"]
    pid = -1
    if len(argv) == 3 and argv[1] == "-m" and argv[2] in runners:
        pid = os.fork()
        if pid == 0:
            _run(request, fds, [listener, conn, *children.values()])
        children[pid] = conn
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(PID.pack(pid))
    except OSError:  # the launcher is gone: so is its process
        if pid > 0:
            _kill(pid)
    if pid < 0:
        conn.close()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


#: this process's server and launcher, once started
_STARTED: list[tuple[subprocess.Popen[bytes], str]] = []


def start() -> str | None:
    """Start a fork server for this process (once): the path of its launcher, with
    :data:`SOCKET_ENV` set in this process's environment for the processes it starts (``None``
    where Unix sockets or ``fork`` are missing). The launcher is written once into kspark's
    cache (a process this one starts may run it after this one has gone); the socket lives in
    a folder of this process's own."""
    if _STARTED and _STARTED[0][0].poll() is None:
        return _STARTED[0][1]
    if not hasattr(os, "fork") or not hasattr(socket, "AF_UNIX"):
        return None
    launcher = _launcher()
    folder = tempfile.mkdtemp(prefix="kspark-fork-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "server.sock")
    server = subprocess.Popen([sys.executable, "-m", __name__, path, str(os.getpid())],
                              stdin=subprocess.DEVNULL, close_fds=True)
    _STARTED[:] = [(server, launcher)]
    os.environ[SOCKET_ENV] = path
    return launcher


def _launcher() -> str:
    """The launcher script for this interpreter, written into kspark's cache if missing."""
    import hashlib

    from kspark.jvm.maven import cache_dir
    from kspark.spark.internals import fork_launcher

    with open(fork_launcher.__file__, encoding="utf-8") as source:
        text = f"#!{sys.executable} -SI\n{source.read()}"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    launcher = cache_dir() / "fork" / digest / "python"
    if not launcher.exists():
        launcher.parent.mkdir(parents=True, exist_ok=True)
        partial = launcher.with_name(f"python.{os.getpid()}.tmp")
        partial.write_text(text, encoding="utf-8")
        partial.chmod(0o755)
        partial.replace(launcher)
    return str(launcher)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), tuple(sys.argv[3:]) or RUNNERS)
