"""The compiled per-record core (kspark.compiled): the build in use, the switch back to pure
Python, and out-of-date builds."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kspark import compiled

#: a session count through the test driver; prints the mode, whether the task module is
#: compiled, and every output record
DRIVER_RUN = textwrap.dedent("""
    import json, random
    import kspark.compiled as compiled
    from kspark import (EmitStrategy, Materialized, SessionWindows, StreamsBuilder,
                        TopologyTestDriver, serdes)
    import kspark.runtime.task as task

    builder = StreamsBuilder()
    (builder.stream("in", serdes.String(), serdes.Long()).group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(50, 20))
        .count(Materialized("counts")).to_stream()
        .to("out", serdes.SessionWindowed(serdes.String()), serdes.Long()))
    rng = random.Random(11)
    with TopologyTestDriver(builder.build()) as driver:
        pipe = driver.create_input_topic("in", serdes.String(), serdes.Long())
        for i in range(400):
            pipe.pipe_input(f"k{rng.randrange(7)}", i, max(0, 5 * i + rng.randrange(-30, 30)))
        out = driver.create_output_topic("out", serdes.SessionWindowed(serdes.String()),
                                         serdes.Long())
        records = [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
                   for r in out.read_records_to_list()]
    print(json.dumps({"status": compiled.status(), "task_compiled": compiled.is_compiled(task),
                      "records": records}))
""")


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, check=False, timeout=120)


def installed_record() -> dict:
    path = Path(compiled.__file__).parent / compiled.BUILD_RECORD
    return json.loads(path.read_text()) if path.exists() else {}


def test_a_compiled_install_runs_every_module_compiled():
    # pure Python only when asked for or without a compiler: a core that fails to build fails
    record = installed_record()
    asked = f"{compiled.PURE_PYTHON} was set"
    if record.get("pure") == asked or os.environ.get(compiled.PURE_PYTHON, "") not in ("", "0"):
        pytest.skip(f"kspark runs as pure Python, as asked: {compiled.status()}")
    if not compiled.has_c_compiler():
        pytest.skip(f"no C compiler ({compiled.c_compiler()!r}) here: {compiled.status()}")
    assert record and "pure" not in record, (
        f"a C compiler is at hand, yet kspark is installed as pure Python: {compiled.status()}")
    assert sorted(record) == sorted(compiled.MODULES)
    assert compiled.status().startswith("compiled")
    for name in compiled.MODULES:
        assert compiled.is_compiled(importlib.import_module(name)), name


def test_pure_python_switch_runs_the_same_records_as_the_install():
    pure = run_python(DRIVER_RUN, KSPARK_PURE_PYTHON="1")
    assert pure.returncode == 0, pure.stderr[-2000:]
    default = run_python(DRIVER_RUN, KSPARK_PURE_PYTHON="")
    assert default.returncode == 0, default.stderr[-2000:]
    pure_out, default_out = json.loads(pure.stdout), json.loads(default.stdout)
    assert pure_out["task_compiled"] is False
    assert pure_out["status"].startswith("pure")
    if "pure" not in installed_record():
        assert pure_out["status"] == f"pure ({compiled.PURE_PYTHON} is set)"
        assert default_out["task_compiled"] is True
    assert len(pure_out["records"]) > 400  # tombstones and updates of merged sessions
    assert pure_out["records"] == default_out["records"]


def test_changed_sources_names_changed_and_missing_sources(tmp_path):
    modules = ["kspark.a", "kspark.sub.b", "kspark.c"]
    for name in modules:
        path = compiled.source_path(name, tmp_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n")
    record = {name: compiled.digest(compiled.source_path(name, tmp_path)) for name in modules}
    assert compiled.changed_sources(record, tmp_path) == []
    compiled.source_path("kspark.sub.b", tmp_path).write_text("# changed\n")
    compiled.source_path("kspark.c", tmp_path).unlink()
    assert compiled.changed_sources(record, tmp_path) == ["kspark.c", "kspark.sub.b"]


def test_an_out_of_date_build_runs_pure_python_with_one_warning(tmp_path):
    # a package root whose first compiled module has an extension built from other source
    first = compiled.MODULES[0]
    source = compiled.source_path(first, tmp_path)
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("VALUE = 'pure'\n")
    ext = source.with_name(source.stem + importlib.machinery.EXTENSION_SUFFIXES[0])
    ext.write_bytes(b"not a real extension")
    (tmp_path / compiled.BUILD_RECORD).write_text(json.dumps({first: "0" * 64}))
    code = textwrap.dedent(f"""
        import warnings
        from pathlib import Path
        from kspark import compiled
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled.install(Path({str(tmp_path)!r}))
        print(compiled.status())
        print(len(caught), caught[0].message if caught else "")
    """)
    result = run_python(code, KSPARK_PURE_PYTHON="")
    assert result.returncode == 0, result.stderr[-2000:]
    status, warning = result.stdout.splitlines()
    assert status == f"pure (changed since they were compiled: {first})"
    assert warning.startswith("1 kspark runs pure Python: its compiled modules are out of date")


def test_value_types_and_json_writing_behave_the_same_as_pure_python():
    # Record, Window and Windowed get an __init__ of their own in pure Python (kspark.frozen);
    # the Json serde's choice between msgspec and Python's encoder is compiled code
    tests = [f"test_fast_paths.py::{name}" for name in (
        "test_records_and_windows_behave_as_frozen_dataclasses",
        "test_the_json_serde_writes_exactly_what_python_writes",
        "test_the_json_serde_takes_msgspec_for_plain_values_only")]
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *tests],
                            capture_output=True, text=True, cwd=Path(__file__).parent,
                            timeout=120, check=False, env={**os.environ, compiled.PURE_PYTHON: "1"})
    assert result.returncode == 0, result.stdout[-3000:]  # 0: collected, ran and passed
