"""Parameters held by one rank under tensor, pipeline and expert parallelism.

What Megatron-Core builds on a rank (megatron/core/tensor_parallel/layers.py and
transformer/*):
- TP (t) splits every matmul of a layer: column-parallel q/k/v and MLP up/gate (output dim / t,
  with their biases), row-parallel o_proj and MLP down (input dim / t; the row-parallel bias is
  replicated); KV heads / t, or one replicated KV group per rank when t > kv heads. The token
  embedding and lm_head are vocab-parallel (VocabParallelEmbedding, ColumnParallelLinear): v / t
  rows (Megatron pads v to a multiple of 128 t; we count ceil(v / t)). Norms, the MoE router and
  learned position embeddings are replicated on every TP rank.
- PP keeps the rank's stage layers (models/parallel.stage_layers); the embedding lives on the first
  rank; the final norm and lm_head on the last. A tied lm_head on pp > 1 is a second copy of the
  embedding on the last rank (Megatron's shared embedding, its gradients all-reduced between the two).
- EP (e) keeps num_experts / e experts per rank, each split by expert-TP = t.
Expert parameters are sharded by ZeRO / the distributed optimizer over the expert-DP group
(Plan.expert_dp), dense ones over DP x CP (Plan.zero_group).

FP8 (Transformer Engine): each linear weight of the rank gets fp8 row- and column-wise copies
(2 bytes per matmul weight), i.e. sharded exactly like the weights they copy; under ZeRO-3 / FSDP
they are cast from the sharded weights and all-gathered in fp8 (torchao float8 FSDP all-gather),
so they are divided by the ZeRO group like the bf16 weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from vramplan.models.architecture.lora import lora_params_per_layer, trainable_params
from vramplan.models.architecture.parallel import Split, candidate_stages, kv_heads_per_rank, split_of
from vramplan.models.architecture.params import (
    LayerGroup,
    LinearModule,
    count_params,
    layer_architecture,
    layer_group,
    layer_group_counts,
    layer_groups,
    layer_norm_params,
    per_layer_input_params,
)
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job
from vramplan.models.core.units import ceil_div

_KV_MODULES = frozenset({"k_proj", "v_proj"})
_REPLICATED_MODULES = frozenset({"gate"})  # the MoE router
_ROW_PARALLEL = frozenset({"o_proj", "down_proj", "attn.c_proj", "mlp.c_proj", "w2"})


@dataclass(frozen=True)
class RankParams:
    """Parameters on one rank: dense (sharded by ZeRO over DP x CP) and expert (over expert-DP)."""

    dense: int
    expert: int
    fp8_matmul_dense: int  # matmul weights that get FP8 copies, dense part
    fp8_matmul_expert: int

    @property
    def total(self) -> int:
        return self.dense + self.expert


def _module_rank_params(module: LinearModule, arch: Architecture, tp: int) -> tuple[int, int]:
    """(parameters, matmul weight elements) of one copy of a linear module on one TP rank."""
    weight = module.in_features * module.out_features
    bias = module.out_features if module.has_bias else 0
    if module.name in _REPLICATED_MODULES:
        return weight + bias, weight
    if module.name in _KV_MODULES:
        rows = module.out_features * kv_heads_per_rank(arch.num_kv_heads, tp) // arch.num_kv_heads
        return module.in_features * rows + (rows if module.has_bias else 0), module.in_features * rows
    shard = ceil_div(weight, tp)
    if module.name in _ROW_PARALLEL:
        return shard + bias, shard
    return shard + ceil_div(bias, tp), shard


@dataclass(frozen=True)
class LayerShard:
    dense: int
    expert: int
    dense_matmul: int
    expert_matmul: int


def layer_shard(arch: Architecture, tp: int, ep: int, group: LayerGroup | None = None) -> LayerShard:
    """One decoder layer of kind `group` (default the last layer's) on one (TP, EP) rank."""
    group = layer_group(arch, arch.num_layers - 1) if group is None else group
    dense = layer_norm_params(arch, group)
    expert = dense_matmul = expert_matmul = 0
    shape = layer_architecture(arch, group.local)  # the KV heads its k/v projections shard by
    for module in group.modules:
        params, matmul = _module_rank_params(module, shape, tp)
        if module.copies_per_layer > 1:
            local = module.copies_per_layer // ep
            expert += local * params
            expert_matmul += local * matmul
        else:
            dense += params
            dense_matmul += matmul
    return LayerShard(dense, expert, dense_matmul, expert_matmul)


def embedding_shard(arch: Architecture, tp: int) -> int:
    """Vocab-parallel token embedding (+ replicated learned positions) on one TP rank, and a multimodal
    checkpoint's vision tower and projector and Gemma 4's per-layer input embeddings (table, projection and
    norm), whole on every TP rank of the first stage (counted as replicated: no stack's TP plan for them is
    modelled; transformers' Gemma 4 tp_plan names neither)."""
    return (ceil_div(arch.vocab_size, tp) * arch.hidden_size + arch.position_embedding_params + arch.vision_params
            + per_layer_input_params(arch))


def head_shard(arch: Architecture, tp: int, pp: int) -> int:
    """Final norm and lm_head on the last rank: a tied head is the embedding itself on pp = 1 and
    a second copy of its vocab shard on pp > 1."""
    if arch.tie_word_embeddings and pp == 1:
        lm_head = 0
    else:
        lm_head = ceil_div(arch.logits_width, tp) * arch.hidden_size
    return count_params(arch).final_norm + lm_head


def stage_layer_counts(arch: Architecture, pipeline: int | Split, stage: int) -> tuple[tuple[LayerGroup, int], ...]:
    """(kind of layer, how many of them) on pipeline rank `stage`, which holds a contiguous run of
    layers (`pipeline`: a depth, its default split, or a split: models/architecture/parallel.py);
    one rank: models/params.layer_groups' counts."""
    counts = split_of(arch.num_layers, pipeline)
    if len(counts) == 1:
        return tuple((group, group.count) for group in layer_groups(arch))
    start = sum(counts[:stage])
    return layer_group_counts(arch, start, start + counts[stage])


@lru_cache(maxsize=4096)
def rank_params(arch: Architecture, tp: int, pipeline: int | Split, ep: int, stage: int) -> RankParams:
    """Parameters of pipeline rank `stage` on one (TP, EP) rank, summed kind of layer by kind
    (models/params.layer_groups; `pipeline`: a depth or a split). With tp = pp = ep = 1 this is
    exactly count_params(arch).total."""
    pp = len(split_of(arch.num_layers, pipeline))
    dense = expert = dense_matmul = expert_matmul = 0
    for group, count in stage_layer_counts(arch, pipeline, stage):
        layer = layer_shard(arch, tp, ep, group)
        dense += count * layer.dense
        expert += count * layer.expert
        dense_matmul += count * layer.dense_matmul
        expert_matmul += count * layer.expert_matmul
    if stage == 0:
        dense += embedding_shard(arch, tp)
    if stage == pp - 1:
        dense += head_shard(arch, tp, pp)
    return RankParams(dense=dense, expert=expert, fp8_matmul_dense=dense_matmul, fp8_matmul_expert=expert_matmul)


def rank_trainable_params(arch: Architecture, job: Job, tp: int, pipeline: int | Split, ep: int, stage: int) -> int:
    """Parameters that train on pipeline rank `stage` of one (TP, EP) rank: its whole shard under
    full training; under LoRA the adapters of the rank's layers, each split over TP: Megatron-Bridge's
    ParallelLinearAdapter (src/megatron/bridge/peft/utils.py, read at 067f987) makes linear_in
    (A) a RowParallelLinear behind a row-parallel base and a ColumnParallelLinear otherwise, and
    linear_out (B) a ColumnParallelLinear, so an adapter's r (d_in + d_out) lands / tp on each
    rank (ceil). With tp = pp = 1 this is trainable_params."""
    if job.method == "full":
        return rank_params(arch, tp, pipeline, ep, stage).total
    if tp == 1 and len(split_of(arch.num_layers, pipeline)) == 1:
        return trainable_params(arch, job)
    return sum(count * ceil_div(lora_params_per_layer(arch, job, group.modules), tp)
               for group, count in stage_layer_counts(arch, pipeline, stage))


@lru_cache(maxsize=4096)
def heaviest_rank(arch: Architecture, tp: int, pipeline: int | Split, ep: int) -> int:
    """The pipeline rank holding the most parameters (the first of equals): its data-parallel
    collectives and optimizer step take the longest, and every rank waits for them at the step's
    end. The candidate ranks (models.parallel.candidate_stages) are the only ones that can be."""
    ranks = candidate_stages(arch, pipeline)
    return max(ranks, key=lambda stage: (rank_params(arch, tp, pipeline, ep, stage).total, -stage))
