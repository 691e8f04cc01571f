"""KTable.transform_values: Kafka Streams' KTableTransformValues (deletes go through the
transformer, a store only when materialized by name, lookups through a transformer of their
own, old values, state stores, no forwarding)."""

from __future__ import annotations

from typing import Any

import pytest
from dsl_util import record_from

from kspark import serdes
from kspark.dsl import Materialized, StreamsBuilder
from kspark.errors import StreamsError, TopologyError
from kspark.processor import ValueTransformerWithKey
from kspark.records import Change
from kspark.state import Stores
from kspark.testing import TopologyTestDriver

S = serdes.String()
L = serdes.Long()


class Tagged(ValueTransformerWithKey):
    """A deleted row of key ``a`` becomes -1 (so deletes reach the transformer); a value
    divisible by 3 deletes the row; others get 100 added."""

    def transform(self, key: Any, value: Any) -> Any:
        if value is None:
            return -1 if key == "a" else None
        return None if value % 3 == 0 else value + 100


def _changes(updates: list[tuple[str, int | None, int]], materialized: Any = None,
             old_values: bool = True) -> tuple[list[Any], list[Any]]:
    builder = StreamsBuilder()
    table = builder.table("in", S, L)
    result = table.transform_values(Tagged, materialized=materialized)
    changes = record_from(builder, result) if old_values else []
    result.to_stream().to("out", S, L)
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, L)
        for key, value, ts in updates:
            inp.pipe_input(key, value, ts)
        out = driver.create_output_topic("out", S, L).read_key_values_to_list()
        store = (driver.get_key_value_store(materialized.name).all()
                 if isinstance(materialized, Materialized) and materialized.name else None)
    return [(k, c) for k, c, _ in changes] or out, [out, store]


UPDATES = [("a", 1, 10), ("b", 2, 11), ("a", 3, 12), ("a", None, 13), ("b", None, 14)]


def test_deletes_go_through_the_transformer():
    _, (out, _) = _changes(UPDATES, old_values=False)
    # a's delete becomes -1 (a value), b's stays a delete; 3 deletes a
    assert out == [("a", 101), ("b", 102), ("a", None), ("a", -1), ("b", None)]


def test_old_values_through_the_transformer_without_a_store():
    changes, _ = _changes(UPDATES)
    assert changes == [("a", Change(101, -1)), ("b", Change(102, None)),
                       ("a", Change(None, 101)), ("a", Change(-1, None)),
                       ("b", Change(None, 102))]


@pytest.mark.parametrize("caching", [False, True], ids=["uncached", "cached"])
def test_materialized_by_name_keeps_the_results_and_reads_old_values_from_it(caching):
    changes, (_, store) = _changes(UPDATES, Materialized("t", caching=caching))
    assert store == [("a", -1)]
    assert changes == [("a", Change(101, None)), ("b", Change(102, None)),
                       ("a", Change(None, 101)), ("a", Change(-1, None)),
                       ("b", Change(None, 102))]


def test_an_unnamed_materialized_keeps_no_store_and_takes_no_store_index():
    builder = StreamsBuilder()
    table = builder.table("in", S, L)
    table.transform_values(Tagged, materialized=Materialized(value_serde=L)).to_stream().to("o")
    description = str(builder.build().describe())
    assert "KTABLE-TRANSFORMVALUES-0000000003" in description
    assert "KTABLE-TOSTREAM-0000000004" in description
    assert "Processor: KTABLE-TRANSFORMVALUES-0000000003 (stores: [])" in description


def test_named_takes_the_generated_index_all_the_same():
    builder = StreamsBuilder()
    builder.table("in", S, L).transform_values(Tagged, name="tv").to_stream().to("o")
    description = str(builder.build().describe())
    assert "Processor: tv (stores: [])" in description
    assert "KTABLE-TOSTREAM-0000000004" in description


class Counting(ValueTransformerWithKey):
    """The value and how many updates its key has had (in the connected store "counts")."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.counts = context.get_state_store("counts")

    def transform(self, key: Any, value: Any) -> Any:
        seen = (self.counts.get(key) or 0) + 1
        self.counts.put(key, seen)
        return None if value is None else f"{value}#{seen}"


def test_the_transformer_uses_a_connected_store():
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store("counts", key_serde=S, value_serde=L))
    (builder.table("in", S, S).transform_values(Counting, "counts")
     .to_stream().to("out", S, S))
    with TopologyTestDriver(builder.build()) as driver:
        inp = driver.create_input_topic("in", S, S)
        for key, value in [("a", "x"), ("b", "y"), ("a", "z"), ("a", None)]:
            inp.pipe_input(key, value)
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("a", "x#1"), ("b", "y#1"), ("a", "z#2"), ("a", None)]
        assert sorted(driver.get_key_value_store("counts").all()) == [("a", 3), ("b", 1)]


def test_a_stream_table_join_looks_up_through_a_transformer():
    builder = StreamsBuilder()
    table = builder.table("t", S, L).transform_values(Tagged)
    (builder.stream("s", S, S).left_join(table, lambda v, t: f"{v}:{t}")
     .to("out", S, S))
    with TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("t", S, L).pipe_input("b", 5, 1)
        clicks = driver.create_input_topic("s", S, S)
        for key in ("a", "b", "c"):
            clicks.pipe_input(key, "v", 2)
        # a is absent from the table: its lookup goes through the transformer all the same
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("a", "v:-1"), ("b", "v:105"), ("c", "v:None")]


class Forwarding(ValueTransformerWithKey):
    def transform(self, key: Any, value: Any) -> Any:
        self.context.forward(None)


def test_forwarding_from_a_transformer_is_refused_naming_the_processor():
    builder = StreamsBuilder()
    builder.table("in", S, L).transform_values(Forwarding, name="fwd").to_stream().to("o")
    with (TopologyTestDriver(builder.build()) as driver,
          pytest.raises(Exception, match=r"fwd.*cannot forward")):
        driver.create_input_topic("in", S, L).pipe_input("a", 1)


def test_an_instance_instead_of_a_supplier_is_refused():
    builder = StreamsBuilder()
    with pytest.raises(TopologyError, match="supplier of ValueTransformerWithKey"):
        builder.table("in", S, L).transform_values(Tagged())


class Failing(ValueTransformerWithKey):
    def transform(self, key: Any, value: Any) -> Any:
        raise LookupError(f"no tier for {key}")


def test_a_failing_transformer_stops_the_task_with_its_error_as_the_cause():
    builder = StreamsBuilder()
    builder.table("in", S, L).transform_values(Failing, name="tier").to_stream().to("o")
    with (TopologyTestDriver(builder.build()) as driver,
          pytest.raises(StreamsError) as caught):
        driver.create_input_topic("in", S, L).pipe_input("a", 1)
    first = str(caught.value).splitlines()[0]
    assert "'tier'" in first and "topic 'in' partition 0 offset 0 key 'a'" in first
    # kept as the cause in the compiled core too (where ``raise ... from`` does not set it)
    assert isinstance(caught.value.__cause__, LookupError)
