"""``kspark run MODULE:ATTR`` (issue: Spark-native in and out): it runs the sessions example
from Kafka with live progress; Ctrl-C stops it with its checkpoint intact, and a second run
resumes: the read_committed outputs equal the test driver's (nothing lost, nothing twice)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from kafka_util import create, driver_outputs, kafka_outputs, produce, sessions_clicks

from kspark.kafka import TopicError

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

APP_MODULE = '''
import os

from kspark import io
from kspark.examples.sessions import topology
from kspark.spark import StreamsApp


def app():
    bootstrap, prefix = os.environ["RUN_BOOTSTRAP"], os.environ["RUN_PREFIX"]
    topics = {name: io.kafka(bootstrap, prefix + name)
              for name in ("clicks", "session-counts", "session-pages")}
    return StreamsApp(topology(), prefix + "app", topics, checkpoint_dir="unused")
'''


def _run_until(app_dir: str, env: dict, done, timeout: float = 240.0) -> str:
    """Start ``kspark run`` and send it Ctrl-C once ``done()`` holds; its output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kspark.cli", "run", "runapp:app", "--checkpoint",
         os.path.join(app_dir, "ck"), "--master", "local[2]"],
        cwd=app_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    try:
        while not done():
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the app did not get there in time"
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    return out


def test_kspark_run_stops_on_ctrl_c_and_a_second_run_resumes(app_dir, bootstrap, topic):
    prefix = f"{topic}."
    with open(os.path.join(app_dir, "runapp.py"), "w") as f:
        f.write(APP_MODULE)
    env = {**os.environ, "RUN_BOOTSTRAP": bootstrap, "RUN_PREFIX": prefix}
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = sessions_clicks(400, seed=21)
    parts = produce(bootstrap, f"{prefix}clicks", clicks[:200])
    first = driver_outputs(clicks[:200], parts)

    def reached(expected):
        def done() -> bool:
            try:
                return kafka_outputs(bootstrap, prefix) == expected
            except TopicError:  # the app has not created its output topics yet
                return False

        return done

    out = _run_until(app_dir, env, reached(first))
    assert "Ctrl-C stops it" in out and "is intact: the same command resumes from it" in out
    assert os.path.isdir(os.path.join(app_dir, "ck", "query", "commits"))
    parts += produce(bootstrap, f"{prefix}clicks", clicks[200:])
    _run_until(app_dir, env, reached(driver_outputs(clicks, parts)))
    assert kafka_outputs(bootstrap, prefix) == driver_outputs(clicks, parts)
