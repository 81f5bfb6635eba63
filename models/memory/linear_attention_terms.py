"""What a Gated DeltaNet layer (Qwen3-Next, Qwen3.5) saves for backward beside its norms, linear inputs
and MLP, which models/memory/activation_terms.py layer_terms counts as for any layer; and what the
estimate assumes installed for it (linear_attention_note)."""

from __future__ import annotations

from vramplan.models.architecture.params import linear_attention_widths
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.memory.saved_tensors import FP32, Shape, Term

GDN_CHUNK = 64  # flash-linear-attention's chunk length (chunk_gated_delta_rule_fwd: chunk_local_cumsum(g, chunk_size=64))


def linear_attention_terms(arch: Architecture, x: Shape) -> list[Term]:
    """A Gated DeltaNet layer (modeling_qwen3_next.py Qwen3NextGatedDeltaNet.forward, modeling_qwen3_5.py
    Qwen3_5GatedDeltaNet) as transformers runs it with flash-linear-attention and causal-conv1d installed
    (the kernels its use_kernel_func_from_hub_with_fallback picks before its reference PyTorch code,
    which warns it is "much slower" and keeps fp32 chunk matrices instead: not modelled). Per token,
    with key = key heads x key width, value = value heads x value width, H value heads:
    - CausalConv1dFn saves its input x (causal_conv1d_interface.py: save_for_backward(x, weight, ...)):
      the q/k/v projection, 2 key + value wide;
    - beta = sigmoid(b) keeps its result, the tensor fla saves too; the decay
      -exp(A_log) * softplus(a.float() + dt_bias) keeps softplus's fp32 input and output;
    - ChunkGatedDeltaRuleFunction.forward (fla/ops/gated_delta_rule/chunk.py) saves the L2-normalised
      q and k (l2norm_fwd's outputs) with their fp32 rstd per head, v (input_guard's contiguous copy of
      the conv output's slice), the chunk-local cumulative decay g in fp32, beta and A, the inverted
      chunk system (solve_tril, in k's dtype: H x 64 per token);
    - the gated RMSNorm (Qwen3NextRMSNormGated, eager): the fp32 copy of the core output, its rsqrt per
      head, the normalised value cast back, the weighted value (fp32 under autocast: the weight is),
      silu's fp32 input z.float() and its output; out_proj keeps the gated output.
    Measured on CPU with saved-tensor hooks, the two kernels emulated to save what their autograd
    functions save (tests/models/memory/test_saved_tensors_families.py: exact per layer)."""
    t, e, hv, hk = x.t, x.e, arch.linear_value_heads, arch.linear_key_heads
    key, value = linear_attention_widths(arch)
    weighted = FP32 if x.autocast else e
    return [
        Term("linear_attn.conv_input", e * t * (2 * key + value)),
        Term("linear_attn.beta", e * t * hv),
        Term("linear_attn.decay_softplus", 2 * FP32 * t * hv),
        Term("linear_attn.qk_normed", 2 * e * t * key),
        Term("linear_attn.qk_rstd", 2 * FP32 * t * hk),
        Term("linear_attn.v", e * t * value),
        Term("linear_attn.decay_cumsum", FP32 * t * hv),
        Term("linear_attn.chunk_inverse", e * t * hv * GDN_CHUNK),
        Term("linear_attn.norm_input_fp32", FP32 * t * value),
        Term("linear_attn.norm_rsqrt", FP32 * t * hv),
        Term("linear_attn.norm_normed", e * t * value),
        Term("linear_attn.norm_weighted", weighted * t * value),
        Term("linear_attn.gate_silu_fp32", 2 * FP32 * t * value),
        Term("linear_attn.output", e * t * value),
    ]


def linear_attention_note(arch: Architecture) -> str | None:
    """What the estimate of a Gated DeltaNet model assumes is installed (None for other models)."""
    if not arch.has_linear_attention:
        return None
    return (f"{arch.name}'s Gated DeltaNet layers are estimated with flash-linear-attention and causal-conv1d installed; "
            "without them transformers falls back to its PyTorch reference code, which keeps more (not modelled)")
