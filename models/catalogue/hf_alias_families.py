"""Config classes whose models are another family's classes (transformers 5.24 MODEL_FOR_CAUSAL_LM_MAPPING_NAMES maps
each to that family's *ForCausalLM): their own keys and config-class defaults, read as the family whose modeling code
builds them (`Family.modeling`, which names the linear modules and the stacks' model support). The registry's record
is in models/catalogue/hf_family_parts.py."""

from __future__ import annotations

from dataclasses import replace

from vramplan.models.catalogue.hf_classic_families import CLASSIC_FAMILIES
from vramplan.models.catalogue.hf_family_parts import LLAMA_DEFAULTS, MLA_DEFAULTS, MLA_KEYS, MLA_PARTS, Family
from vramplan.models.catalogue.hf_moe_families import MOE_FAMILIES

_NO_WINDOW = {"sliding_window": None, "use_sliding_window": None}  # LlamaAttention has no sliding window: not read

ALIAS_FAMILIES: dict[str, Family] = {
    # GPT-SW3 (AI Sweden): configuration_auto maps gpt-sw3 to GPT2Config and modeling_auto to GPT2LMHeadModel
    "gpt-sw3": replace(CLASSIC_FAMILIES["gpt2"], modeling="gpt2"),
    # EXAONE 3.0 / 3.5 (configuration_exaone.py ExaoneConfig, LG AI Research): LlamaForCausalLM; the hub files' own
    # names num_layers and activation_function (ExaoneConfig.attribute_map), head_dim hidden / heads unless given
    "exaone": Family(
        keys={"num_layers": ["num_hidden_layers", "num_layers"], "hidden_act": ["hidden_act", "activation_function"],
              **_NO_WINDOW},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 102400, "hidden_size": 4096,
                  "intermediate_size": 14336, "num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 8},
        modeling="llama"),
    # InternLM3 (configuration_internlm3.py InternLM3Config): LlamaForCausalLM, qkv_bias / bias the hub files' names of
    # attention_bias / mlp_bias, which validate_architecture requires equal (Llama's attention_bias also biases o_proj)
    "internlm3": Family(
        keys={"attention_bias": ["attention_bias", "qkv_bias"], "mlp_bias": ["mlp_bias", "bias"], **_NO_WINDOW},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 32768, "vocab_size": 128512, "hidden_size": 4096,
                  "intermediate_size": 10240, "num_layers": 48, "num_attention_heads": 32, "num_kv_heads": 2,
                  "head_dim": 128},
        parts={"biases_agree": True}, modeling="llama"),
    # IQuest-Coder-V1 (configuration_iquestcoder.py IQuestCoderConfig): LlamaForCausalLM; clip_qkv and
    # use_sliding_window raise in validate_architecture
    "iquestcoder": Family(
        keys=_NO_WINDOW,
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 76800, "hidden_size": 5120,
                  "intermediate_size": 27648, "num_layers": 80, "num_attention_heads": 40, "num_kv_heads": 8,
                  "head_dim": 128},
        parts={"refused_if_set": {"clip_qkv": "is refused by IQuestCoderConfig (no released checkpoint clamps q/k/v)",
                                  "use_sliding_window": "is refused by IQuestCoderConfig (Llama's attention has no "
                                                        "sliding window)"}},
        modeling="llama"),
    # Sarvam MLA (configuration_sarvam_mla.py SarvamMLAConfig): DeepseekV3ForCausalLM with a full q_proj (q_lora_rank
    # None), 128 routed experts and one shared, one dense first layer; head_dim / q_head_dim are derived (popped)
    "sarvam_mla": Family(
        keys=MLA_KEYS,
        defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "q_lora_rank": None, "max_position_embeddings": 4096,
                  "vocab_size": 262144, "hidden_size": 4096, "intermediate_size": 16384, "moe_intermediate_size": 2048,
                  "num_layers": 32, "num_attention_heads": 64, "shared_experts": 1, "num_experts": 128,
                  "experts_per_token": 8, "first_dense_layers": 1},
        parts=MLA_PARTS, modeling="deepseek_v3"),
    # Sarvam MoE (configuration_sarvam_moe.py SarvamMoEConfig): Glm4MoeForCausalLM with QK norms, RoPE over the whole
    # head (partial_rotary_factor defaults to 1.0), use_qkv_bias the hub files' name of attention_bias
    "sarvam_moe": replace(MOE_FAMILIES["glm4_moe"],
                          keys={**MOE_FAMILIES["glm4_moe"].keys, "attention_bias": ["attention_bias", "use_qkv_bias"]},
                          defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 262144,
                                    "hidden_size": 4096, "intermediate_size": 8192, "num_layers": 19,
                                    "num_attention_heads": 64, "num_kv_heads": 4, "head_dim": 64,
                                    "partial_rotary_factor": 1.0, "moe_intermediate_size": 1024,
                                    "experts_per_token": 6, "shared_experts": 1, "num_experts": 128,
                                    "first_dense_layers": 1, "use_qk_norm": True},
                          modeling="glm4_moe"),
}
