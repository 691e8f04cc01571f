"""The topology graph."""

from kspark.topology.topology import SubTopology, Topology, TopologyDescription

__all__ = ["SubTopology", "Topology", "TopologyDescription"]
