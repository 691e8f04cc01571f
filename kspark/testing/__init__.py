"""The in-process test driver."""

from kspark.testing.driver import TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver

__all__ = ["TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver"]
