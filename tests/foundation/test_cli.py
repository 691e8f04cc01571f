"""The kspark command: --version and describe."""

from __future__ import annotations

from typer.testing import CliRunner

import kspark
from kspark.cli import app

runner = CliRunner()


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"kspark {kspark.__version__}"


def test_describe_prints_the_topology_of_a_factory():
    result = runner.invoke(app, ["describe", "kspark.examples.click_counter:topology"])
    assert result.exit_code == 0, result.output
    assert "Sub-topology: 0" in result.output
    assert "Processor: counter (stores: [click-counts])" in result.output


def test_describe_of_a_dsl_topology_shows_session_stores():
    result = runner.invoke(app, ["describe", "kspark.examples.sessions:topology"])
    assert result.exit_code == 0, result.output
    assert "session-counts" in result.output and "session-pages" in result.output


def test_describe_rejects_bad_specs_with_a_clear_message():
    for spec, message in [("nocolon", "MODULE:ATTR"), ("kspark.nope:x", "cannot import"),
                          ("kspark.examples.sessions:missing", "no attribute"),
                          ("kspark.examples.sessions:GAP_MS", "not a Topology")]:
        result = runner.invoke(app, ["describe", spec])
        assert result.exit_code != 0
        assert message in result.output, (spec, result.output)
