"""A secured broker: the embedded broker with SASL/PLAIN on every listener (``sasl_users``), the
sessions app on it with credentials in ``io.kafka(config=...)``, and a wrong password refused at
once with an error naming the broker."""

from __future__ import annotations

import json
import os
import time

import pytest
from kafka_util import OUTPUTS, WINDOWED, driver_outputs, produce, sessions_clicks

from kspark import io
from kspark.kafka import EmbeddedBroker, KafkaAuthenticationError, TopicSpec, ensure_topics
from kspark.kafka.reader import OffsetRange, read_range, read_to_end

pytestmark = [pytest.mark.kafka]

PASSWORD = 'al"ice\\secret'  # a quote and a backslash: escaped in the broker's JAAS config


@pytest.fixture(scope="module")
def sasl_broker():
    with EmbeddedBroker(sasl_users={"alice": PASSWORD, "bob": "bob-secret"}) as running:
        yield running


def _wrong(broker: EmbeddedBroker) -> dict[str, str]:
    return {**broker.client_config, "sasl.password": "wrong"}


def _sessions_app(bootstrap: str, config: dict, prefix: str, checkpoint: str, spark):
    from kspark.examples.sessions import topology
    from kspark.spark import StreamsApp

    topics = {name: io.kafka(bootstrap, prefix + name, config=config,
                             max_records_per_trigger=150 if name == "clicks" else None)
              for name in ("clicks", *OUTPUTS)}
    return StreamsApp(topology(), f"{prefix}app", topics, spark=spark, checkpoint_dir=checkpoint)


def test_broker_settings_and_client_config():
    broker = EmbeddedBroker(port=1234, sasl_users={"alice": PASSWORD})
    props = broker.server_properties("/tmp/x", 1235)
    assert props["listeners"] == "SASL_PLAINTEXT://127.0.0.1:1234,CONTROLLER://127.0.0.1:1235"
    assert props["inter.broker.listener.name"] == "SASL_PLAINTEXT"
    assert props["listener.security.protocol.map"] == (
        "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT")
    jaas = props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert 'user_alice="al\\"ice\\\\secret"' in jaas and jaas.endswith(";")
    assert props["listener.name.controller.plain.sasl.jaas.config"] == jaas
    assert broker.bootstrap == "127.0.0.1:1234"
    assert broker.client_config == {"security.protocol": "SASL_PLAINTEXT",
                                    "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                    "sasl.password": PASSWORD}
    assert EmbeddedBroker(port=1234).client_config == {}
    with pytest.raises(ValueError, match="SASL user name 'a b'"):
        EmbeddedBroker(sasl_users={"a b": "x"})
    # the password stays out of a topic location's repr
    assert PASSWORD not in repr(io.kafka("h:1", "t", config=broker.client_config))


def test_broker_command_takes_users_and_passwords():
    from typer.testing import CliRunner

    from kspark.cli import app

    done = CliRunner().invoke(app, ["broker", "--sasl-user", "alice"])
    assert done.exit_code == 2 and "expected USER:PASSWORD" in done.output


def test_spark_connector_options_carry_the_login():
    from kspark.spark.internals.kafka_connector import java_client_options

    opts = java_client_options({"kafka.security.protocol": "SASL_PLAINTEXT",
                                "kafka.sasl.mechanisms": "PLAIN", "kafka.sasl.username": "alice",
                                "kafka.sasl.password": PASSWORD, "subscribe": "t"})
    assert opts == {
        "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
        "subscribe": "t",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                  'required username="alice" password="al\\"ice\\\\secret";',
    }
    with pytest.raises(ValueError, match="SASL mechanism GSSAPI"):
        java_client_options({"kafka.sasl.username": "alice", "kafka.sasl.password": "x"})


@pytest.mark.spark
def test_sessions_app_on_a_sasl_broker_equals_the_test_driver(spark, app_dir, sasl_broker):
    bootstrap, config = sasl_broker.bootstrap, sasl_broker.client_config
    prefix = "sasl."
    ensure_topics(bootstrap, [TopicSpec(f"{prefix}clicks", 4)], config=config)
    clicks = sessions_clicks(300, seed=21, base_ms=int(time.time() * 1000) - 86_400_000)
    parts = produce(bootstrap, f"{prefix}clicks", clicks, config=config)
    app = _sessions_app(bootstrap, config, prefix, os.path.join(app_dir, "ck"), spark)
    app.start()
    try:
        app.process_all_available()
        shown = json.dumps(app.query.recentProgress, default=str)
        shown += app.query._jsq.explainInternal(True)  # the plans, as explain() prints them
        metrics = app.metrics()
    finally:
        app.stop()
    assert metrics["process-total"] == 300 and metrics["batches"] >= 2
    got = {
        topic: sorted(((WINDOWED.deserialize(m.key()), serde.deserialize(m.value()),
                        m.timestamp()[1])
                       for m in read_to_end(bootstrap, prefix + topic, config)), key=repr)
        for topic, serde in OUTPUTS.items()
    }
    expected = driver_outputs(clicks, parts)
    assert len(expected["session-counts"]) > 10
    assert got == expected
    assert PASSWORD not in shown, shown  # the source's options are not shown

    # Spark's connector logs in with the same config (as a JAAS config of its Java client)
    from kspark.spark.internals.kafka_connector import has_connector, java_client_options

    if has_connector(spark):
        options = java_client_options(
            {"kafka.bootstrap.servers": bootstrap, "subscribe": f"{prefix}clicks",
             **{f"kafka.{k}": v for k, v in config.items()}})
        assert spark.read.format("kafka").options(**options).load().count() == 300


@pytest.mark.spark
def test_a_wrong_password_stops_start_at_once_naming_the_broker(spark, app_dir, sasl_broker):
    bootstrap = sasl_broker.bootstrap
    app = _sessions_app(bootstrap, _wrong(sasl_broker), "sasl-wrong.",
                        os.path.join(app_dir, "ck"), spark)
    started = time.monotonic()
    with pytest.raises(KafkaAuthenticationError) as err:
        app.start()
    assert time.monotonic() - started < 10
    first = str(err.value).splitlines()[0]
    assert first.startswith(f"Kafka at {bootstrap}: authentication failed: ")
    assert "Invalid username or password" in first
    assert "wrong" not in str(err.value)
    assert app.query is None


def test_readers_refuse_a_wrong_password_at_once(sasl_broker):
    bootstrap, config = sasl_broker.bootstrap, sasl_broker.client_config_for("bob")
    ensure_topics(bootstrap, [TopicSpec("sasl-read", 1)], config=config)
    produce(bootstrap, "sasl-read", [("k", {"n": 1}, 1_700_000_000_000)], config=config)
    assert [m.value() for m in read_to_end(bootstrap, "sasl-read", config)] == [b'{"n": 1}']
    for read in (
        lambda: list(read_to_end(bootstrap, "sasl-read", _wrong(sasl_broker))),
        # an executor's reader (planned offsets, no metadata request of its own)
        lambda: list(read_range(bootstrap, OffsetRange("sasl-read", 0, 0, 1),
                                _wrong(sasl_broker))),
    ):
        started = time.monotonic()
        with pytest.raises(KafkaAuthenticationError, match=f"^Kafka at {bootstrap}: "
                                                           "authentication failed"):
            read()
        assert time.monotonic() - started < 10
