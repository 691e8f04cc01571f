"""Processor API: processors, their context and punctuation."""

from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.punctuation import Cancellable, PunctuationType

__all__ = ["Cancellable", "Processor", "ProcessorContext", "PunctuationType"]
