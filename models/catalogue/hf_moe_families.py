"""The MoE families of the registry (models/catalogue/hf_families.py says what a `Family` holds):
routed experts in some or all layers, with their routers' and shared experts' parts.
"""

from __future__ import annotations

from vramplan.models.catalogue.hf_family_parts import (
    GATED_DELTA_DEFAULTS,
    GATED_DELTA_KEYS,
    GATED_DELTA_PARTS,
    LLAMA_DEFAULTS,
    MLA_PARTS,
    MOE_KEYS,
    QWEN_DEFAULTS,
    QWEN_MOE_KEYS,
    Family,
)
from vramplan.models.catalogue.hf_mla_families import MLA_FAMILIES

# GraniteMoeConfig's defaults, which GraniteMoeSharedConfig shares
_GRANITE_MOE_DEFAULTS = {**LLAMA_DEFAULTS, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
                         "num_layers": 32, "num_attention_heads": 32, "num_experts": 8, "experts_per_token": 2}
_GRANITE_MOE_PARTS = {"fused_gate_up": True, "router_topk_softmax": True}

MOE_FAMILIES: dict[str, Family] = {
    "mixtral": Family(keys=MOE_KEYS, defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096 * 32,
                                                "num_experts": 8, "experts_per_token": 2},
                      parts={"moe_block_class": "transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock"}),
    "qwen3_moe": Family(
        keys=QWEN_MOE_KEYS,
        defaults={**QWEN_DEFAULTS, "num_experts": 128, "experts_per_token": 8,
                  "moe_intermediate_size": 768, "moe_layer_interval": 1},
        parts={"qk_norm": "head", "moe_block_class": "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"},
    ),
    # Qwen1.5-MoE / Qwen2-MoE (configuration_qwen2_moe.py / modeling_qwen2_moe.py): Qwen 2's attention with
    # q/k/v biases from qkv_bias; every decoder_sparse_step-th layer MoE (mlp_only_layers dense), a softmax
    # top-k router, fused [E, 2f, h] experts and one shared expert of shared_expert_intermediate_size whose
    # output a sigmoid gate (a linear h -> 1) scales.
    "qwen2_moe": Family(
        keys={**QWEN_MOE_KEYS, "attention_bias": "qkv_bias", "shared_expert_width": "shared_expert_intermediate_size"},
        defaults={**QWEN_DEFAULTS, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                  "num_layers": 24, "num_attention_heads": 16, "num_experts": 60, "experts_per_token": 4,
                  "moe_intermediate_size": 1408, "shared_expert_width": 5632, "moe_layer_interval": 1,
                  "attention_bias": True},
        # DeepSpeed's ZeRO-3 fetches this block whole (models/memory/zero3_live.py DEFAULT_LEAF_MODULE_CLASSES)
        parts={"attention_bias_qkv_only": True, "shared_expert_gate": True,
               "moe_block_class": "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock"},
    ),
    # Qwen3-Next (configuration_qwen3_next.py / modeling_qwen3_next.py): three Gated DeltaNet layers to each
    # full-attention layer (GATED_DELTA_PARTS), the linear layers projecting q/k/v/z and b/a through two fused
    # matrices (in_proj_qkvz, in_proj_ba); every decoder_sparse_step-th layer MoE (mlp_only_layers dense) with
    # Qwen2-MoE's block: a softmax top-k router, fused experts and a shared expert behind a sigmoid gate.
    "qwen3_next": Family(
        keys={**QWEN_MOE_KEYS, **GATED_DELTA_KEYS, "shared_expert_width": "shared_expert_intermediate_size"},
        defaults={**GATED_DELTA_DEFAULTS, "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                  "num_layers": 48, "num_attention_heads": 16, "num_kv_heads": 2, "num_experts": 512,
                  "experts_per_token": 10, "moe_intermediate_size": 512, "shared_expert_width": 512,
                  "moe_layer_interval": 1},
        parts={**GATED_DELTA_PARTS, "shared_expert_gate": True},
    ),
    # Qwen3.5 MoE (configuration_qwen3_5_moe.py Qwen3_5MoeTextConfig / modeling_qwen3_5_moe.py): Qwen3-Next's
    # layers with the linear projections apart (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) and every
    # layer MoE (the config has no decoder_sparse_step), the same router and gated shared expert. A
    # qwen3_5_moe config.json holds it in text_config; AutoModelForCausalLM builds Qwen3_5MoeForCausalLM,
    # without the vision tower.
    "qwen3_5_moe_text": Family(
        keys={**QWEN_MOE_KEYS, **GATED_DELTA_KEYS, "moe_layer_interval": None,
              "shared_expert_width": "shared_expert_intermediate_size"},
        defaults={**GATED_DELTA_DEFAULTS, "vocab_size": 248320, "hidden_size": 2048, "intermediate_size": 512,
                  "num_layers": 40, "num_attention_heads": 16, "num_kv_heads": 2, "num_experts": 256,
                  "experts_per_token": 8, "moe_intermediate_size": 512, "shared_expert_width": 512},
        parts={**GATED_DELTA_PARTS, "shared_expert_gate": True, "linear_split_projections": True},
    ),
    **MLA_FAMILIES,  # DeepSeek-V3-style MLA layers (hf_mla_families.py)
    # Phi-3.5-MoE (configuration_phimoe.py / modular_phimoe.py): Llama's attention with q/k/v/o biases
    # (attention_bias), LayerNorms with bias, Mixtral's experts in every layer behind a sparsemixer router (two
    # Gumbel-sampled top-1 passes; PhimoeTopKRouter), an lm_head bias from lm_head_bias; PhimoeConfig's defaults
    # (Phi-3.5-MoE, 41.9B). The experts carry no bias: the MLP bias is read as attention_bias's (no dense layer).
    "phimoe": Family(
        keys={"num_experts": "num_local_experts", "mlp_bias": "attention_bias", "lm_head_bias": "lm_head_bias"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096 * 32, "vocab_size": 32064, "hidden_size": 4096,
                  "intermediate_size": 6400, "num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 8,
                  "num_experts": 16, "experts_per_token": 2, "lm_head_bias": False},
        parts={"norm_kind": "layernorm"},
    ),
    # FlexOlmo (configuration_flex_olmo.py / modular_flex_olmo.py): OLMo 2's layer (post-norms multiplying their
    # weight in fp32, q_norm / k_norm over the projections' whole width: FlexOlmoAttention = Olmo2Attention) with
    # OLMoE's sparse block in every layer (FlexOlmoSparseMoeBlock = OlmoeSparseMoeBlock); FlexOlmoConfig's defaults,
    # FlexOlmo-7x7B's shape.
    "flex_olmo": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 100352, "hidden_size": 4096,
                  "intermediate_size": 11008, "num_layers": 32, "num_attention_heads": 32, "num_experts": 7,
                  "experts_per_token": 5},
        parts={"norm_kind": "rmsnorm_fp32_weight", "norm_position": "post", "qk_norm": "width"},
    ),
    # OLMoE (configuration_olmoe.py / modeling_olmoe.py): pre-norms with Llama's RMSNorm, q_norm / k_norm
    # over the projections' whole width, every layer MoE (num_experts experts of intermediate_size, a
    # softmax top-k router, no shared expert); clip_qkv clamps q/k/v in place, each clamp keeping its input.
    "olmoe": Family(
        keys={"clip_qkv": "clip_qkv"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 50304, "hidden_size": 2048,
                  "intermediate_size": 2048, "num_layers": 16, "num_attention_heads": 16, "num_experts": 64,
                  "experts_per_token": 8},
        parts={"qk_norm": "width"},
    ),
    # Llama 4: MoE every interleave_moe_layer_step-th layer (top-1 routed + a shared expert of
    # intermediate_size), dense layers of intermediate_size_mlp; chunked attention with RoPE and an
    # unweighted L2 QK norm on 3 of every 4 layers, global NoPE attention on the 4th.
    "llama4_text": Family(
        keys={"num_experts": "num_local_experts", "moe_layer_interval": "interleave_moe_layer_step",
              "dense_intermediate_size": "intermediate_size_mlp", "moe_intermediate_size": "intermediate_size",
              "sliding_window": "attention_chunk_size", "global_every": "no_rope_layer_interval"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096 * 32, "num_experts": 16, "experts_per_token": 1,
                  "moe_layer_interval": 1, "dense_intermediate_size": 16384, "sliding_window": 8192,
                  "global_every": 4, "use_qk_norm": True, "shared_experts": 1},
        # Llama4TextMoe.forward: routed_in = hidden_states.repeat(num_experts, 1) * router scores
        parts={"local_attention": "chunked", "qk_norm_on_global_layers": False, "moe_all_experts": True,
               "qk_norm_kind": "l2"},
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
        defaults={**LLAMA_DEFAULTS, "num_layers": 36, "num_experts": 128, "vocab_size": 201088, "hidden_size": 2880,
                  "intermediate_size": 2880, "head_dim": 64, "num_attention_heads": 64, "num_kv_heads": 8,
                  "sliding_window": 128, "global_every": 2, "max_position_embeddings": 131072,
                  "experts_per_token": 4, "attention_bias": True, "mlp_bias": True},  # mlp_bias reads attention_bias
        parts={"norm_kind": "rmsnorm_fp32_weight", "attention_sinks": True, "moe_bias": True, "fused_gate_up": True,
               "clamped_swiglu": True, "router_topk_softmax": True, "eager_softmax_fp32": False, "rope_tables": "half"},
    ),
    # Aria's decoder (configuration_aria.py AriaTextConfig / modeling_aria.py, Rhymes AI): Llama's attention, a MoE block
    # in every layer: the router softmaxes only the top-k raw logits (AriaTextTopKRouter, in the activation dtype, as
    # gpt-oss's), fused grouped_mm experts (AriaExperts, always SiLU-gated) beside moe_num_shared_experts shared experts
    # of intermediate_size each (one MLP). The `aria` wrapper (a vision tower and a cross-attention projector) is not read.
    "aria_text": Family(
        keys={"num_experts": "moe_num_experts", "experts_per_token": "moe_topk", "shared_experts": "moe_num_shared_experts"},
        defaults={**LLAMA_DEFAULTS, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 4096, "num_layers": 32,
                  "num_attention_heads": 32, "num_experts": 8, "experts_per_token": 2, "shared_experts": 2},
        parts={"router_topk_softmax": True, "fused_gate_up": True, "silu_experts": True},
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
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 151552, "hidden_size": 4096,
                  "intermediate_size": 10944, "num_layers": 46, "num_attention_heads": 96, "num_kv_heads": 8,
                  "partial_rotary_factor": 0.5, "moe_intermediate_size": 1408, "experts_per_token": 8,
                  "shared_experts": 1, "num_experts": 128, "first_dense_layers": 1, "use_qk_norm": False},
        parts={**MLA_PARTS, "attention_bias_qkv_only": True, "qk_norm_kind": "head", "rope_concatenated": True},
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
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 103424, "hidden_size": 2560,
                  "intermediate_size": 12288, "num_layers": 28, "num_attention_heads": 20, "num_kv_heads": 4,
                  "tie_word_embeddings": True, "num_experts": 64, "experts_per_token": 6, "shared_experts": 2,
                  "first_dense_layers": 1, "moe_layer_interval": 1, "moe_intermediate_size": 1536},
        parts={"router_fp32": True, "rope_tables": "per_layer_fp32"},
    ),
    # Granite 3.0 MoE (configuration_granitemoe.py / modeling_granitemoe.py): Granite's layer (float
    # multipliers, nothing kept) with every MLP a MoE block: a router without bias whose fp32 logits are
    # top-k'd and softmaxed over the k (GraniteMoeTopKRouter), fused [E, 2f, h] gate_up_proj experts.
    "granitemoe": Family(
        keys={"num_experts": "num_local_experts"},
        defaults=_GRANITE_MOE_DEFAULTS,
        parts=_GRANITE_MOE_PARTS,
    ),
    # Granite MoE with a shared MLP (configuration_granitemoeshared.py): Granite MoE plus, when
    # shared_intermediate_size > 0, a dense gated MLP of that width beside the experts (shared_mlp:
    # input_linear h -> 2 x width, output_linear), its output added to theirs.
    "granitemoeshared": Family(
        keys={"num_experts": "num_local_experts", "shared_expert_width": "shared_intermediate_size"},
        defaults={**_GRANITE_MOE_DEFAULTS, "shared_expert_width": 0},
        parts=_GRANITE_MOE_PARTS,
    ),
    # dots.llm1 (configuration_dots1.py / modeling_dots1.py): Qwen 3's attention (q/k RMSNorms per head,
    # attention_bias on q/k/v/o, the MLPs never biased) with DeepSeek-V3's MoE block: first_k_dense_replace
    # dense layers of intermediate_size, n_shared_experts shared experts, a sigmoid router whose fp32 linear
    # runs on an fp32 copy of its input (Dots1TopkRouter), [E, 2f, h] experts. Dots1Config's expert
    # counts default to None, which builds nothing: a file must name them.
    "dots1": Family(
        keys={"num_experts": ["n_routed_experts", "num_local_experts"], "first_dense_layers": "first_k_dense_replace",
              "shared_experts": "n_shared_experts"},
        defaults={**LLAMA_DEFAULTS, "vocab_size": 152064, "hidden_size": 4608, "intermediate_size": 10944,
                  "moe_intermediate_size": 1408, "num_layers": 62, "num_attention_heads": 32, "num_kv_heads": 32,
                  "first_dense_layers": 0},
        parts={**MLA_PARTS, "qk_norm": "head"},  # the dense and shared MLPs: separate gate_proj / up_proj
        required=("num_experts", "experts_per_token", "shared_experts"),
    ),
    # MiniMax-M2 (configuration_minimax_m2.py / modeling_minimax_m2.py): GQA without biases, q_norm / k_norm
    # RMSNorms over the projections' whole width, RoPE on rotary_dim of each head (the released files'
    # legacy key; MiniMaxM2Config turns it into partial_rotary_factor = rotary_dim / head_dim), every layer
    # MoE: a sigmoid router on fp32 logits with a score-correction buffer (no parameter), fused [E, 2f, h]
    # experts of intermediate_size, no shared expert.
    "minimax_m2": Family(
        keys={"num_experts": "num_local_experts", "rotary_dim": "rotary_dim"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 196608, "vocab_size": 200064, "hidden_size": 3072,
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
              "moe_intermediate_size": None},
        defaults={**LLAMA_DEFAULTS, "vocab_size": 290943, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32},
        parts={"qk_norm": "head", "router_fp32": True},
        required=("num_experts", "experts_per_token"),
        layer_lists=("experts_per_token",),
    ),
    # Solar Open (configuration_solar_open.py / modular_solar_open.py): Llama's attention (q/k/v biases from
    # attention_bias, o_proj never biased, no QK norm) and GLM-4.5's MoE block (DeepSeek-V3's: shared experts, a
    # sigmoid router on an fp32 copy of its input) in every layer; SolarOpenConfig has no dense width
    # (intermediate_size is unset: no layer is dense), so a file's is not read and the expert width's
    # default stands in for it.
    "solar_open": Family(
        keys={"num_experts": ["n_routed_experts", "num_local_experts"], "shared_experts": "n_shared_experts",
              "intermediate_size": None},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 196608, "hidden_size": 4096,
                  "intermediate_size": 1280, "num_layers": 48, "num_attention_heads": 64, "num_kv_heads": 8,
                  "head_dim": 128, "num_experts": 128, "experts_per_token": 8, "shared_experts": 1},
        parts={**MLA_PARTS, "attention_bias_qkv_only": True},
    ),
    # K-EXAONE (configuration_exaone_moe.py / modular_exaone_moe.py): EXAONE 4.0's attention (q/k RMSNorms per
    # head; sliding-window layers with RoPE, a global NoPE layer every sliding_window_pattern-th) under OLMoE's
    # pre-norm layer, and DeepSeek-V3's MoE block (num_shared_experts shared experts, a sigmoid router on an
    # fp32 copy of its input) after the dense layers mlp_layer_types (or first_k_dense_replace) names.
    "exaone_moe": Family(
        keys={"shared_experts": "num_shared_experts", "first_dense_layers": "first_k_dense_replace",
              "global_every": "sliding_window_pattern"},
        defaults={**LLAMA_DEFAULTS, "vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 16384,
                  "num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 32, "sliding_window": 4096,
                  "global_every": 4, "first_dense_layers": 1, "moe_intermediate_size": 1024, "num_experts": 64,
                  "experts_per_token": 8, "shared_experts": 1},
        parts={**MLA_PARTS, "qk_norm": "head"},
    ),
    # Hy3 (configuration_hy_v3.py / modular_hy_v3.py): Apertus's attention (q/k RMSNorms per head before RoPE,
    # attention_bias on q/k/v/o) and, after the dense layers mlp_layer_types names (default the first), MiniMax-M2's
    # MoE block with num_shared_experts shared experts: a sigmoid router whose fp32 weight runs on an fp32 copy
    # of its input (HYV3TopKRouter), a score-correction buffer; the shared and routed outputs summed in fp32
    # (enable_moe_fp32_combine: casts that keep nothing).
    "hy_v3": Family(
        keys={"shared_experts": "num_shared_experts", "first_dense_layers": "first_k_dense_replace"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 120832, "hidden_size": 4096,
                  "intermediate_size": 13312, "num_layers": 80, "num_attention_heads": 64, "num_kv_heads": 8,
                  "head_dim": 128, "num_experts": 192, "experts_per_token": 8, "shared_experts": 1,
                  "moe_intermediate_size": 1536, "first_dense_layers": 1},
        parts={"qk_norm": "head", "router_fp32": True},
    ),
    # Mellum 2 (configuration_mellum.py / modular_mellum.py, JetBrains): Qwen3-MoE's attention (q/k RMSNorms per
    # head, RoPE on every layer) with a sliding window on the layers layer_types names (default none), Qwen3-MoE's
    # sparse block (a softmax top-k router, [E, 2f, h] experts, no shared expert) on the layers mlp_layer_types calls
    # sparse (default all) and Qwen2-MoE's MLP of intermediate_size on the dense ones (LagunaDecoderLayer's pre-norm
    # layer); MellumConfig's defaults (Mellum2-12B-A2.5B). Its multi-token-prediction layer is not built by
    # MellumForCausalLM (_keys_to_ignore_on_load_unexpected "mtp."): not counted.
    "mellum": Family(
        keys={**QWEN_MOE_KEYS, "moe_layer_interval": None},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 98304, "hidden_size": 2304,
                  "intermediate_size": 7168, "num_layers": 28, "num_attention_heads": 32, "num_kv_heads": 4,
                  "head_dim": 128, "sliding_window": 1024, "global_every": 1, "num_experts": 64,
                  "experts_per_token": 8, "moe_intermediate_size": 896},
        parts={"qk_norm": "head"},
    ),
    # Kolibri-1 (configuration_kolibri1.py / modular_kolibri1.py, Aleph Alpha): EXAONE 4.0's attention (q/k RMSNorms
    # per head; RoPE on the sliding layers, the global layers NoPE: q and k unrotated, the same bytes) in GLM-4's
    # sandwich layer (four RMSNorms), and in every layer DeepSeek-V3's block: one shared MLP of
    # shared_expert_intermediate_size beside [E, 2f, h] experts behind a router whose fp32 linear runs on an fp32
    # copy of its input, picking the top-k of logits + a score-correction buffer and taking the sigmoid of the k
    # picked logits (Kolibri1TopKRouter); layer i global when (i + 1) % 5 == 0 (Kolibri1Config's layer_types);
    # no dense layer (the config has no intermediate_size).
    "kolibri1": Family(
        keys={"num_experts": ["num_experts", "num_local_experts"], "shared_expert_width": "shared_expert_intermediate_size",
              "intermediate_size": None, "moe_layer_interval": None},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 262144, "vocab_size": 128000, "hidden_size": 2560,
                  "intermediate_size": 512, "num_layers": 50, "num_attention_heads": 48, "num_kv_heads": 4,
                  "head_dim": 128, "sliding_window": 513, "global_every": 5, "num_experts": 384,
                  "experts_per_token": 6, "moe_intermediate_size": 512, "shared_expert_width": 512},
        parts={"norm_position": "sandwich", "norms_per_layer": 4, "qk_norm": "head", "router_fp32": True},
    ),
    # MiMo-V2-Flash (configuration_mimo_v2_flash.py / modular_mimo_v2_flash.py, Xiaomi): Qwen 2's attention without
    # biases, q/k head_dim 192 and values v_head_dim 128 wide, RoPE on a third of each head (rotated and pass-through
    # parts concatenated), values scaled by attention_value_scale (a multiply that keeps nothing); the sliding layers
    # (window 129) have twice the KV heads and a learned sink per head (MiMoV2FlashAttention), the full ones -- layer 0
    # and every sixth -- neither; eager attention subtracts the row max on every layer (no SDPA path: sinks); after
    # the dense first layer (mlp_layer_types) DeepSeek-V3's MoE block without a shared expert (a sigmoid router whose
    # fp32 weight runs on an fp32 copy of its input, group-limited top-k); MiMoV2FlashConfig's defaults (MiMo-V2-Flash,
    # 309B). The multi-token-prediction layers are not built by MiMoV2FlashForCausalLM ("model.mtp."): not counted.
    "mimo_v2_flash": Family(
        keys={"num_experts": ["n_routed_experts", "num_local_experts"], "shared_experts": None,
              "first_dense_layers": None},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 152576, "hidden_size": 4096,
                  "intermediate_size": 16384, "moe_intermediate_size": 2048, "num_layers": 48, "num_attention_heads": 64,
                  "num_kv_heads": 4, "head_dim": 192, "v_head_dim": 128, "sliding_window": 129, "global_every": 6,
                  "partial_rotary_factor": 0.334, "num_experts": 256, "experts_per_token": 8, "first_dense_layers": 1},
        parts={**MLA_PARTS, "global_first_layer": True, "local_kv_heads_factor": 2, "local_attention_sinks": True,
               "value_head_dim": True, "eager_softmax_fp32": False},
    ),
    # Command A+ (configuration_cohere2_moe.py / modular_cohere2_moe.py, Cohere): Cohere 2's layer (one norm feeding
    # attention and the MLP in parallel; sliding layers with RoPE and a global NoPE layer every sliding_window_pattern-th)
    # with Mixtral's experts of intermediate_size behind a router that softmaxes (in fp32) or sigmoids the top-k of its
    # logits (expert_selection_fn), num_shared_experts shared experts as one MLP of that many widths, summed or
    # averaged with the experts' output (a Python-float divide: nothing kept); leading dense layers (mlp_layer_types)
    # of prefix_dense_intermediate_size; Cohere's bias-free fp32 LayerNorm, or Llama's RMSNorm when rms_norm_eps is
    # set; Cohere2MoeConfig's defaults.
    "cohere2_moe": Family(
        keys={"global_every": "sliding_window_pattern", "shared_experts": "num_shared_experts",
              "dense_intermediate_size": "prefix_dense_intermediate_size"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True, "vocab_size": 256000,
                  "hidden_size": 8192, "intermediate_size": 22528, "num_layers": 40, "num_attention_heads": 64,
                  "head_dim": 128, "sliding_window": 4096, "global_every": 4, "num_experts": 8, "experts_per_token": 2,
                  "shared_experts": 0, "dense_intermediate_size": None},
        parts={"norm_kind": "layernorm_nobias", "parallel_attention_mlp": True, "norms_per_layer": 1,
               "rmsnorm_when_eps": True, "router_topk_softmax": True},
    ),
    # Laguna (configuration_laguna.py / modular_laguna.py, poolside): pre-norm layers (Llama's RMSNorm); attention with
    # per-head q/k RMSNorms, a head count per layer (num_attention_heads_per_layer: one for the full layers, one for
    # the sliding ones), a rope_parameters per layer type (the full layers rotate half of each head, the sliding ones
    # all of it) and an output gate softplus(g_proj(x)) in fp32, per head (gating True / "per-head") or per channel;
    # after the dense first layer (mlp_layer_types), Qwen3-MoE's experts beside one ungated shared MLP of
    # shared_expert_intermediate_size, behind a sigmoid router whose logits (cast to fp32) pick the top-k with a score-correction
    # parameter (e_score_correction_bias, requires_grad False: counted, as transformers counts it); LagunaConfig's
    # defaults. Refused: moe_router_logit_softcapping > 0 (its tanh is not modelled) and
    # moe_apply_router_weight_on_input (transformers raises on it).
    "laguna": Family(
        keys={"shared_expert_width": "shared_expert_intermediate_size", "moe_layer_interval": None},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 100352, "hidden_size": 2048,
                  "intermediate_size": 8192, "num_layers": 40, "num_attention_heads": 48, "num_kv_heads": 8,
                  "head_dim": 128, "sliding_window": 512, "global_every": 1, "partial_rotary_factor": 0.5,
                  "num_experts": 256, "experts_per_token": 8, "moe_intermediate_size": 512, "shared_expert_width": 512,
                  "first_dense_layers": 1},
        parts={"qk_norm": "head", "attention_output_gate": True, "gating_key": "gating",
               "router_correction_parameter": True,
               "heads_per_layer": True, "local_rotary_default": 1.0,
               "refused_if_set": {"moe_router_logit_softcapping": "a soft-capped router (its tanh) is not modelled",
                                  "moe_apply_router_weight_on_input": "transformers' Laguna raises on it"}},
    ),
    # AFMoE (Arcee Trinity; configuration_afmoe.py / modular_afmoe.py): four RMSNorms a layer (sandwich) that multiply
    # their weight in fp32 (GptOssRMSNorm), q/k RMSNorms per head, a sigmoid gate on the attention output
    # (self_attn.gate_proj: attention_output_gate), RoPE on the sliding layers only (the global layer every
    # global_attn_every_n_layers-th is NoPE: q and k stay views, the same bytes), num_dense_layers dense layers,
    # then num_shared_experts shared experts beside routed experts behind a sigmoid router on fp32 logits. Its
    # frozen fp32 expert_bias (E a MoE layer, requires_grad False) is not counted.
    "afmoe": Family(
        keys={"first_dense_layers": "num_dense_layers", "shared_experts": "num_shared_experts",
              "global_every": "global_attn_every_n_layers"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 16384, "vocab_size": 200192, "hidden_size": 2048,
                  "intermediate_size": 6144, "moe_intermediate_size": 1408, "num_layers": 32, "num_attention_heads": 16,
                  "num_kv_heads": 16, "head_dim": 128, "num_experts": 64, "experts_per_token": 6, "shared_experts": 2,
                  "first_dense_layers": 1, "sliding_window": 1024, "global_every": 4},
        parts={"norm_kind": "rmsnorm_fp32_weight", "norm_position": "sandwich", "norms_per_layer": 4, "qk_norm": "head",
               "attention_output_gate": True},
    ),
}
