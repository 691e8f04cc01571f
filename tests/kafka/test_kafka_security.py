"""Security (issue 41): the embedded broker on TLS with certificates of a CA the test set-up
makes, SCRAM-SHA-512 users, and Kafka's StandardAuthorizer. The main job runs on a SASL_SSL
broker with exactly the ACLs ``app.required_acls()`` lists and equals the test driver; without
any one of them it stops at ``start()`` naming the resource and the operation, and writes
nothing; passwords and key material appear in no log, error, description or metrics."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path

import pytest
from kafka_util import OUTPUTS, WINDOWED, driver_outputs, produce, sessions_clicks

from kspark import io
from kspark.kafka import EmbeddedBroker, KafkaAuthenticationError, TopicSpec, ensure_topics
from kspark.kafka.acls import KafkaAuthorizationError
from kspark.kafka.reader import read_to_end
from kspark.kafka.security import INTERNAL_USER, make_certificates

pytestmark = [pytest.mark.kafka]

PASSWORD = 'al"ice\\sec,ret]'  # what the storage tool's --add-scram could not take
ADMIN = "admin-pw"


@pytest.fixture(scope="module")
def tls_broker():
    with EmbeddedBroker(tls=True) as running:
        yield running


@pytest.fixture(scope="module")
def acl_broker():
    with EmbeddedBroker(sasl_users={"alice": PASSWORD, "admin": ADMIN},
                        sasl_mechanism="SCRAM-SHA-512", tls=True, acls=True,
                        super_users=("admin",)) as running:
        yield running


def _outputs(bootstrap: str, config: dict, prefix: str) -> dict[str, list]:
    return {
        topic: sorted(((WINDOWED.deserialize(m.key()), serde.deserialize(m.value()),
                        m.timestamp()[1])
                       for m in read_to_end(bootstrap, prefix + topic, config)), key=repr)
        for topic, serde in OUTPUTS.items()
    }


def _sessions_app(broker: EmbeddedBroker, prefix: str, checkpoint: str, spark):
    from kspark.examples.sessions import topology
    from kspark.spark import StreamsApp

    topics = {name: io.kafka(broker.bootstrap, prefix + name, config=broker.client_config,
                             max_records_per_trigger=150 if name == "clicks" else None)
              for name in ("clicks", *OUTPUTS)}
    return StreamsApp(topology(), f"{prefix}app", topics, spark=spark, checkpoint_dir=checkpoint)


def _grant(broker: EmbeddedBroker, needs: list, principal: str = "User:alice") -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap,
                         **broker.client_config_for("admin")})
    for future in admin.create_acls([n.binding(principal) for n in needs]).values():
        future.result(30)


def _revoke(broker: EmbeddedBroker, principal: str = "User:alice") -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap,
                         **broker.client_config_for("admin")})
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    for future in admin.delete_acls([every]).values():
        future.result(30)


# -- no broker -----------------------------------------------------------------------------------

def test_certificates_verify_against_their_ca(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    made = make_certificates(str(tmp_path), ("broker", "client"))
    ca = x509.load_pem_x509_certificate(Path(made.ca).read_bytes())
    for name in ("broker", "client"):
        cert = x509.load_pem_x509_certificate(Path(made.certificate(name)).read_bytes())
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
        key_text = Path(made.key(name)).read_text()
        assert key_text.startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, as Java reads it
        assert oct(os.stat(made.key(name)).st_mode & 0o777) == "0o600"
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    # kept on a second call (a broker restarted on the directory keeps its CA)
    before = Path(made.ca).read_text()
    assert Path(make_certificates(str(tmp_path), ("broker",)).ca).read_text() == before


def test_broker_properties_for_each_protocol(tmp_path):
    plain = EmbeddedBroker(port=1234)
    assert plain.security_protocol == "PLAINTEXT" and plain.client_config == {}
    tls = EmbeddedBroker(port=1234, tls=True, tls_dir=str(tmp_path / "a"))
    props = tls.server_properties("/tmp/x", 1235)
    assert props["listeners"] == "SSL://127.0.0.1:1234,CONTROLLER://127.0.0.1:1235"
    assert props["listener.security.protocol.map"] == "SSL:SSL,CONTROLLER:SSL"
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PEM"
    assert props["ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert props["ssl.client.auth"] == "none" and "authorizer.class.name" not in props
    assert tls.client_config == {"security.protocol": "SSL",
                                 "ssl.ca.location": str(tmp_path / "a" / "ca.pem")}
    scram = EmbeddedBroker(port=1234, tls=True, tls_dir=str(tmp_path / "b"),
                           sasl_users={"alice": "x", "root": "y"}, acls=True,
                           super_users=("root",), sasl_mechanism="SCRAM-SHA-512")
    props = scram.server_properties("/tmp/x", 1235)
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL"
    assert props["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert props["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
    assert props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.scram.ScramLoginModule required")
    assert props["authorizer.class.name"] == (
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert props["super.users"] == f"User:{INTERNAL_USER};User:root"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert scram.client_config_for("alice") == {
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(tmp_path / "b" / "ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "x"}
    assert scram.client_config_for("alice", "PLAIN")["sasl.mechanism"] == "PLAIN"
    for bad, match in [({"acls": True}, "acls=True needs sasl_users"),
                       ({"client_auth": True}, "client_auth=True needs tls=True"),
                       ({"sasl_mechanism": "GSSAPI"}, "sasl_mechanism must be one of"),
                       ({"sasl_users": {"a": "b"}, "super_users": ("c",)}, "super user 'c'")]:
        with pytest.raises(ValueError, match=match):
            EmbeddedBroker(**bad)


def test_spark_connector_options_trust_the_ca():
    from kspark.spark.internals.kafka_connector import java_client_options

    opts = java_client_options({"kafka.security.protocol": "SASL_SSL",
                                "kafka.ssl.ca.location": "/ca.pem",
                                "kafka.ssl.endpoint.identification.algorithm": "none",
                                "kafka.sasl.mechanism": "SCRAM-SHA-512",
                                "kafka.sasl.username": "alice", "kafka.sasl.password": "pw"})
    assert opts == {
        "kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/ca.pem",
        "kafka.ssl.endpoint.identification.algorithm": "", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                  'required username="alice" password="pw";',
    }
    assert java_client_options({"kafka.ssl.ca.pem": "PEM"})["kafka.ssl.truststore.certificates"] \
        == "PEM"
    with pytest.raises(ValueError, match=r"ssl\.key\.location is librdkafka's"):
        java_client_options({"kafka.ssl.key.location": "/k.pem"})


# -- TLS ----------------------------------------------------------------------------------------

def test_tls_clients_read_and_write_and_an_untrusted_ca_is_refused_at_once(tls_broker, tmp_path):
    bootstrap, config = tls_broker.bootstrap, tls_broker.client_config
    ensure_topics(bootstrap, [TopicSpec("tls.t", 4)], config=config)
    produce(bootstrap, "tls.t", [("k", {"n": 1}, 1_700_000_000_000)], config=config)
    assert [m.value() for m in read_to_end(bootstrap, "tls.t", config)] == [b'{"n": 1}']
    other = make_certificates(str(tmp_path / "other"))  # another CA
    started = time.monotonic()
    with pytest.raises(KafkaAuthenticationError) as err:
        ensure_topics(bootstrap, [TopicSpec("tls.t", 4)],
                      config={**config, "ssl.ca.location": other.ca})
    assert time.monotonic() - started < 10
    assert str(err.value).startswith(f"Kafka at {bootstrap}: authentication failed: ")
    assert "certificate verify failed" in str(err.value)


@pytest.mark.spark
def test_spark_connector_reads_over_tls(spark, tls_broker):
    from kspark.spark.internals.kafka_connector import has_connector, java_client_options

    if not has_connector(spark):
        pytest.skip("the session has no Spark Kafka connector")
    bootstrap, config = tls_broker.bootstrap, tls_broker.client_config
    ensure_topics(bootstrap, [TopicSpec("tls.spark", 4)], config=config)
    produce(bootstrap, "tls.spark",
            [(f"k{i}", {"n": i}, 1_700_000_000_000 + i) for i in range(20)], config=config)
    options = java_client_options({"kafka.bootstrap.servers": bootstrap,
                                   "subscribe": "tls.spark",
                                   **{f"kafka.{k}": v for k, v in config.items()}})
    assert spark.read.format("kafka").options(**options).load().count() == 20


# -- SCRAM and ACLs -----------------------------------------------------------------------------

@pytest.mark.spark
def test_main_job_with_exactly_the_listed_acls_equals_the_test_driver(
        spark, app_dir, acl_broker, caplog):
    broker, prefix = acl_broker, "acl."
    admin = broker.client_config_for("admin")
    ensure_topics(broker.bootstrap, [TopicSpec(f"{prefix}clicks", 4)], config=admin)
    clicks = sessions_clicks(400, seed=41, base_ms=int(time.time() * 1000) - 86_400_000)
    parts = produce(broker.bootstrap, f"{prefix}clicks", clicks[:250], config=admin)
    checkpoint = os.path.join(app_dir, "ck")
    app = _sessions_app(broker, prefix, checkpoint, spark)
    needs = app.required_acls()[broker.bootstrap]
    assert [str(n) for n in needs] == [
        "READ on TOPIC 'acl.clicks': source topic",
        "WRITE on TOPIC 'acl.session-counts': output topic",
        "CREATE on TOPIC 'acl.session-counts': output topic, created at start",
        "WRITE on TOPIC 'acl.app-kspark-sink-batches': sink-marker topic",
        "CREATE on TOPIC 'acl.app-kspark-sink-batches': sink-marker topic, created at start",
        "READ on TOPIC 'acl.app-kspark-sink-batches': sink-marker topic, read back",
        "DESCRIBE_CONFIGS on TOPIC 'acl.app-kspark-sink-batches': sink-marker topic, its "
        "configs checked",
        "WRITE on TRANSACTIONAL_ID 'acl.app-kspark-sink' (prefix): exactly-once writes",
        "WRITE on TOPIC 'acl.session-pages': output topic",
        "CREATE on TOPIC 'acl.session-pages': output topic, created at start",
        "DESCRIBE on GROUP 'kspark-reader': kspark's readers look up their group",
    ]
    _grant(broker, needs)
    texts = []
    with caplog.at_level(logging.DEBUG, logger="kspark"):
        app.start()
        try:
            app.process_all_available()
        finally:
            app.stop()
        # a restart with more input: the writers read their markers back, configs are checked
        parts += produce(broker.bootstrap, f"{prefix}clicks", clicks[250:], config=admin)
        app = _sessions_app(broker, prefix, checkpoint, spark)
        app.start()
        try:
            app.process_all_available()
            texts += [json.dumps(app.query.recentProgress, default=str),
                      app.query._jsq.explainInternal(True), json.dumps(app.metrics()),
                      repr(app.metrics_report()), str(app.topology.describe()),
                      repr(app.topics), _panel(app)]
        finally:
            app.stop()
    assert app.metrics()["process-total"] == 150
    assert _outputs(broker.bootstrap, admin, prefix) == driver_outputs(clicks, parts)
    denied = re.findall(r"Principal = User:alice is Denied operation = (\w+) .*?on resource = "
                        r"(\S+)", Path(broker.log_path).read_text())
    assert denied == []
    texts.append(caplog.text)
    _no_secrets(broker, "\n".join(texts))


def _panel(app) -> str:
    """What ``kspark run``'s live panel shows of ``app``."""
    from rich.console import Console

    from kspark.cli_run import _status

    console = Console(record=True, width=200)
    console.print(_status(app, time.monotonic()))
    return console.export_text()


def _no_secrets(broker: EmbeddedBroker, text: str) -> None:
    """Neither a password nor the broker's private key in ``text`` or in the broker's log."""
    key = Path(broker.certificates.key("broker")).read_text().splitlines()[1]
    with open(broker.log_path) as f:
        text += f.read()
    for secret in (PASSWORD, ADMIN, broker._internal_password, key):
        assert secret not in text


@pytest.mark.spark
def test_without_any_one_acl_start_stops_naming_it_and_nothing_is_written(
        spark, app_dir, acl_broker):
    broker = acl_broker
    admin = broker.client_config_for("admin")
    probe = _sessions_app(broker, "acl-0.", os.path.join(app_dir, "probe"), spark)
    count = len(probe.required_acls()[broker.bootstrap])
    stopped = []
    for i in range(count):
        prefix = f"acl-{i + 1}."
        ensure_topics(broker.bootstrap, [TopicSpec(f"{prefix}clicks", 4)], config=admin)
        produce(broker.bootstrap, f"{prefix}clicks",
                sessions_clicks(40, seed=i, base_ms=int(time.time() * 1000) - 86_400_000),
                config=admin)
        app = _sessions_app(broker, prefix, os.path.join(app_dir, f"ck{i}"), spark)
        needs = app.required_acls()[broker.bootstrap]
        missing = needs[i]
        _grant(broker, needs[:i] + needs[i + 1:])
        with pytest.raises(KafkaAuthorizationError) as err:
            app.start()
            try:
                app.process_all_available()
            finally:
                app.stop()
        message = str(err.value)
        stopped.append(message)
        _revoke(broker)
        assert message.startswith(f"Kafka at {broker.bootstrap}: principal User:alice is not "
                                  f"allowed {missing.operation} on "), (missing, message)
        assert repr(missing.name) in message, (missing, message)
        assert PASSWORD not in message
        for topic in OUTPUTS:  # nothing written (the topic may not even exist)
            written = list(read_to_end(broker.bootstrap, prefix + topic, admin)) \
                if _exists(broker, prefix + topic) else []
            assert written == [], (missing, topic)
    assert len(stopped) == count


def _exists(broker: EmbeddedBroker, topic: str) -> bool:
    from kspark.kafka.admin import partition_counts

    return partition_counts(broker.bootstrap, [topic],
                            broker.client_config_for("admin"))[topic] is not None


def test_kspark_broker_command_with_tls_and_scram(tmp_path):
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "kspark.cli", "broker", "--port", "0", "--tls",
         "--tls-dir", str(tmp_path / "tls"), "--sasl-user", "carol:carol-pw"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("clients connect with"):
                break
        address = re.search(r"bootstrap servers (127\.0\.0\.1:\d+)", "".join(lines)).group(1)
        ca = str(tmp_path / "tls" / "ca.pem")
        assert lines[-1].strip() == (
            f"clients connect with security.protocol=SASL_SSL, ssl.ca.location={ca}, "
            "sasl.mechanism=PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 as carol")
        config = {"security.protocol": "SASL_SSL", "ssl.ca.location": ca,
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
                  "sasl.password": "carol-pw"}
        ensure_topics(address, [TopicSpec("cli.t", 1)], config=config)
        assert "carol-pw" not in "".join(lines)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
