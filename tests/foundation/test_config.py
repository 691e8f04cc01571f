"""StreamsConfig from Kafka-style settings: whole numbers may come as text, as a properties
file gives them; anything else is refused with the setting's name."""

from __future__ import annotations

import pytest

from kspark.config import StreamsConfig


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
