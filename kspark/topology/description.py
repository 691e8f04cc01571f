"""``Topology.describe()``: the text of Kafka Streams' ``TopologyDescription``, character for
character, so a description can be compared with a Java application's.

As Kafka Streams lays it out: the nodes are grouped into sub-topologies (connected by edges and
by the stores they share; a global store's source and processor are a group of their own),
numbered in the order their first node was added. Within a sub-topology nodes come by the size
of what hangs below them (largest first: 1 + the sizes of its children), then by name; each
node's ``-->`` and ``<--`` lists are sorted the same way, by the sizes at the moment each edge
was added (:func:`_neighbours`). A processor's stores are listed in the order of Java's
``HashSet`` of their names; a global store only on the processor that keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from kspark.topology.nodes import Node, ProcessorNode, SinkNode, SourceNode


class Described(Protocol):
    """What a description needs of a topology."""

    @property
    def nodes(self) -> Mapping[str, Node]: ...

    @property
    def global_nodes(self) -> Mapping[str, tuple[str, str]]:
        """Global store name -> (its source, its processor)."""
        ...

    @property
    def global_stores(self) -> Mapping[str, str]:
        """Global store name -> its topic."""
        ...


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` of ``text`` (over its UTF-16 code units), as an unsigned
    32-bit number."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_order(names: list[str], copied: bool = False) -> list[str]:
    """``names`` (in insertion order) in the iteration order of a Java ``HashSet`` or
    ``HashMap`` of them (``copied``: a ``HashSet`` copied from another set): by bucket of the
    spread hash, then insertion order."""
    capacity = 16
    while capacity * 3 // 4 < len(names) + copied:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [n for _, _, n in sorted((bucket(n), i, n) for i, n in enumerate(names))]


def _groups(topology: Described) -> list[list[str]]:
    """The node groups, numbered as Kafka Streams numbers them."""
    nodes = topology.nodes
    root = {n: n for n in nodes}

    def find(x: str) -> str:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    owner: dict[str, str] = {}
    for node in nodes.values():
        if isinstance(node, SourceNode):
            continue
        for parent in node.parents:
            root[find(node.name)] = find(parent)
        if isinstance(node, ProcessorNode):
            for store in node.stores:
                if store in topology.global_stores:
                    continue
                if store in owner:
                    root[find(node.name)] = find(owner[store])
                else:
                    owner[store] = node.name
    groups: dict[str, list[str]] = {}
    for name in nodes:
        groups.setdefault(find(name), []).append(name)
    return list(groups.values())


class _Entry:
    __slots__ = ("key", "left", "parent", "red", "right")

    def __init__(self, key: str, parent: _Entry | None) -> None:
        self.key, self.parent = key, parent
        self.left: _Entry | None = None
        self.right: _Entry | None = None
        self.red = False


class JavaTreeSet:
    """A set ordered as Java's ``TreeSet`` (a red-black tree) orders it when its comparator
    changes its mind after an element is inserted: each insertion walks down from the root
    comparing with the comparator as it is at that moment, and the tree is rebalanced as
    Java's ``TreeMap`` rebalances it. Iterates in tree order."""

    def __init__(self, compare: Callable[[str, str], int]) -> None:
        self.compare = compare
        self.root: _Entry | None = None

    def add(self, key: str) -> None:
        t, parent, cmp = self.root, None, 0
        if t is None:
            self.root = _Entry(key, None)
            return
        while t is not None:
            parent, cmp = t, self.compare(key, t.key)
            if cmp == 0:
                return
            t = t.left if cmp < 0 else t.right
        assert parent is not None
        entry = _Entry(key, parent)
        if cmp < 0:
            parent.left = entry
        else:
            parent.right = entry
        self._fix(entry)

    def _rotate(self, p: _Entry, left: bool) -> None:
        child = p.right if left else p.left
        assert child is not None
        inner = child.left if left else child.right
        if left:
            p.right = inner
        else:
            p.left = inner
        if inner is not None:
            inner.parent = p
        child.parent = p.parent
        if p.parent is None:
            self.root = child
        elif p.parent.left is p:
            p.parent.left = child
        else:
            p.parent.right = child
        if left:
            child.left = p
        else:
            child.right = p
        p.parent = child

    def _fix(self, x: _Entry) -> None:
        x.red = True
        while x is not self.root and x.parent is not None and x.parent.red:
            parent = x.parent
            grand = parent.parent
            assert grand is not None
            on_left = parent is grand.left
            uncle = grand.right if on_left else grand.left
            if uncle is not None and uncle.red:
                parent.red = uncle.red = False
                grand.red = True
                x = grand
                continue
            if x is (parent.right if on_left else parent.left):
                x = parent
                self._rotate(x, left=on_left)
            assert x.parent is not None and x.parent.parent is not None
            x.parent.red = False
            x.parent.parent.red = True
            self._rotate(x.parent.parent, left=not on_left)
        assert self.root is not None
        self.root.red = False

    def __iter__(self) -> Iterator[str]:
        stack: list[_Entry] = []
        node = self.root
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            yield node.key
            node = node.right


def _neighbours(topology: Described, group: list[str]
                ) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, int]]:
    """Each node's successors and predecessors as Kafka Streams' sorted sets hold them, and
    each node's size. Kafka Streams connects the nodes one at a time (in the order of a
    ``HashMap`` of their names), inserting each edge into both sorted sets (by size, then
    name) with the sizes the nodes have at that moment, then adding the child's size to the
    parent and its ancestors: a set is not sorted again when sizes grow later."""
    size = dict.fromkeys(group, 1)

    def compare(a: str, b: str) -> int:
        if a == b:
            return 0
        if size[a] != size[b]:
            return size[b] - size[a]
        return -1 if a < b else 1

    successors = {n: JavaTreeSet(compare) for n in group}
    predecessors = {n: JavaTreeSet(compare) for n in group}

    def grow(name: str, delta: int) -> None:
        size[name] += delta
        for parent in predecessors[name]:
            grow(parent, delta)

    for name in java_hash_order(group):
        node = topology.nodes[name]
        if isinstance(node, SourceNode):
            continue
        for parent in node.parents:
            predecessors[name].add(parent)
            successors[parent].add(name)
            grow(parent, size[name])
    return ({n: list(s) for n, s in successors.items()},
            {n: list(s) for n, s in predecessors.items()}, size)


class TopologyDescription:
    """The structure of a topology in the layout of Kafka Streams' ``describe()``."""

    def __init__(self, topology: Described) -> None:
        self.topology = topology

    def _lines(self, name: str, successors: list[str], predecessors: list[str]) -> str:
        node = self.topology.nodes[name]

        def names(listed: list[str]) -> str:
            return ", ".join(listed) if listed else "none"

        if isinstance(node, SourceNode):
            topics = (f"[{', '.join(node.topics)}]" if node.pattern is None
                      else node.pattern.pattern)
            return f"Source: {name} (topics: {topics})\n      --> {names(successors)}"
        if isinstance(node, SinkNode):
            where = (f"topic: {node.topic}" if node.topic_extractor is None
                     else f"extractor class: {node.topic_extractor!r}")
            return f"Sink: {name} ({where})\n      <-- {names(predecessors)}"
        # a global store is read without being connected, except by the processor keeping it
        kept = {store for store, (_, p) in self.topology.global_nodes.items() if p == name}
        stores = [s for s in dict.fromkeys(node.stores)
                  if s not in self.topology.global_stores or s in kept]
        return (f"Processor: {name} (stores: [{', '.join(java_hash_order(stores, True))}])"
                f"\n      --> {names(successors)}\n      <-- {names(predecessors)}")

    def __str__(self) -> str:
        topology = self.topology
        global_nodes = {n for pair in topology.global_nodes.values() for n in pair}
        text = ["Topologies:\n "]
        for number, group in enumerate(_groups(topology)):
            successors, predecessors, size = _neighbours(topology, group)

            def lines(n: str, succ: dict[str, list[str]] = successors,
                      pred: dict[str, list[str]] = predecessors) -> str:
                return f"    {self._lines(n, succ[n], pred[n])}\n"

            if set(group) & global_nodes:
                source = next(n for n in group if isinstance(topology.nodes[n], SourceNode))
                processor = next(n for n in group if n != source)
                text.append(f"  Sub-topology: {number} for global store (will not generate "
                            f"tasks)\n{lines(source)}{lines(processor)}")
            else:
                body = "".join(lines(n) for n in sorted(group, key=lambda n: (-size[n], n)))
                text.append(f"  Sub-topology: {number}\n{body}\n")
        return "".join(text)

    def __repr__(self) -> str:
        return str(self)
