"""The README's first example runs and prints what the README says."""

from __future__ import annotations

import contextlib
import io
import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_readme_driver_example_prints_the_documented_records():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    block = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "README.md", "exec"), {})
    last = printed.getvalue().strip().splitlines()[-1]
    assert "Windowed('alice', [1000, 1000]), value=1, timestamp=1000" in last
    assert "Windowed('alice', [1000, 1000]), value=None, timestamp=1000" in last
    assert "Windowed('alice', [1000, 5000]), value=2, timestamp=5000" in last


def test_readme_join_example_attributes_clicks_and_shows_unclicked_impressions():
    from kspark import TopologyTestDriver, serdes

    with open(README, encoding="utf-8") as f:
        text = f.read()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "left_join" in b]
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    s, j = serdes.String(), serdes.Json()
    with TopologyTestDriver(scope["builder"].build()) as driver:
        pipes = {t: driver.create_input_topic(t, s, j)
                 for t in ("impressions", "clicks", "campaigns")}
        pipes["campaigns"].pipe_input("c1", {"name": "Winter"}, 0)
        pipes["impressions"].pipe_input("i1", {"campaign": "c1"}, 1_000)
        pipes["impressions"].pipe_input("i2", {"campaign": "c2"}, 2_000)
        pipes["clicks"].pipe_input("i1", {}, 5_000)
        pipes["impressions"].pipe_input("i3", {"campaign": "c1"}, 700_000)  # i2's window closes
        out = driver.create_output_topic("attributed-impressions", s, j)
        assert out.read_key_values_to_list() == [
            ("i1", {"campaign": "c1", "clicked": True, "campaign_name": "Winter"}),
            ("i2", {"campaign": "c2", "clicked": False, "campaign_name": None})]
