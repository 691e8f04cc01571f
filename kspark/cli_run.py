"""``kspark run MODULE:ATTR``: run a StreamsApp with live progress until Ctrl-C.

``ATTR`` is a :class:`~kspark.spark.StreamsApp` or a function returning one. ``--master``,
``--checkpoint`` and ``--config`` replace the app's own. Ctrl-C stops the query between
micro-batches; its checkpoint stays, and the same command resumes from it.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

console = Console()


def load_app(spec: str) -> Any:
    """Resolve ``MODULE:ATTR`` to a StreamsApp (or a zero-argument function returning one)."""
    from kspark.spark.app import StreamsApp

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise typer.BadParameter(f"expected MODULE:ATTR, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise typer.BadParameter(f"cannot import module {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise typer.BadParameter(
                f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(obj, StreamsApp) and callable(obj):
        obj = obj()
    if not isinstance(obj, StreamsApp):
        raise typer.BadParameter(f"{spec} is a {type(obj).__name__}, not a StreamsApp")
    return obj


def with_options(app: Any, master: str | None, checkpoint: str | None,
                 config: list[str], remote: str | None = None) -> Any:
    """``app`` with the command line's master (or Spark Connect server), checkpoint directory
    and settings."""
    from kspark.config import StreamsConfig
    from kspark.errors import ConfigError
    from kspark.spark.app import StreamsApp

    if master is None and checkpoint is None and not config and remote is None:
        return app
    settings = dict(vars(app.config))
    extra = settings.pop("extra")
    for item in config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--config")
        settings[key] = value
    try:
        merged = StreamsConfig.of({**settings, **extra})
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    spark = None
    if remote is not None:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(remote).getOrCreate()
    return StreamsApp(app.topology, app.application_id, app.topics, spark=spark, config=merged,
                      checkpoint_dir=checkpoint or app.checkpoint_dir,
                      trigger_interval_ms=app.trigger_interval_ms,
                      master=master or app.master)


def _status(app: Any, started: float) -> Table:
    from kspark.spark.internals.progress import source_lag

    metrics = app.metrics()
    progress = app.query.lastProgress if app.query is not None else None
    lag = source_lag(progress) if progress else None
    table = Table(title=f"kspark run: {app.application_id}", show_header=False)
    for name, value in (
        ("records in", f"{metrics.get('process-total', 0):,}"),
        ("micro-batches", f"{metrics.get('batches', 0):,}"),
        ("lag (records or files behind)", "-" if lag is None else f"{lag:,}"),
        ("dropped records", f"{metrics.get('dropped-records-total', 0):,}"),
        ("running for", f"{time.monotonic() - started:,.0f} s"),
    ):
        table.add_row(name, value)
    return table


def run(
    spec: Annotated[str, typer.Argument(help="MODULE:ATTR of a StreamsApp or a function "
                                             "returning one")],
    master: Annotated[str | None, typer.Option(help="Spark master (default: the app's).")] = None,
    checkpoint: Annotated[
        str | None, typer.Option(help="Checkpoint directory (default: the app's).")] = None,
    config: Annotated[
        list[str] | None,
        typer.Option("--config", metavar="KEY=VALUE", help="A setting; repeatable.")] = None,
    log: Annotated[str | None, typer.Option(help="File for Spark's log output.")] = None,
    remote: Annotated[str | None, typer.Option(
        help="Run on this Spark Connect server (sc://host:port) instead of a local Spark.")
    ] = None,
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve the app's metrics in Prometheus' format on this port (0: a free one).")
    ] = None,
) -> None:
    """Run an application until Ctrl-C, with live progress; a second run resumes from its
    checkpoint."""
    from kspark.errors import KsparkError

    if remote is not None and master is not None:
        raise typer.BadParameter("give --master or --remote, not both", param_hint="--remote")
    app = with_options(load_app(spec), master, checkpoint, config or [], remote)
    endpoint = None
    if metrics_port is not None:
        try:
            endpoint = app.serve_metrics(metrics_port)
        except (KsparkError, OSError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--metrics-port") from exc
        console.print(f"metrics: {endpoint.url}", highlight=False)
    log_path = log or os.path.join(tempfile.gettempdir(), f"kspark-{app.application_id}.log")
    console.print(f"running {app.application_id!r}; checkpoint: {app.checkpoint_dir}; "
                  f"Spark's log: {log_path}. Ctrl-C stops it.", highlight=False)
    saved = os.dup(2)
    started = time.monotonic()
    try:
        with open(log_path, "ab") as log_file:  # Spark and its Python workers log to fd 2
            os.dup2(log_file.fileno(), 2)
            try:
                app.start()
                with Live(_status(app, started), console=console, refresh_per_second=2) as live:
                    while not app.await_termination(1.0):
                        live.update(_status(app, started))
            finally:
                os.dup2(saved, 2)
    except KeyboardInterrupt:
        app.stop()
        batches = app.metrics().get("batches", 0)
        console.print(f"stopped after {batches} micro-batch(es) of this run; the checkpoint in "
                      f"{app.checkpoint_dir} is intact: the same command resumes from it",
                      highlight=False)
        return
    except KsparkError as exc:
        app.stop()
        console.print(f"[red]{app.application_id} stopped:[/red] {exc}".splitlines()[0],
                      highlight=False)
        raise typer.Exit(1) from exc
    finally:
        os.close(saved)
        if endpoint is not None:
            endpoint.close()
    app.stop()
    console.print(f"the query of {app.application_id!r} ended", highlight=False)
