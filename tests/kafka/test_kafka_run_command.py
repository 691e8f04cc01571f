"""``kspark run MODULE:ATTR`` (issue: Spark-native in and out): it runs the sessions example
from Kafka with live progress; Ctrl-C stops it with its checkpoint intact, and a second run
resumes: the read_committed outputs equal the test driver's (nothing lost, nothing twice).
``--metrics-port`` serves its figures to Prometheus while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import pytest
from kafka_util import (
    create,
    driver_outputs,
    kafka_outputs,
    produce,
    sessions_clicks,
    wait_while_running,
)
from net_util import free_port
from prometheus_client.parser import text_string_to_metric_families

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



def _process_totals(port: int) -> dict[str, float]:
    """Each task's ``process_total`` scraped from the app's metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {s.labels["task_id"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "kafka_streams_stream_task_metrics_process_total"}


def _run_until(app_dir: str, env: dict, done, timeout: float = 240.0, *extra: str) -> str:
    """Start ``kspark run`` and send it Ctrl-C once ``done()`` holds; its output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kspark.cli", "run", "runapp:app", "--checkpoint",
         os.path.join(app_dir, "ck"), "--master", "local[2]", *extra],
        cwd=app_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_while_running(proc, done, timeout)
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

    port, scraped = free_port(), []

    def reached_and_scraped() -> bool:  # the running app's figures, once it has counted all
        if not reached(first)():
            return False
        scraped.insert(0, _process_totals(port))
        return sum(scraped[0].values()) >= 200  # published just before the batch is counted

    out = _run_until(app_dir, env, reached_and_scraped, 240.0, "--metrics-port", str(port))
    assert "Ctrl-C stops it" in out and "is intact: the same command resumes from it" in out
    assert f"metrics: http://localhost:{port}/metrics" in out
    assert sorted(scraped[0]) == ["0_0", "0_1", "0_2", "0_3"]  # the clicks topic's partitions
    assert sum(scraped[0].values()) == 200  # each click processed once
    assert os.path.isdir(os.path.join(app_dir, "ck", "query", "commits"))
    parts += produce(bootstrap, f"{prefix}clicks", clicks[200:])
    _run_until(app_dir, env, reached(driver_outputs(clicks, parts)))
    assert kafka_outputs(bootstrap, prefix) == driver_outputs(clicks, parts)
