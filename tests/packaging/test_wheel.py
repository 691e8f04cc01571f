"""The wheel: ``python -m build`` from the checkout makes one with the compiled core inside
where a C compiler is at hand (pure Python, saying why, where none is); installed into a fresh
virtual environment outside the checkout, it runs the sessions example with ``spark-submit``,
the driver and its Python workers importing kspark from the wheel."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from kspark import compiled, serdes
from kspark.examples.sessions import generate_clicks, topology
from kspark.hashing import kafka_partition
from kspark.spark.internals.jvm_stderr import BANNER, STATE_SERVER_LOGGER
from kspark.testing import TopologyTestDriver

#: in the background of the soak (``./dev test``): the build is a compiler on one core, the
#: rest mostly waiting
pytestmark = [pytest.mark.slow, pytest.mark.background]
ROOT = Path(__file__).resolve().parents[2]
EXT = importlib.machinery.EXTENSION_SUFFIXES[0]
NAME = f"kspark-{importlib.metadata.version('kspark')}"
#: the clicks of the sessions run: generate_clicks(**CLICKS), 3 micro-batches, 2 partitions
CLICKS = {"n": 3000, "users": 40, "seed": 5}

#: the sessions example on the session of ``spark-submit`` (as on a cluster), run by the fresh
#: environment's Python; writes where kspark came from (driver and Python workers), its status
#: and the sessions to result.json
SESSIONS_RUN = textwrap.dedent("""
    import json, os
    import kspark
    from pyspark.sql import SparkSession
    from kspark import compiled, io, serdes
    from kspark.examples.sessions import generate_clicks, topology
    from kspark.spark import StreamsApp

    def origin(_):
        import kspark, kspark.compiled
        return kspark.__file__, kspark.compiled.status()

    windowed = serdes.SessionWindowed(serdes.String())
    clicks = io.memory(serdes.String(), serdes.Json(), partitions=2, max_files_per_trigger=1)
    clicks.send_all(list(generate_clicks(**CLICKS)), per_file=1000)
    counts, pages = io.memory(windowed, serdes.Long()), io.memory(windowed, serdes.Json())
    app = StreamsApp(topology(), "sessions", {
        "clicks": clicks, "session-counts": counts, "session-pages": pages,
    }, spark=SparkSession.builder.getOrCreate(), checkpoint_dir=os.path.abspath("checkpoint"))
    app.start()
    try:
        app.process_all_available()
        workers = app.spark.sparkContext.parallelize(range(2), 2).map(origin).collect()
    finally:
        app.stop()

    def sessions(topic):
        return [[w.key, w.window.start, w.window.end, v] for w, v, _ in topic.records()]

    with open("result.json", "w") as f:
        json.dump({"driver": origin(0), "workers": workers, "counts": sessions(counts),
                   "pages": sessions(pages)}, f)
""")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would point Python or Spark at this
    environment's interpreter and import path, or run kspark as pure Python."""
    drop = {"PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", compiled.PURE_PYTHON}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def checkout_copy(dest: Path) -> Path:
    """The checkout's build inputs as they are, with what an in-place build leaves beside the
    sources (extensions, bytecode, its build record), plus what no build of these sources made:
    an extension beside them, and a module and an extension in the build directories."""
    dest.mkdir()
    for entry in ROOT.iterdir():
        if entry.is_file():
            shutil.copy2(entry, dest)
    shutil.copytree(ROOT / "kspark", dest / "kspark")
    (dest / "kspark" / f"stale{EXT}").write_bytes(b"not an extension")
    (dest / "kspark" / compiled.BUILD_RECORD).write_text('{"pure": "the checkout\'s record"}')
    for lib in ("lib", f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"):
        earlier = dest / "build" / lib / "kspark"
        earlier.mkdir(parents=True)
        (earlier / "removed.py").write_text("REMOVED = True\n")
        (earlier / f"removed{EXT}").write_bytes(b"not an extension")
    return dest


class WheelBuild:
    """``python -m build --wheel`` of ``src`` into ``out`` (the build's tools from this
    environment, not from PyPI), running in the background from its start."""

    def __init__(self, src: Path, out: Path, **env: str) -> None:
        self.src, self.out = src, out
        self.messages = out.with_suffix(".log")
        with open(self.messages, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                 str(out), "."], cwd=src, stdout=log, stderr=subprocess.STDOUT, text=True,
                env=clean_env(**env))

    def result(self) -> tuple[Path, str]:
        """Once the build has ended: the wheel and the build's messages."""
        returncode = self.process.wait(timeout=900)
        log = self.messages.read_text()
        assert returncode == 0, log[-6000:]
        (wheel,) = self.out.glob("kspark-*.whl")
        assert (self.src / "kspark" / f"stale{EXT}").exists()  # the source tree as it was
        assert "checkout's record" in (self.src / "kspark" / compiled.BUILD_RECORD).read_text()
        return wheel, log


def build_wheel(src: Path, out: Path, **env: str) -> tuple[Path, str]:
    """The wheel of ``src`` built into ``out``, and the build's messages."""
    return WheelBuild(src, out, **env).result()


#: the compiled wheel's build, started when the run begins (``start_wheel_build``)
BACKGROUND: list[WheelBuild] = []


def start_wheel_build(tmp: Path) -> None:
    """Start building the wheel from a copy of the checkout under ``tmp``: it compiles on one
    core while the run's other tests go on (the conftest calls this once tests of this module
    are collected)."""
    if not BACKGROUND:
        BACKGROUND.append(WheelBuild(checkout_copy(tmp / "src"), tmp / "dist"))


def stop_wheel_build() -> None:
    """End the background build if the run ends before its tests (a failure with ``-x``)."""
    for build in BACKGROUND:
        if build.process.poll() is None:
            build.process.kill()
            build.process.wait()


def python_sources(src: Path) -> set[str]:
    return {p.relative_to(src).as_posix() for p in (src / "kspark").rglob("*.py")
            if "__pycache__" not in p.parts}


def fresh_venv(path: Path, wheel: Path) -> Path:
    """A virtual environment at ``path`` with ``wheel`` installed, and this environment's
    packages importable after its own: its dependencies, not its kspark (the checkout's
    editable install hooks in through an import line of a ``.pth`` file, which a directory
    added to the path does not run). Its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   timeout=120)
    python = path / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "--quiet", str(wheel)],
        capture_output=True, text=True, env=clean_env(), timeout=300, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                           "'purelib'))"], capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()
    ours = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (Path(site) / "kspark_test_dependencies.pth").write_text("\n".join(ours) + "\n")
    return python


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory):
    """The wheel built from a copy of the checkout: its copy, the wheel, the build's messages."""
    start_wheel_build(tmp_path_factory.mktemp("wheel"))
    (build,) = BACKGROUND
    wheel, log = build.result()
    return build.src, wheel, log


def test_the_wheel_holds_the_package_and_its_compiled_core_and_nothing_else(wheel_build):
    if not compiled.has_c_compiler():
        pytest.skip(f"no C compiler ({compiled.c_compiler()!r}): see the pure wheel's test")
    src, wheel, log = wheel_build
    assert f"kspark build: {len(compiled.MODULES)} modules compiled with mypyc" in log
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        record = json.loads(z.read(f"kspark/{compiled.BUILD_RECORD}"))
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert wheel.name.endswith(f"-{platform}.whl")
    assert all(n.startswith(("kspark/", f"{NAME}.dist-info/")) for n in names)
    assert {n for n in names if n.endswith(".py")} == python_sources(src)
    assert {n for n in names if n.endswith(EXT)} == {
        f"kspark/_core__mypyc{EXT}",
        *(compiled.source_path(m, Path("kspark")).with_suffix(EXT).as_posix()
          for m in compiled.MODULES)}
    assert record == {m: compiled.digest(compiled.source_path(m, src / "kspark"))
                      for m in compiled.MODULES}
    others = {n for n in names if not n.endswith((".py", EXT))}
    assert others == {"kspark/py.typed", f"kspark/{compiled.BUILD_RECORD}",
                      *(f"{NAME}.dist-info/{f}" for f in (
                          "METADATA", "WHEEL", "entry_points.txt", "top_level.txt", "RECORD"))}


def expected_sessions() -> tuple[list, list]:
    """The sessions example's counts and pages from the checkout's test driver, one driver per
    partition as Spark runs one task per partition."""
    windowed = serdes.SessionWindowed(serdes.String())
    clicks = list(generate_clicks(**CLICKS))
    counts: list = []
    pages: list = []
    for partition in (0, 1):
        with TopologyTestDriver(topology()) as driver:
            pipe = driver.create_input_topic("clicks", serdes.String(), serdes.Json())
            for user, click, ts in clicks:
                if kafka_partition(user.encode(), 2) == partition:
                    pipe.pipe_input(user, click, ts)
            for topic, serde, out in (("session-counts", serdes.Long(), counts),
                                      ("session-pages", serdes.Json(), pages)):
                out += [[r.key.key, r.key.window.start, r.key.window.end, r.value] for r in
                        driver.create_output_topic(topic, windowed, serde).read_records_to_list()]
    return counts, pages


def test_the_wheel_runs_the_sessions_example_in_a_fresh_environment(wheel_build, tmp_path):
    _, wheel, _ = wheel_build
    venv = tmp_path / "venv"
    python = fresh_venv(venv, wheel)
    run_dir = tmp_path / "run"
    (run_dir / "tmp").mkdir(parents=True)
    script = run_dir / "sessions_run.py"
    script.write_text(f"CLICKS = {CLICKS!r}\n{SESSIONS_RUN}")
    submit = Path(sys.executable).parent / "spark-submit"
    result = subprocess.run(
        [str(submit), "--master", "local[2]", str(script)], cwd=run_dir, capture_output=True,
        text=True, timeout=600, check=False,
        env=clean_env(TMPDIR=str(run_dir / "tmp"), PYSPARK_PYTHON=str(python),
                      PYSPARK_DRIVER_PYTHON=str(python)))
    assert result.returncode == 0, result.stderr[-3000:]
    # Spark's console at spark-submit's defaults (INFO), without pyspark's worker banners and
    # the state server's warnings of the keys kspark looks up
    assert "INFO SparkContext" in result.stderr
    assert BANNER.decode() not in result.stderr + result.stdout
    assert STATE_SERVER_LOGGER.rsplit(".", 1)[1] not in result.stderr
    got = json.loads((run_dir / "result.json").read_text())
    package = str(venv.resolve() / "lib")
    if compiled.has_c_compiler():
        status = f"compiled ({len(compiled.MODULES)} modules compiled with mypyc)"
    else:
        status = got["driver"][1]
        assert status.startswith("pure (installed so: no C compiler found")
    for where, how in [got["driver"], *got["workers"]]:
        assert str(Path(where).resolve()).startswith(package), where
        assert how == status
    counts, pages = expected_sessions()
    assert len(counts) > 100
    assert sum(c[3] for c in counts) > 2000  # of 3000 clicks: the rest late or still open
    assert sorted(got["counts"]) == sorted(counts)
    assert sorted(got["pages"]) == sorted(pages)


@pytest.mark.parametrize("env, reason", [
    ({compiled.PURE_PYTHON: "1"}, f"{compiled.PURE_PYTHON} was set"),
    ({"CC": "/nonexistent/cc"}, "no C compiler found ('/nonexistent/cc', "),
], ids=["KSPARK_PURE_PYTHON", "no-compiler"])
def test_a_pure_wheel_says_why_when_installed(tmp_path, env, reason):
    src = checkout_copy(tmp_path / "src")
    wheel, log = build_wheel(src, tmp_path / "dist", **env)
    assert wheel.name == f"{NAME}-py3-none-any.whl"
    assert f"kspark build: pure Python: {reason}" in log
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        record = json.loads(z.read(f"kspark/{compiled.BUILD_RECORD}"))
    assert record["pure"].startswith(reason)
    assert not [n for n in names if n.endswith(EXT)]
    assert {n for n in names if n.endswith(".py")} == python_sources(src)
    python = fresh_venv(tmp_path / "venv", wheel)
    status = subprocess.run([str(python), "-c", "import kspark.compiled as c; print(c.status())"],
                            cwd=tmp_path, capture_output=True, text=True, env=clean_env(),
                            timeout=120, check=True).stdout.strip()
    assert status == f"pure (installed so: {record['pure']})"
