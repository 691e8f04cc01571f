"""Spark's exceptions turned into kspark's at the API surface.

A failed query raises Spark's ``StreamingQueryException``, whose first line is always Spark's
(``[STREAM_FAILED] ... [FOREACH_BATCH_USER_FUNCTION_ERROR] ...``); kspark's own message is
somewhere in the Python traceback it carries. :func:`as_kspark_error` finds it and gives the
same kspark exception type with that message first, Spark's exception as its cause.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from kspark.errors import KsparkError, StreamsError

#: ``kspark.errors.StreamsError: message`` (or any kspark module's error) in a traceback
_KSPARK_LINE = re.compile(r"^(kspark(?:\.\w+)+)\.(\w+): (.+)$", re.MULTILINE)
#: the last line of a Python traceback: ``ValueError: message``
_PYTHON_LINE = re.compile(r"^((?:\w+\.)*\w*(?:Error|Exception)): (.+)$", re.MULTILINE)
_SPARK_PREFIX = re.compile(r"^(\[[A-Z_]+\] )+")
#: Spark's wrapping of a query's failure, around the message that says what happened
_QUERY_WRAP = re.compile(r"Query \[id = [^\]]*\] terminated with exception: ")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
#: Java's and the C library's words for ENOSPC
_NO_SPACE = "No space left on device"
#: a file system with less free than this (or 1 %) counts as full
_NEARLY_FULL = 16 * 1024 * 1024


def _error_types() -> dict[str, type[KsparkError]]:
    found: dict[str, type[KsparkError]] = {}
    pending: list[type[KsparkError]] = [KsparkError]
    while pending:
        cls = pending.pop()
        found[f"{cls.__module__}.{cls.__name__}"] = cls
        pending.extend(cls.__subclasses__())
    return found


def as_kspark_error(exc: BaseException, app_id: str,
                    checkpoint_dir: str | None = None) -> KsparkError:
    """The kspark error ``exc`` (raised by Spark for the query of application ``app_id``)
    carries: the outermost kspark error in its Python traceback, else the Python error that
    stopped a worker, else Spark's own message (naming ``checkpoint_dir`` first when the
    failure is about it); each as a kspark type naming the app."""
    if isinstance(exc, KsparkError):
        return exc
    text = str(exc)
    matches = list(_KSPARK_LINE.finditer(text))
    if matches:
        last = matches[-1]
        cls = _error_types().get(f"{last.group(1)}.{last.group(2)}", StreamsError)
        error: KsparkError = _instance(cls, last.group(3).strip())
    else:
        python = [m for m in _PYTHON_LINE.finditer(text)
                  if not m.group(1).startswith(("pyspark.", "py4j."))]
        if python:
            name, message = python[-1].group(1), python[-1].group(2).strip()
            error = StreamsError(f"application {app_id!r} stopped: {name}: {message}")
        else:
            first = _SPARK_PREFIX.sub("", text.strip().splitlines()[0] if text.strip() else "")
            first = _SQLSTATE.sub("", _QUERY_WRAP.sub("", first))
            if _NO_SPACE in text:
                error = _no_space(app_id, checkpoint_dir, first)
            elif checkpoint_dir and checkpoint_dir.rstrip("/") in first:
                error = StreamsError(f"application {app_id!r}: checkpoint directory "
                                     f"{checkpoint_dir} cannot be written: {first}")
            else:
                error = StreamsError(f"application {app_id!r} stopped: {type(exc).__name__}: "
                                     f"{first or 'no message'}")
    error.__cause__ = exc
    return error


def _no_space(app_id: str, checkpoint_dir: str | None, first: str) -> StreamsError:
    """A failure for want of disk space: on the checkpoint directory's file system when that
    is (nearly) full, which Spark's message does not say."""
    if checkpoint_dir and os.path.isdir(checkpoint_dir):
        usage = shutil.disk_usage(checkpoint_dir)
        space = f"{_size(usage.free)} free of {_size(usage.total)}"
        if usage.free < max(_NEARLY_FULL, usage.total // 100):
            return StreamsError(
                f"application {app_id!r}: checkpoint directory {checkpoint_dir} cannot be "
                f"written: no space left on device ({space} on its file system); free space "
                f"and start again: the query resumes from its last committed batch")
        return StreamsError(
            f"application {app_id!r} stopped: no space left on device, not on the checkpoint "
            f"directory's file system ({checkpoint_dir}: {space}): on Spark's local "
            f"directories (spark.local.dir) or a sink's: {first}")
    return StreamsError(f"application {app_id!r} stopped: no space left on device: {first}")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    value, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"


def _instance(cls: type[KsparkError], message: str) -> KsparkError:
    try:
        return cls(message)
    except TypeError:  # an error type with other constructor arguments
        return StreamsError(f"{cls.__name__}: {message}")


@contextmanager
def kspark_errors(app_id: str, checkpoint_dir: str | None = None) -> Iterator[None]:
    """Raise what the block raises as a kspark error (:func:`as_kspark_error`)."""
    try:
        yield
    except KsparkError:
        raise
    except Exception as exc:
        if _is_spark(exc):
            raise as_kspark_error(exc, app_id, checkpoint_dir) from exc
        raise


def _is_spark(exc: BaseException) -> bool:
    """Whether ``exc`` comes from Spark or Py4J (not a plain Python error of the caller)."""
    module = type(exc).__module__
    return module.startswith(("pyspark", "py4j"))
