"""Wall-clock punctuation fires on Spark while no input arrives (a tick source keeps
micro-batches running), and idle closing emits a quiet stream's last session."""

from __future__ import annotations

import itertools
import os
import time

import pytest

from kspark import (
    EmitStrategy,
    Materialized,
    Processor,
    PunctuationType,
    Record,
    SessionWindows,
    StreamsBuilder,
    Topology,
    io,
    serdes,
)
from kspark.spark import StreamsApp

pytestmark = pytest.mark.spark
S = serdes.String()
INTERVAL_MS = 4_000  # a micro-batch costs about 1.7 s on this machine


class Heartbeat(Processor):
    def init(self, context):
        self.context = context
        context.schedule(INTERVAL_MS, PunctuationType.WALL_CLOCK_TIME, self.beat)

    def beat(self, now):
        self.context.forward(Record("beat", str(now), now))

    def process(self, record):
        pass


def test_wall_clock_punctuator_fires_every_interval_while_idle(spark, app_dir):
    topo = Topology().add_source("src", "in", S, S).add_processor("beat", Heartbeat, "src")
    topo.add_sink("out", "beats", "beat", key_serde=S, value_serde=S)
    src, beats = io.memory(S, S), io.memory(S, S)
    src.send_all([("k", "v", 1)])
    app = StreamsApp(topo, "heartbeat", {"in": src, "beats": beats}, spark=spark,
                     config={"spark.kspark.tick.ms": 500},
                     checkpoint_dir=os.path.join(app_dir, "hb"))
    app.start()
    try:
        app.process_all_available()
        idle_from = time.time() * 1000
        time.sleep(3 * INTERVAL_MS / 1000 + 1.5)
        idle_to = time.time() * 1000
    finally:
        app.stop()
    fires = sorted(int(v) for _, v, _ in beats.records())
    assert app.metrics()["process-total"] == 1  # no input arrived while idle
    idle_fires = [f for f in fires if idle_from <= f <= idle_to]
    assert len(idle_fires) >= 3, (fires, idle_from, idle_to)
    # one fire per interval; a fire waits for the next micro-batch, so allow half an interval
    gaps = [b - a for a, b in itertools.pairwise(idle_fires)]
    assert all(g <= INTERVAL_MS * 1.5 for g in gaps), (gaps, idle_fires)


def test_idle_closing_emits_the_last_session_on_spark(spark, app_dir):
    b = StreamsBuilder()
    (b.stream("clicks", S, S).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5_000, 0))
     .emit_strategy(EmitStrategy.on_window_close())
     .count(Materialized("sessions"))
     .to_stream().to("out", serdes.SessionWindowed(S), serdes.Long()))
    src, out = io.memory(S, S), io.memory(serdes.SessionWindowed(S), serdes.Long())
    src.send_all([("u", "a", 1_000), ("u", "b", 3_000)])
    app = StreamsApp(b.build(), "idle-close", {"clicks": src, "out": out}, spark=spark,
                     config={"window.close.on.idle.ms": 1_000, "spark.kspark.tick.ms": 500},
                     checkpoint_dir=os.path.join(app_dir, "idle"))
    app.start()
    try:
        app.process_all_available()
        deadline = time.time() + 60
        while not out.records() and time.time() < deadline:
            time.sleep(0.3)
    finally:
        app.stop()
    records = out.records()
    assert [(k.key, k.window.start, k.window.end, v) for k, v, _ in records] == [
        ("u", 1_000, 3_000, 2)]


def test_process_all_available_with_ticks_waits_for_every_file(spark, app_dir, tmp_path):
    # ticks always bring new input, so waiting means: a micro-batch planned after the call left
    # the file source (one file a micro-batch, read in the stages) nothing to read
    topo = Topology().add_source("src", "in", S, S).add_processor("beat", Heartbeat, "src")
    topo.add_sink("out", "beats", "beat", key_serde=S, value_serde=S)
    topo.add_sink("copy", "copies", "src", key_serde=S, value_serde=S)
    files = io.files(str(tmp_path / "in"), format="kspark", max_files_per_trigger=1)
    for n in range(4):
        files.write_batch(n, [(S.serialize(f"k{n}"), S.serialize(f"v{n}"), 1_000 + n, 0)])
    copies = io.memory(S, S)
    app = StreamsApp(topo, "ticks-files", {"in": files, "beats": io.memory(S, S),
                                           "copies": copies}, spark=spark,
                     config={"spark.kspark.tick.ms": 500},
                     checkpoint_dir=os.path.join(app_dir, "ticks-files"))
    app.start()
    try:
        app.process_all_available()
        copied = sorted(k for k, _, _ in copies.records())
    finally:
        app.stop()
    assert copied == ["k0", "k1", "k2", "k3"]
