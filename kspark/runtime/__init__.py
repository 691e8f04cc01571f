"""Internal: the Task (one partition's processors, stores, stream time and punctuation), the
records and batches it runs on, and the per-batch runner both runtimes share. Not part of the
public API."""
