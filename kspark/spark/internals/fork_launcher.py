"""The Python executable kspark's local session gives Spark (``spark.pyspark.python``): a script
of this file's text that asks the fork server (:mod:`kspark.spark.internals.fork_server`) for
a process of ``python -m <module>`` forked from one that has imported it already, and runs
Python itself when there is no server or the server does not preload the module.

It runs as ``python -SI``: standard library only, nothing of kspark imported, so that it starts
in milliseconds. The forked process gets this process's standard streams, working directory,
environment and arguments; this process stays as its stand-in for Spark (a signal it gets goes
to the forked process, whose exit code it exits with).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys

#: the environment variable with the fork server's socket
SOCKET_ENV = "KSPARK_FORK_SERVER"
#: a request: its length, then its JSON (argv, cwd, env), the standard streams passed along
REQUEST = struct.Struct(">I")
#: the server's answers: the forked process's id (-1: declined), later its exit code
PID = struct.Struct(">q")
EXIT = struct.Struct(">i")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def read_exactly(conn: socket.socket, size: int) -> bytes | None:
    """``size`` bytes from ``conn`` (``None``: it closed first)."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def forked(path: str, argv: list[str]) -> int | None:
    """Run ``argv`` (``python -m module``) as a process of the server at ``path``: its exit
    code, or ``None`` when the server does not take it (nothing was run)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        body = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(conn, [REQUEST.pack(len(body))], [0, 1, 2])
        conn.sendall(body)
        answer = read_exactly(conn, PID.size)
    except OSError:
        conn.close()
        return None
    if answer is None or PID.unpack(answer)[0] < 0:
        conn.close()
        return None
    pid = PID.unpack(answer)[0]

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    try:
        status = read_exactly(conn, EXIT.size)
    except OSError:
        status = None
    if status is None:  # the server went away: the process must not outlive its stand-in
        forward(signal.SIGTERM, None)
        return 1
    code: int = EXIT.unpack(status)[0]
    return 128 - code if code < 0 else code


def main(argv: list[str]) -> None:
    path = os.environ.get(SOCKET_ENV)
    if path and len(argv) == 3 and argv[1] == "-m":
        code = forked(path, argv)
        if code is not None:
            sys.exit(code)
    os.execv(sys.executable, [sys.executable, *argv[1:]])


if __name__ == "__main__":
    main(sys.argv)
