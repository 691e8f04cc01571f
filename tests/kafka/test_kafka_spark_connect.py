"""kspark on Spark Connect (issue 39): a server started from pyspark's own distribution runs
the file app and the Kafka-to-Kafka main job for a Connect client, with the outputs local mode
gives; ``kspark run --remote`` killed mid-run and started again writes every output record
once (read_committed); a memory sink, which would keep its records on the server, is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from connect_client import FILE_CLICKS, file_app
from kafka_util import (
    create,
    driver_outputs,
    kafka_outputs,
    produce,
    sessions_clicks,
    wait_while_running,
)

from kspark import io
from kspark.kafka import TopicError

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

HERE = os.path.dirname(os.path.abspath(__file__))


def _over_connect(url: str, *args: str) -> dict:
    """Run connect_client.py with ``args``; what it printed last (JSON)."""
    proc = subprocess.run([sys.executable, os.path.join(HERE, "connect_client.py"), url, *args],
                          capture_output=True, text=True, timeout=600, check=False, cwd=HERE)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _rows(location) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in location.read_records())


def test_the_file_app_over_connect_writes_what_local_mode_writes(connect_server, spark,
                                                                 app_dir):
    remote, local = os.path.join(app_dir, "remote"), os.path.join(app_dir, "local")
    metrics = _over_connect(connect_server.url, "file", remote)
    app = file_app(spark, local)
    app.start()
    try:
        app.process_all_available()
    finally:
        app.stop()
    for name in ("counts", "pages"):
        assert _rows(io.files(os.path.join(remote, name))) == \
            _rows(io.files(os.path.join(local, name))) != []
    # the figures the server's batch writer left reached the client's app object
    assert metrics["process-total"] == FILE_CLICKS["n"] and metrics["batches"] >= 3


def test_a_memory_sink_is_refused_over_connect(connect_server, app_dir):
    got = _over_connect(connect_server.url, "memory", app_dir)
    assert got["error"].startswith("StreamsError") and "sinks ['session-counts']" in \
        got["error"] and "a memory sink keeps its records" in got["error"]


def test_the_main_job_over_connect_equals_the_test_driver(connect_server, app_dir, bootstrap,
                                                          topic):
    prefix = f"{topic}."
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = sessions_clicks(300, seed=13)
    parts = produce(bootstrap, f"{prefix}clicks", clicks)
    metrics = _over_connect(connect_server.url, "kafka", bootstrap, prefix,
                            os.path.join(app_dir, "ck"))
    assert kafka_outputs(bootstrap, prefix) == driver_outputs(clicks, parts)
    assert metrics["process-total"] == 300


APP_MODULE = '''
import os

from kspark import io
from kspark.examples.sessions import topology
from kspark.spark import StreamsApp


def app():
    bootstrap, prefix = os.environ["RUN_BOOTSTRAP"], os.environ["RUN_PREFIX"]
    topics = {name: io.kafka(bootstrap, prefix + name, **({"max_records_per_trigger": 50}
                                                          if name == "clicks" else {}))
              for name in ("clicks", "session-counts", "session-pages")}
    return StreamsApp(topology(), prefix + "app", topics, checkpoint_dir="unused")
'''


def _client(app_dir: str, env: dict, url: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kspark.cli", "run", "runapp:app", "--remote", url,
         "--checkpoint", os.path.join(app_dir, "ck")],
        cwd=app_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_kspark_run_remote_killed_and_restarted_writes_each_record_once(connect_server, app_dir,
                                                                      bootstrap, topic):
    prefix = f"{topic}."
    with open(os.path.join(app_dir, "runapp.py"), "w") as f:
        f.write(APP_MODULE)
    env = {**os.environ, "RUN_BOOTSTRAP": bootstrap, "RUN_PREFIX": prefix}
    create(bootstrap, f"{prefix}clicks", 4)
    clicks = sessions_clicks(600, seed=17)
    parts = produce(bootstrap, f"{prefix}clicks", clicks[:400])

    def some_output() -> bool:
        try:
            return any(kafka_outputs(bootstrap, prefix).values())
        except TopicError:
            return False

    first = _client(app_dir, env, connect_server.url)
    try:
        wait_while_running(first, some_output)
    finally:
        first.kill()  # the client dies mid-run; its query's run goes on on the server
        first.wait(30)
    parts += produce(bootstrap, f"{prefix}clicks", clicks[400:])
    expected = driver_outputs(clicks, parts)
    second = _client(app_dir, env, connect_server.url)
    try:  # the restart stops the old run and resumes from the checkpoint
        wait_while_running(second, lambda: kafka_outputs(bootstrap, prefix) == expected)
        second.send_signal(signal.SIGINT)
        out, _ = second.communicate(timeout=120)
    finally:
        if second.poll() is None:
            second.kill()
    assert second.returncode == 0, out[-3000:]
    assert kafka_outputs(bootstrap, prefix) == expected


def test_remote_and_master_together_are_refused(app_dir):
    proc = subprocess.run([sys.executable, "-m", "kspark.cli", "run", "x:y", "--remote",
                           "sc://localhost:1", "--master", "local[1]"], capture_output=True,
                          text=True, cwd=app_dir, check=False)
    assert proc.returncode != 0 and "give --master or --remote, not both" in proc.stderr
