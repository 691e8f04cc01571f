"""Immutable value classes that are fast both compiled and as pure Python.

``Record``, ``Window`` and ``Windowed`` are plain classes with ``__slots__`` whose
``__setattr__`` refuses every assignment (``dataclasses.FrozenInstanceError``), as a frozen
dataclass's does. Compiled with mypyc (:mod:`kspark.compiled`), their ``__init__`` stores the
attributes directly and never calls ``__setattr__``; as pure Python it would, so their modules
give them, in pure Python only, an ``__init__`` that sets the slots through the slots'
descriptors (:func:`slot_setters`), the fastest way CPython has. Each class defines its own
``__setattr__``: inherited from a base class, it would catch the compiled stores too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from types import FunctionType
from typing import Any


def pure_python_class(cls: type) -> bool:
    """Whether ``cls`` runs as pure Python (its ``__init__`` a Python function), not compiled."""
    return isinstance(vars(cls).get("__init__"), FunctionType)


def slot_setters(cls: type, *names: str) -> tuple[Callable[[Any, Any], None], ...]:
    """The functions that set ``cls``'s slots ``names``, in that order, past its
    ``__setattr__``."""
    return tuple(vars(cls)[name].__set__ for name in names)


def reduce_frozen(obj: Any) -> tuple[Any, ...]:
    """``__reduce__`` for a frozen dataclass compiled with mypyc, whose default unpickling
    would assign its fields one by one and be refused: its class, called with its fields."""
    return type(obj), tuple(getattr(obj, f.name) for f in fields(obj))
