"""The family registry: how each Hugging Face model_type's config.json maps onto the parts.

Data, one entry per model_type (as torchtitan keeps one `ModelArgs` per model):
- `keys`: where a part's value lives when the family names it differently from the common
  spelling (`num_hidden_layers`, `hidden_size`, `num_key_value_heads`, ...);
- `defaults`: the value the transformers 5.24 config class (`<Type>Config.__init__`) uses when
  config.json omits the key;
- `parts`: what the family's modeling code fixes whatever the config says (norm kind and
  placement, fused projections, QK norms, hard-coded biases);
- `text_config`: the decoder sits in config.json's `text_config` (multimodal checkpoints);
- `required`: keys whose config-class default (None) builds no model in transformers itself, so a
  file without them is refused rather than read as something else (dots1's expert counts);
- `layer_lists`: keys the family's config may give as one value per layer (HunYuan's moe_topk), read
  as one value when all are equal and refused otherwise.
models/catalogue/hf_config.py reads any family through this table; the memory model only sees the parts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Family:
    # field -> its config.json key: a name, a list of alternative names (the first present is read)
    # or a tuple of names read together (dropout probabilities)
    keys: Mapping[str, str | list[str] | tuple[str, ...]] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, Any] = field(default_factory=dict)
    text_config: bool = False
    required: tuple[str, ...] = ()
    layer_lists: tuple[str, ...] = ()


_LLAMA_DEFAULTS = {"max_position_embeddings": 2048, "tie_word_embeddings": False, "attention_bias": False,
                   "mlp_bias": False, "hidden_act": "silu", "dropout": (0.0,)}
_QWEN_DEFAULTS = {**_LLAMA_DEFAULTS, "max_position_embeddings": 32768, "use_sliding_window": False}
_Keys = dict[str, str | list[str] | tuple[str, ...]]
_MOE_KEYS: _Keys = {"num_experts": "num_local_experts"}
# transformers 5 saves some MoE counts under num_local_experts (config.to_dict()); hub files use the family's name
_QWEN_MOE_KEYS: _Keys = {"num_experts": ["num_experts", "num_local_experts"], "moe_layer_interval": "decoder_sparse_step"}
_MLA_KEYS: _Keys = {"num_experts": ["n_routed_experts", "num_local_experts"], "first_dense_layers": "first_k_dense_replace",
             "shared_experts": "n_shared_experts"}
_MLA_PARTS = {"router_fp32": True}  # DeepseekV2/V3 gate: F.linear(hidden_states.type(torch.float32), ...)
_MLA_DEFAULTS = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                 "v_head_dim": 128, "moe_layer_freq": 1}
_NEOX_MLP = {"gated_mlp": False, "fused_qkv": True, "norm_kind": "layernorm", "parallel_attention_mlp": True}
_FALCON_PARTS = {**_NEOX_MLP, "eager_softmax_fp32": False}  # modeling_falcon: softmax(..., dtype=hidden_states.dtype)

FAMILIES: dict[str, Family] = {
    # GPT2Config: n_layer 12, n_embd 768, n_head 12, n_inner None (4h), n_positions 1024, vocab 50257,
    # activation gelu_new, resid/embd/attn_pdrop 0.1; modeling_gpt2: Conv1D c_attn with biases, LayerNorm.
    "gpt2": Family(
        keys={"num_layers": "n_layer", "hidden_size": "n_embd", "num_attention_heads": "n_head",
              "intermediate_size": "n_inner", "max_position_embeddings": "n_positions",
              "hidden_act": "activation_function", "dropout": ("resid_pdrop", "embd_pdrop", "attn_pdrop")},
        defaults={"num_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": None,
                  "max_position_embeddings": 1024, "vocab_size": 50257, "hidden_act": "gelu_new",
                  "dropout": (0.1, 0.1, 0.1), "tie_word_embeddings": True, "attention_bias": True, "mlp_bias": True},
        parts={"learned_position_embeddings": True, "fused_qkv": True, "norm_kind": "layernorm",
               "eager_softmax_fp32": False, "gated_mlp": False},
    ),
    "llama": Family(defaults={**_LLAMA_DEFAULTS}),
    "mistral": Family(defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 4096 * 32, "sliding_window": 4096}),
    "mixtral": Family(keys=_MOE_KEYS, defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 4096 * 32,
                                                "num_experts": 8, "experts_per_token": 2},
                      parts={"moe_block_class": "transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock"}),
    # Qwen2Attention hard-codes bias=True on q/k/v (modeling_qwen2.py).
    "qwen2": Family(defaults={**_QWEN_DEFAULTS}, parts={"qkv_bias": True}),
    "qwen3": Family(defaults={**_QWEN_DEFAULTS}, parts={"qk_norm": "head"}),
    "qwen3_moe": Family(
        keys=_QWEN_MOE_KEYS,
        defaults={**_QWEN_DEFAULTS, "num_experts": 128, "experts_per_token": 8,
                  "moe_intermediate_size": 768, "moe_layer_interval": 1},
        parts={"qk_norm": "head", "moe_block_class": "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"},
    ),
    # Qwen1.5-MoE / Qwen2-MoE (configuration_qwen2_moe.py / modeling_qwen2_moe.py): Qwen 2's attention with
    # q/k/v biases from qkv_bias; every decoder_sparse_step-th layer MoE (mlp_only_layers dense), a softmax
    # top-k router, fused [E, 2f, h] experts and one shared expert of shared_expert_intermediate_size whose
    # output a sigmoid gate (a linear h -> 1) scales.
    "qwen2_moe": Family(
        keys={**_QWEN_MOE_KEYS, "attention_bias": "qkv_bias", "shared_expert_width": "shared_expert_intermediate_size"},
        defaults={**_QWEN_DEFAULTS, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                  "num_layers": 24, "num_attention_heads": 16, "num_experts": 60, "experts_per_token": 4,
                  "moe_intermediate_size": 1408, "shared_expert_width": 5632, "moe_layer_interval": 1,
                  "attention_bias": True},
        # DeepSpeed's ZeRO-3 fetches this block whole (models/memory/zero3_live.py DEFAULT_LEAF_MODULE_CLASSES)
        parts={"attention_bias_qkv_only": True, "shared_expert_gate": True,
               "moe_block_class": "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock"},
    ),
    # Gemma2: (1 + w) RMSNorms before and after attention and MLP, gelu_pytorch_tanh GeGLU,
    # sliding window 4096 on every other layer, attention logits soft-capped at 50.
    "gemma2": Family(
        keys={"hidden_act": ["hidden_activation", "hidden_act"]},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True,
                  "hidden_act": "gelu_pytorch_tanh", "sliding_window": 4096, "global_every": 2,
                  "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
        parts={"norm_kind": "rmsnorm_offset", "norm_position": "sandwich", "norms_per_layer": 4},
    ),
    "gemma3_text": Family(
        keys={"global_every": "sliding_window_pattern", "hidden_act": ["hidden_activation", "hidden_act"]},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 131072, "tie_word_embeddings": True,
                  "vocab_size": 262208, "hidden_act": "gelu_pytorch_tanh", "sliding_window": 4096, "global_every": 6,
                  "final_logit_softcapping": None, "attn_logit_softcapping": None},
        parts={"norm_kind": "rmsnorm_offset", "norm_position": "sandwich", "norms_per_layer": 4, "qk_norm": "head"},
    ),
    # Phi3: fused qkv_proj and gate_up_proj, no biases.
    "phi3": Family(
        keys={"dropout": ("resid_pdrop", "embd_pdrop", "attention_dropout")},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 4096, "dropout": (0.0, 0.0, 0.0),
                  "sliding_window": None},
        parts={"fused_qkv": True, "fused_gate_up": True},
    ),
    # OLMo 2: no pre-norms; RMSNorm (weight applied in fp32) after attention and after the MLP, and
    # q_norm / k_norm over the whole projection width.
    "olmo2": Family(
        defaults={**_LLAMA_DEFAULTS},
        parts={"norm_kind": "rmsnorm_fp32_weight", "norm_position": "post", "qk_norm": "width"},
    ),
    # OLMoE (configuration_olmoe.py / modeling_olmoe.py): pre-norms with Llama's RMSNorm, q_norm / k_norm
    # over the projections' whole width, every layer MoE (num_experts experts of intermediate_size, a
    # softmax top-k router, no shared expert); clip_qkv clamps in place (nothing kept).
    "olmoe": Family(
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 50304, "hidden_size": 2048,
                  "intermediate_size": 2048, "num_layers": 16, "num_attention_heads": 16, "num_experts": 64,
                  "experts_per_token": 8},
        parts={"qk_norm": "width"},
    ),
    # OLMo 3 (configuration_olmo3.py / modeling_olmo3.py): OLMo 2's layer, with sliding-window attention
    # (sliding_window 4096) on three layers of every four (layer_types; Olmo3Config's default pattern).
    "olmo3": Family(
        defaults={**_LLAMA_DEFAULTS, "vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32, "sliding_window": 4096, "global_every": 4},
        parts={"norm_kind": "rmsnorm_fp32_weight", "norm_position": "post", "qk_norm": "width"},
    ),
    # DeepSeek-V2/V3: MLA, routed + shared experts, first_k_dense_replace dense layers.
    "deepseek_v2": Family(keys=_MLA_KEYS, defaults={**_LLAMA_DEFAULTS, **_MLA_DEFAULTS, "first_dense_layers": 0,
                                                    "shared_experts": 2, "num_experts": 64, "experts_per_token": None,
                                                    "moe_intermediate_size": 1407}, parts=_MLA_PARTS),
    "deepseek_v3": Family(keys=_MLA_KEYS, defaults={**_LLAMA_DEFAULTS, **_MLA_DEFAULTS, "max_position_embeddings": 4096,
                                                    "first_dense_layers": 3, "shared_experts": 1, "num_experts": 256,
                                                    "experts_per_token": 8, "moe_intermediate_size": 2048}, parts=_MLA_PARTS),
    # Llama 4: MoE every interleave_moe_layer_step-th layer (top-1 routed + a shared expert of
    # intermediate_size), dense layers of intermediate_size_mlp; chunked attention with RoPE and an
    # unweighted L2 QK norm on 3 of every 4 layers, global NoPE attention on the 4th.
    "llama4_text": Family(
        keys={"num_experts": "num_local_experts", "moe_layer_interval": "interleave_moe_layer_step",
              "dense_intermediate_size": "intermediate_size_mlp", "moe_intermediate_size": "intermediate_size",
              "sliding_window": "attention_chunk_size", "global_every": "no_rope_layer_interval"},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 4096 * 32, "num_experts": 16, "experts_per_token": 1,
                  "moe_layer_interval": 1, "dense_intermediate_size": 16384, "sliding_window": 8192,
                  "global_every": 4, "use_qk_norm": True, "shared_experts": 1},
        # Llama4TextMoe.forward: routed_in = hidden_states.repeat(num_experts, 1) * router scores
        parts={"local_attention": "chunked", "qk_norm_on_global_layers": False, "moe_all_experts": True,
               "qk_norm_kind": "l2"},
    ),
    # GPT-NeoX: fused query_key_value, parallel attention + MLP (use_parallel_residual), LayerNorms,
    # biases everywhere, RoPE on rotary_pct of each head.
    "gpt_neox": Family(
        keys={"partial_rotary_factor": "rotary_pct", "dropout": ("attention_dropout", "hidden_dropout")},
        defaults={**_LLAMA_DEFAULTS, "hidden_act": "gelu", "attention_bias": True, "mlp_bias": True,
                  "partial_rotary_factor": 0.25, "dropout": (0.0, 0.0), "use_parallel_residual": True},
        parts={**_NEOX_MLP},
    ),
    "falcon": Family(
        keys={"num_layers": ["num_hidden_layers", "n_layer"], "num_attention_heads": ["num_attention_heads", "n_head"],
              "num_kv_heads": ["num_kv_heads", "n_head_kv"], "intermediate_size": "ffn_hidden_size",
              "hidden_act": "activation", "attention_bias": "bias",
              "mlp_bias": "bias", "dropout": ("attention_dropout", "hidden_dropout")},
        defaults={**_LLAMA_DEFAULTS, "hidden_act": "gelu", "intermediate_size": None, "tie_word_embeddings": True,
                  "dropout": (0.0, 0.0), "num_kv_heads": None, "multi_query": True,
                  "new_decoder_architecture": False, "parallel_attn": True, "num_ln_in_parallel_attn": None,
                  "alibi": False},
        parts={**_FALCON_PARTS},
    ),
    # Cohere: one LayerNorm without bias feeding attention and MLP in parallel; tied embeddings.
    "cohere": Family(
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True, "use_qk_norm": False},
        parts={"norm_kind": "layernorm_nobias", "parallel_attention_mlp": True, "norms_per_layer": 1},
    ),
    # StarCoder2: biases on every linear (use_bias), LayerNorm, c_fc / c_proj gelu_pytorch_tanh MLP.
    "starcoder2": Family(
        keys={"attention_bias": "use_bias", "mlp_bias": "use_bias",
              "dropout": ("attention_dropout", "residual_dropout", "embedding_dropout")},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 4096, "tie_word_embeddings": True,
                  "hidden_act": "gelu_pytorch_tanh", "attention_bias": True, "mlp_bias": True, "sliding_window": None,
                  "dropout": (0.0, 0.0, 0.0)},
        parts={"norm_kind": "layernorm", "gated_mlp": False},
    ),
    # gpt-oss (transformers 5.24 configuration_gpt_oss.py / modeling_gpt_oss.py): every layer MoE, top-k
    # router with a bias softmaxing only the top-k logits (GptOssTopKRouter), experts with biases and one
    # fused [E, h, 2f] gate_up_proj running the clamped GLU (GptOssExperts._apply_gate), q/k/v/o biases
    # (attention_bias), one learned sink logit per head (self_attn.sinks), eager softmax in the activation
    # dtype, RMSNorm multiplying its weight in fp32 (GptOssRMSNorm), RoPE tables head_dim / 2 wide whose
    # halves rotate by chunk and cat (_apply_rotary_emb), layer_types alternating sliding (128) and
    # full attention, untied lm_head.
    "gpt_oss": Family(
        keys={"num_experts": "num_local_experts", "mlp_bias": "attention_bias"},
        defaults={**_LLAMA_DEFAULTS, "num_layers": 36, "num_experts": 128, "vocab_size": 201088, "hidden_size": 2880,
                  "intermediate_size": 2880, "head_dim": 64, "num_attention_heads": 64, "num_kv_heads": 8,
                  "sliding_window": 128, "global_every": 2, "max_position_embeddings": 131072,
                  "experts_per_token": 4, "attention_bias": True, "mlp_bias": True},  # mlp_bias reads attention_bias
        parts={"norm_kind": "rmsnorm_fp32_weight", "attention_sinks": True, "moe_bias": True, "fused_gate_up": True,
               "clamped_swiglu": True, "router_topk_softmax": True, "eager_softmax_fp32": False, "rope_tables": "half"},
    ),
    # GLM-4-0414 (configuration_glm4.py / modeling_glm4.py): four RMSNorms (input, post_self_attn,
    # post_attention = pre-MLP, post_mlp), fused gate_up_proj, bias on q/k/v only (o_proj and the MLP
    # have none), RoPE on partial_rotary_factor (0.5) of each head whose cos/sin every layer slices
    # and repeat_interleaves into its own copies (apply_rotary_pos_emb).
    "glm4": Family(
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 151552, "attention_bias": True,
                  "partial_rotary_factor": 0.5},
        parts={"norm_position": "sandwich", "norms_per_layer": 4, "fused_gate_up": True, "rope_tables": "per_layer",
               "attention_bias_qkv_only": True},
    ),
    # GLM-4.5 / 4.6 / 4.7 and GLM-4.5-Air (transformers 5.24 configuration_glm4_moe.py / modeling_glm4_moe.py):
    # DeepSeek-V3's MoE block (Glm4MoeMoE = DeepseekV3MoE: a sigmoid top-k router whose linear runs on an fp32
    # copy of its input, Glm4MoeTopkRouter; fused [E, 2f, h] gate_up_proj experts; n_shared_experts shared
    # experts; first_k_dense_replace dense layers of intermediate_size) under Llama's GQA attention: q/k/v
    # biases from attention_bias, none on o_proj or the MLPs (Glm4MoeAttention), use_qk_norm an RMSNorm over
    # each head's head_dim (q_norm / k_norm), RoPE on partial_rotary_factor of each head (rotary half kept
    # apart and concatenated, apply_rotary_pos_emb). The checkpoints' multi-token-prediction layer
    # (num_nextn_predict_layers) is not built by Glm4MoeForCausalLM: not counted.
    "glm4_moe": Family(
        keys={"num_experts": ["n_routed_experts", "num_local_experts"], "first_dense_layers": "first_k_dense_replace",
              "shared_experts": "n_shared_experts"},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 151552, "hidden_size": 4096,
                  "intermediate_size": 10944, "num_layers": 46, "num_attention_heads": 96, "num_kv_heads": 8,
                  "partial_rotary_factor": 0.5, "moe_intermediate_size": 1408, "experts_per_token": 8,
                  "shared_experts": 1, "num_experts": 128, "first_dense_layers": 1, "use_qk_norm": False},
        parts={**_MLA_PARTS, "attention_bias_qkv_only": True, "qk_norm_kind": "head"},
    ),
    # EXAONE 4.0 (configuration_exaone4.py / modeling_exaone4.py): no pre-norms; RMSNorms after attention
    # and after the MLP (post_attention_layernorm, post_feedforward_layernorm) as OLMo 2's, but Llama's
    # RMSNorm (the weight times the input-dtype product); q_norm / k_norm per head over head_dim;
    # sliding-window attention (4096) on three layers of four (layer_types, or sliding_window_pattern),
    # the global layers without RoPE where a window is set (q and k then views: the same bytes saved).
    "exaone4": Family(
        keys={"global_every": "sliding_window_pattern"},
        defaults={**_LLAMA_DEFAULTS, "vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 16384,
                  "num_layers": 32, "num_attention_heads": 32, "sliding_window": 4096, "global_every": 4},
        parts={"norm_position": "post", "qk_norm": "head"},
    ),
    # Seed-OSS (configuration_seed_oss.py / modeling_seed_oss.py): Llama's layer with biases on q/k/v
    # (attention_bias), o_proj's own switch (attention_out_bias) and the MLP's (mlp_bias); dropout on the
    # attention probabilities (attention_dropout) and after o_proj and down_proj (residual_dropout), both
    # 0.1 in SeedOssConfig.
    "seed_oss": Family(
        keys={"out_bias": "attention_out_bias", "dropout": ("attention_dropout", "residual_dropout")},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 524288, "vocab_size": 155136, "hidden_size": 4096,
                  "intermediate_size": 27648, "num_layers": 64, "num_attention_heads": 80, "num_kv_heads": 8,
                  "head_dim": 128, "attention_bias": True, "out_bias": False, "dropout": (0.1, 0.1)},
        parts={"attention_bias_qkv_only": True},
    ),
    # ERNIE 4.5 dense (configuration_ernie4_5.py / modeling_ernie4_5.py): Llama's layer, one use_bias switch
    # for every linear, RoPE on interleaved pairs in fp32 with cos/sin repeat_interleaved in every layer
    # (apply_rotary_pos_emb); tied embeddings (ERNIE-4.5-0.3B).
    "ernie4_5": Family(
        keys={"attention_bias": "use_bias", "mlp_bias": "use_bias"},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 103424, "hidden_size": 1024,
                  "intermediate_size": 3072, "num_layers": 18, "num_attention_heads": 16, "num_kv_heads": 2,
                  "head_dim": 128, "tie_word_embeddings": True},
        parts={"rope_tables": "per_layer_fp32"},
    ),
    # ERNIE 4.5 MoE (configuration_ernie4_5_moe.py / modeling_ernie4_5_moe.py): ERNIE 4.5's layer with a
    # MoE block from moe_layer_start_index on, every moe_layer_interval-th layer ((i + 1) % interval, as
    # Architecture.is_moe_layer), moe_num_shared_experts shared experts of moe_intermediate_size each, a
    # router softmaxing every expert's fp32 logit of an fp32 copy of its input (Ernie4_5_MoeTopKRouter),
    # fused [E, 2f, h] gate_up_proj experts.
    "ernie4_5_moe": Family(
        keys={"num_experts": "moe_num_experts", "experts_per_token": "moe_k", "shared_experts": "moe_num_shared_experts",
              "first_dense_layers": "moe_layer_start_index", "last_moe_layer": "moe_layer_end_index",
              "attention_bias": "use_bias", "mlp_bias": "use_bias"},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 103424, "hidden_size": 2560,
                  "intermediate_size": 12288, "num_layers": 28, "num_attention_heads": 20, "num_kv_heads": 4,
                  "tie_word_embeddings": True, "num_experts": 64, "experts_per_token": 6, "shared_experts": 2,
                  "first_dense_layers": 1, "moe_layer_interval": 1, "moe_intermediate_size": 1536},
        parts={"router_fp32": True, "rope_tables": "per_layer_fp32"},
    ),
    # Hunyuan dense (configuration_hunyuan_v1_dense.py / modeling_hunyuan_v1_dense.py): Llama's layer with
    # q/k RMSNorms per head applied after RoPE (query_layernorm, key_layernorm: the same tensors kept as
    # Qwen 3's before it); attention_bias on q/k/v/o, the MLP never biased.
    "hunyuan_v1_dense": Family(
        defaults={**_LLAMA_DEFAULTS, "vocab_size": 290943, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32},
        parts={"qk_norm": "head"},
    ),
    # SmolLM3 (configuration_smollm3.py / modeling_smollm3.py): Llama's layer; no_rope_layers drops RoPE on
    # every no_rope_layer_interval-th layer (q and k stay views of their projections, which SDPA keeps: the
    # same bytes as rotated copies); tied embeddings.
    "smollm3": Family(defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 32768, "vocab_size": 128256,
                                "hidden_size": 2048, "intermediate_size": 11008, "num_layers": 36,
                                "num_attention_heads": 16, "num_kv_heads": 4, "tie_word_embeddings": True,
                                "use_sliding_window": False, "sliding_window": None}),
    # Ministral 3 (configuration_ministral3.py / modeling_ministral3.py; the decoder of the Ministral 3
    # checkpoints' text_config): Mistral's layer, q scaled by Llama 4's position-dependent attention scale
    # before RoPE (a b x 1 x s x 1 factor; the product is a new q, the projection output is not kept).
    "ministral3": Family(defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 262144, "vocab_size": 131072,
                                   "hidden_size": 4096, "intermediate_size": 14336, "num_layers": 34,
                                   "num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 128,
                                   "sliding_window": None}),
    # Granite 3.x (configuration_granite.py / modeling_granite.py): Llama's modules; embedding_multiplier,
    # residual_multiplier, attention_multiplier and logits_scaling scale by Python floats (save nothing).
    "granite": Family(defaults={**_LLAMA_DEFAULTS}),
    # Cohere 2 (Command R7B / Command A, configuration_cohere2.py / modeling_cohere2.py): Cohere's one
    # bias-free LayerNorm feeding attention and MLP in parallel; sliding-window layers with RoPE and a
    # global NoPE layer every sliding_window_pattern-th (layer_types); head_dim = hidden / heads
    # whatever config.json says (Cohere2Config.__post_init__); tied embeddings.
    "cohere2": Family(
        keys={"global_every": "sliding_window_pattern"},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True,
                  "vocab_size": 256000, "sliding_window": 4096, "global_every": 4},
        parts={"norm_kind": "layernorm_nobias", "parallel_attention_mlp": True, "norms_per_layer": 1,
               "head_dim_from_hidden": True},
    ),
    # Gemma (configuration_gemma.py / modeling_gemma.py): Llama's layer with Gemma's RMSNorm (fp32
    # normalise * (1 + weight), then cast), GeGLU (gelu_pytorch_tanh: GemmaConfig turns the hub files'
    # legacy "gelu" into it), the embedding scaled by sqrt(hidden) (the first norm keeps that product as
    # its input anyway), head_dim 256, tied embeddings.
    "gemma": Family(
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True, "vocab_size": 256000,
                  "hidden_size": 3072, "intermediate_size": 24576, "num_layers": 28, "num_attention_heads": 16,
                  "num_kv_heads": 16, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh"},
        parts={"norm_kind": "rmsnorm_offset"},
    ),
    # GLM-4 (GLM-4-9B-chat-hf; configuration_glm.py / modeling_glm.py): GLM-4-0414's attention and MLP (fused
    # gate_up_proj, biases on q/k/v only, per-layer interleaved RoPE copies on half of each head) under
    # Llama's two pre-norms.
    "glm": Family(
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 151552, "hidden_size": 4096,
                  "intermediate_size": 13696, "num_layers": 40, "num_attention_heads": 32, "num_kv_heads": 2,
                  "head_dim": 128, "attention_bias": True, "partial_rotary_factor": 0.5},
        parts={"fused_gate_up": True, "rope_tables": "per_layer", "attention_bias_qkv_only": True},
    ),
    # Arcee AFM (configuration_arcee.py / modeling_arcee.py): Llama's layer with an MLP that has no gate:
    # up_proj, squared ReLU (relu2), down_proj.
    "arcee": Family(
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 32000, "hidden_size": 2560,
                  "intermediate_size": 18432, "num_layers": 32, "num_attention_heads": 32, "hidden_act": "relu2"},
        parts={"gated_mlp": False},
    ),
    # Nemotron-4 / Minitron (configuration_nemotron.py / modeling_nemotron.py): LayerNorm1P (a LayerNorm with
    # bias whose weight is stored minus one; autocast off, the layer's dtype), an MLP without a gate
    # (up_proj, relu2, down_proj), RoPE on partial_rotary_factor (0.5) of each head, untied lm_head.
    "nemotron": Family(
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 256000, "hidden_size": 6144,
                  "intermediate_size": 24576, "num_layers": 32, "num_attention_heads": 48, "hidden_act": "relu2",
                  "partial_rotary_factor": 0.5},
        parts={"gated_mlp": False, "norm_kind": "layernorm"},
    ),
    # Granite 3.0 MoE (configuration_granitemoe.py / modeling_granitemoe.py): Granite's layer (float
    # multipliers, nothing kept) with every MLP a MoE block: a router without bias whose fp32 logits are
    # top-k'd and softmaxed over the k (GraniteMoeTopKRouter), fused [E, 2f, h] gate_up_proj experts.
    "granitemoe": Family(
        keys={"num_experts": "num_local_experts"},
        defaults={**_LLAMA_DEFAULTS, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32, "num_experts": 8, "experts_per_token": 2},
        parts={"fused_gate_up": True, "router_topk_softmax": True},
    ),
    # Granite MoE with a shared MLP (configuration_granitemoeshared.py): Granite MoE plus, when
    # shared_intermediate_size > 0, a dense gated MLP of that width beside the experts (shared_mlp:
    # input_linear h -> 2 x width, output_linear), its output added to theirs.
    "granitemoeshared": Family(
        keys={"num_experts": "num_local_experts", "shared_expert_width": "shared_intermediate_size"},
        defaults={**_LLAMA_DEFAULTS, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32, "num_experts": 8, "experts_per_token": 2,
                  "shared_expert_width": 0},
        parts={"fused_gate_up": True, "router_topk_softmax": True},
    ),
    # dots.llm1 (configuration_dots1.py / modeling_dots1.py): Qwen 3's attention (q/k RMSNorms per head,
    # attention_bias on q/k/v/o, the MLPs never biased) with DeepSeek-V3's MoE block: first_k_dense_replace
    # dense layers of intermediate_size, n_shared_experts shared experts, a sigmoid router whose fp32 linear
    # runs on an fp32 copy of its input (Dots1TopkRouter), [E, 2f, h] experts. Dots1Config's expert
    # counts default to None, which builds nothing: a file must name them.
    "dots1": Family(
        keys={"num_experts": ["n_routed_experts", "num_local_experts"], "first_dense_layers": "first_k_dense_replace",
              "shared_experts": "n_shared_experts"},
        defaults={**_LLAMA_DEFAULTS, "vocab_size": 152064, "hidden_size": 4608, "intermediate_size": 10944,
                  "moe_intermediate_size": 1408, "num_layers": 62, "num_attention_heads": 32, "num_kv_heads": 32,
                  "first_dense_layers": 0},
        parts={**_MLA_PARTS, "qk_norm": "head"},  # the dense and shared MLPs: separate gate_proj / up_proj
        required=("num_experts", "experts_per_token", "shared_experts"),
    ),
    # MiniMax-M2 (configuration_minimax_m2.py / modeling_minimax_m2.py): GQA without biases, q_norm / k_norm
    # RMSNorms over the projections' whole width, RoPE on rotary_dim of each head (the released files'
    # legacy key; MiniMaxM2Config turns it into partial_rotary_factor = rotary_dim / head_dim), every layer
    # MoE: a sigmoid router on fp32 logits with a score-correction buffer (no parameter), fused [E, 2f, h]
    # experts of intermediate_size, no shared expert.
    "minimax_m2": Family(
        keys={"num_experts": "num_local_experts", "rotary_dim": "rotary_dim"},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 196608, "vocab_size": 200064, "hidden_size": 3072,
                  "intermediate_size": 1536, "num_layers": 62, "num_attention_heads": 48, "num_kv_heads": 8,
                  "head_dim": 128, "num_experts": 256, "experts_per_token": 8},
        parts={"qk_norm": "width", "fused_gate_up": True},
    ),
    # Hunyuan MoE (Hunyuan-A13B; configuration_hunyuan_v1_moe.py / modeling_hunyuan_v1_moe.py): Hunyuan dense's
    # attention (q/k RMSNorms per head after RoPE) and, in every layer, a MoE block: a softmax top-k router
    # whose linear is built in fp32 and runs on an fp32 copy of its input (HunYuanMoEV1Gate: nn.Linear(...,
    # dtype=torch.float32), kept so by from_pretrained), num_experts experts and one shared MLP, both of
    # intermediate_size (HunYuanMoEV1Experts, HunYuanMoEV1MLP: transformers reads neither
    # moe_intermediate_size nor num_shared_expert, which the released files carry). moe_topk may be a
    # list, one per layer. A single expert beside the shared MLP (the class default) is not modelled.
    "hunyuan_v1_moe": Family(
        keys={"experts_per_token": "moe_topk", "shared_expert_width": "intermediate_size",
              "moe_intermediate_size": "<not read by transformers' HunYuanMoEV1>"},
        defaults={**_LLAMA_DEFAULTS, "vocab_size": 290943, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32},
        parts={"qk_norm": "head", "router_fp32": True},
        required=("num_experts", "experts_per_token"),
        layer_lists=("experts_per_token",),
    ),
    # GLM-4.7-Flash (configuration_glm4_moe_lite.py / modular_glm4_moe_lite.py): DeepSeek-V3's layer exactly
    # (DeepseekV3Attention's MLA, GLM-4.5's MoE block = DeepSeek-V3's: shared experts, a sigmoid router on an
    # fp32 copy of its input), the dense layers named by mlp_layer_types (default: the first).
    "glm4_moe_lite": Family(
        keys=_MLA_KEYS,
        defaults={**_LLAMA_DEFAULTS, **_MLA_DEFAULTS, "max_position_embeddings": 202752, "vocab_size": 154880,
                  "hidden_size": 2048, "intermediate_size": 10240, "moe_intermediate_size": 1536, "num_layers": 47,
                  "num_attention_heads": 20, "num_kv_heads": 20, "shared_experts": 1, "num_experts": 64,
                  "experts_per_token": 4, "first_dense_layers": 1, "kv_lora_rank": 512, "q_lora_rank": 768,
                  "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192},
        parts=_MLA_PARTS,
    ),
    # Mistral 4 (configuration_mistral4.py / modular_mistral4.py; also a Mistral 3 checkpoint's text_config):
    # DeepSeek-V3's layer (MLA, first_k_dense_replace dense layers, n_shared_experts shared experts, [E, 2f, h]
    # experts) with a softmax router on activation-dtype logits (Mistral4TopkRouter: no fp32 copy of its
    # input) and Ministral 3's position-dependent scale on q (a b x 1 x s x 1 factor).
    "mistral4": Family(
        keys=_MLA_KEYS,
        defaults={**_LLAMA_DEFAULTS, **_MLA_DEFAULTS, "max_position_embeddings": 1048576, "vocab_size": 131072,
                  "hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 2048, "num_layers": 36,
                  "num_attention_heads": 32, "num_kv_heads": 32, "shared_experts": 1, "num_experts": 128,
                  "experts_per_token": 4, "first_dense_layers": 0, "kv_lora_rank": 256, "q_lora_rank": 1024,
                  "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 64},
    ),
    # Solar Open (configuration_solar_open.py / modular_solar_open.py): Llama's attention (q/k/v biases from
    # attention_bias, o_proj never biased, no QK norm) and GLM-4.5's MoE block (DeepSeek-V3's: shared experts, a
    # sigmoid router on an fp32 copy of its input) in every layer; SolarOpenConfig has no dense width
    # (intermediate_size is unset: no layer is dense), so none is read.
    "solar_open": Family(
        keys={"num_experts": ["n_routed_experts", "num_local_experts"], "shared_experts": "n_shared_experts",
              "intermediate_size": "moe_intermediate_size"},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 196608, "hidden_size": 4096,
                  "intermediate_size": 1280, "num_layers": 48, "num_attention_heads": 64, "num_kv_heads": 8,
                  "head_dim": 128, "num_experts": 128, "experts_per_token": 8, "shared_experts": 1},
        parts={**_MLA_PARTS, "attention_bias_qkv_only": True},
    ),
    # K-EXAONE (configuration_exaone_moe.py / modular_exaone_moe.py): EXAONE 4.0's attention (q/k RMSNorms per
    # head; sliding-window layers with RoPE, a global NoPE layer every sliding_window_pattern-th) under OLMoE's
    # pre-norm layer, and DeepSeek-V3's MoE block (num_shared_experts shared experts, a sigmoid router on an
    # fp32 copy of its input) after the dense layers mlp_layer_types (or first_k_dense_replace) names.
    "exaone_moe": Family(
        keys={"shared_experts": "num_shared_experts", "first_dense_layers": "first_k_dense_replace",
              "global_every": "sliding_window_pattern"},
        defaults={**_LLAMA_DEFAULTS, "vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 16384,
                  "num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 32, "sliding_window": 4096,
                  "global_every": 4, "first_dense_layers": 1, "moe_intermediate_size": 1024, "num_experts": 64,
                  "experts_per_token": 8, "shared_experts": 1},
        parts={**_MLA_PARTS, "qk_norm": "head"},
    ),
    # Jais 2 (configuration_jais2.py / modular_jais2.py): Llama's attention with biases (attention_bias on
    # q/k/v/o), LayerNorms with weight and bias (nn.LayerNorm), Nemotron's MLP without a gate (up_proj, relu2,
    # down_proj, mlp_bias).
    "jais2": Family(
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 8192, "vocab_size": 150272, "hidden_size": 3328,
                  "intermediate_size": 26624, "num_layers": 32, "num_attention_heads": 26, "num_kv_heads": 26,
                  "head_dim": 128, "hidden_act": "relu2", "attention_bias": True, "mlp_bias": True},
        parts={"gated_mlp": False, "norm_kind": "layernorm"},
    ),
    # Hy3 (configuration_hy_v3.py / modular_hy_v3.py): Apertus's attention (q/k RMSNorms per head before RoPE,
    # attention_bias on q/k/v/o) and, after the dense layers mlp_layer_types names (default the first), MiniMax-M2's
    # MoE block with num_shared_experts shared experts: a sigmoid router whose fp32 weight runs on an fp32 copy
    # of its input (HYV3TopKRouter), a score-correction buffer; the shared and routed outputs summed in fp32
    # (enable_moe_fp32_combine: casts that keep nothing).
    "hy_v3": Family(
        keys={"shared_experts": "num_shared_experts", "first_dense_layers": "first_k_dense_replace"},
        defaults={**_LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 120832, "hidden_size": 4096,
                  "intermediate_size": 13312, "num_layers": 80, "num_attention_heads": 64, "num_kv_heads": 8,
                  "head_dim": 128, "num_experts": 192, "experts_per_token": 8, "shared_experts": 1,
                  "moe_intermediate_size": 1536, "first_dense_layers": 1},
        parts={"qk_norm": "head", "router_fp32": True},
    ),
}
FAMILIES["gemma3"] = Family(text_config=True)
FAMILIES["llama4"] = Family(text_config=True)
# Mistral 3 (Mistral Small 3.1 / 3.2, Magistral; configuration_mistral3.py): a Pixtral vision tower and
# a Mistral decoder in text_config (model_type mistral); only the decoder is counted.
FAMILIES["mistral3"] = Family(text_config=True)
# model_types whose decoder lives in config.json's text_config, and the model_type to read it as
# when text_config names no supported model_type of its own.
TEXT_CONFIG_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral"}
SUPPORTED_MODEL_TYPES = tuple(FAMILIES)

# Decoder families transformers 5.24 builds whose layers vramplan has no terms for, and why: a
# config.json of one is refused saying so (models/catalogue/hf_config.py), not as an unknown type.
_LINEAR_ATTENTION = "layers of linear attention (Gated DeltaNet) beside full attention, whose saved tensors and FLOPs are not modelled"
_RECURRENT = "state-space or recurrent layers, whose saved tensors and FLOPs are not modelled"
_PER_LAYER_EMBEDDINGS = "per-layer input embeddings and layers of several head widths, which are not modelled"
_SPARSE_ATTENTION = ("DeepSeek Sparse Attention's lightning indexer (its projections and top-k token selection), whose "
                     "parameters, saved tensors and FLOPs are not modelled")
UNMODELLED_FAMILIES: dict[str, str] = {
    **dict.fromkeys(("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "kimi_linear",
                     "qwen4_exp", "qwen4_exp_text", "olmo_hybrid"), _LINEAR_ATTENTION),
    **dict.fromkeys(("granitemoehybrid", "nemotron_h", "jamba", "falcon_h1", "falcon_mamba", "mamba", "mamba2",
                     "bamba", "zamba", "zamba2", "lfm2", "lfm2_moe", "lfm3", "recurrent_gemma", "rwkv", "xlstm"), _RECURRENT),
    **dict.fromkeys(("gemma3n", "gemma3n_text", "gemma4", "gemma4_text"), _PER_LAYER_EMBEDDINGS),
    # modeling_<type>.py <Name>Indexer (DeepseekV32Indexer, GlmMoeDsaIndexer, MistralLarge4TextIndexer): its own
    # q/k projections, weights and top-k token selection
    **dict.fromkeys(("deepseek_v32", "glm_moe_dsa", "mistral_large4", "mistral_large4_text"), _SPARSE_ATTENTION),
    # DeepseekV4/HYV4/Glm5NextText: an indexer beside hyper-connections (HyperConnection, HyperHead), and
    # DeepSeek-V4's attention compressors (CSACompressor, HCACompressor) or GLM-5-Next's linear attention
    **dict.fromkeys(("deepseek_v4", "hy_v4", "glm5_next", "glm5_next_text"),
                    _SPARSE_ATTENTION.replace("not modelled", "not modelled, nor its hyper-connections")),
    # activations.py XIELUActivation: a Python formula, or the optional xielu CUDA kernel, keeping different tensors
    "apertus": "the xIELU activation, whose saved tensors differ between transformers' Python formula and its "
               "optional CUDA kernel, and are not modelled",
}
