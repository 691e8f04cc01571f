"""Internal: what the runtimes compute from a topology (the execution plan: tasks and
partitions; the stores restored from source topics). Not part of the public API."""
