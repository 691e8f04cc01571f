"""The vectorised batch path of session aggregations against the record-by-record path: on random
input (out-of-order, late, merging, duplicate timestamps, null keys and values) split into random
batches, both give identical forwarded records, store buckets, persisted task state and
counters."""

from __future__ import annotations

import logging
import os
import pickle
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_lines import aborts, drop_details

from kspark import EmitStrategy, Materialized, SessionWindows, StreamsBuilder, serdes
from kspark.config import StreamsConfig
from kspark.runtime.batch import DictTaskState, run_task_batch
from kspark.runtime.task import SourceBatch, SourceRecord, output_records

S = serdes.String()
J = serdes.Json()


@pytest.fixture(autouse=True)
def _quiet():
    drops = logging.getLogger("kspark.task")  # a warning per batch with dropped records
    level = drops.level
    drops.setLevel(logging.ERROR)
    yield
    drops.setLevel(level)


def topology(gap: int, grace: int, on_close: bool, caching: bool, kind: str,
             retention: int | None = None):
    b = StreamsBuilder()
    grouped = b.stream("in", S, J).group_by_key(S, J)
    windowed = grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace))
    if on_close:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    m = Materialized("agg-store", caching=caching, retention=retention)
    if kind == "count":
        table = windowed.count(m)
        out_serde = serdes.Long()
    else:
        table = windowed.aggregate(
            lambda: [], lambda k, v, agg: [*agg, v], lambda k, a, b2: a + b2, m
        )
        out_serde = J
    table.to_stream().to("out", serdes.SessionWindowed(S), out_serde)
    return b.build()


def state_of(state: DictTaskState) -> tuple:
    """The task's meta and buckets; of the stores' sizes, the entries (the paths may pickle
    equal data to other bytes)."""
    meta = pickle.loads(state.meta) if state.meta else None
    if meta is not None:
        meta["store_sizes"] = {store: {bucket: entries for bucket, (entries, _) in sizes.items()}
                               for store, sizes in meta["store_sizes"].items()}
    buckets = {k: pickle.loads(v) for k, v in state.buckets.items()}
    return meta, buckets


def run(topo, batches, fast: bool, logged: bool = False, most: int | None = None):
    """Outputs, counters, final state, records handled by a fast path, and the fast path's
    aborts (each batch that had to run again record by record); with ``most``, each batch
    runs at most that many records at a time (``task.batch.max.records``)."""
    config = StreamsConfig.of({"task.batch.max.records": most}, application_id="fast-test")
    sub = topo.sub_topologies()[0]
    state = DictTaskState()
    outputs, counters, used = [], [], 0
    with aborts() as aborted:
        for batch in batches:
            result = run_task_batch(topo, sub, 0, SourceBatch.from_records(batch), state,
                                    config, wall_clock=lambda: 0, fast_path=fast,
                                    changelog_stores=None if logged else ())
            outputs.append([(o.topic, o.key, o.value, o.timestamp, o.headers)
                            for o in result.output])
            outputs.append(result.changelog)
            counters.append(dict(result.metrics.counters))
            used += result.fast_records
    return outputs, counters, state_of(state), used, aborted.messages


records_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d", None]),
        st.one_of(st.integers(0, 9), st.none()),
        st.integers(0, 400),
    ),
    min_size=1,
    max_size=120,
)


def input_batches(steps, cuts, gap: int, drift: int) -> list[list[SourceRecord]]:
    """Records of ``steps`` (key, value, jitter) in time mostly increasing by ``drift`` with
    jitter (so that both paths get exercised), cut into batches at ``cuts``."""
    recs, now = [], 0
    for i, (key, value, jitter) in enumerate(steps):
        now += drift
        ts = max(0, now - jitter % (gap * 3 + 1)) if jitter % 4 == 0 else now + jitter % 7
        recs.append(SourceRecord("in", 0, i, ts, None if key is None else S.serialize(key),
                                 None if value is None else J.serialize(value)))
    bounds = sorted({c for c in cuts if c < len(recs)})
    return [recs[a:b] for a, b in zip([0, *bounds], [*bounds, len(recs)])]


def examples(default: int) -> int:
    """Hypothesis examples: ``default`` in CI, more with ``KSPARK_EXAMPLES`` set."""
    return int(os.environ.get("KSPARK_EXAMPLES", default))


@settings(max_examples=examples(400), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=records_strategy,
    cuts=st.lists(st.integers(1, 120), max_size=5),
    gap=st.integers(1, 40),
    grace=st.integers(0, 40),
    on_close=st.booleans(),
    caching=st.booleans(),
    kind=st.sampled_from(["count", "list"]),
    drift=st.integers(0, 6),
    logged=st.booleans(),
    most=st.one_of(st.none(), st.integers(1, 50)),
)
def test_fast_path_equals_record_path(steps, cuts, gap, grace, on_close, caching, kind, drift,
                                      logged, most):
    # with ``most``, both paths run each batch in slices, each slice a commit
    batches = input_batches(steps, cuts, gap, drift)
    topo = topology(gap, grace, on_close, caching, kind)
    fast = run(topo, batches, True, logged, most)
    exact = run(topo, batches, False, logged, most)
    assert exact[3] == 0
    assert fast[4] == []  # declining a batch is fine; failing half-way through is a bug
    assert fast[0] == exact[0]
    assert fast[1] == exact[1]
    assert fast[2] == exact[2]


def test_fast_path_is_used_on_ordered_input():
    recs = [SourceRecord("in", 0, i, 1000 * (i // 3) + (i % 3), S.serialize(f"k{i % 5}"),
                         J.serialize(1)) for i in range(300)]
    topo = topology(5_000, 1_000, True, True, "count")
    fast = run(topo, [recs[:150], recs[150:]], True)
    exact = run(topo, [recs[:150], recs[150:]], False)
    assert fast[3] > 250
    assert fast[:3] == exact[:3]


def test_fast_path_with_a_captured_changelog_logs_what_the_record_path_logs():
    # sessions grow record by record within a batch: the cache flushes the final window, and a
    # tombstone for each window it replaced (with on_window_close; emitting updates, the cache
    # has a flush listener and, as Kafka Streams' cache, logs nothing for a window made and
    # replaced within the batch), as the record-by-record path does
    recs = [SourceRecord("in", 0, i, 1000 * (i // 3) + (i % 3), S.serialize(f"k{i % 5}"),
                         J.serialize(1)) for i in range(300)]
    for on_close in (True, False):
        topo = topology(5_000, 1_000, on_close, True, "count")
        fast = run(topo, [recs[:150], recs[150:]], True, logged=True)
        exact = run(topo, [recs[:150], recs[150:]], False, logged=True)
        assert fast[3] > 250
        changelogs = [o for o in exact[0] if isinstance(o, dict)]
        assert sum(len(c["agg-store"]) for c in changelogs) > (100 if on_close else 10)
        tombstones = [e for c in changelogs for e in c["agg-store"].rows() if e[1] is None]
        assert tombstones
        assert fast[:3] == exact[:3]


def test_user_function_failure_reports_like_the_record_path():
    b = StreamsBuilder()
    windowed = b.stream("in", S, J).group_by_key(S, J).windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(10, 5)
    )

    def agg(key, value, total):
        if value == 13:
            raise ValueError("unlucky")
        return total + value

    windowed.aggregate(lambda: 0, agg, lambda k, a, b2: a + b2).to_stream().to(
        "out", serdes.SessionWindowed(S), J
    )
    topo = b.build()
    recs = [SourceRecord("in", 0, i, i, S.serialize("k"), J.serialize(13 if i == 7 else 1))
            for i in range(20)]
    messages = []
    for fast in (True, False):
        with pytest.raises(Exception) as info:
            run(topo, [recs], fast)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "offset 7" in messages[0]


def test_a_fast_path_abort_is_a_warning_once_per_cause(caplog):
    """A batch whose fast path fails (a user function raising) runs again record by record;
    the first such abort of a cause is a warning naming it, later ones are DEBUG lines."""

    class Unlucky(Exception):
        pass

    def agg(key, value, total):
        if value == 13:
            raise Unlucky("thirteen")
        return total + value

    b = StreamsBuilder()
    (b.stream("in", S, J).group_by_key(S, J)
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5))
     .aggregate(lambda: 0, agg, lambda k, a, b2: a + b2).to_stream()
     .to("out", serdes.SessionWindowed(S), J))
    topo = b.build()
    recs = [SourceRecord("in", 0, i, i, S.serialize("k"), J.serialize(13 if i == 7 else 1))
            for i in range(20)]
    caplog.set_level(logging.DEBUG, logger="kspark.runtime")
    levels = []
    for _ in range(2):
        caplog.clear()
        with pytest.raises(Exception, match="thirteen"):
            run(topo, [recs], True)
        aborts = [r for r in caplog.records if "runs again record by record" in r.getMessage()]
        assert len(aborts) == 1
        assert "Unlucky: thirteen" in aborts[0].getMessage()
        assert "batch of 20 records" in aborts[0].getMessage()
        levels.append(aborts[0].levelno)
    assert levels == [logging.WARNING, logging.DEBUG]


def test_source_batch_round_trip():
    recs = [SourceRecord("a" if i % 3 else "b", i % 2, i, 100 - i, b"k", None) for i in range(7)]
    batch = SourceBatch.from_records(recs)
    assert batch.topic is None
    assert list(batch.records()) == recs
    single = SourceBatch.from_records([r for r in recs if r.topic == "a"])
    assert single.topic == "a"
    assert list(single.records()) == [r for r in recs if r.topic == "a"]


def per_topic(outputs):
    """Each batch's output records by topic (the order within a topic is what Kafka keeps),
    and its changelogs."""
    out = []
    for item in outputs:
        if isinstance(item, dict):
            out.append(item)
        else:
            by_topic = {}
            for rec in item:
                by_topic.setdefault(rec[0], []).append(rec)
            out.append(by_topic)
    return out


@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=records_strategy,
    cuts=st.lists(st.integers(1, 120), max_size=4),
    on_close=st.booleans(),
    logged=st.booleans(),
    most=st.one_of(st.none(), st.integers(1, 50)),
)
def test_two_aggregations_of_one_stream_equal_the_record_path(steps, cuts, on_close, logged,
                                                               most):
    # the main job's shape: a session count and a session aggregate on the same grouped stream
    from kspark.examples import sessions

    recs, now = [], 0
    for i, (key, value, jitter) in enumerate(steps):
        now += 700 * (jitter % 5)
        ts = max(0, now - 1000 * (jitter % 30)) if jitter % 6 == 0 else now
        page = None if value is None else {"page": f"/p{value}"}
        recs.append(SourceRecord("clicks", 0, i, ts, None if key is None else S.serialize(key),
                                 None if page is None else J.serialize(page)))
    bounds = sorted({c for c in cuts if c < len(recs)})
    batches = [recs[a:b] for a, b in zip([0, *bounds], [*bounds, len(recs)])]
    topo = sessions.topology(emit_on_close=on_close)
    fast = run(topo, batches, True, logged, most)
    exact = run(topo, batches, False, logged, most)
    assert fast[4] == []
    assert per_topic(fast[0]) == per_topic(exact[0])
    assert fast[1] == exact[1]
    assert fast[2] == exact[2]


def test_two_aggregations_take_the_fast_path():
    from kspark.examples import sessions

    recs = [SourceRecord("clicks", 0, i, 1000 * (i // 3) + (i % 3), S.serialize(f"k{i % 5}"),
                         J.serialize({"page": "/"})) for i in range(300)]
    topo = sessions.topology()
    fast = run(topo, [recs[:150], recs[150:]], True, logged=True)
    exact = run(topo, [recs[:150], recs[150:]], False, logged=True)
    assert fast[3] > 250
    assert per_topic(fast[0]) == per_topic(exact[0])
    assert fast[1:3] == exact[1:3]


def test_decoded_values_are_fresh_objects_per_record():
    from kspark.runtime.decoding import decode_column

    raw = np.array([J.serialize({"page": "/"}), J.serialize({"page": "/"}),
                    J.serialize(["a", 1]), J.serialize({"nested": {"x": 1}}), None], dtype=object)
    column = decode_column(raw, J, dedupe=False)
    first, second = column.value(0), column.value(1)
    assert first == second == {"page": "/"} and first is not second
    first["page"] = "changed"  # an aggregator that mutates its value changes no other record
    assert column.value(1) == {"page": "/"}
    assert column.value(2) == ["a", 1] and column.value(2) is not column.value(2)
    nested = column.value(3)
    nested["nested"]["x"] = 2
    assert column.value(3) == {"nested": {"x": 1}}
    assert column.value(4) is None


def late_inside_sessions(rnd, gap: int, grace: int, continued: bool) -> list[SourceRecord]:
    """Sessions of three keys, each key's clicks in time order, and for some sessions a record
    with a timestamp inside the session arriving well after it (closed, expired, or still in
    grace as other keys' clicks have moved stream time on); ``continued``: some sessions then
    get one more click within the gap, after the late one."""
    events = []
    for key in "abc":
        t = rnd.randrange(0, 50)
        for _ in range(rnd.randrange(3, 7)):
            stamps = [t]
            for _ in range(rnd.randrange(1, 5)):
                stamps.append(stamps[-1] + rnd.randrange(1, gap))
            events += [(ts, ts, key) for ts in stamps]
            if stamps[-1] - stamps[0] > 1 and rnd.random() < 0.7:
                inside = rnd.randrange(stamps[0] + 1, stamps[-1])
                arrival = stamps[-1] + rnd.randrange(0, 3 * (gap + grace))
                events.append((arrival, inside, key))
                if continued and rnd.random() < 0.5:
                    stamps.append(stamps[-1] + rnd.randrange(1, gap))
                    events.append((max(arrival + 1, stamps[-1]), stamps[-1], key))
            t = stamps[-1] + gap + rnd.randrange(1, 4 * gap)
    events.sort(key=lambda e: e[0])
    return [SourceRecord("in", 0, i, ts, S.serialize(key), J.serialize(i))
            for i, (_, ts, key) in enumerate(events)]


def run_logging_drops(topo, batches, fast: bool, logged: bool):
    """:func:`run`'s results and the details of the records dropped, in sorted order."""
    with drop_details() as drops:
        result = run(topo, batches, fast, logged)
    return (*result, sorted(drops.messages))


@settings(max_examples=examples(200), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    cuts=st.lists(st.integers(1, 80), max_size=3),
    on_close=st.booleans(),
    caching=st.booleans(),
    kind=st.sampled_from(["count", "list"]),
    logged=st.booleans(),
    continued=st.booleans(),
    retention=st.sampled_from([None, 400]),
)
def test_late_records_inside_their_sessions_stay_on_the_fast_path(seed, cuts, on_close, caching,
                                                                 kind, logged, continued,
                                                                 retention):
    # the clickstream's late clicks: each is dropped by its session's cluster, not replayed
    # (with the default retention a closed session has expired; with more it is still found)
    gap, grace = 100, 50
    recs = late_inside_sessions(random.Random(seed), gap, grace, continued)
    topo = topology(gap, grace, on_close, caching, kind, retention)
    whole = run_logging_drops(topo, [recs], True, logged)
    exact = run_logging_drops(topo, [recs], False, logged)
    assert whole[:3] == exact[:3]
    assert whole[4] == []
    assert whole[5] == exact[5]  # the same records dropped, with the same windows and clocks
    # without a cache, emitting every update or logging every write goes record by record
    if not continued:
        batched = (on_close or caching) and (caching or not logged)
        assert whole[3] == (len(recs) if batched else 0)
    bounds = sorted({c for c in cuts if c < len(recs)})
    batches = [recs[a:b] for a, b in zip([0, *bounds], [*bounds, len(recs)])]
    assert run(topo, batches, True, logged)[:3] == run(topo, batches, False, logged)[:3]


@pytest.mark.parametrize("stored", [False, True])
def test_sessions_closed_together_are_forwarded_in_key_order(stored):
    """Sessions of several keys with the same window, closed by one record, are forwarded by
    key (as the record path's pending closes order them), whatever order the keys came in; with
    ``stored``, the sessions come from the store rather than from the batch."""
    keys = ["d", "b", "e", "a", "c"]
    first = [SourceRecord("in", 0, i, 100, S.serialize(k), J.serialize(1))
             for i, k in enumerate(keys)]
    later = [SourceRecord("in", 0, len(keys) + i, 100 + i, S.serialize("z"), J.serialize(1))
             for i in range(3)] + [SourceRecord("in", 0, 99, 10_000, S.serialize("y"),
                                                J.serialize(1))]
    batches = [first, later] if stored else [first + later]
    topo = topology(50, 10, True, True, "count")
    fast = run(topo, batches, True)
    exact = run(topo, batches, False)
    assert fast[3] == len(first) + len(later)
    assert fast[:3] == exact[:3]
    forwarded = [S.deserialize(key[:-16]) for _, key, _, _, _ in fast[0][-2]]
    assert forwarded == ["a", "b", "c", "d", "e", "z"]


def deleting_topology(gap: int, grace: int, on_close: bool, caching: bool, none_on: int):
    """A list aggregation whose aggregator returns None on ``none_on`` (deleting the session)
    and whose merger returns None on a stored session of two records."""
    b = StreamsBuilder()
    windowed = b.stream("in", S, J).group_by_key(S, J).windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(gap, grace))
    if on_close:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    (windowed.aggregate(lambda: [], lambda k, v, agg: None if v == none_on else [*(agg or []), v],
                        lambda k, a, b2: None if len(b2) == 2 else [*(a or []), *b2],
                        Materialized("agg-store", caching=caching))
     .to_stream().to("out", serdes.SessionWindowed(S), J))
    return b.build()


@settings(max_examples=examples(100), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3),
                                 st.integers(0, 400)), min_size=5, max_size=60),
       cuts=st.lists(st.integers(1, 60), max_size=3),
       gap=st.integers(1, 20), grace=st.integers(0, 20), on_close=st.booleans(),
       caching=st.booleans(), none_on=st.integers(0, 3), drift=st.integers(0, 6),
       most=st.one_of(st.none(), st.integers(1, 30)))
def test_fast_path_equals_record_path_when_functions_return_none(steps, cuts, gap, grace,
                                                                on_close, caching, none_on,
                                                                drift, most):
    """An aggregator returning None deletes its session on the record path (Kafka Streams puts
    the null); the batch path, which does not model that, goes record by record instead of
    keeping a session without an aggregate (a later batch then handed ``None`` to the merger
    and failed)."""
    batches = input_batches(steps, cuts, gap, drift)
    topo = deleting_topology(gap, grace, on_close, caching, none_on)
    fast, exact = run(topo, batches, True, most=most), run(topo, batches, False, most=most)
    assert fast[:3] == exact[:3]


class TakenSlices:
    """A slice output that takes every record of each slice (as a stage's sinks would write
    them) and keeps what it took, until the batch restarts."""

    def __init__(self) -> None:
        self.taken: list = []
        self.restarts = 0

    def write(self, output, changelog):
        self.taken.extend((o.topic, o.key, o.value, o.timestamp) for o in output_records(output))
        return [], changelog

    def restart(self):
        self.taken, self.restarts = [], self.restarts + 1


def test_a_fast_path_abort_in_a_later_slice_restarts_what_the_slices_gave_away():
    """Slices of 5: the aggregator fails once, in the batch path of the fourth slice. The
    batch runs again record by record from its durable state, in the same slices, and the
    slice output forgets what the first three gave it: what it took and the batch's result
    are then the record path's, once."""
    failed = []

    def agg(key, value, total):
        if value == 13 and not failed:
            failed.append(key)
            raise ValueError("once")
        return total + value

    b = StreamsBuilder()
    (b.stream("in", S, J).group_by_key(S, J)
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(150, 50))
     .aggregate(lambda: 0, agg, lambda k, a, b2: a + b2, Materialized("sums")).to_stream()
     .to("out", serdes.SessionWindowed(S), J))
    topo = b.build()
    values = [1] * 17 + [13] + [1] * 4
    recs = [SourceRecord("in", 0, i, 100 * i + 1000 * (i // 6), S.serialize("ab"[i % 2]),
                         J.serialize(v)) for i, v in enumerate(values)]
    config = StreamsConfig.of({"task.batch.max.records": 5}, application_id="fast-test")
    sub = topo.sub_topologies()[0]

    def batch(fast, sliced):
        return run_task_batch(topo, sub, 0, SourceBatch.from_records(recs), DictTaskState(),
                              config, wall_clock=lambda: 0, fast_path=fast, sliced=sliced)

    taken = TakenSlices()
    with aborts() as aborted:
        result = batch(True, taken)
    assert taken.restarts == 1 and len(aborted.messages) == 1
    exact = batch(False, None)
    out = [(o.topic, o.key, o.value, o.timestamp) for o in result.output]
    assert taken.taken + out == [(o.topic, o.key, o.value, o.timestamp) for o in exact.output]
    assert len(taken.taken) > 0 and result.fast_records == 0


@pytest.mark.parametrize("kind", ["count", "list"])
def test_slices_of_one_record_commit_as_the_driver_does_after_every_record(kind):
    """Each slice is a commit: with slices of one record, a cached aggregation emitting every
    update forwards what the test driver forwards (it commits after every record), not the
    combined updates of the whole batch."""
    from kspark import TopologyTestDriver

    steps = [("a", 1, 0), ("b", 2, 3), ("a", 3, 8), ("a", 4, 0), ("b", 5, 1), ("c", 6, 4)]
    recs = input_batches(steps, [], 10, 3)[0]
    topo = topology(10, 5, False, True, kind)
    out_serde = serdes.Long() if kind == "count" else J
    with TopologyTestDriver(topo) as driver:
        for rec in recs:
            driver.pipe_raw("in", rec.key, rec.value, rec.timestamp)
        expected = [(r.key, r.value, r.timestamp) for r in driver.create_output_topic(
            "out", serdes.SessionWindowed(S), out_serde).read_records_to_list()]

    def forwarded(most):
        records = run(topo, [recs], True, most=most)[0][0]
        return [(serdes.SessionWindowed(S).deserialize(k), None if v is None
                 else out_serde.deserialize(v), ts) for _, k, v, ts, _ in records]

    assert forwarded(1) == expected
    assert len(forwarded(None)) < len(expected)  # one commit: the updates combined
