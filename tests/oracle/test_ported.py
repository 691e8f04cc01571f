"""Kafka Streams' own unit tests, ported: their input sequences (``ported_cases.py``,
``ported_join_cases.py``, ``ported_dsl_cases.py``) run through Kafka Streams 4.3.1's
``TopologyTestDriver`` (the oracle) and kspark's, compared as ``test_differential.py`` compares
its random cases (records in order, stores, changelogs where a case asks for them, topology
descriptions). One batched oracle call per shape; a failure names the Kafka Streams test each
differing case came from.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from comparison import difference, to_oracle
from kspark_side import run as run_kspark
from ported_cases import CASES
from ported_dsl_cases import DSL_CASES
from ported_join_cases import JOIN_CASES

from oracle import OracleCaseError

ALL = CASES + JOIN_CASES + DSL_CASES
JOINS = {"stream_join", "stream_table_join", "global_join", "table_join", "fk_join"}
BY_SHAPE: dict[str, list[dict]] = defaultdict(list)
for _case in ALL:
    BY_SHAPE[_case["shape"]].append(_case)


def without_source(case: dict) -> dict:
    """``case`` as both sides run it: its description, and the changelogs of an aggregation's
    or table's stores (a join case asks for its own), except where an aggregation emitting on
    window close keeps its cache (README "Deviations": kspark's changelog then gets one change
    per key and commit)."""
    p = case["params"]
    on_close_cache = p.get("emit") == "close" and p.get("caching", True)
    changelogs = case.get("changelogs", not on_close_cache and case["shape"] not in JOINS)
    return ({k: v for k, v in case.items() if k != "source"}
            | {"describe": True, "changelogs": changelogs})


@pytest.mark.parametrize("shape", sorted(BY_SHAPE))
def test_ported_kafka_streams_tests_agree(kafka_streams, shape: str) -> None:
    cases = [without_source(c) for c in BY_SHAPE[shape]]
    answers = kafka_streams.run_many([to_oracle(c) for c in cases])
    failures = []
    for ported, case, kafka in zip(BY_SHAPE[shape], cases, answers, strict=True):
        if isinstance(kafka, OracleCaseError):
            failures.append(f"{ported['source']}: the oracle refused the case: {kafka}")
            continue
        report = difference(case, kafka, run_kspark(case))
        if report is not None:
            failures.append(f"ported from Kafka Streams' {ported['source']}:\n{report}")
    assert not failures, (f"{len(failures)} of {len(cases)} ported {shape} cases differ\n\n"
                          + "\n\n".join(failures))


def test_every_ported_case_names_its_source() -> None:
    """Each case names a Kafka Streams test class and method; every join and aggregation
    shape the tests cover has cases."""
    for case in ALL:
        cls, _, method = case["source"].partition(".")
        assert cls.endswith("Test") and method, case["source"]
    assert {"session", "time_window", "sliding", "stream_aggregate", "table_aggregate",
            "table_ops", "stream_join", "stream_table_join", "global_join", "table_join",
            "fk_join", "cogroup", "branch", "repartition"} <= set(BY_SHAPE)
