"""Opt-in idle closing (``window.close.on.idle.ms``): a quiet stream's last windows close."""

from __future__ import annotations

from kspark import (
    EmitStrategy,
    Materialized,
    SessionWindows,
    StreamsBuilder,
    TopologyTestDriver,
    serdes,
)

S = serdes.String()


def _topology():
    b = StreamsBuilder()
    (b.stream("clicks", S, S).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5_000, 1_000))
     .emit_strategy(EmitStrategy.on_window_close())
     .count(Materialized("sessions"))
     .to_stream().to("out", serdes.SessionWindowed(S), serdes.Long()))
    return b.build()


def _run(config):
    driver = TopologyTestDriver(_topology(), config=config)
    clicks = driver.create_input_topic("clicks", S, S)
    out = driver.create_output_topic("out", serdes.SessionWindowed(S), serdes.Long())
    clicks.pipe_input("u", "a", 1_000)
    clicks.pipe_input("u", "b", 2_000)
    return driver, clicks, out


def test_without_idle_closing_the_last_session_is_never_emitted():
    driver, _, out = _run(None)
    driver.advance_wall_clock_time(3_600_000)
    assert out.is_empty()


def test_idle_closing_emits_the_last_session_once_and_later_records_are_late():
    driver, clicks, out = _run({"window.close.on.idle.ms": 30_000})
    driver.advance_wall_clock_time(29_999)
    assert out.is_empty()
    driver.advance_wall_clock_time(1)
    records = out.read_records_to_list()
    assert [(r.key.key, r.key.window.start, r.key.window.end, r.value) for r in records] == [
        ("u", 1_000, 2_000, 2)]
    driver.advance_wall_clock_time(120_000)
    assert out.is_empty()  # exactly once
    clicks.pipe_input("u", "c", 2_500)  # inside the emitted session: now late
    assert driver.metrics()["dropped-records-total"] == 1
    assert out.is_empty()


def test_new_input_resets_the_idle_timer():
    driver, clicks, out = _run({"window.close.on.idle.ms": 30_000})
    driver.advance_wall_clock_time(20_000)
    clicks.pipe_input("u", "c", 3_000)
    driver.advance_wall_clock_time(20_000)
    assert out.is_empty()
    driver.advance_wall_clock_time(10_000)
    assert [r.value for r in out.read_records_to_list()] == [3]
