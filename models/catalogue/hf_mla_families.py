"""The registry's MoE families with DeepSeek-V2/V3's multi-head latent attention (models/catalogue/hf_families.py says
what a `Family` holds): MLA, shared and routed experts, and DeepSeek Sparse Attention's indexer where it has one."""

from __future__ import annotations

from vramplan.models.catalogue.hf_family_parts import (
    DSA_KEYS,
    DSA_PARTS,
    LLAMA_DEFAULTS,
    MLA_DEFAULTS,
    MLA_KEYS,
    MLA_PARTS,
    Family,
)

MLA_FAMILIES: dict[str, Family] = {
    # A.X-K1 (configuration_axk1.py / modular_axk1.py, SK Telecom): DeepSeek-V3's layer with an RMSNorm on the MoE
    # block's output (AXK1MoE.post_mlp_layernorm, MoE layers only); first_k_dense_replace (default 1) dense layers;
    # AXK1Config's defaults.
    "axk1": Family(
        keys=MLA_KEYS,
        defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "max_position_embeddings": 32768, "vocab_size": 163840,
                  "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_layers": 61,
                  "num_attention_heads": 64, "num_kv_heads": 64, "shared_experts": 1, "num_experts": 192,
                  "experts_per_token": 8, "first_dense_layers": 1},
        parts={**MLA_PARTS, "moe_output_norm": True},
    ),
    # DeepSeek-V2/V3: MLA, routed + shared experts, first_k_dense_replace dense layers.
    "deepseek_v2": Family(keys=MLA_KEYS, defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "first_dense_layers": 0,
                                                    "shared_experts": 2, "num_experts": 64, "experts_per_token": None,
                                                    "moe_intermediate_size": 1407}, parts=MLA_PARTS),
    "deepseek_v3": Family(keys=MLA_KEYS, defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "max_position_embeddings": 4096,
                                                    "first_dense_layers": 3, "shared_experts": 1, "num_experts": 256,
                                                    "experts_per_token": 8, "moe_intermediate_size": 2048}, parts=MLA_PARTS),
    # DeepSeek-V3.2 (configuration_deepseek_v32.py / modeling_deepseek_v32.py, its defaults the published
    # deepseek-ai/DeepSeek-V3.2-Exp shape): DeepSeek-V3's layer (MLA with a query latent, which the indexer
    # reads too; first_k_dense_replace dense layers; shared and routed experts behind a sigmoid router on an
    # fp32 copy of its input) with DeepSeek Sparse Attention in every layer: a lightning indexer of
    # index_n_heads x index_head_dim scores every key under torch.no_grad and keeps index_topk per query,
    # which SDPA / eager attention apply as a mask (DeepseekV32Attention.forward).
    "deepseek_v32": Family(
        keys={**MLA_KEYS, **DSA_KEYS},
        defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "max_position_embeddings": 163840, "vocab_size": 129280,
                  "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_layers": 61,
                  "num_attention_heads": 128, "num_kv_heads": 128, "shared_experts": 1, "num_experts": 256,
                  "experts_per_token": 8, "first_dense_layers": 3, "index_heads": 64, "index_head_dim": 128,
                  "index_topk": 2048},
        parts=DSA_PARTS,
    ),
    # GLM-5 (configuration_glm_moe_dsa.py / modeling_glm_moe_dsa.py, its defaults documented as zai-org/GLM-5):
    # DeepSeek-V3.2's layer (GlmMoeDsaAttention, GlmMoeDsaIndexer with interleaved RoPE, DeepSeek-V3's MoE
    # block), mlp_layer_types naming the dense layers; indexer_types may let a layer reuse the previous
    # layer's top-k ("shared"), which is refused (models/catalogue/hf_config.py _sparse_indexer).
    "glm_moe_dsa": Family(
        keys={**MLA_KEYS, **DSA_KEYS},
        defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "max_position_embeddings": 202752, "vocab_size": 154880,
                  "hidden_size": 6144, "intermediate_size": 12288, "moe_intermediate_size": 2048, "num_layers": 78,
                  "num_attention_heads": 64, "num_kv_heads": 64, "shared_experts": 1, "num_experts": 256,
                  "experts_per_token": 8, "first_dense_layers": 3, "kv_lora_rank": 512, "q_lora_rank": 2048,
                  "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192, "index_heads": 32,
                  "index_head_dim": 128, "index_topk": 2048},
        parts={**DSA_PARTS, "indexer_types": True},
    ),
    # GLM-4.7-Flash (configuration_glm4_moe_lite.py / modular_glm4_moe_lite.py): DeepSeek-V3's layer exactly
    # (DeepseekV3Attention's MLA, GLM-4.5's MoE block = DeepSeek-V3's: shared experts, a sigmoid router on an
    # fp32 copy of its input), the dense layers named by mlp_layer_types (default: the first).
    "glm4_moe_lite": Family(
        keys=MLA_KEYS,
        defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "max_position_embeddings": 202752, "vocab_size": 154880,
                  "hidden_size": 2048, "intermediate_size": 10240, "moe_intermediate_size": 1536, "num_layers": 47,
                  "num_attention_heads": 20, "num_kv_heads": 20, "shared_experts": 1, "num_experts": 64,
                  "experts_per_token": 4, "first_dense_layers": 1, "kv_lora_rank": 512, "q_lora_rank": 768,
                  "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192},
        parts=MLA_PARTS,
    ),
    # Mistral 4 (configuration_mistral4.py / modular_mistral4.py; also a Mistral 3 checkpoint's text_config):
    # DeepSeek-V3's layer (MLA, first_k_dense_replace dense layers, n_shared_experts shared experts, [E, 2f, h]
    # experts) with a softmax router on activation-dtype logits (Mistral4TopkRouter: no fp32 copy of its
    # input) and Ministral 3's position-dependent scale on q (a b x 1 x s x 1 factor).
    "mistral4": Family(
        keys=MLA_KEYS,
        defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "max_position_embeddings": 1048576, "vocab_size": 131072,
                  "hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 2048, "num_layers": 36,
                  "num_attention_heads": 32, "num_kv_heads": 32, "shared_experts": 1, "num_experts": 128,
                  "experts_per_token": 4, "first_dense_layers": 0, "kv_lora_rank": 256, "q_lora_rank": 1024,
                  "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 64},
    ),
}
