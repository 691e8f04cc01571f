"""Internal: how a topology runs on Spark (the wire format between stages, the stages, the
sources as Spark data sources, interactive queries over the state store checkpoint). Not part of
the public API; use :class:`kspark.spark.StreamsApp` and
:func:`kspark.spark.session.local_spark`."""
