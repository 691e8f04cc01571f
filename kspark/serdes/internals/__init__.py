"""Internal: what the serdes are built from. Not part of the public API: use
:mod:`kspark.serdes`."""
