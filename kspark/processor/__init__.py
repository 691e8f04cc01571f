"""Processor API: processors, their context and punctuation."""

from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.fixed_key import FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord
from kspark.processor.punctuation import Cancellable, PunctuationType

__all__ = ["Cancellable", "FixedKeyProcessor", "FixedKeyProcessorContext", "FixedKeyRecord",
           "Processor", "ProcessorContext", "PunctuationType"]
