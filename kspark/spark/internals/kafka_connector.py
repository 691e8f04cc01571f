"""Spark's own Kafka connector (``spark.readStream.format("kafka")``, the Maven artifact
``org.apache.spark:spark-sql-kafka-0-10``), which pyspark does not ship.

:func:`connector_jars` fetches it from Maven Central once (cached, see :mod:`kspark.jvm.maven`):
the installed Spark's version, else, when that is not published, the newest earlier one of the
same major version (logged at WARNING). :func:`add_connector_jars` puts those jars on a new
local session's ``spark.jars``; without them (no network, no Java to run Ivy) the session has no
connector and Kafka topics are read by kspark's own source ``kspark_kafka`` (which
``source="auto"`` picks anyway, see :data:`AUTO_PREFERS_CONNECTOR`). :func:`has_connector`
tells whether a session has the connector, however it got it (``spark.jars``,
``spark.jars.packages``, a cluster's classpath).
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from kspark.errors import KsparkError
from kspark.jvm.maven import cache_dir, resolve
from kspark.kafka.broker import jaas_quote

log = logging.getLogger("kspark.spark.internals.kafka_connector")

ARTIFACT = "spark-sql-kafka-0-10"
PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
#: how long a fallback version (seconds) or "not available" is remembered before the installed
#: version (or anything) is tried again; the installed version, once had, is kept
RETRY_FALLBACK_S = 24 * 3600
RETRY_MISSING_S = 3600
#: what a Kafka topic's ``source="auto"`` reads with: Spark's connector when the session has it
#: (True), or kspark's own source (False); measured: docs/performance.md#kafka-source-choice
AUTO_PREFERS_CONNECTOR = False


#: librdkafka settings whose name differs in Kafka's Java clients
JAVA_NAMES = {"sasl.mechanisms": "sasl.mechanism"}
#: librdkafka's TLS settings that trust a CA, as a Java client's PEM trust store
JAVA_TRUST = {"ssl.ca.location": "ssl.truststore.location",
              "ssl.ca.pem": "ssl.truststore.certificates"}
#: librdkafka's PEM key and certificate of the client, which a Java client takes only as one
#: key store (``ssl.keystore.location`` of PKCS#12, a setting both name alike)
_PEM_CLIENT_KEYS = ("ssl.certificate.location", "ssl.key.location", "ssl.certificate.pem",
                    "ssl.key.pem")
#: the Java login module that takes a user name and password, per SASL mechanism
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class ConnectorMissing(KsparkError):
    """A Kafka topic asks for Spark's Kafka connector and the session does not have it."""


def java_client_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with their ``kafka.``-prefixed librdkafka settings as Kafka's Java clients
    name them: ``sasl.mechanisms`` as ``sasl.mechanism``, ``sasl.username`` with
    ``sasl.password`` as a ``sasl.jaas.config`` of the mechanism's login module (unless one is
    given), a CA (``ssl.ca.location``, ``ssl.ca.pem``) as a PEM trust store, and
    ``ssl.endpoint.identification.algorithm=none`` as Java's empty value."""
    out: dict[str, str] = {}
    login: dict[str, str] = {}
    for key, value in options.items():
        name = key[len("kafka."):].lower() if key.lower().startswith("kafka.") else None
        if name in ("sasl.username", "sasl.password"):
            login[name] = value
        elif name in JAVA_TRUST:
            out["kafka.ssl.truststore.type"] = "PEM"
            out[f"kafka.{JAVA_TRUST[name]}"] = value
        elif name in _PEM_CLIENT_KEYS:
            raise ValueError(
                f"kafka topic: {name} is librdkafka's; Spark's Kafka connector (a Java client) "
                "takes the client's key and certificate as ssl.keystore.location (PKCS#12) with "
                "ssl.keystore.password, which both clients read"
            )
        elif name == "ssl.endpoint.identification.algorithm":
            out[f"kafka.{name}"] = "" if value.lower() == "none" else value
        elif name is not None:
            out[f"kafka.{JAVA_NAMES.get(name, key[len('kafka.'):])}"] = value
        else:
            out[key] = value
    if login and "kafka.sasl.jaas.config" not in out:
        mechanism = out.get("kafka.sasl.mechanism", "GSSAPI").upper()
        module = LOGIN_MODULES.get(mechanism)
        if module is None:
            raise ValueError(
                f"kafka topic: sasl.username and sasl.password are given for SASL mechanism "
                f"{mechanism}, which takes no password; for Spark's Kafka connector set "
                f"sasl.mechanism to one of {', '.join(LOGIN_MODULES)} or give sasl.jaas.config"
            )
        out["kafka.sasl.jaas.config"] = (
            f"{module} required username={jaas_quote(login.get('sasl.username', ''))} "
            f"password={jaas_quote(login.get('sasl.password', ''))};"
        )
    return out


def _pyspark_jars() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def installed_version() -> str:
    """The installed Spark's version (``major.minor.patch`` of ``pyspark.__version__``)."""
    import pyspark

    found = re.match(r"\d+\.\d+\.\d+", pyspark.__version__)
    if found is None:
        raise ValueError(f"unexpected pyspark version {pyspark.__version__!r}")
    return found.group(0)


def _scala_version() -> str:
    cores = glob.glob(os.path.join(_pyspark_jars(), "spark-core_*.jar"))
    found = re.match(r"spark-core_(\d+\.\d+)-", os.path.basename(cores[0])) if cores else None
    return found.group(1) if found else "2.13"


def coordinates(version: str | None = None) -> list[str]:
    """The Maven coordinates to try, in order: the installed version, then the newest earlier
    one of the same major version (an Ivy version range)."""
    version = version or installed_version()
    base = f"org.apache.spark:{ARTIFACT}_{_scala_version()}"
    major = version.split(".")[0]
    return [f"{base}:{version}", f"{base}:[{major}.0.0,{version}["]


def _jar_version(jars: list[str]) -> str:
    for jar in jars:
        found = re.search(rf"{ARTIFACT}_[\d.]+-(.+)\.jar$", os.path.basename(jar))
        if found:
            return found.group(1)
    return "?"


def _without_spark_jars(jars: list[str]) -> list[str]:
    """``jars`` (Ivy's ``organisation-artifact-revision.jar`` files) without the artifacts that
    pyspark ships already (Hadoop's client, Scala's library...: the JVM loads pyspark's first)."""
    shipped = set()
    for name in os.listdir(_pyspark_jars()):
        found = re.fullmatch(r"(.+)-\d[^-]*\.jar", name)
        if found:
            shipped.add(found.group(1))
    kept = []
    for jar in jars:
        found = re.fullmatch(r"(.+)-\d[^-]*\.jar", os.path.basename(jar))
        if found is None or not any(found.group(1).endswith(f"-{a}") for a in shipped):
            kept.append(jar)
    return kept


def _note_path(version: str) -> str:
    return os.path.join(cache_dir(), "jars", f"spark-kafka-connector-{version}.json")


def _remembered(version: str) -> str | None:
    """The coordinate chosen for ``version`` earlier ("" for none), or None to try again."""
    path = _note_path(version)
    try:
        with open(path) as f:
            chosen = json.load(f)["coordinate"]
        age = time.time() - os.path.getmtime(path)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if chosen == coordinates(version)[0]:
        return chosen
    return chosen if age < (RETRY_FALLBACK_S if chosen else RETRY_MISSING_S) else None


def _remember(version: str, coordinate: str, reason: str = "") -> None:
    path = _note_path(version)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, staging = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"coordinate": coordinate, "reason": reason}, f)
        os.replace(staging, path)
    except OSError as exc:
        log.debug("cannot remember the Kafka connector's version in %s: %s", path, exc)


def connector_jars(version: str | None = None) -> list[str] | None:
    """Local paths of the jars of Spark's Kafka connector for Spark ``version`` (default: the
    installed one) beyond those pyspark ships, fetched once; None (logged) when it cannot be had.
    An unpublished version falls back to the newest earlier one of its major version."""
    version = version or installed_version()
    chosen = _remembered(version)
    if chosen == "":
        log.info("Spark's Kafka connector is not available (remembered in %s); Kafka topics "
                 "are read by kspark's own source", _note_path(version))
        return None
    failures = []
    for coordinate in [chosen] if chosen else coordinates(version):
        try:
            jars = resolve([coordinate], f"spark-sql-kafka-{version}")
        except (KsparkError, OSError) as exc:
            failures.append(f"{coordinate}: {str(exc).splitlines()[0]}")
            continue
        used = _jar_version(jars)
        if used != version:
            log.warning("Spark's Kafka connector %s is not on Maven Central; using %s with Spark "
                        "%s", version, used, version)
        if chosen is None:
            _remember(version, coordinate)
        return _without_spark_jars(jars)
    reason = "; ".join(failures)
    _remember(version, "", reason)
    log.warning("Spark's Kafka connector cannot be had (%s); Kafka topics are read by kspark's "
                "own source (source='spark' fails). kspark retries in %d minutes", reason,
                RETRY_MISSING_S // 60)
    return None


def add_connector_jars(settings: dict[str, Any]) -> None:
    """Add the connector's jars to ``spark.jars`` of a new session's ``settings`` when they can
    be had (and the settings do not already bring a Kafka connector)."""
    given = f"{settings.get('spark.jars', '')},{settings.get('spark.jars.packages', '')}"
    if ARTIFACT in given:
        return
    jars = connector_jars()
    if jars:
        settings["spark.jars"] = ",".join([*filter(None, [str(settings.get("spark.jars", ""))]),
                                           *jars])


def has_connector(spark: Any) -> bool:
    """Whether the session's JVM can load Spark's Kafka connector (as ``format("kafka")``
    would: through the driver's context class loader, which sees ``spark.jars``)."""
    try:
        jvm = spark._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass(PROVIDER_CLASS)
        return True
    except Exception:  # no JVM (Spark Connect), or the class is not there
        return False


def uses_connector(spark: Any, source: str) -> bool:
    """Whether a Kafka topic with ``source`` ("auto", "kspark" or "spark") is read by Spark's
    connector in ``spark``."""
    return source == "spark" or (
        source == "auto" and AUTO_PREFERS_CONNECTOR and has_connector(spark)
    )


def connector_reader(spark: Any, options: dict[str, str],
                     partitions: Mapping[str, int | None] | None = None) -> Any:
    """A ``format("kafka")`` stream reader with the ``kspark_kafka`` source's ``options``
    (reading committed records only, with their headers). Spark's connector needs every
    partition in JSON starting offsets; ``partitions`` (topic -> partition count) fills those
    left out with earliest (-2), as ``kspark_kafka`` starts them. librdkafka settings are
    translated for the connector's Java clients (:func:`java_client_options`). Raises
    :class:`ConnectorMissing` without the connector."""
    if not has_connector(spark):
        raise ConnectorMissing(
            "Spark's Kafka connector (org.apache.spark:spark-sql-kafka-0-10_2.13) is not loaded in "
            "this Spark session, and a Kafka topic asks for it (source='spark'). A session of "
            "kspark.spark.session.local_spark() gets it from Maven Central when it can (see the "
            "log); for your own session set spark.jars.packages to "
            f"{coordinates()[0]} (or the newest published version of Spark "
            f"{installed_version().split('.')[0]}), or use source='kspark' or 'auto'"
        )
    opts = {"kafka.isolation.level": "read_committed", "includeHeaders": "true",
            **java_client_options(options)}
    starting = opts.get("startingOffsets", "earliest")
    if partitions and starting.startswith("{"):
        given = json.loads(starting)
        for topic, count in partitions.items():
            parts = given.setdefault(topic, {})
            for p in range(count or 0):
                parts.setdefault(str(p), -2)
        opts["startingOffsets"] = json.dumps(given)
    reader = spark.readStream.format("kafka")
    for key, value in opts.items():
        reader = reader.option(key, value)
    return reader


__all__ = [
    "ConnectorMissing",
    "add_connector_jars",
    "connector_jars",
    "connector_reader",
    "has_connector",
    "java_client_options",
    "uses_connector",
]
