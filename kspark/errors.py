"""Exceptions raised by kspark. Each message names what failed and where."""

from __future__ import annotations


class KsparkError(Exception):
    """Base class of every kspark error."""


class ConfigError(KsparkError, ValueError):
    """A setting is unknown or has a value of the wrong type; the message names it."""


class TopologyError(KsparkError):
    """The topology is malformed (unknown parent, duplicate name, unknown store...)."""


class StreamsError(KsparkError):
    """Processing stopped: a record could not be processed."""

    #: whether the message already names the record (task, topic, partition, offset)
    located: bool = False


class BadInputError(StreamsError):
    """A source could not make a record of its input (a file row without a usable timestamp,
    for example); the message names the source, the file and line or the partition and offset,
    the field and the value."""

    located = True


class SerializationError(KsparkError):
    """A serde could not serialize or deserialize a value."""


class InvalidStateStoreError(KsparkError):
    """A store was used wrongly (unknown name, read-only, closed)."""


class NoSuchElementError(KsparkError):
    """Read from an empty output topic in the test driver."""


class BufferFullError(StreamsError):
    """A suppression buffer configured to shut down when full became full."""


class CheckpointLayoutError(StreamsError):
    """A checkpoint's state layout is not one this application and kspark version can resume
    (see docs/api.md, Upgrades and topology changes)."""
