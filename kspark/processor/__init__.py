"""Processor API: processors, their context and punctuation."""

from kspark.processor.api import Processor, ProcessorContext
from kspark.processor.fixed_key import FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord
from kspark.processor.punctuation import Cancellable, PunctuationType
from kspark.processor.value_transformer import ForwardingDisabledContext, ValueTransformerWithKey

__all__ = ["Cancellable", "FixedKeyProcessor", "FixedKeyProcessorContext", "FixedKeyRecord",
           "ForwardingDisabledContext", "Processor", "ProcessorContext", "PunctuationType",
           "ValueTransformerWithKey"]
