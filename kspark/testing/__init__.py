"""The in-process test driver."""

from kspark.testing.driver import TestInputTopic, TestOutputTopic, TopologyTestDriver
from kspark.testing.test_record import TestRecord

__all__ = ["TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver"]
