"""Latency of one ring collective, NCCL's own cost model.

NCCL picks an algorithm per call from a latency + size / bandwidth model (NVIDIA/nccl
src/graph/tuning.cc, ncclTopoTuneModel, commit 01afd20): all-gather and reduce-scatter only run
as rings, whose latency is the base latency of the Simple protocol (large messages) plus one hop
latency per ring step: nRanks - 1 steps, nNodes - 1 of them over the network and the rest over
NVLink. With the constants there (baseLat Ring/Simple 8.4 us; hwLat Ring/Simple NVLink 3.4 us,
NET 9.6 us), one all-gather over 2,048 ranks on 512 nodes costs ~10 ms whatever its size, which is
what makes per-layer ZeRO-3 gathers over thousands of ranks slow (models/time/performance.py).
"""

from __future__ import annotations

from vramplan.models.core.units import BYTES_PER_GB, US_PER_S, ceil_div
from vramplan.models.time.calibration import COMMUNICATION_EFFICIENCY

RING_BASE_US = 8.4  # tuning.cc baseLat[Ring][Simple]
RING_NVLINK_STEP_US = 3.4  # hwLat[NVLINK][Ring][Simple]
RING_NET_STEP_US = 9.6  # hwLat[NET][Ring][Simple]


def link_seconds(num_bytes: float, link_gb_per_s: float) -> float:
    """Bytes over a link at COMMUNICATION_EFFICIENCY of its rate (solver/bound_arrays.py divides by
    the same product, in order)."""
    return num_bytes / (link_gb_per_s * COMMUNICATION_EFFICIENCY.value * BYTES_PER_GB)


def ring_latency_s(ranks: int, nodes: int) -> float:
    """One all-gather or reduce-scatter over `ranks` GPUs on `nodes` instances (0 for one rank)."""
    if ranks <= 1:
        return 0.0
    inter = max(0, min(nodes, ranks) - 1)
    return (RING_BASE_US + (ranks - 1 - inter) * RING_NVLINK_STEP_US + inter * RING_NET_STEP_US) / US_PER_S


def group_nodes(ranks: int, stride: int, gpus_per_instance: int) -> int:
    """Instances a group of `ranks` GPUs `stride` ranks apart spans (Megatron's order puts DP
    ranks tp x cp apart): one while the whole span fits one instance."""
    if ranks * stride <= gpus_per_instance:
        return 1
    per_instance = max(1, gpus_per_instance // stride)
    return ceil_div(ranks, per_instance)
