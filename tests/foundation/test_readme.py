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
