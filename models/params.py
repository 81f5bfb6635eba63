"""Exact parameter counts, matrix by matrix, as Hugging Face transformers builds each model_type.

Module layouts (transformers `modeling_<type>.py`):
- gpt2: wte (v x h), wpe (n_positions x h), per block ln_1, attn.c_attn (Conv1D h -> 3h, bias),
  attn.c_proj (h -> h, bias), ln_2, mlp.c_fc (h -> f, bias), mlp.c_proj (f -> h, bias); ln_f;
  lm_head tied to wte.
- llama / mistral / qwen2 / gemma2: embed_tokens, per layer q/k/v/o_proj (q: h -> a*d, k,v: h -> kv*d,
  o: a*d -> h; qwen2 has q/k/v biases), mlp gate/up (h -> f) and down (f -> h), RMSNorms
  (2 per layer, gemma2 4: input, post_attention, pre_feedforward, post_feedforward); final norm;
  lm_head unless tied.
- mixtral: as llama but the MLP is a router gate (h -> E, no bias) and E experts w1/w3 (h -> f),
  w2 (f -> h); a token uses experts_per_token of them.
Tests compare every catalogue row against counts from transformers itself (tests/golden_params.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from vramplan.models.catalogue_schema import Architecture


@dataclass(frozen=True)
class LinearModule:
    """One weight matrix of a decoder layer, named as Hugging Face names it (PEFT target names)."""

    name: str
    in_features: int
    out_features: int
    has_bias: bool
    copies_per_layer: int = 1  # MoE experts repeat the expert matrices

    @property
    def num_params(self) -> int:
        return self.copies_per_layer * (self.in_features * self.out_features + self.has_bias * self.out_features)


@lru_cache(maxsize=256)
def layer_linear_modules(arch: Architecture) -> tuple[LinearModule, ...]:
    """The linear (matmul) modules of one decoder layer, in forward order."""
    h, f = arch.hidden_size, arch.intermediate_size
    q_dim = arch.num_attention_heads * arch.head_dim
    kv_dim = arch.num_kv_heads * arch.head_dim
    if arch.model_type == "gpt2":
        return (
            LinearModule("c_attn", h, q_dim + 2 * kv_dim, has_bias=True),
            LinearModule("attn.c_proj", q_dim, h, has_bias=True),
            LinearModule("c_fc", h, f, has_bias=True),
            LinearModule("mlp.c_proj", f, h, has_bias=True),
        )
    attention = (
        LinearModule("q_proj", h, q_dim, has_bias=arch.qkv_bias),
        LinearModule("k_proj", h, kv_dim, has_bias=arch.qkv_bias),
        LinearModule("v_proj", h, kv_dim, has_bias=arch.qkv_bias),
        LinearModule("o_proj", q_dim, h, has_bias=arch.linear_bias),
    )
    if arch.is_moe:
        experts = arch.num_experts
        mlp = (
            LinearModule("gate", h, experts, has_bias=False),
            LinearModule("w1", h, f, has_bias=False, copies_per_layer=experts),
            LinearModule("w3", h, f, has_bias=False, copies_per_layer=experts),
            LinearModule("w2", f, h, has_bias=False, copies_per_layer=experts),
        )
    else:
        mlp = (
            LinearModule("gate_proj", h, f, has_bias=arch.linear_bias),
            LinearModule("up_proj", h, f, has_bias=arch.linear_bias),
            LinearModule("down_proj", f, h, has_bias=arch.linear_bias),
        )
    return attention + mlp


def norm_params(arch: Architecture) -> int:
    """Parameters of one norm: LayerNorm has weight and bias, RMSNorm a weight."""
    return 2 * arch.hidden_size if arch.norm_kind == "layernorm" else arch.hidden_size


@dataclass(frozen=True)
class ParamCounts:
    """Exact parameter counts of one architecture."""

    embedding: int  # token embedding (+ learned position embedding)
    per_layer: int  # one decoder layer
    per_layer_linear: int  # of which matmul weights and their biases
    num_layers: int
    final_norm: int
    lm_head: int  # 0 when tied to the token embedding
    inactive_per_layer: int  # MoE: expert parameters a token does not use, per layer

    @property
    def total(self) -> int:
        return self.embedding + self.num_layers * self.per_layer + self.final_norm + self.lm_head

    @property
    def active(self) -> int:
        """Parameters a token passes through (MoE: only experts_per_token experts)."""
        return self.total - self.num_layers * self.inactive_per_layer

    @property
    def blocks_linear(self) -> int:
        """All matmul weights and biases of the decoder layers (what LoRA targets and QLoRA quantises)."""
        return self.num_layers * self.per_layer_linear


@lru_cache(maxsize=256)
def count_params(arch: Architecture) -> ParamCounts:
    h = arch.hidden_size
    modules = layer_linear_modules(arch)
    linear = sum(m.num_params for m in modules)
    per_layer = linear + arch.norms_per_layer * norm_params(arch)
    expert_params = sum(m.num_params // m.copies_per_layer for m in modules if m.copies_per_layer > 1)
    embedding = arch.vocab_size * h
    if arch.learned_position_embeddings:
        embedding += arch.max_position_embeddings * h
    return ParamCounts(
        embedding=embedding,
        per_layer=per_layer,
        per_layer_linear=linear,
        num_layers=arch.num_layers,
        final_norm=norm_params(arch),
        lm_head=0 if arch.tie_word_embeddings else arch.vocab_size * h,
        inactive_per_layer=(arch.num_experts - arch.experts_per_token) * expert_params,
    )
