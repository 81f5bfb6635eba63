"""ZeRO-3's working set under torch FSDP: which units are gathered while a unit runs its backward.

A stack's ZeRO-3 is FSDP2 (`fully_shard`, FSDP2_STACKS), FSDP1 (`FullyShardedDataParallel`,
FSDP1_STACKS) or DeepSpeed's (every other stack: models/memory/overhead.py). FSDP gathers whole
units: one per decoder layer in every stack modelled, and the embedding, final norm and lm_head
either left to the root unit (ROOT_GATHERED_STACKS; torchtitan before 83e6941, the torchtitan-root-fsdp
stack: pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py L339 `fully_shard(model,
...)` after the blocks) or wrapped apart (torchtitan: tok_embeddings
alone, [norm, output] together, pytorch/torchtitan@73a0e69 (v0.2.2)
torchtitan/models/llama3/infra/parallelize.py apply_fsdp; torchtune's full fine-tunes:
custom_sharded_layers ['tok_embeddings', 'output'], the root keeping the final norm).

While unit i runs its backward, FSDP2 holds (torch 2.13
torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py):
- unit i's unsharded parameters, in the MixedPrecisionPolicy's param_dtype (`pre_backward` ->
  `unshard`, `wait_for_unshard`);
- the unit that runs its backward next, all-gathered in advance (`pre_backward` ->
  `_backward_prefetch` -> `_prefetch_unshard`; its all-gather output is live until its own
  `wait_for_unshard` copies it out);
- unit i's unsharded gradients, in param_dtype, until its `post_backward`;
- the reduce-scatter input of the unit whose backward ran before, in the reduce dtype
  (_fsdp_collectives.py foreach_reduce `reduce_scatter_comm.allocate(..., dtype=reduce_dtype)` on
  the current stream; `comm_ctx.reduce_scatter_states` keeps it, at most
  `reduce_scatter_max_input_buffers` = 1, until the next unit's `post_backward` pops it).
FSDP1 (torch/distributed/fsdp/_runtime_utils.py, BackwardPrefetch.BACKWARD_PRE, the default, and
limit_all_gathers: two all-gathers in flight) holds the same but the reduce-scatter input: the
padded unsharded gradient is reduce-scattered and freed in the unit's own post-backward hook
(`_reduce_grad`, `_no_dispatch_record_stream`).

The root unit, where it holds both the embedding and the lm_head, is gathered through the whole
backward: its pre-backward runs when the loss's gradient reaches the lm_head (the first module the
backward meets) and its post-backward in the final callback (`_root_post_backward_final_callback`:
the token ids it reads need no gradient), after the embedding's, whatever reshard_after_forward
(torch FSDP2 before pytorch/pytorch#154704 also never resharded the root after forward;
FSDP1 `_post_forward_reshard`: "Do not free the root's parameters in the post-forward"). Its
trainable lm_head's unsharded gradient lives as long (a full fine-tune's: FSDP2 keeps
`unsharded_param.grad` until `post_backward`).

Not counted: FSDP2 allocates every all-gather output on `all_gather_copy_in_stream`
(_fsdp_collectives.py foreach_all_gather) and in the forward keeps the previous unit's output until
the next unit's copy-out (`wait_for_unshard`: `comm_ctx.all_gather_state`), so that stream's pool
grows to the largest two consecutive units of the forward, which the caching allocator does not
hand to the default stream (c10/cuda/CUDACachingAllocator.cpp: "once freed, blocks can be
re-allocated on the same stream, but not on any other stream"). Those bytes are cached, not
allocated, and a failed cudaMalloc first releases every stream's free cached segments
(`release_cached_blocks`) before reporting out of memory, so they show in max_memory_reserved only
with memory to spare and do not decide a fit; counted, they put torchtune's published 70B LoRA and
405B QLoRA peaks at 1.25 and 1.34 x (docs/memory-model.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.architecture.lora import trainable_params
from vramplan.models.architecture.params import count_params, layer_groups, layer_norm_params
from vramplan.models.architecture.quantization import quantised_layer_bytes
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import (
    FP32_REDUCE_STACKS,
    FSDP1_STACKS,
    FSDP2_STACKS,
    ROOT_GATHERED_STACKS,
    SEPARATE_END_UNITS_STACKS,
)
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.precision import FP32_BYTES, weight_bytes_per_param


@dataclass(frozen=True)
class Unit:
    """One FSDP unit on one rank (its TP shard): bytes as gathered, of its unsharded gradient (in
    param_dtype) and of its reduce-scatter input (in the reduce dtype)."""

    gathered_bytes: int
    grad_bytes: int = 0
    reduce_bytes: int = 0


def fsdp_version(job: Job) -> int | None:
    """2 for FSDP2, 1 for FSDP1, None where ZeRO-3 is DeepSpeed's (or the stack is not one of FSDP's).
    litgpt's full fine-tune is FSDP1 (Lightning-AI/litgpt@2685705 finetune/full.py FSDPStrategy,
    one unit per Block), its LoRA FSDP2 (finetune/lora.py ModelParallelStrategy + fully_shard)."""
    if job.stack in FSDP2_STACKS:
        return 1 if job.stack == "litgpt" and job.method == "full" else 2
    if job.stack in FSDP1_STACKS:
        return 1
    return None


def root_holds_ends(job: Job) -> bool:
    """Whether the root unit holds the embedding and the lm_head (gathered through the backward).
    torchtune's LoRA recipe wraps only `layers.i` (pytorch/torchtune@30b8519e8
    recipes/lora_finetune_distributed.py _is_layer_name; v0.6.1 70B_lora.yaml leaves
    custom_sharded_layers commented out), its full configs shard tok_embeddings and output apart
    (70B_full.yaml, 8B_full.yaml `custom_sharded_layers: ['tok_embeddings', 'output']`)."""
    if job.stack not in ROOT_GATHERED_STACKS:
        return False
    return not (job.stack == "torchtune" and job.method == "full")


def ends_apart(job: Job) -> bool:
    """Whether the embedding and the lm_head are units of their own (SEPARATE_END_UNITS_STACKS;
    torchtune's full fine-tunes, root_holds_ends)."""
    return job.stack in SEPARATE_END_UNITS_STACKS or (job.stack == "torchtune" and job.method == "full")


def layer_gathered_bytes(arch: Architecture, job: Job, weight_bytes: int) -> int:
    """The largest decoder layer as gathered: 16-bit, or a 4-bit base's quantised storage
    (models/architecture/quantization.py quantised_layer_bytes)."""
    sizes = []
    for group in layer_groups(arch):
        norms = layer_norm_params(arch, group)
        quantised = quantised_layer_bytes(arch, job, weight_bytes, group.modules, norms)
        sizes.append(quantised if quantised is not None
                     else (sum(m.num_params for m in group.modules) + norms) * weight_bytes)
    return max(sizes)


def _largest_layer_params(arch: Architecture) -> int:
    return max(sum(m.num_params for m in g.modules) + layer_norm_params(arch, g) for g in layer_groups(arch))


def units(arch: Architecture, job: Job, plan: Plan) -> tuple[Unit | None, list[Unit]]:
    """(the root unit where it holds the embedding and lm_head, the other units in backward order).
    Every decoder layer is counted as the largest one; three stand for all."""
    weight_bytes = int(weight_bytes_per_param(plan.precision))
    reduce = FP32_BYTES if job.stack in FP32_REDUCE_STACKS else weight_bytes
    tp = plan.tp
    full = job.method == "full"
    counts = count_params(arch)
    layer_trainable = _largest_layer_params(arch) if full else ceil_div(trainable_params(arch, job), arch.num_layers)
    layer_trainable = ceil_div(layer_trainable, tp)
    layer = Unit(ceil_div(layer_gathered_bytes(arch, job, weight_bytes), tp), layer_trainable * weight_bytes,
                 layer_trainable * reduce)
    # a tied lm_head's weight is the token embedding's (not the rest of the embedding count: Gemma 4's per-layer inputs)
    head = counts.lm_head or arch.vocab_size * arch.hidden_size
    layers = [layer] * min(3, arch.num_layers)
    if root_holds_ends(job):
        root_params = counts.embedding + counts.vision + counts.final_norm + counts.lm_head  # the tower: unwrapped
        root_grads = ceil_div(head, tp) * weight_bytes if full else 0
        return Unit(ceil_div(root_params, tp) * weight_bytes, root_grads), layers
    if not ends_apart(job):
        return None, layers
    embedding_params = ceil_div(counts.embedding, tp)
    embedding = Unit((embedding_params + counts.vision) * weight_bytes, embedding_params * weight_bytes * full,
                     embedding_params * reduce * full)
    if not counts.lm_head:  # tied: the output unit holds the final norm only
        return None, [*layers, embedding]
    output_params = ceil_div(counts.lm_head + counts.final_norm, tp)
    output = Unit(output_params * weight_bytes, output_params * weight_bytes * full, output_params * reduce * full)
    return None, [output, *layers, embedding]


def working_set_bytes(arch: Architecture, job: Job, plan: Plan, stage_gathered: bool = False) -> int:
    """The most FSDP holds gathered at one time during the backward, beside the sharded states
    (the module docstring): the root where it holds the embedding and lm_head, then the largest of
    (the unit in backward + its gradient + the prefetched next unit + under FSDP2 the previous
    unit's reduce-scatter input). `stage_gathered` (model_states keeps_stage_gathered: torchtitan's
    pipeline stage stays gathered and accumulates its gradients in fp32, counted in the states):
    only the unit's own gradient in param_dtype, made by autograd before post_backward accumulates
    it into the fp32 buffer (_fsdp_param.py accumulate_unsharded_grad_if_needed), the root's included
    where it holds the lm_head (torchtitan-root-fsdp: the last stage's root holds norm and output)."""
    version = fsdp_version(job)
    root, backward = units(arch, job, plan)
    if stage_gathered:
        return max(unit.grad_bytes for unit in (backward if root is None else [root, *backward]))
    held = 0
    for i, unit in enumerate(backward):
        prefetched = backward[i + 1].gathered_bytes if i + 1 < len(backward) else 0
        reduce_input = backward[i - 1].reduce_bytes if i > 0 and version == 2 else 0
        held = max(held, unit.gathered_bytes + unit.grad_bytes + prefetched + reduce_input)
    return held + (root.gathered_bytes + root.grad_bytes if root is not None else 0)
