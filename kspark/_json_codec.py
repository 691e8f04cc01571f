"""JSON text as the ``Json`` serde writes and reads it: compact separators, CPython's C encoder
built once, msgspec's encoder for the values it writes as Python's does, and msgspec's decoder
for what it decodes as Python's does."""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec
import numpy as np


def _plain(value: Any) -> Any:
    """numpy's (and so pandas') scalars as the Python values they hold, arrays as lists;
    anything else is not JSON."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


DECODER: Final = json.JSONDecoder()
#: msgspec's decoder of JSON bytes (untyped): the value ``DECODER`` gives for every document
#: both accept (integers of any size as ints, floats rounded alike, duplicate keys the last
#: one's value); it refuses what only ``DECODER`` takes (``NaN``, ``Infinity``, a number
#: beyond a float's range, a lone surrogate escape), which then goes to ``DECODER``
FAST_DECODE: Final = msgspec.json.Decoder().decode
ENCODER: Final = json.JSONEncoder(separators=(",", ":"), default=_plain)
#: CPython's C encoder built once: ``json.dumps(value, separators=(",", ":"))`` without
#: building an encoder per call (``JSONEncoder.encode`` builds one); no circular-reference check
#: (a cyclic value fails with a RecursionError instead, reported the same way); ``None`` where
#: the C encoder is missing
_C_JSON = getattr(json.encoder, "c_make_encoder", None)
ONE_SHOT: Final = None if _C_JSON is None else _C_JSON(
    None, _plain, json.encoder.encode_basestring_ascii, None, ":", ",",
    False, False, True,
)


def json_text(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))``."""
    if ONE_SHOT is None:
        return ENCODER.encode(value)
    return "".join(ONE_SHOT(value, 0))


#: msgspec's encoder: the bytes ``json_text`` gives for a value :func:`_msgspec_writes_alike`
#: accepts, whenever those bytes are ASCII without DEL (msgspec writes other characters as they
#: are, Python's encoder escapes them)
_FAST_ENCODE: Final = msgspec.json.Encoder().encode
#: deeper values go Python's way (which also reports a cyclic value)
_MAX_DEPTH: Final = 32
#: ``bytes.isascii`` called as a function (no method looked up per value)
_IS_ASCII: Final = bytes.isascii


def _msgspec_writes_alike(value: object, depth: int) -> bool:
    """Whether msgspec writes ``value`` as Python's encoder does, ASCII aside: exactly dicts
    with str keys, lists, tuples, str, int, bool, None, and floats written without an exponent
    (zero, or 1e-4 <= abs < 1e16, where both write the shortest repr); subclasses, other types
    (which msgspec may write and Python refuses) and other floats (exponents, NaN and the
    infinities are written otherwise) are not."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if isinstance(value, float) and kind is float:
        size = abs(value)
        return size == 0.0 or 1e-4 <= size < 1e16
    if depth >= _MAX_DEPTH:
        return False
    if isinstance(value, dict) and kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            # the scalars most values hold, checked here rather than by a call each
            held = type(item)
            if not (held is str or held is int or held is bool or item is None
                    or _msgspec_writes_alike(item, depth + 1)):
                return False
        return True
    if isinstance(value, list | tuple) and (kind is list or kind is tuple):
        return all(_msgspec_writes_alike(item, depth + 1) for item in value)
    return False


def fast_json_bytes(value: object) -> bytes | None:
    """``json_text(value).encode()`` written by msgspec when that gives the same bytes; ``None``
    when it may not (the caller then writes it Python's way)."""
    if not _msgspec_writes_alike(value, 0):
        return None
    try:
        out: bytes = _FAST_ENCODE(value)
    except Exception:  # a lone surrogate: Python's encoder escapes it
        return None
    if _IS_ASCII(out) and 127 not in out:
        return out
    return None
