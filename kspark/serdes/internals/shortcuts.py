"""A serde's single-value functions with a shortcut for the common type: the value of that type
goes the fast way first, anything else (and a value the fast way fails on) the general way,
which reports errors as the serde does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def with_shortcut(
    general: Callable[[Any], Any], kind: type, fast: Callable[[Any], Any],
    errors: type[Exception],
) -> Callable[[Any], Any]:
    """``general``, but a value of exactly type ``kind`` goes through ``fast`` first (one that
    raises ``errors`` goes the general way)."""

    def convert(value: Any) -> Any:
        if type(value) is kind:
            try:
                return fast(value)
            except errors:
                pass
        return general(value)

    return convert


def utf8_writer(general: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``with_shortcut(general, str, str.encode, UnicodeEncodeError)``, encoding as the
    compiled core encodes (no call of a method through Python)."""

    def convert(value: Any) -> Any:
        if type(value) is str:
            try:
                return value.encode()
            except UnicodeEncodeError:
                pass
        return general(value)

    return convert


def utf8_reader(general: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``with_shortcut(general, bytes, bytes.decode, UnicodeDecodeError)``, decoding as the
    compiled core decodes."""

    def convert(value: Any) -> Any:
        if type(value) is bytes:
            try:
                return value.decode()
            except UnicodeDecodeError:
                pass
        return general(value)

    return convert
