"""Internal: how the test driver keeps what a run writes. Not part of the public API: use
:mod:`kspark.testing`."""
