"""Training FLOPs per token, the convention of Korthikanti et al. (arXiv:2205.05198, App. A) and
Megatron-LM `num_floating_point_operations`.

Forward FLOPs per token: 2 x (matmul weights a token passes through: the decoder layers'
active linear weights and the lm_head) + 4 * s * (heads * head_dim) per layer for the
attention scores (QK^T) and values (softmax x V), counted over the full s x s square as the
paper and llm-foundry do. Backward costs twice the forward (input gradients and weight gradients); with LoRA/QLoRA the
frozen weights need no weight gradients, so backward costs one forward (adapters are
negligible: r << h). For the GPT layer with h = a*d,
f = 4h this is exactly 72 B s L h^2 (1 + s/(6h) + v/(12hL)) per iteration of B sequences.

Hardware FLOPs add what recompute re-runs: full recompute one more forward of every layer
(96 B s L h^2 (...) in the paper), selective recompute the attention scores/values forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from vramplan.models.architecture.params import layer_architecture, layer_groups
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Method, Plan, Recompute
from vramplan.models.memory.linear_attention_terms import GDN_CHUNK
from vramplan.models.memory.recompute import effective_mode, recomputed_fraction


@dataclass(frozen=True)
class FlopsPerToken:
    model: int  # forward + backward, the MFU numerator
    hardware: int  # plus the recomputed forward work, what the GPU really executes
    forward: int = 0  # the forward pass alone (once): what forward-phase traffic can hide behind
    linear: int = 0  # the decoder's linear GEMMs of `hardware` (recompute included): what fp8 runs in fp8
    expert: int = 0  # the routed experts' GEMMs of `linear` (models/time/moe_gemm.py times their shape)
    # a DeepSeek Sparse Attention indexer's forward in `hardware` (recompute included; no backward), and of
    # it the scores' fp32 matmuls, which run at the GPU's fp32 rate (models/time/performance.py)
    indexer: int = 0
    fp32: int = 0

    @property
    def forward_share(self) -> float:
        """The forward pass's share of the executed work; recompute runs inside the backward."""
        return self.forward / self.hardware if self.hardware else 0.0


def _active_matmul_weights(arch: Architecture) -> int:
    """Matmul weights a token passes through, all decoder layers (MoE: experts_per_token experts)."""
    total = 0
    for group in layer_groups(arch):
        for module in group.modules:
            used = arch.experts_per_token if module.copies_per_layer > 1 else 1
            total += group.count * used * module.in_features * module.out_features
    return total


def _routed_expert_weights(arch: Architecture) -> int:
    """Routed-expert matmul weights a token passes through, all decoder layers (0 for a dense model)."""
    return sum(group.count * arch.experts_per_token * module.in_features * module.out_features
               for group in layer_groups(arch) for module in group.modules if module.copies_per_layer > 1)


def _attention_span(arch: Architecture, seq_len: int, local: bool) -> int:
    """Keys a query is scored against, full-square convention: s, or the window / chunk on local layers."""
    return min(seq_len, arch.attention_window) if local else seq_len


def gated_delta_forward_flops(arch: Architecture) -> int:
    """Forward FLOPs per token of one Gated DeltaNet layer's recurrence, flash-linear-attention's chunked
    form (fla/ops/gated_delta_rule/chunk.py chunk_gated_delta_rule_fwd) per value head, chunk C = 64,
    key width K, value width V: k k^T within the chunk (2CK), w = A k and u = A v (2CK + 2CV), the
    state's read w S and update S += k^T v_new (4KV), the output q S (2KV) and the intra-chunk
    q k^T and its product with v_new (2CK + 2CV); the triangular solve (~C^2 / 3) is left out. Like
    attention scores, it has no weights: its backward is twice its forward."""
    c, k, v = GDN_CHUNK, arch.linear_key_head_dim, arch.linear_value_head_dim
    return arch.linear_value_heads * (6 * c * k + 4 * c * v + 6 * k * v)


def indexer_forward_flops(arch: Architecture, seq_len: int) -> tuple[int, int]:
    """(all, of which fp32 scores) forward FLOPs per token of the whole model's DeepSeek Sparse Attention
    indexers (0, 0 without): per layer its projections, wq_b from the query latent, wk and weights_proj
    (2 q_lora_rank H d + 2 h d + 2 h H), and its scores against every key of the sequence, the full
    square (the top-k needs them all): q.float() @ k.float() (2 H d s, fp32 operands: a full-precision
    matmul unless TF32 is enabled, which neither torch nor the HF Trainer does by default) and the
    heads' weighted sum (2 H s). transformers runs it under torch.no_grad (modeling_deepseek_v32.py
    DeepseekV32Indexer.forward): no backward."""
    if not arch.has_indexer:
        return 0, 0
    heads, width, h = arch.index_heads, arch.index_head_dim, arch.hidden_size
    projections = 2 * (arch.q_lora_rank * heads * width + h * width + h * heads)
    scores = 2 * heads * width * seq_len
    indexed = sum(group.count for group in layer_groups(arch) if group.indexed)  # GLM-5's shared layers run none
    return indexed * (projections + scores + 2 * heads * seq_len), indexed * scores


@lru_cache(maxsize=4096)
def forward_flops_per_token(arch: Architecture, seq_len: int) -> tuple[int, int, int]:
    """(layer matmuls, attention scores+values, logits) forward FLOPs per token, whole model.

    Scores cost 2 * span * a * d_qk and values 2 * span * a * d_v per token (MLA: d_qk = nope + rope,
    d_v = v_head_dim); sliding-window and chunked layers score only their window; a Gated DeltaNet
    layer's recurrence (gated_delta_forward_flops) stands in its attention's place."""
    layers = 2 * _active_matmul_weights(arch)
    heads = {local: shape.num_attention_heads * (shape.head_dim + shape.value_head_dim)  # Laguna: its sliding layers'
             for local, shape in ((False, arch), (True, layer_architecture(arch, True)))}
    attention = sum(g.count * (gated_delta_forward_flops(arch) if g.linear
                               else 2 * _attention_span(arch, seq_len, g.local) * heads[g.local])
                    for g in layer_groups(arch))
    logits = 2 * arch.logits_width * arch.hidden_size
    return layers, attention, logits


def training_flops_per_token(
    arch: Architecture, seq_len: int, recompute: Recompute, method: Method = "full", recomputed_fraction: float = 1.0
) -> FlopsPerToken:
    """`recomputed_fraction`: the share of the layers full recompute re-runs (Megatron
    --recompute-num-layers; models.recompute.recomputed_fraction)."""
    return training_flops_over_recomputes(arch, seq_len, ((recompute, recomputed_fraction),), method)[0]


def training_flops_over_recomputes(arch: Architecture, seq_len: int, recomputes: Sequence[tuple[Recompute, float]],
                                   method: Method = "full") -> list[FlopsPerToken]:
    """training_flops_per_token of each (recompute, recomputed fraction): what the recompute does
    not change (the forward's FLOPs, the model FLOPs, the experts' weights) counted once."""
    layers, attention, logits = forward_flops_per_token(arch, seq_len)
    # Attention scores/values have no weights: their backward is always twice their forward.
    passes = 3 if method == "full" else 2
    model = passes * (layers + logits) + 3 * attention
    experts = 2 * _routed_expert_weights(arch)  # forward FLOPs; recompute re-runs them in extra_linear's share
    indexer, indexer_fp32 = indexer_forward_flops(arch, seq_len)  # forward only: counted once in the model's
    flops = []
    for recompute, fraction in recomputes:
        rerun = 0  # of the indexer: full recompute re-runs each checkpointed layer's forward, indexer included
        if recompute == "full":
            extra, extra_linear = round((layers + attention) * fraction), round(layers * fraction)
            rerun = round(indexer * fraction)
        elif recompute == "selective":
            extra, extra_linear = attention, 0
        elif recompute == "op":  # torchtitan per-op SAC re-runs every second matmul (models/memory/recompute.py)
            extra = extra_linear = layers // 2
        else:
            extra = extra_linear = 0
        expert = passes * experts + (extra_linear * experts // layers if layers else 0)
        flops.append(FlopsPerToken(model=model + indexer, hardware=model + indexer + extra + rerun,
                                   forward=layers + attention + logits + indexer, linear=passes * layers + extra_linear,
                                   expert=expert, indexer=indexer + rerun,
                                   fp32=indexer_fp32 + (rerun * indexer_fp32 // indexer if indexer else 0)))
    return flops


def plan_flops_per_token(arch: Architecture, job: Job, plan: Plan) -> FlopsPerToken:
    """Model and hardware FLOPs per token under the plan's recompute (its recomputed share of layers)."""
    return plan_flops_over_recomputes(arch, job, (plan,))[0]


def plan_flops_over_recomputes(arch: Architecture, job: Job, plans: Sequence[Plan],
                               fractions: Sequence[float] | None = None) -> list[FlopsPerToken]:
    """plan_flops_per_token of plans that differ in their recompute alone (`fractions`: their
    models.recompute.recomputed_fraction, when the caller has them)."""
    if fractions is None:
        fractions = [recomputed_fraction(arch, job, plan) for plan in plans]
    return training_flops_over_recomputes(arch, job.seq_len, [(effective_mode(job, plan), fraction)
                                                              for plan, fraction in zip(plans, fractions)], job.method)


def korthikanti_model_flops_per_iteration(arch: Architecture, global_batch: int, seq_len: int) -> int:
    """72 B s L h^2 (1 + s/(6h) + v/(12hL)), in exact integers (GPT layer only)."""
    b, s, layers, h, v = global_batch, seq_len, arch.num_layers, arch.hidden_size, arch.vocab_size
    return 72 * b * s * layers * h * h + 12 * b * s * s * layers * h + 6 * b * s * v * h

