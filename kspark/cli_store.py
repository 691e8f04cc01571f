"""``kspark store``: list and query the stores of a (running or stopped) application.

``--app-dir`` is the application's checkpoint directory (``StreamsApp(checkpoint_dir=...)``),
which holds ``app.json`` (written when the app starts) and the Spark query checkpoint. Queries
read the latest committed state with Spark's state data source; see ``docs/state-access.md``.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kspark.records import KeyValue
from kspark.windows import Windowed

store_app = typer.Typer(
    no_args_is_help=True, help="Query the state stores of an application (interactive queries)."
)
console = Console()
AppDir = Annotated[
    str, typer.Option("--app-dir", help="The application's checkpoint directory (has app.json).")
]


def parse_time(text: str | None, option: str) -> int | None:
    """Epoch milliseconds from an integer or an ISO-8601 date/time (UTC unless it says)."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise typer.BadParameter(
            f"{text!r} is neither epoch milliseconds nor an ISO-8601 time", param_hint=option
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_key(text: str | None, key_format: str) -> Any:
    """The store key ``text`` stands for: the string itself, an int, or JSON (arrays become
    tuples, as Python keys usually are)."""
    if text is None:
        return None
    if key_format == "str":
        return text
    try:
        if key_format == "int":
            return int(text)
        return _tuples(json.loads(text))
    except ValueError as exc:
        raise typer.BadParameter(
            f"{text!r} is not {key_format}: {exc}", param_hint="--key"
        ) from exc


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def run_query(view: Any, key: Any, time_from: int | None, time_to: int | None) -> list[KeyValue]:
    """What ``kspark store query`` prints for a store view."""
    if view.kind == "key_value":
        if time_from is not None or time_to is not None:
            raise typer.BadParameter(
                "--from/--to apply to window and session stores only; "
                f"{view.name!r} is a key-value store"
            )
        if key is None:
            return view.all()
        value = view.get(key)
        return [] if value is None else [KeyValue(key, value)]
    if time_from is not None and time_to is not None and time_from > time_to:
        raise typer.BadParameter(f"--from ({time_from}) is after --to ({time_to})")
    if view.kind == "window":
        if key is None:
            return view.fetch_all(time_from, time_to)
        stores = view.stores()
        size = stores[0].window_size_ms if stores else 0
        return [
            KeyValue(Windowed(key, _window(kv.key, size)), kv.value)
            for kv in view.fetch_range(key, time_from, time_to)
        ]
    if key is None:
        return view.find_sessions_range(None, None, time_from, time_to)
    return view.find_sessions(key, time_from, time_to)


def _window(start: int, size: int) -> Any:
    from kspark.windows import Window

    return Window(start, start + size)


def _iso(ms: int) -> str:
    """``2026-02-03 00:00:00`` (with ``.123`` when the milliseconds are not 0), UTC."""
    text = datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return text if ms % 1000 == 0 else f"{text}.{ms % 1000:03d}"


def _plain(value: Any) -> Any:
    """A JSON-friendly form of a key or value."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return repr(value)


def rows_as_json(rows: list[KeyValue]) -> list[dict[str, Any]]:
    out = []
    for kv in rows:
        if isinstance(kv.key, Windowed):
            w = kv.key.window
            item = {"key": _plain(kv.key.key), "start": w.start, "end": w.end}
        else:
            item = {"key": _plain(kv.key)}
        item["value"] = _plain(kv.value)
        out.append(item)
    return out


def rows_as_table(title: str, kind: str, rows: list[KeyValue]) -> Table:
    table = Table(title=title)
    table.add_column("key")
    if kind != "key_value":
        table.add_column("start (UTC)")
        table.add_column("end (UTC)")
    table.add_column("value", justify="right")
    for kv in rows:
        if isinstance(kv.key, Windowed):
            w = kv.key.window
            table.add_row(str(kv.key.key), _iso(w.start), _iso(w.end), str(kv.value))
        else:
            table.add_row(str(kv.key), str(kv.value))
    return table


@store_app.command("list")
def list_stores(app_dir: AppDir) -> None:
    """List the application's stores (no Spark needed)."""
    from kspark.spark.internals.query import load_app_info

    info = _info(app_dir, load_app_info)
    table = Table(title=f"Stores of {info['application_id']!r}")
    for column in ("store", "kind", "changelog topic", "restored from"):
        table.add_column(column)
    for name, spec in sorted(info["stores"].items()):
        table.add_row(
            name, spec["kind"], spec.get("changelog_topic") or "-", spec.get("source_topic") or "-"
        )
    console.print(table)


@store_app.command("query")
def query(
    app_dir: AppDir,
    store: Annotated[str, typer.Option("--store", help="Store name.")],
    key: Annotated[str | None, typer.Option("--key", help="Only this key.")] = None,
    key_format: Annotated[
        str, typer.Option("--key-format", help="How to read --key: str, int or json.")
    ] = "str",
    time_from: Annotated[
        str | None,
        typer.Option("--from", help="Windowed stores: earliest window start (session: end); "
                     "epoch ms or ISO-8601."),
    ] = None,
    time_to: Annotated[
        str | None,
        typer.Option("--to", help="Windowed stores: latest window start; epoch ms or ISO-8601."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Print a store's entries as of the application's latest committed state."""
    from kspark.spark.internals.query import load_app_info, store_view, unknown_store

    if key_format not in ("str", "int", "json"):
        raise typer.BadParameter("must be str, int or json", param_hint="--key-format")
    info = _info(app_dir, load_app_info)
    if store not in info["stores"]:
        _fail(str(unknown_store(store, info)))
    lo, hi = parse_time(time_from, "--from"), parse_time(time_to, "--to")
    if lo is not None and hi is not None and lo > hi:
        raise typer.BadParameter(f"--from ({lo}) is after --to ({hi})")
    if info["stores"][store]["kind"] == "key_value" and (lo is not None or hi is not None):
        raise typer.BadParameter(
            f"--from/--to apply to window and session stores only; {store!r} is a key-value store"
        )
    parsed_key = parse_key(key, key_format)
    sys.path.insert(0, ".")  # values of user-defined types unpickle from the caller's modules
    from kspark.spark.session import local_spark

    spark = local_spark("local[1]")
    view = store_view(spark, app_dir, store, info)
    rows = run_query(view, parsed_key, lo, hi)
    if as_json:
        print(json.dumps(rows_as_json(rows), indent=2))
        return
    title = (
        f"{store} ({info['stores'][store]['kind']}) of {info['application_id']!r}, "
        f"batch {view.batch_id}: {len(rows)} entries"
    )
    console.print(rows_as_table(title, info["stores"][store]["kind"], rows))


def _info(app_dir: str, load: Any) -> dict[str, Any]:
    from kspark.errors import KsparkError

    try:
        return load(app_dir)
    except KsparkError as exc:
        _fail(str(exc))
        raise  # unreachable


def _fail(message: str) -> None:
    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)
