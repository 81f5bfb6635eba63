"""A fragmentation reserve sized from the largest transient allocation.

Why a reserve on top of the tensors: PyTorch's CUDA caching allocator
(c10/cuda/CUDACachingAllocator.cpp) serves requests above 1 MiB from the large pool, rounds
them up to 2 MiB (`kRoundLarge`) and gives a request larger than `kLargeBuffer` (20 MiB) a segment
of its own size from cudaMalloc. A multi-GB transient (the fp32 logits gradient of an eager loss,
a rebuilt layer under recompute) freed after its use stays cached in that segment; the next
allocations are carved out of it (blocks are split), so when the same multi-GB request comes back
in the next step the segment is no longer free as one block and the allocator cudaMallocs another:
`memory_reserved` exceeds `memory_allocated` by up to one copy of the largest transient. torchtune
logs both (`log_memory_stats`: "peak memory alloc" and "peak memory reserved"), and so do its
published runs.

The rule (the Job field `fragmentation_fraction`, per stack in catalogues/stacks.csv):
reserve = fraction x the largest single transient block of the step, with fraction 1 (one stranded
copy) under the default allocator and 0 under `expandable_segments:True` (segments grow in place
and freed pages are remapped, so no second copy is needed: torchtitan's run_train.sh and Unsloth
set it). The `hf` preset keeps 0 so that the default reproduces vramplan's numbers from before the
presets; tests/data/measured_peaks.csv shows what that costs at long context
(docs/stacks.md). The reserve is added to the activations pillar and replaces nothing of the user's
`capacity_fraction`.
"""

from __future__ import annotations

import math

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.saved_tensors import Shape
from vramplan.models.memory.sparse_attention_terms import indexer_largest_block_bytes


def largest_layer_transient_bytes(arch: Architecture, x: Shape) -> int:
    """The largest single tensor a layer's backward allocates: an f-wide gradient of the routed tokens."""
    return x.e * x.t * arch.experts_per_token * arch.intermediate_size


def fragmentation_reserve_bytes(arch: Architecture, job: Job, x: Shape, loss_transient_bytes: int, tp: int = 1) -> int:
    """The reserve on one rank of a TP group: the layers' f-wide gradients and the vocab-parallel loss's
    blocks are / tp; a DeepSeek Sparse Attention indexer's largest fp32 tensor (whole on every rank:
    models/memory/sparse_attention_terms.py) is one block of its own."""
    largest = max(loss_transient_bytes, largest_layer_transient_bytes(arch, x))
    sharded = ceil_div(math.ceil(job.fragmentation_fraction * largest), tp)
    return max(sharded, math.ceil(job.fragmentation_fraction * indexer_largest_block_bytes(arch, x)))
