"""JSON text as the ``Json`` serde writes and reads it: compact separators, CPython's C encoder
built once, and msgspec's decoder for what it decodes as Python's does."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import numpy as np


def _plain(value: Any) -> Any:
    """numpy's (and so pandas') scalars as the Python values they hold, arrays as lists;
    anything else is not JSON."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


DECODER = json.JSONDecoder()
#: msgspec's decoder of JSON bytes (untyped): the value ``DECODER`` gives for every document
#: both accept (integers of any size as ints, floats rounded alike, duplicate keys the last
#: one's value); it refuses what only ``DECODER`` takes (``NaN``, ``Infinity``, a number
#: beyond a float's range, a lone surrogate escape), which then goes to ``DECODER``
FAST_DECODE = msgspec.json.Decoder().decode
ENCODER = json.JSONEncoder(separators=(",", ":"), default=_plain)
#: CPython's C encoder built once: ``json.dumps(value, separators=(",", ":"))`` without
#: building an encoder per call (``JSONEncoder.encode`` builds one); no circular-reference check
#: (a cyclic value fails with a RecursionError instead, reported the same way); ``None`` where
#: the C encoder is missing
_C_JSON = getattr(json.encoder, "c_make_encoder", None)
ONE_SHOT = None if _C_JSON is None else _C_JSON(
    None, _plain, json.encoder.encode_basestring_ascii, None, ":", ",",
    False, False, True,
)


def json_text(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))``."""
    if ONE_SHOT is None:
        return ENCODER.encode(value)
    return "".join(ONE_SHOT(value, 0))
