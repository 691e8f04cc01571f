"""StreamsConfig from Kafka-style settings: whole numbers may come as text, as a properties
file gives them; anything else is refused with the setting's name."""

from __future__ import annotations

import re

import pytest

from kspark.config import StreamsConfig
from kspark.errors import ConfigError


def test_whole_number_settings_accept_their_text():
    config = StreamsConfig.of({"state.buckets": "4", "window.close.on.idle.ms": "2500"})
    assert config.state_buckets == 4 and config.close_on_idle_ms == 2500
    assert StreamsConfig.of({"state.buckets": 8}).state_buckets == 8
    assert StreamsConfig.of({}).close_on_idle_ms is None


@pytest.mark.parametrize("name, value", [
    ("state.buckets", "four"), ("state.buckets", 2.5), ("state.buckets", True),
    ("window.close.on.idle.ms", "1s"), ("state.buckets", "0"),
])
def test_bad_whole_number_settings_name_the_setting(name, value):
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        StreamsConfig.of({name: value})


@pytest.mark.parametrize("name, near", [
    ("state.bucket", "state.buckets"),
    ("default.value.serdes", "default.value.serde"),
    ("window.close.on.idle", "window.close.on.idle.ms"),
    ("spark.kspark.partition", "spark.kspark.partitions"),
    ("errors.dead.letter.topic", "errors.dead.letter.queue.topic.name"),
    ("no.such.thing", None),
])
def test_an_unknown_setting_is_refused_with_the_nearest_name(name, near):
    with pytest.raises(ConfigError) as caught:
        StreamsConfig.of({name: "1"})
    first = str(caught.value).splitlines()[0]
    assert first.startswith(f"unknown setting {name!r}")
    if near is None:
        assert "did you mean" not in first
    else:
        assert f"did you mean {near!r}?" in first


def test_spark_and_kafka_settings_pass_through_and_kspark_ones_are_checked():
    config = StreamsConfig.of({"spark.sql.shuffle.partitions": "7", "kafka.linger.ms": 5,
                               "spark.kspark.partitions": "3", "spark.kspark.tick.ms": 250,
                               "spark.kspark.files.read.in.stage": "TRUE"})
    assert config.extra == {"spark.sql.shuffle.partitions": "7", "kafka.linger.ms": 5,
                            "spark.kspark.partitions": 3, "spark.kspark.tick.ms": 250,
                            "spark.kspark.files.read.in.stage": "true"}


@pytest.mark.parametrize("name, value, expected", [
    ("application.id", 42, "application.id must be a non-empty string"),
    ("default.key.serde", "String", "default.key.serde must be a Serde"),
    ("default.deserialization.exception.handler", "skip",
     "default.deserialization.exception.handler must be one of fail, log_and_continue"),
    ("errors.dead.letter.queue.topic.name", 7, "errors.dead.letter.queue.topic.name must be a"),
    ("spark.kspark.tick.ms", "0", "spark.kspark.tick.ms must be >= 1"),
    ("spark.kspark.files.read.in.stage", "yes",
     "spark.kspark.files.read.in.stage must be one of auto, true, false"),
])
def test_a_value_of_the_wrong_type_names_the_setting_and_the_type(name, value, expected):
    with pytest.raises(ConfigError, match=re.escape(expected)):
        StreamsConfig.of({name: value})


def test_field_names_are_accepted_too_and_a_config_passes_through():
    config = StreamsConfig.of({"state_buckets": "2"}, application_id="app")
    assert config.state_buckets == 2 and config.application_id == "app"
    assert StreamsConfig.of(config) is config
    assert StreamsConfig.of(None).deserialization_handler == "fail"
