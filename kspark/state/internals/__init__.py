"""Internal: what the stores are built from (the store base with caching and change capture,
segments, bucket persistence, changelog encoding). Not part of the public API: use
:mod:`kspark.state` and :class:`kspark.state.Stores`."""
