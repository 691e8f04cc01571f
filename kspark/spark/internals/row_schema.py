"""The columns of every row between kspark's sources and stages on Spark (see
:mod:`kspark.spark.internals.wire` for what the rows carry and how): plain names and types, so
that a source's planning, which Spark runs in Python processes of its own, imports no Arrow,
numpy or pandas to declare its schema."""

from __future__ import annotations

#: the columns of every row between kspark's sources and stages, and their types
ROW_TYPES = [("kind", "string"), ("topic", "string"), ("key", "binary"), ("value", "binary"),
             ("timestamp", "long"), ("partition", "int"), ("offset", "long"), ("task", "string"),
             ("headers", "binary")]
ROW_COLUMNS = [c for c, _ in ROW_TYPES]
ROW_DDL = ", ".join(f"{c} {t}" for c, t in ROW_TYPES)
