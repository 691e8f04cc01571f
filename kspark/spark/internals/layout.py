"""Whether a checkpoint can be resumed: the layout an application's state was written with (its
``app.json``, see :mod:`kspark.spark.internals.query`) against the layout it would write now.

A checkpoint resumes when the state format, the task count, the bucket count and the number of
sub-topologies (Spark's stateful operators) are the same and every store that has state keeps
its kind and its sub-topology; a store added starts empty and a store removed
leaves its state unused, as in Kafka Streams. Anything else is refused at ``start()`` with an
error that names the change (the store, the topics, both versions), before Spark would read
state it cannot place.
"""

from __future__ import annotations

import logging
from typing import Any

from kspark.errors import CheckpointLayoutError

log = logging.getLogger("kspark.app")


def _written_by(info: dict[str, Any]) -> str:
    return f"kspark {info.get('kspark_version', 'before 0.2')} (state format {info.get('format')})"


def _kind(kind: Any) -> str:
    return str(kind).replace("_", "-")


def layout_changes(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """What differs between the layout ``old`` (of a checkpoint) and ``new`` (of the app now):
    ``(refused, notes)``, each a list of sentences naming the change."""
    refused: list[str] = []
    notes: list[str] = []
    readable = new.get("readable_formats", [new["format"]])
    if old.get("format") not in readable:
        formats = ", ".join(map(str, readable[:-1])) + (" and " if len(readable) > 1 else "")
        refused.append(
            f"its state was written by {_written_by(old)}; this is {_written_by(new)}, which "
            f"reads state format{'s' if len(readable) > 1 else ''} {formats}{readable[-1]}")
        return refused, notes
    if old.get("tasks") != new["tasks"]:
        refused.append(
            f"it has {old.get('tasks')} tasks per sub-topology and the application now has "
            f"{new['tasks']} (the partition count of topics {', '.join(new.get('topics', []))} "
            "changed): state is kept per task")
    if old.get("state_buckets") != new["state_buckets"]:
        refused.append(
            f"its state is in {old.get('state_buckets')} buckets per store and "
            f"state.buckets is now {new['state_buckets']}")
    if old.get("operators") != new["operators"]:
        count = old.get("operators")
        refused.append(
            f"it has {count} sub-topolog{'y' if count == 1 else 'ies'} and the topology now has "
            f"{new['operators']} (one was added or removed; Spark keeps state per stateful "
            "operator, one per sub-topology)")
    for name, was in sorted(old.get("stores", {}).items()):
        now = new["stores"].get(name)
        if now is None:
            notes.append(f"store {name!r} is no longer in the topology: its state stays unused")
            continue
        if was.get("kind") != now["kind"]:
            refused.append(f"store {name!r} was a {_kind(was.get('kind'))} store and is now a "
                           f"{_kind(now['kind'])} store")
        elif (was.get("operator_id"), was.get("sub_topology")) != (now["operator_id"],
                                                                    now["sub_topology"]):
            refused.append(
                f"store {name!r} was in sub-topology {was.get('sub_topology')} (Spark state "
                f"operator {was.get('operator_id')}) and is now in sub-topology "
                f"{now['sub_topology']} (operator {now['operator_id']})")
        elif was.get("params") != now["params"]:
            notes.append(f"store {name!r} changed its parameters from {was.get('params')} to "
                         f"{now['params']}: its state is kept")
    for name in sorted(set(new["stores"]) - set(old.get("stores", {}))):
        notes.append(f"store {name!r} is new: it starts empty")
    return refused, notes


def check_resumable(old: dict[str, Any], new: dict[str, Any], checkpoint_dir: str) -> None:
    """Raise :class:`CheckpointLayoutError` naming every change that stops ``checkpoint_dir``
    from being resumed; log the changes it resumes across."""
    refused, notes = layout_changes(old, new)
    app = new["application_id"]
    for note in notes:
        log.warning("application %r resumes checkpoint %s: %s", app, checkpoint_dir, note)
    if refused:
        raise CheckpointLayoutError(
            f"application {app!r} cannot resume checkpoint {checkpoint_dir}: "
            + "; ".join(refused)
            + ". Start it with a new checkpoint_dir (its state is then rebuilt from its "
            "inputs), or run the application as it was.")
