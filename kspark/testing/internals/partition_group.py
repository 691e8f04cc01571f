"""The order in which the test driver processes the records its topology writes to topics it
reads itself (repartition topics), as Kafka Streams' ``TopologyTestDriver`` does: a queue per
topic, and among the topics with records waiting the one whose first record has the smallest
timestamp next (``PartitionGroup.nextRecord``), its ties broken as ``java.util.PriorityQueue``
breaks them (a binary heap: not first in, first out)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from kspark.runtime.task import OutputRecord

T = TypeVar("T")


class JavaPriorityQueue(Generic[T]):
    """``java.util.PriorityQueue`` ordered by ``key``: its heap's sift up and sift down, so
    that equal keys come out in Java's order."""

    def __init__(self, key: Callable[[T], int]) -> None:
        self._heap: list[T] = []
        self._key = key

    def __len__(self) -> int:
        return len(self._heap)

    def offer(self, item: T) -> None:
        heap, key = self._heap, self._key
        heap.append(item)
        k, x = len(heap) - 1, key(item)
        while k > 0:
            parent = (k - 1) >> 1
            if x >= key(heap[parent]):
                break
            heap[k] = heap[parent]
            k = parent
        heap[k] = item

    def poll(self) -> T | None:
        heap, key = self._heap, self._key
        if not heap:
            return None
        first, last = heap[0], heap.pop()
        n = len(heap)
        if n:
            k, x, half = 0, key(last), n >> 1
            while k < half:
                child = 2 * k + 1
                right = child + 1
                if right < n and key(heap[child]) > key(heap[right]):
                    child = right
                if x <= key(heap[child]):
                    break
                heap[k] = heap[child]
                k = child
            heap[k] = last
        return first


class InternalRecords:
    """The records waiting in the topics a topology writes and reads: :meth:`add` them as they
    are written, :meth:`next` gives the one Kafka Streams' driver processes next."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[OutputRecord]] = {}
        self._by_time: JavaPriorityQueue[deque[OutputRecord]] = JavaPriorityQueue(
            lambda queue: queue[0].timestamp)

    def add(self, records: Iterable[OutputRecord]) -> None:
        for record in records:
            queue = self._queues.get(record.topic)
            if queue is None:
                queue = self._queues[record.topic] = deque()
            queue.append(record)
            if len(queue) == 1:
                self._by_time.offer(queue)

    def next(self) -> OutputRecord | None:
        queue = self._by_time.poll()
        if queue is None:
            return None
        record = queue.popleft()
        if queue:
            self._by_time.offer(queue)
        return record
