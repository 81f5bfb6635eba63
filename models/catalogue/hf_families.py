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
  as one value when all are equal and refused otherwise;
- `modeling`: the model_type whose modeling code builds it, where that is another family's (InternLM3 and
  EXAONE are LlamaForCausalLM: hf_alias_families.py); the architecture records that type.
The entries: the dense families here, the MoE families in hf_moe_families.py, the record and the
shared key maps in hf_family_parts.py. models/catalogue/hf_config.py reads any family through this
table; the memory model only sees the parts.
"""
from __future__ import annotations

from vramplan.models.catalogue.hf_alias_families import ALIAS_FAMILIES
from vramplan.models.catalogue.hf_classic_families import CLASSIC_FAMILIES
from vramplan.models.catalogue.hf_family_parts import (
    FALCON_PARTS,
    GATED_DELTA_DEFAULTS,
    GATED_DELTA_KEYS,
    GATED_DELTA_PARTS,
    LLAMA_DEFAULTS,
    MLA_DEFAULTS,
    NEOX_MLP,
    QWEN_DEFAULTS,
    Family,
)
from vramplan.models.catalogue.hf_gemma_families import GEMMA_FAMILIES
from vramplan.models.catalogue.hf_moe_families import MOE_FAMILIES

FAMILIES: dict[str, Family] = {
    **CLASSIC_FAMILIES,  # GPT-2-era and parallel-block layers (hf_classic_families.py)
    "llama": Family(defaults={**LLAMA_DEFAULTS}),
    "mistral": Family(defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096 * 32, "sliding_window": 4096}),
    # Ministral 8B (configuration_ministral.py / modular_ministral.py): Mistral's layer (Qwen2's attention without
    # biases) with layer_types naming each layer's sliding or full attention (MinistralConfig defaults every layer
    # to sliding_attention while sliding_window is set); MistralConfig's defaults. head_dim None does not build in
    # transformers (MinistralAttention: head_dim ** -0.5); hidden / heads stands in.
    "ministral": Family(defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096 * 32, "sliding_window": 4096}),
    # Qwen2Attention hard-codes bias=True on q/k/v (modeling_qwen2.py).
    "qwen2": Family(defaults={**QWEN_DEFAULTS}, parts={"qkv_bias": True}),
    "qwen3": Family(defaults={**QWEN_DEFAULTS}, parts={"qk_norm": "head"}),
    # Qwen3.5 (configuration_qwen3_5.py Qwen3_5TextConfig / modeling_qwen3_5.py): Qwen3-Next's hybrid of three
    # Gated DeltaNet layers to one gated full-attention layer (GATED_DELTA_PARTS) with a dense SwiGLU MLP, the
    # linear projections apart (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a). A qwen3_5 config.json holds
    # it in text_config; AutoModelForCausalLM builds Qwen3_5ForCausalLM, without the vision tower.
    "qwen3_5_text": Family(
        keys=GATED_DELTA_KEYS,
        defaults={**GATED_DELTA_DEFAULTS, "vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288,
                  "num_layers": 32, "num_attention_heads": 16, "num_kv_heads": 4},
        parts={**GATED_DELTA_PARTS, "linear_split_projections": True},
    ),
    **GEMMA_FAMILIES,  # Gemma 1 to 4 and VaultGemma (hf_gemma_families.py)
    # Phi3: fused qkv_proj and gate_up_proj, no biases.
    "phi3": Family(
        keys={"residual_dropout": "resid_pdrop"},  # embd_pdrop: no dropout reads it (modeling_phi3.py)
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "residual_dropout": 0.0,
                  "sliding_window": None},
        parts={"fused_qkv": True, "fused_gate_up": True},
    ),
    # OLMo 2: no pre-norms; RMSNorm (weight applied in fp32) after attention and after the MLP, and
    # q_norm / k_norm over the whole projection width.
    "olmo2": Family(
        defaults={**LLAMA_DEFAULTS},
        parts={"norm_kind": "rmsnorm_fp32_weight", "norm_position": "post", "qk_norm": "width"},
    ),
    # OLMo 3 (configuration_olmo3.py / modeling_olmo3.py): OLMo 2's layer, with sliding-window attention
    # (sliding_window 4096) on three layers of every four (layer_types; Olmo3Config's default pattern).
    "olmo3": Family(
        defaults={**LLAMA_DEFAULTS, "vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32, "sliding_window": 4096, "global_every": 4},
        parts={"norm_kind": "rmsnorm_fp32_weight", "norm_position": "post", "qk_norm": "width"},
    ),
    # GPT-NeoX: fused query_key_value, parallel attention + MLP (use_parallel_residual), LayerNorms,
    # biases everywhere, RoPE on rotary_pct of each head.
    "gpt_neox": Family(
        keys={"partial_rotary_factor": "rotary_pct", "residual_dropout": "hidden_dropout",
              "embedding_dropout": "hidden_dropout"},  # GPTNeoXModel.emb_dropout reads hidden_dropout
        defaults={**LLAMA_DEFAULTS, "hidden_act": "gelu", "attention_bias": True, "mlp_bias": True,
                  "partial_rotary_factor": 0.25, "residual_dropout": 0.0, "use_parallel_residual": True},
        parts={**NEOX_MLP},
    ),
    "falcon": Family(
        keys={"num_layers": ["num_hidden_layers", "n_layer"], "num_attention_heads": ["num_attention_heads", "n_head"],
              "num_kv_heads": ["num_kv_heads", "n_head_kv"], "intermediate_size": "ffn_hidden_size",
              "hidden_act": "activation", "attention_bias": "bias",
              "mlp_bias": "bias", "residual_dropout": "hidden_dropout"},
        defaults={**LLAMA_DEFAULTS, "hidden_act": "gelu", "intermediate_size": None, "tie_word_embeddings": True,
                  "residual_dropout": 0.0, "num_kv_heads": None, "multi_query": True,
                  "new_decoder_architecture": False, "parallel_attn": True, "num_ln_in_parallel_attn": None,
                  "alibi": False},
        parts={**FALCON_PARTS},
    ),
    # Cohere: one LayerNorm without bias feeding attention and MLP in parallel; tied embeddings.
    "cohere": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True, "use_qk_norm": False},
        # use_qk_norm: CohereLayerNorm((heads, head_dim)) on q and (kv heads, head_dim) on k, a weight per head
        parts={"norm_kind": "layernorm_nobias", "parallel_attention_mlp": True, "norms_per_layer": 1,
               "qk_norm_kind": "per_head"},
    ),
    # StarCoder2: biases on every linear (use_bias), LayerNorm, c_fc / c_proj gelu_pytorch_tanh MLP.
    "starcoder2": Family(
        keys={"attention_bias": "use_bias", "mlp_bias": "use_bias",
              "residual_dropout": "residual_dropout", "embedding_dropout": "embedding_dropout"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "tie_word_embeddings": True,
                  "hidden_act": "gelu_pytorch_tanh", "attention_bias": True, "mlp_bias": True, "sliding_window": None,
                  "residual_dropout": 0.0, "embedding_dropout": 0.0},
        parts={"norm_kind": "layernorm", "gated_mlp": False},
    ),
    # GLM-4-0414 (configuration_glm4.py / modeling_glm4.py): four RMSNorms (input, post_self_attn,
    # post_attention = pre-MLP, post_mlp), fused gate_up_proj, bias on q/k/v only (o_proj and the MLP
    # have none), RoPE on partial_rotary_factor (0.5) of each head whose cos/sin every layer slices
    # and repeat_interleaves into its own copies (apply_rotary_pos_emb).
    "glm4": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 151552, "attention_bias": True,
                  "partial_rotary_factor": 0.5},
        parts={"norm_position": "sandwich", "norms_per_layer": 4, "fused_gate_up": True, "rope_tables": "per_layer",
               "attention_bias_qkv_only": True},
    ),
    # EXAONE 4.0 (configuration_exaone4.py / modeling_exaone4.py): no pre-norms; RMSNorms after attention
    # and after the MLP (post_attention_layernorm, post_feedforward_layernorm) as OLMo 2's, but Llama's
    # RMSNorm (the weight times the input-dtype product); q_norm / k_norm per head over head_dim;
    # sliding-window attention (4096) on three layers of four (layer_types, or sliding_window_pattern),
    # the global layers without RoPE where a window is set (q and k then views: the same bytes saved).
    "exaone4": Family(
        keys={"global_every": "sliding_window_pattern"},
        defaults={**LLAMA_DEFAULTS, "vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 16384,
                  "num_layers": 32, "num_attention_heads": 32, "sliding_window": 4096, "global_every": 4},
        parts={"norm_position": "post", "qk_norm": "head"},
    ),
    # Seed-OSS (configuration_seed_oss.py / modeling_seed_oss.py): Llama's layer with biases on q/k/v
    # (attention_bias), o_proj's own switch (attention_out_bias) and the MLP's (mlp_bias); dropout on the
    # attention probabilities (attention_dropout) and after o_proj and down_proj (residual_dropout), both
    # 0.1 in SeedOssConfig.
    "seed_oss": Family(
        keys={"out_bias": "attention_out_bias", "residual_dropout": "residual_dropout"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 524288, "vocab_size": 155136, "hidden_size": 4096,
                  "intermediate_size": 27648, "num_layers": 64, "num_attention_heads": 80, "num_kv_heads": 8,
                  "head_dim": 128, "attention_bias": True, "out_bias": False, "attention_dropout": 0.1,
                  "residual_dropout": 0.1},
        parts={"attention_bias_qkv_only": True},
    ),
    # ERNIE 4.5 dense (configuration_ernie4_5.py / modeling_ernie4_5.py): Llama's layer, one use_bias switch
    # for every linear, RoPE on interleaved pairs in fp32 with cos/sin repeat_interleaved in every layer
    # (apply_rotary_pos_emb); tied embeddings (ERNIE-4.5-0.3B).
    "ernie4_5": Family(
        keys={"attention_bias": "use_bias", "mlp_bias": "use_bias"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 103424, "hidden_size": 1024,
                  "intermediate_size": 3072, "num_layers": 18, "num_attention_heads": 16, "num_kv_heads": 2,
                  "head_dim": 128, "tie_word_embeddings": True},
        parts={"rope_tables": "per_layer_fp32"},
    ),
    # Hunyuan dense (configuration_hunyuan_v1_dense.py / modeling_hunyuan_v1_dense.py): Llama's layer with
    # q/k RMSNorms per head applied after RoPE (query_layernorm, key_layernorm: the same tensors kept as
    # Qwen 3's before it); attention_bias on q/k/v/o, the MLP never biased.
    "hunyuan_v1_dense": Family(
        defaults={**LLAMA_DEFAULTS, "vocab_size": 290943, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32},
        parts={"qk_norm": "head"},
    ),
    # SmolLM3 (configuration_smollm3.py / modeling_smollm3.py): Llama's layer; no_rope_layers drops RoPE on
    # every no_rope_layer_interval-th layer (q and k stay views of their projections, which SDPA keeps: the
    # same bytes as rotated copies); tied embeddings.
    "smollm3": Family(defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 32768, "vocab_size": 128256,
                                "hidden_size": 2048, "intermediate_size": 11008, "num_layers": 36,
                                "num_attention_heads": 16, "num_kv_heads": 4, "tie_word_embeddings": True,
                                "use_sliding_window": False, "sliding_window": None}),
    # Ministral 3 (configuration_ministral3.py / modeling_ministral3.py; the decoder of the Ministral 3
    # checkpoints' text_config): Mistral's layer, q scaled by Llama 4's position-dependent attention scale
    # before RoPE (a b x 1 x s x 1 factor; the product is a new q, the projection output is not kept).
    "ministral3": Family(defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 262144, "vocab_size": 131072,
                                   "hidden_size": 4096, "intermediate_size": 14336, "num_layers": 34,
                                   "num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 128,
                                   "sliding_window": None}),
    # Granite 3.x (configuration_granite.py / modeling_granite.py): Llama's modules; embedding_multiplier,
    # residual_multiplier, attention_multiplier and logits_scaling scale by Python floats (save nothing).
    "granite": Family(defaults={**LLAMA_DEFAULTS}),
    # HyperCLOVA X SEED (configuration_hyperclovax.py / modular_hyperclovax.py, NAVER): Granite's layer with, when
    # use_post_norm (the default), an RMSNorm on the attention's and the MLP's output before each residual add
    # (post_norm1 / post_norm2: Gemma 2's sandwich of four norms); head_dim None is hidden / heads; logits_scaling
    # multiplies the logits (a Python float: nothing kept); GraniteConfig's defaults.
    "hyperclovax": Family(
        keys={"sandwich_norms": "use_post_norm"},
        defaults={**LLAMA_DEFAULTS, "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_layers": 32,
                  "num_attention_heads": 32, "sandwich_norms": True},
        parts={"sandwich_when_flagged": True},
    ),
    # Granite SWA (configuration_granite_swa.py / modular_granite_swa.py, IBM): Granite's layer (Python-float multipliers,
    # nothing kept) with sliding-window attention (128) on three layers of four, the first of each four global
    # (GraniteSWAConfig's layer_types: i % 4 == 0), and a learned sink per head that scales the attention output by
    # sigmoid(logsumexp(scores) - sink) in fp32 (its eager_attention_forward; flash kernels take it as s_aux; no SDPA
    # path); layer_rope_theta may leave a layer unrotated (NoPE: q and k stay views, the same bytes).
    "granite_swa": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 8192, "vocab_size": 100352, "hidden_size": 2560,
                  "intermediate_size": 8192, "num_layers": 24, "num_attention_heads": 20, "num_kv_heads": 4,
                  "tie_word_embeddings": True, "sliding_window": 128, "global_every": 4},
        parts={"global_attention_first": True, "attention_sinks": True, "sink_scaling": True},
    ),
    # Cohere 2 (Command R7B / Command A, configuration_cohere2.py / modeling_cohere2.py): Cohere's one
    # bias-free LayerNorm feeding attention and MLP in parallel; sliding-window layers with RoPE and a
    # global NoPE layer every sliding_window_pattern-th (layer_types); head_dim = hidden / heads
    # whatever config.json says (Cohere2Config.__post_init__); tied embeddings.
    "cohere2": Family(
        keys={"global_every": "sliding_window_pattern"},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 8192, "tie_word_embeddings": True,
                  "vocab_size": 256000, "sliding_window": 4096, "global_every": 4},
        parts={"norm_kind": "layernorm_nobias", "parallel_attention_mlp": True, "norms_per_layer": 1,
               "head_dim_from_hidden": True},
    ),
    # Helium (configuration_helium.py / modular_helium.py, Kyutai): Llama's layer whose RMSNorms multiply their weight
    # in fp32 (HeliumRMSNorm), and RoPE on interleaved pairs whose cos/sin each layer slices and repeat_interleaves
    # (apply_rotary_pos_emb: GLM-4's per-layer copies, the whole head rotated); HeliumConfig's defaults (Helium-1 2B).
    "helium": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 48000, "hidden_size": 2560,
                  "intermediate_size": 7040, "num_layers": 24, "num_attention_heads": 20, "num_kv_heads": 20,
                  "head_dim": 128},
        parts={"norm_kind": "rmsnorm_fp32_weight", "rope_tables": "per_layer"},
    ),
    # nanochat (configuration_nanochat.py / modular_nanochat.py, Karpathy's): RMSNorms without weights
    # (NanoChatRMSNorm = Llama4TextL2Norm) before each block and on the embedding before the first layer (the final
    # norm's module, run twice), Qwen 3's attention with its q/k normed the same way after RoPE, CLIP's MLP without a
    # gate (fc1, relu2, fc2), logits soft-capped at 15 (Gemma 2's head); NanoChatConfig's defaults (d12).
    "nanochat": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 2048, "vocab_size": 50304, "hidden_size": 768,
                  "intermediate_size": 8192, "num_layers": 12, "num_attention_heads": 6, "hidden_act": "relu2",
                  "final_logit_softcapping": 15.0},
        parts={"norm_kind": "rmsnorm_noparams", "qk_norm": "l2", "gated_mlp": False, "embedding_norm": True},
    ),
    # CWM (configuration_cwm.py / modular_cwm.py, Meta's Code World Model): Llama's layer (CwmAttention = Qwen2's
    # attention without biases) with sliding-window attention (8,192) on three layers of four, the first of each
    # four global (CwmConfig: full_attention when i % 4 == 0); CwmConfig's defaults (CWM 32B).
    "cwm": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 128256, "hidden_size": 6144,
                  "intermediate_size": 21504, "num_layers": 64, "num_attention_heads": 48, "num_kv_heads": 8,
                  "head_dim": 128, "sliding_window": 8192, "global_every": 4},
        parts={"global_attention_first": True},
    ),
    # Apertus (configuration_apertus.py / modular_apertus.py): Llama's attention with per-head q/k RMSNorms
    # (ApertusAttention), an MLP without a gate whose activation is xIELU (ApertusMLP: up_proj, XIELUActivation,
    # down_proj; transformers' Python formula unless the optional xielu CUDA wheel is installed), two pre-norms
    # (attention_layernorm, feedforward_layernorm); ApertusConfig's defaults (Apertus-8B).
    "apertus": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 65536, "vocab_size": 131072, "hidden_size": 4096,
                  "intermediate_size": 14336, "num_layers": 32, "num_attention_heads": 32, "hidden_act": "xielu"},
        parts={"qk_norm": "head", "gated_mlp": False},
    ),
    # Apertus 1.5's decoder (configuration_apertus1p5.py Apertus1p5TextConfig / modular_apertus1p5.py): Apertus's layer
    # with an extended vocabulary (266,752: text, visual and audio codes) and an output head pruned to the text-only
    # prefix, output_vocab_size rows (Apertus1p5TextForCausalLM.lm_head; untied), the logits as wide.
    "apertus1p5_text": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 65536, "vocab_size": 266752, "hidden_size": 4096,
                  "intermediate_size": 14336, "num_layers": 32, "num_attention_heads": 32, "hidden_act": "xielu"},
        parts={"qk_norm": "head", "gated_mlp": False, "pruned_head": True}, modeling="apertus",
    ),
    # Youtu-LLM (configuration_youtu.py / modular_youtu.py): DeepSeek-V3's MLA (YoutuAttention = DeepseekV3Attention,
    # DeepseekV3Config's latent widths) in a Llama layer with a dense SwiGLU MLP and no experts, tied embeddings;
    # YoutuConfig's defaults (Youtu-LLM-2B).
    "youtu": Family(
        defaults={**LLAMA_DEFAULTS, **MLA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 128256,
                  "hidden_size": 2048, "intermediate_size": 6144, "num_layers": 32, "num_attention_heads": 16,
                  "num_kv_heads": 16, "tie_word_embeddings": True},
    ),
    # MiniCPM3 (configuration_minicpm3.py / modular_minicpm3.py): DeepSeek-V2's MLA with cos/sin RoPE in a Llama
    # layer with a dense SwiGLU MLP, a scaled embedding, residual and logit scales (scalar multiplies: nothing more
    # kept); v_head_dim None is hidden / heads (MiniCPM3Config.__post_init__); MiniCPM3Config's defaults (MiniCPM3-4B).
    "minicpm3": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 32768, "vocab_size": 73448, "hidden_size": 2560,
                  "intermediate_size": 6400, "num_layers": 62, "num_attention_heads": 40, "num_kv_heads": 40,
                  "tie_word_embeddings": True, "kv_lora_rank": 256, "q_lora_rank": 768, "qk_nope_head_dim": 64,
                  "qk_rope_head_dim": 32, "v_head_dim": None},
        parts={"v_head_dim_from_hidden": True},
    ),
    # GLM-4 (GLM-4-9B-chat-hf; configuration_glm.py / modeling_glm.py): GLM-4-0414's attention and MLP (fused
    # gate_up_proj, biases on q/k/v only, per-layer interleaved RoPE copies on half of each head) under
    # Llama's two pre-norms.
    "glm": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 131072, "vocab_size": 151552, "hidden_size": 4096,
                  "intermediate_size": 13696, "num_layers": 40, "num_attention_heads": 32, "num_kv_heads": 2,
                  "head_dim": 128, "attention_bias": True, "partial_rotary_factor": 0.5},
        parts={"fused_gate_up": True, "rope_tables": "per_layer", "attention_bias_qkv_only": True},
    ),
    # Arcee AFM (configuration_arcee.py / modeling_arcee.py): Llama's layer with an MLP that has no gate:
    # up_proj, squared ReLU (relu2), down_proj.
    "arcee": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 32000, "hidden_size": 2560,
                  "intermediate_size": 18432, "num_layers": 32, "num_attention_heads": 32, "hidden_act": "relu2"},
        parts={"gated_mlp": False},
    ),
    # Nemotron-4 / Minitron (configuration_nemotron.py / modeling_nemotron.py): LayerNorm1P (a LayerNorm with
    # bias whose weight is stored minus one; autocast off, the layer's dtype), an MLP without a gate
    # (up_proj, relu2, down_proj), RoPE on partial_rotary_factor (0.5) of each head, untied lm_head.
    "nemotron": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 256000, "hidden_size": 6144,
                  "intermediate_size": 24576, "num_layers": 32, "num_attention_heads": 48, "hidden_act": "relu2",
                  "partial_rotary_factor": 0.5},
        parts={"gated_mlp": False, "norm_kind": "layernorm"},
    ),
    # Jais 2 (configuration_jais2.py / modular_jais2.py): Llama's attention with biases (attention_bias on
    # q/k/v/o), LayerNorms with weight and bias (nn.LayerNorm), Nemotron's MLP without a gate (up_proj, relu2,
    # down_proj, mlp_bias).
    "jais2": Family(
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 8192, "vocab_size": 150272, "hidden_size": 3328,
                  "intermediate_size": 26624, "num_layers": 32, "num_attention_heads": 26, "num_kv_heads": 26,
                  "head_dim": 128, "hidden_act": "relu2", "attention_bias": True, "mlp_bias": True},
        parts={"gated_mlp": False, "norm_kind": "layernorm"},
    ),
    **MOE_FAMILIES,
    **ALIAS_FAMILIES,  # config classes another family's modeling code builds (hf_alias_families.py)
}
FAMILIES["gemma3"] = Family(text_config=True)
FAMILIES["llama4"] = Family(text_config=True)
# Mistral 3 (Mistral Small 3.1 / 3.2, Magistral; configuration_mistral3.py): a Pixtral vision tower and
# a Mistral decoder in text_config (model_type mistral); the tower and projector are counted apart
# (hf_vision.py), as is Gemma 3's SigLIP tower.
FAMILIES["mistral3"] = Family(text_config=True)
# model_types whose decoder lives in config.json's text_config, and the model_type to read it as
# when text_config names no supported model_type of its own.
FAMILIES["qwen3_5"] = Family(text_config=True)
FAMILIES["qwen3_5_moe"] = Family(text_config=True)
# Gemma 4 (configuration_gemma4.py Gemma4Config): a gemma4_text decoder in text_config, a Gemma4VisionModel tower when
# vision_config is set (hf_vision.py; an audio_config is refused there)
FAMILIES["gemma4"] = Family(text_config=True)
TEXT_CONFIG_TYPES = {"gemma4": "gemma4_text", "gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral",
                     "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
SUPPORTED_MODEL_TYPES = tuple(FAMILIES)
