"""The family registry's record (`Family`) and the key maps and defaults several families share.

models/catalogue/hf_families.py (dense families) and hf_moe_families.py (MoE families) are the entries;
hf_families.py's docstring says what each field of a `Family` holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Family:
    # field -> its config.json key: a name, a list of alternative names (the first present is read), or None
    # where the family's config has the key but its modeling code never reads it (not read: the default stands)
    keys: Mapping[str, str | list[str] | None] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Any] = field(default_factory=dict)
    text_config: bool = False
    required: tuple[str, ...] = ()
    layer_lists: tuple[str, ...] = ()
    modeling: str | None = None  # the model_type whose modeling code builds it, where another family's (hf_alias_families.py)


LLAMA_DEFAULTS = {"max_position_embeddings": 2048, "tie_word_embeddings": False, "attention_bias": False,
                  "mlp_bias": False, "hidden_act": "silu", "attention_dropout": 0.0}
QWEN_DEFAULTS = {**LLAMA_DEFAULTS, "max_position_embeddings": 32768, "use_sliding_window": False}
Keys = dict[str, str | list[str] | None]
MOE_KEYS: Keys = {"num_experts": "num_local_experts"}
# transformers 5 saves some MoE counts under num_local_experts (config.to_dict()); hub files use the family's name
QWEN_MOE_KEYS: Keys = {"num_experts": ["num_experts", "num_local_experts"], "moe_layer_interval": "decoder_sparse_step"}
MLA_KEYS: Keys = {"num_experts": ["n_routed_experts", "num_local_experts"], "first_dense_layers": "first_k_dense_replace",
                  "shared_experts": "n_shared_experts"}
MLA_PARTS = {"router_fp32": True}  # DeepseekV2/V3 gate: F.linear(hidden_states.type(torch.float32), ...)
MLA_DEFAULTS = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                "v_head_dim": 128, "moe_layer_freq": 1}
NEOX_MLP = {"gated_mlp": False, "fused_qkv": True, "norm_kind": "layernorm", "parallel_attention_mlp": True}
FALCON_PARTS = {**NEOX_MLP, "eager_softmax_fp32": False}  # modeling_falcon: softmax(..., dtype=hidden_states.dtype)

# Gated DeltaNet hybrids (configuration_qwen3_next.py, configuration_qwen3_5.py): the linear-attention
# widths and the period of the full-attention layers; the full-attention layers gate their output with a
# sigmoid of a second half of q_proj and norm q and k per head, every norm (1 + w)-weighted in fp32
# (Qwen3NextRMSNorm, as Gemma's); partial RoPE on a quarter of each 256-wide head.
GATED_DELTA_KEYS: Keys = {"linear_key_heads": "linear_num_key_heads", "linear_value_heads": "linear_num_value_heads",
                          "linear_conv_kernel": "linear_conv_kernel_dim", "full_attention_every": "full_attention_interval"}
GATED_DELTA_DEFAULTS = {**QWEN_DEFAULTS, "head_dim": 256, "partial_rotary_factor": 0.25, "linear_key_heads": 16,
                        "linear_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                        "linear_conv_kernel": 4, "full_attention_every": 4}
GATED_DELTA_PARTS = {"linear_attention": True, "norm_kind": "rmsnorm_offset", "qk_norm": "head",
                     "attention_output_gate": True, "attention_gate_in_q": True}

# DeepSeek Sparse Attention (configuration_deepseek_v32.py, configuration_glm_moe_dsa.py): the lightning indexer's
# heads, head width and the keys it keeps per query
DSA_KEYS: Keys = {"index_heads": "index_n_heads", "index_head_dim": "index_head_dim", "index_topk": "index_topk"}
DSA_PARTS = {**MLA_PARTS, "sparse_indexer": True}
