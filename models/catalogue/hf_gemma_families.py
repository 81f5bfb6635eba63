"""The Gemma families (Google): Gemma 1 to 4 and VaultGemma, entries of the family registry
(models/catalogue/hf_families.py says what each field of a `Family` holds)."""

from __future__ import annotations

from vramplan.models.catalogue.hf_family_parts import LLAMA_DEFAULTS, Family

# Gemma 4's keys, config-class defaults (Gemma4TextConfig, Gemma4UnifiedTextConfig: global_head_dim 512 from
# __post_init__'s kwargs) and parts, shared by its two text decoders
_GEMMA4_KEYS: dict[str, str | list[str] | None] = {
    "hidden_act": ["hidden_activation", "hidden_act"], "global_every": None, "global_head_dim": "global_head_dim",
    "num_experts": None, "experts_per_token": None,  # read only with enable_moe_block (hf_gemma4.py)
    "global_kv_heads": "num_global_key_value_heads", "value_from_key": "attention_k_eq_v",
    "kv_shared_layers": "num_kv_shared_layers", "double_wide_mlp": "use_double_wide_mlp",
    "bidirectional_attention": "use_bidirectional_attention"}
_GEMMA4_DEFAULTS = {**LLAMA_DEFAULTS, "tie_word_embeddings": True, "vocab_size": 262144, "hidden_size": 2304,
                    "intermediate_size": 9216, "num_layers": 30, "num_attention_heads": 8, "num_kv_heads": 4,
                    "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "global_every": 6, "global_head_dim": 512,
                    "final_logit_softcapping": None, "attn_logit_softcapping": None}
_GEMMA4_PARTS = {"norm_kind": "rmsnorm_pow", "norm_position": "sandwich", "norms_per_layer": 4, "qk_norm": "head",
                 "value_norm": True, "stored_kv": True, "last_layer_global": True, "global_shape": True}

GEMMA_FAMILIES: dict[str, Family] = {
    # VaultGemma (configuration_vaultgemma.py / modular_vaultgemma.py): Gemma 2's layer without its post-attention
    # and post-feedforward norms (VaultGemmaDecoderLayer deletes them: two pre-norms), Gemma 2's config defaults
    # (VaultGemmaConfig(Gemma2Config): sliding window 4096 on every other layer unless layer_types says, attention
    # logits soft-capped at 50, final logits at 30).
    "vaultgemma": Family(
        keys={"hidden_act": ["hidden_activation", "hidden_act"]},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True, "vocab_size": 256000,
                  "hidden_size": 2304, "intermediate_size": 9216, "num_layers": 26, "num_attention_heads": 8,
                  "num_kv_heads": 4, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "sliding_window": 4096,
                  "global_every": 2, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
        parts={"norm_kind": "rmsnorm_offset"},
    ),
    # Gemma2: (1 + w) RMSNorms before and after attention and MLP, gelu_pytorch_tanh GeGLU,
    # sliding window 4096 on every other layer, attention logits soft-capped at 50.
    "gemma2": Family(
        keys={"hidden_act": ["hidden_activation", "hidden_act"]},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True,
                  "hidden_act": "gelu_pytorch_tanh", "sliding_window": 4096, "global_every": 2,
                  "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
        parts={"norm_kind": "rmsnorm_offset", "norm_position": "sandwich", "norms_per_layer": 4},
    ),
    "gemma3_text": Family(
        keys={"global_every": "sliding_window_pattern", "hidden_act": ["hidden_activation", "hidden_act"]},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "tie_word_embeddings": True,
                  "vocab_size": 262208, "hidden_act": "gelu_pytorch_tanh", "sliding_window": 4096, "global_every": 6,
                  "final_logit_softcapping": None, "attn_logit_softcapping": None},
        parts={"norm_kind": "rmsnorm_offset", "norm_position": "sandwich", "norms_per_layer": 4, "qk_norm": "head"},
    ),
    # Gemma (configuration_gemma.py / modeling_gemma.py): Llama's layer with Gemma's RMSNorm (fp32
    # normalise * (1 + weight), then cast), GeGLU (gelu_pytorch_tanh: GemmaConfig turns the hub files'
    # legacy "gelu" into it), the embedding scaled by sqrt(hidden) (the first norm keeps that product as
    # its input anyway), head_dim 256, tied embeddings.
    "gemma": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True, "vocab_size": 256000,
                  "hidden_size": 3072, "intermediate_size": 24576, "num_layers": 28, "num_attention_heads": 16,
                  "num_kv_heads": 16, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh"},
        parts={"norm_kind": "rmsnorm_offset"},
    ),
    # Gemma 4 (configuration_gemma4.py Gemma4TextConfig / modeling_gemma4.py): Gemma 3's sandwich layer whose RMSNorms
    # multiply their weight in fp32 after x * pow(mean(x^2) + eps, -0.5) (Gemma4RMSNorm: norm_kind rmsnorm_pow), q/k
    # normed per head and v by a weightless norm per head (v_norm), a 512-wide head with its own KV heads on the full
    # layers whose values are their keys under attention_k_eq_v, the last layer always full (hf_gemma4.py reads these).
    # With enable_moe_block (26B-A4B) every layer runs routed experts beside its MLP (moe_beside_mlp).
    "gemma4_text": Family(
        keys={**_GEMMA4_KEYS, "per_layer_input_width": "hidden_size_per_layer_input",
              "per_layer_input_vocab": "vocab_size_per_layer_input", "experts_beside_mlp": "enable_moe_block",
              "expert_count": "num_experts", "expert_top_k": "top_k_experts", "expert_width": "moe_intermediate_size"},
        defaults={**_GEMMA4_DEFAULTS, "max_position_embeddings": 131072, "sliding_window": 512,
                  "per_layer_input_width": 256, "per_layer_input_vocab": 262144},
        parts=_GEMMA4_PARTS,
    ),
    # Gemma 4 Unified (configuration_gemma4_unified.py / modeling_gemma4_unified.py): Gemma 4's decoder without per-layer
    # input embeddings or experts (its config has neither key).
    "gemma4_unified_text": Family(
        keys=_GEMMA4_KEYS,
        defaults={**_GEMMA4_DEFAULTS, "max_position_embeddings": 262144, "sliding_window": 1024},
        parts=_GEMMA4_PARTS,
    ),
}
