"""Run as ``python -m fork_probe`` by ``test_fork_server.py``: prints what it was started with
(one JSON line), writes a line to standard error, then sleeps ``PROBE_SLEEP`` seconds and exits
with ``PROBE_EXIT``."""

from __future__ import annotations

import json
import os
import sys
import time

if __name__ == "__main__":
    print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(),
                      "argv": sys.argv[1:], "probe": os.environ.get("PROBE_VALUE"),
                      "path": sys.path}), flush=True)
    print("probe stderr", file=sys.stderr, flush=True)
    time.sleep(float(os.environ.get("PROBE_SLEEP", "0")))
    sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
