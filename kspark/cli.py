"""The ``kspark`` command."""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

import kspark

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="kspark: Kafka Streams' stateful processing model on Apache Spark.",
)
console = Console()


def _version(value: bool) -> None:
    if value:
        console.print(f"kspark {kspark.__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """kspark command line."""


def load_topology(spec: str) -> Any:
    """Resolve ``MODULE:ATTR`` to a Topology (a Topology, a StreamsBuilder, or a zero-argument
    callable returning either)."""
    from kspark.topology import Topology

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise typer.BadParameter(f"expected MODULE:ATTR, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise typer.BadParameter(f"cannot import module {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise typer.BadParameter(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if callable(obj) and not isinstance(obj, Topology) and not hasattr(obj, "build"):
        obj = obj()
    if hasattr(obj, "build") and not isinstance(obj, Topology):
        obj = obj.build()
    if not isinstance(obj, Topology):
        raise typer.BadParameter(f"{spec} is a {type(obj).__name__}, not a Topology")
    return obj


@app.command()
def describe(spec: Annotated[str, typer.Argument(help="MODULE:ATTR of a topology")]) -> None:
    """Print a topology's description (its sub-topologies, nodes and stores)."""
    sys.path.insert(0, ".")
    console.print(str(load_topology(spec).describe()), highlight=False, markup=False)


@app.command()
def demo(
    records: Annotated[int, typer.Option(help="Number of generated clicks.")] = 2_000,
) -> None:
    """Run the bundled example (the main job) on its embedded default and print its results."""
    from kspark.examples.click_counter import STORE, generate_clicks, topology
    from kspark.serdes import Json, Long, String
    from kspark.testing import TopologyTestDriver

    with TopologyTestDriver(topology()) as driver:
        clicks = driver.create_input_topic("clicks", String(), Json())
        report = driver.create_output_topic("click-counts-report", String(), Long())
        for user, click, ts in generate_clicks(records):
            clicks.pipe_input(user, click, ts)
        reports = report.read_records_to_list()
        store = driver.get_key_value_store(STORE)
        table = Table(title=f"Clicks per user after {records} clicks (store {STORE!r})")
        table.add_column("user")
        table.add_column("clicks", justify="right")
        for user, count in store.all():
            table.add_row(user, str(count))
        console.print(table)
        console.print(
            f"{len(reports)} report records forwarded by the punctuator; "
            f"metrics: {driver.metrics()}"
        )


from kspark.cli_store import store_app  # noqa: E402

app.add_typer(store_app, name="store")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
