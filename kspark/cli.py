"""The ``kspark`` command."""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

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
def broker(
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 9092,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    data: Annotated[
        str | None,
        typer.Option(help="Directory for the broker's data, kept across runs "
                          "(default: a temporary one, removed at exit)."),
    ] = None,
    sasl_user: Annotated[
        list[str] | None,
        typer.Option("--sasl-user", metavar="USER:PASSWORD",
                     help="Require SASL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and accept this "
                          "user; repeatable."),
    ] = None,
    tls: Annotated[
        bool, typer.Option("--tls", help="Listen on TLS (SSL, or SASL_SSL with users), with "
                                         "certificates of a CA of its own.")] = False,
    tls_dir: Annotated[
        str | None, typer.Option(help="Where the certificates are made or kept (with --tls).")
    ] = None,
    acls: Annotated[
        bool, typer.Option("--acls", help="Allow users only what ACLs allow (Kafka's "
                                          "StandardAuthorizer; needs --sasl-user).")] = False,
    super_user: Annotated[
        list[str] | None,
        typer.Option("--super-user", metavar="USER",
                     help="With --acls: a user allowed everything; repeatable."),
    ] = None,
) -> None:
    """Run Apache Kafka (one KRaft node, fetched from Maven Central on first use) until Ctrl-C."""
    import time

    from kspark.jvm.maven import ResolutionError
    from kspark.kafka.broker import KAFKA_VERSION, BrokerError, EmbeddedBroker

    users = {}
    for given in sasl_user or []:
        name, sep, password = given.partition(":")
        if not sep or not name:
            raise typer.BadParameter("expected USER:PASSWORD", param_hint="--sasl-user")
        users[name] = password
    try:
        server = EmbeddedBroker(port=port or None, host=host, data_dir=data, sasl_users=users,
                                tls=tls, tls_dir=tls_dir, acls=acls,
                                super_users=tuple(super_user or ()))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    try:
        server.start()
    except (BrokerError, ResolutionError) as exc:
        console.print(f"[red]cannot start the broker:[/red] {exc}", markup=True, highlight=False)
        raise typer.Exit(1) from exc
    console.print(
        f"Apache Kafka {KAFKA_VERSION} on bootstrap servers {server.bootstrap_servers}; data: "
        f"{data or 'temporary'}; log: {server.log_path}. Ctrl-C stops it.",
        highlight=False,
    )
    settings = server.client_config_for(None)
    if settings:
        console.print("clients connect with " + ", ".join(f"{k}={v}" for k, v in settings.items())
                      + (f", sasl.mechanism=PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 as "
                         f"{', '.join(users)}" if users else ""), highlight=False, soft_wrap=True)
    if acls:
        console.print("ACLs decide what users may do; super users: "
                      f"{', '.join(super_user or []) or 'none'}", highlight=False)
    try:
        while server.running:
            time.sleep(0.2)
        console.print(f"[red]the broker exited[/red]; log: {server.log_path}\n"
                      f"{server.log_tail()}", highlight=False)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        console.print("stopping the broker")
    finally:
        server.stop()


@app.command()
def demo(
    records: Annotated[int, typer.Option(help="Number of generated clicks.")] = 100_000,
    partitions: Annotated[int, typer.Option(help="Partitions of the input topic.")] = 4,
    out: Annotated[str, typer.Option(help="Where to write the PNG plot.")] = "kspark-demo.png",
    master: Annotated[str, typer.Option(help="Spark master.")] = "local[2]",
    log: Annotated[
        str | None, typer.Option(help="File for Spark's and the broker's log output.")
    ] = None,
) -> None:
    """Run the main job: clicks -> embedded Kafka -> sessions app on local Spark -> Kafka.

    Shows live progress, then a summary table; writes a PNG plot of the sessions (--out).
    """
    import os
    import tempfile

    from kspark.demo import run_demo

    log_path = log or os.path.join(tempfile.gettempdir(), "kspark-demo.log")
    broker_log = f"{os.path.splitext(log_path)[0]}-broker.log"
    saved = os.dup(2)
    try:
        with open(log_path, "ab") as log_file:  # Spark and its Python workers log to fd 2
            os.dup2(log_file.fileno(), 2)
            try:
                run_demo(records=records, partitions=partitions, out=out, master=master,
                         console=console, broker_log=broker_log)
            finally:
                os.dup2(saved, 2)
    except KeyboardInterrupt:
        console.print("interrupted; everything it started is stopped")
        raise typer.Exit(130) from None
    except Exception as exc:
        console.print(f"[red]the demo failed:[/red] {type(exc).__name__}: {exc}", markup=True,
                      highlight=False)
        console.print(f"log: {log_path}; the broker's: {broker_log}", highlight=False)
        raise typer.Exit(1) from exc
    finally:
        os.close(saved)
    console.print(f"log of Spark: {log_path}; of the broker: {broker_log}", highlight=False)


from kspark.cli_run import run  # noqa: E402
from kspark.cli_store import store_app  # noqa: E402

app.command()(run)
app.add_typer(store_app, name="store")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
