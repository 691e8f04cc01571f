"""Internal: how the DSL is built (graph and naming, the implementations of the public types of
:mod:`kspark.dsl.api`, and every DSL operator as a Processor). Not part of the public API; its
modules may change between releases."""
