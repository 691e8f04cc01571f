"""The embedded broker, ``kspark broker``, topic administration and offset-range reading (no
Spark)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka_util import BASE_MS, consume, create, produce

from kspark.examples.sessions import topology as sessions_topology
from kspark.jvm.class_archive import MAGIC
from kspark.jvm.maven import cache_dir
from kspark.kafka import EmbeddedBroker, TopicError, TopicSpec, ensure_topics, topology_topics
from kspark.kafka.reader import OffsetLookup, OffsetRange, limit_ranges, plan_start, read_range
from kspark.topology.internals.plan import ExecutionPlan

pytestmark = pytest.mark.kafka


def _records(n, users=7):
    return [(f"u{i % users}", {"i": i}, BASE_MS + i) for i in range(n)]


def test_records_across_partitions_are_read_back_to_the_true_end(bootstrap, topic):
    create(bootstrap, topic, 4)
    parts = produce(bootstrap, topic, _records(300))
    got = consume(bootstrap, topic)
    assert sorted(m.value() for m in got) == sorted(
        f'{{"i": {i}}}'.encode() for i in range(300)
    )
    # the end offsets are the record counts, although the broker's ListOffsets answer (base
    # offset of the last batch + 1) is smaller for a partition written in one batch
    lookup = OffsetLookup(bootstrap)
    tps = lookup.topic_partitions([topic])
    assert lookup.latest(tps) == {(topic, p): parts.count(p) for p in range(4)}
    lookup.close()


def test_read_range_stops_at_its_end_and_names_a_missing_topic(bootstrap, topic):
    create(bootstrap, topic, 1)
    produce(bootstrap, topic, _records(50), partitions=1)
    chunks = list(read_range(bootstrap, OffsetRange(topic, 0, 10, 20), batch_size=4))
    assert [m.offset() for chunk in chunks for m in chunk] == list(range(10, 20))
    with pytest.raises(TopicError, match="'no-such-topic'"):
        OffsetLookup(bootstrap).topic_partitions(["no-such-topic"])


def test_plan_start_raises_or_skips_and_counts_on_data_loss():
    assert plan_start(("t", 3), 5, 0, 9, True) == (5, 0)
    with pytest.raises(TopicError) as err:
        plan_start(("t", 3), 5, 12, 20, True)
    assert "topic 't' partition 3" in str(err.value)
    assert "offsets 5 to 11 were deleted" in str(err.value)
    assert plan_start(("t", 3), 5, 12, 20, False) == (12, 7)
    with pytest.raises(TopicError, match="partition ends at offset 2"):
        plan_start(("t", 0), 40, 0, 2, True)
    assert plan_start(("t", 0), 40, 0, 2, False) == (0, 0)


class _Answering:
    """A fake admin client (named as such): answers the cluster gives rarely and cannot give
    on demand. ``answers``: what each ListOffsets call answers for every partition, in turn
    (an offset, or the code of a Kafka error)."""

    def __init__(self, *answers: int | str) -> None:
        self.answers = list(answers)

    def list_offsets(self, requests, **_):
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        answer = self.answers.pop(0)

        class Answer:
            offset = answer

        out = {}
        for tp in requests:
            out[tp] = Future()
            if isinstance(answer, str):
                out[tp].set_exception(KafkaException(KafkaError(getattr(KafkaError, answer))))
            else:
                out[tp].set_result(Answer())
        return out


#: a broker that has just come back answers a ListOffsets with no offset (seen once in the
#: broker-kill test)
_NO_OFFSET = -1001


def test_an_end_offset_the_broker_cannot_give_yet_is_unavailable_not_data_loss():
    """-1001 would read as a partition that ended before the next offset to read (a data loss
    error); it is a broker not ready yet, which the source waits for."""
    from kspark.kafka import KafkaUnreachableError

    lookup = OffsetLookup("nowhere:9092")
    lookup._admin = _Answering(_NO_OFFSET)
    with pytest.raises(KafkaUnreachableError, match=r"topic 'k.clicks' partition 0 .*-1001"):
        lookup.latest([("k.clicks", 0)])


def test_a_partition_without_its_leader_yet_is_waited_for_not_a_topic_error():
    """Right after a topic's creation a broker may answer "not leader for partition" (error
    6, seen when a test read an output topic its app had just made): the cluster cannot serve
    it yet, which a reader to the end waits for; a topic error it is not."""
    from kspark.kafka import KafkaUnreachableError

    lookup = OffsetLookup("nowhere:9092")
    lookup._admin = _Answering("NOT_LEADER_FOR_PARTITION")
    with pytest.raises(KafkaUnreachableError, match=r"partition 0 .*yet.*Not leader"):
        lookup.earliest([("k.out", 0)])
    lookup._admin = _Answering("NOT_LEADER_FOR_PARTITION", _NO_OFFSET, 7)
    assert lookup.when_served(lambda: lookup.latest([("k.out", 0)])) == {("k.out", 0): 7}
    lookup.timeout = 0.0
    lookup._admin = _Answering("NOT_LEADER_FOR_PARTITION", 7)
    with pytest.raises(KafkaUnreachableError):  # no time left to wait
        lookup.when_served(lambda: lookup.latest([("k.out", 0)]))


def test_limit_ranges_shares_the_limit_and_always_progresses():
    avail = {("t", 0): (0, 300), ("t", 1): (10, 110), ("t", 2): (5, 5)}
    ends = limit_ranges(avail, 100)
    assert ends == {("t", 0): 75, ("t", 1): 35, ("t", 2): 5}
    assert limit_ranges(avail, 1000) == {("t", 0): 300, ("t", 1): 110, ("t", 2): 5}
    tiny = limit_ranges({("t", 0): (0, 1000), ("t", 1): (0, 1)}, 1)
    assert tiny == {("t", 0): 1, ("t", 1): 0}  # never stuck, never over the limit
    uneven = limit_ranges({("t", p): (0, 33) for p in range(3)}, 50)
    assert sum(uneven.values()) == 50 and max(uneven.values()) - min(uneven.values()) <= 1


def _config(admin, name):
    resource = ConfigResource(ResourceType.TOPIC, name)
    return {k: v.value for k, v in admin.describe_configs([resource])[resource].result().items()}


def test_ensure_topics_creates_then_verifies(bootstrap, topic):
    compacted = f"{topic}-changelog"
    windowed = {"cleanup.policy": "compact,delete", "retention.ms": "86400000"}
    specs = [TopicSpec(topic, 3), TopicSpec(compacted, 2, {"cleanup.policy": "compact"}),
             TopicSpec(f"{topic}-windowed", 1, windowed)]
    assert sorted(ensure_topics(bootstrap, specs)) == sorted([s.name for s in specs])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(timeout=10).topics
    assert len(meta[topic].partitions) == 3 and len(meta[compacted].partitions) == 2
    assert _config(admin, compacted)["cleanup.policy"] == "compact"
    assert {k: _config(admin, f"{topic}-windowed")[k] for k in windowed} == windowed
    assert ensure_topics(bootstrap, specs) == []  # already there, as needed
    with pytest.raises(TopicError, match=f"'{topic}' .*has 3 partitions; .*needs 5"):
        ensure_topics(bootstrap, [TopicSpec(topic, 5)])
    with pytest.raises(TopicError, match=r"cleanup\.policy=compact"):
        ensure_topics(bootstrap, [TopicSpec(compacted, 2, {"cleanup.policy": "delete"})])
    with pytest.raises(TopicError, match=f"'{topic}-absent'"):
        ensure_topics(bootstrap, [TopicSpec(f"{topic}-absent", 1)], create=False)


def test_topology_topics_lists_outputs_and_compacted_changelogs():
    topology = sessions_topology()
    plan = ExecutionPlan.of(topology, {"clicks": 6, "session-counts": None})
    specs = {s.name: s for s in topology_topics("shop", topology, plan, None)}
    assert specs["session-counts"].partitions == 6 and specs["session-counts"].role == "output"
    assert specs["session-pages"].partitions == 6
    log = specs["shop-session-counts-changelog"]
    # a session store's changelog: compacted, and deleted after retention + 1 day
    retention = sessions_topology().store_builders["session-counts"].params["retention_ms"]
    assert (log.partitions, log.config, log.role) == (
        6, {"cleanup.policy": "compact,delete", "retention.ms": str(retention + 86_400_000)},
        "changelog")
    assert "shop-session-pages-changelog" in specs


def test_broker_stops_cleanly_and_maps_or_writes_its_class_archive():
    broker = EmbeddedBroker().start()
    pid, port = broker.pid, broker.port
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        arguments = f.read().decode().split("\0")
    (option,) = [a for a in arguments
                 if a.startswith(("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit="))]
    path = Path(option.split("=", 1)[1])
    assert path.parent == cache_dir() / "jvm" and path.name.startswith("kafka-broker-")
    if option.startswith("-XX:SharedArchiveFile="):
        with open(f"/proc/{pid}/maps") as f:
            assert str(path) in f.read()  # Java took it (it ignores one it cannot use)
    broker.stop()
    with pytest.raises(OSError):
        os.kill(pid, 0)  # reaped
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    if option.startswith("-XX:ArchiveClassesAtExit="):  # written whole as it stopped (unless
        # another start has made it the archive since)
        archive = path.parent / f"{path.name.split('.')[0]}.jsa"
        assert archive.exists() or path.read_bytes()[:4] == MAGIC


def test_kspark_broker_command_prints_its_address_and_stops_on_ctrl_c(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "kspark.cli", "broker", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        address = None
        for line in proc.stdout:
            found = re.search(r"bootstrap servers (127\.0\.0\.1:\d+)", line)
            if found:
                address = found.group(1)
                break
        assert address is not None
        create(address, "cli-topic", 2)
        produce(address, "cli-topic", _records(10), partitions=2)
        assert len(consume(address, "cli-topic")) == 10
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0  # the command gives the broker 30 s, then kills it
        host, port = address.split(":")
        with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=1):
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
