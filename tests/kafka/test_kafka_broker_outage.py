"""A broker that goes away mid-run (issue: faults and bad input): the app waits for it up to
``task.timeout.ms`` and resumes when it comes back; with a shorter timeout it stops with an
error naming the cluster and the setting, and a restart resumes. Either way every result is
written once (read_committed outputs equal the test driver's). One broker of this module's
own, stopped and started again on the same port and data."""

from __future__ import annotations

import os
import threading
import time

import pytest
from kafka_app_process import sessions_app
from kafka_util import create, driver_outputs, kafka_outputs, produce, sessions_clicks

from kspark.errors import KsparkError
from kspark.kafka import EmbeddedBroker

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def test_the_app_waits_for_a_broker_that_comes_back_or_stops_naming_it(spark, app_dir):
    data = os.path.join(app_dir, "kafka")
    broker = EmbeddedBroker(data_dir=data).start()
    port, bootstrap = broker.port, broker.bootstrap_servers
    checkpoint = os.path.join(app_dir, "ck")
    clicks = sessions_clicks(450, seed=11)
    create(bootstrap, "o.clicks", 4)
    parts = produce(bootstrap, "o.clicks", clicks[:150])
    try:
        # the broker stops between micro-batches and is back 5 s later: the app waits
        app = sessions_app(bootstrap, "o.", checkpoint, 100, spark=spark,
                           config={"task.timeout.ms": 60_000})
        app.start()
        app.process_all_available()
        broker.stop()

        failures: list[BaseException] = []

        def process() -> None:  # blocks while the source waits for the broker
            try:
                app.process_all_available()
            except BaseException as exc:
                failures.append(exc)

        waiting = threading.Thread(target=process)
        waiting.start()
        time.sleep(5)
        assert waiting.is_alive() and not failures  # still waiting, not failed
        # (started from this thread: the broker dies with the thread that started it)
        broker = EmbeddedBroker(port=port, data_dir=data).start()
        parts.extend(produce(bootstrap, "o.clicks", clicks[150:300]))
        waiting.join(timeout=300)
        try:
            assert not failures, failures
            app.process_all_available()
        finally:
            app.stop()
        assert kafka_outputs(bootstrap, "o.") == driver_outputs(clicks[:300], parts)

        # with a short task.timeout.ms the app stops, naming the cluster and the setting
        app = sessions_app(bootstrap, "o.", checkpoint, 100, spark=spark,
                           config={"task.timeout.ms": 2_000})
        app.start()
        app.process_all_available()
        broker.stop()
        try:
            with pytest.raises(KsparkError) as caught:
                app.process_all_available()
        finally:
            app.stop()
        first = str(caught.value).splitlines()[0]
        assert f"cannot reach Kafka at {bootstrap}" in first
        assert "task.timeout.ms = 2000" in first

        # a restart once the broker is back resumes: every result once
        broker = EmbeddedBroker(port=port, data_dir=data).start()
        parts.extend(produce(bootstrap, "o.clicks", clicks[300:]))
        app = sessions_app(bootstrap, "o.", checkpoint, 100, spark=spark)
        app.start()
        try:
            app.process_all_available()
        finally:
            app.stop()
        assert kafka_outputs(bootstrap, "o.") == driver_outputs(clicks, parts)
    finally:
        broker.stop()


def test_a_broker_killed_three_times_mid_run_loses_and_duplicates_nothing(spark, app_dir):
    """SIGKILL of the broker (no controlled shutdown) while micro-batches run, three times,
    each time restarted on the same data: the app rides through and every result is written
    once."""
    data = os.path.join(app_dir, "kafka")
    broker = EmbeddedBroker(data_dir=data).start()
    port, bootstrap = broker.port, broker.bootstrap_servers
    clicks = sessions_clicks(1200, seed=29)
    create(bootstrap, "k.clicks", 4)
    parts = produce(bootstrap, "k.clicks", clicks[:300])
    app = sessions_app(bootstrap, "k.", os.path.join(app_dir, "ck"), 50, spark=spark,
                       config={"task.timeout.ms": 180_000})
    failures: list[BaseException] = []
    done = threading.Event()

    def run() -> None:  # micro-batches one after the other, as a running app
        try:
            while not done.is_set():
                app.process_all_available()
                time.sleep(0.05)
        except BaseException as exc:
            failures.append(exc)

    app.start()
    runner = threading.Thread(target=run)
    runner.start()
    batches = []
    try:
        for round_ in range(3):
            time.sleep(1.5)  # within the 6 micro-batches of the input just produced
            batches.append(app.metrics()["batches"])
            broker.kill()
            time.sleep(1)
            # (started from this thread: the broker dies with the thread that started it)
            broker = EmbeddedBroker(port=port, data_dir=data).start()
            parts.extend(produce(bootstrap, "k.clicks", clicks[300 * (round_ + 1):
                                                               300 * (round_ + 2)]))
        done.set()
        runner.join(timeout=600)
        assert not runner.is_alive() and not failures, failures
        app.process_all_available()
        metrics = app.metrics()
    finally:
        done.set()
        app.stop()
        try:
            assert kafka_outputs(bootstrap, "k.") == driver_outputs(clicks, parts)
        finally:
            broker.stop()
    assert metrics["process-total"] == 1200
    assert len(set(batches)) == 3  # each kill came while the app was making progress
