"""A plan's pipeline split as each stack's launch configuration writes it, so the run holds the
layers per rank the estimate assumed (models/architecture/parallel.py plan_split).

Megatron-LM asserts that pp divides the layers unless the split is given
(megatron/training/arguments.py: 'Number of layers should be divisible by the
pipeline-model-parallel size'; core/transformer/transformer_block.py get_num_layers_to_build):
a split whose middle ranks hold alike is --decoder-first/last-pipeline-num-layers (the middle
even: 'the left over layers must be divisible by left over stages'), any other, and any uneven
interleaved split, --pipeline-model-parallel-layout (core/transformer/pipeline_parallel_layer_layout.py:
'|' between the pp x vpp virtual stages in order, virtual stage k on rank k % pp, 'E' the
embedding, 't' a decoder layer, 'L' the loss; 't*7' repeats). torchtitan takes the modules of
each model chunk in stage order (config/configs.py module_fqns_per_model_part; its own default
takes a layer off the first and the last stage, pipeline_parallel_first/last_stage_less_layers),
written whenever there is a pipeline so its split is the estimate's.
"""

from __future__ import annotations

from vramplan.models.architecture.parallel import Split, split_of
from vramplan.models.core.setup import Plan


def _chunks(split: Split, vpp: int) -> list[int]:
    """Decoder layers of the pp x vpp virtual stages in stage order (virtual stage k on rank
    k % pp): each rank's layers over its vpp chunks, the remainder on its first chunks."""
    pp = len(split)
    per_rank = [[count // vpp + (1 if v < count % vpp else 0) for v in range(vpp)] for count in split]
    return [per_rank[k % pp][k // pp] for k in range(pp * vpp)]


def megatron_split_args(plan: Plan, num_layers: int) -> list[str]:
    """Megatron's arguments for the plan's split ([] when its default, pp dividing the layers, is
    the split)."""
    split = split_of(num_layers, plan.stage_layers if plan.stage_layers is not None else plan.pp)
    if plan.pp == 1 or (len(set(split)) == 1 and num_layers % plan.pp == 0):
        return []
    if plan.vpp == 1 and len(set(split[1:-1])) <= 1:
        return [f"--decoder-first-pipeline-num-layers {split[0]}", f"--decoder-last-pipeline-num-layers {split[-1]}"]
    chunks = _chunks(split, plan.vpp)
    stages = [("E" if k == 0 else "") + (f"t*{count}" if count > 1 else "t") + ("L" if k == len(chunks) - 1 else "")
              for k, count in enumerate(chunks)]
    return [f"--pipeline-model-parallel-layout \"{'|'.join(stages)}\""]


def megatron_sets_vpp(plan: Plan, num_layers: int) -> bool:
    """Whether the layout string already sets the virtual stages (Megatron derives vpp from it and
    refuses --num-layers-per-virtual-pipeline-stage beside it)."""
    return any(arg.startswith("--pipeline-model-parallel-layout") for arg in megatron_split_args(plan, num_layers))


def torchtitan_model_parts(plan: Plan, num_layers: int) -> list[list[str]]:
    """torchtitan's module_fqns_per_model_part: each chunk's modules in stage order, the embedding
    on the first, the final norm and the output layer on the last (torchtitan's decoder models
    name them tok_embeddings, layers.N, norm, output)."""
    split = split_of(num_layers, plan.stage_layers if plan.stage_layers is not None else plan.pp)
    parts, start = [], 0
    chunks = _chunks(split, plan.vpp)
    for k, count in enumerate(chunks):
        part = (["tok_embeddings"] if k == 0 else []) + [f"layers.{i}" for i in range(start, start + count)]
        parts.append(part + (["norm", "output"] if k == len(chunks) - 1 else []))
        start += count
    return parts
