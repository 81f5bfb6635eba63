"""Decoder families transformers 5.24 builds whose layers vramplan has no terms for, and why: a config.json of one is
refused saying so (models/catalogue/hf_config.py), not as an unknown type. The families it reads are the registry of
models/catalogue/hf_families.py and hf_moe_families.py."""

from __future__ import annotations

_LINEAR_ATTENTION = ("layers of linear attention other than Qwen3-Next's and Qwen3.5's Gated DeltaNet, whose parameters, "
                     "saved tensors and FLOPs are not modelled")
_RECURRENT = "state-space or recurrent layers, whose saved tensors and FLOPs are not modelled"
_PER_LAYER_EMBEDDINGS = "per-layer input embeddings and layers of several head widths, which are not modelled"
# Gemma4UnifiedForConditionalGeneration (what AutoModelForCausalLM builds for it) loads both on the GPU
_GEMMA4_TOWERS = ("a vision embedder and an audio tower beside its decoder (Gemma4UnifiedForConditionalGeneration), "
                  "which are not counted; its text_config saved as a config.json of its own reads as the decoder "
                  "(gemma4_unified_text)")
_INDEXER = "DeepSeek Sparse Attention's lightning indexer (its projections and top-k token selection)"
_SPARSE_ATTENTION = ("a lightning indexer of its own (its query projected from a LayerNorm of the hidden state, not from "
                     "MLA's query latent as DeepSeek-V3.2's and GLM-5's) and a position-dependent softmax scale, whose "
                     "parameters, saved tensors and FLOPs are not modelled")
_HYPER_CONNECTIONS = f"{_INDEXER} and hyper-connections, whose parameters, saved tensors and FLOPs are not modelled"
UNMODELLED_FAMILIES: dict[str, str] = {
    **dict.fromkeys(("kimi_linear",), _LINEAR_ATTENTION),
    # OlmoHybridGatedDeltaNet: q/k/v/a/b/g projected apart, beta doubled (linear_allow_neg_eigval), its own gated norm
    "olmo_hybrid": ("Gated DeltaNet layers of its own (q/k/v/a/b/g projected apart, beta doubled, its own gated norm: "
                    "not Qwen3-Next's linear attention), whose parameters, saved tensors and FLOPs are not modelled"),
    # Qwen4ExpText*: Qwen3.5's Gated DeltaNet beside a sparse-attention indexer (QSAIndexer), gated-residual
    # hyper-connections (GatedResidual), n-gram and per-layer embeddings (NGramEmbedding, PLELayer)
    **dict.fromkeys(("qwen4_exp", "qwen4_exp_text"),
                    "Qwen3.5's Gated DeltaNet beside a sparse-attention indexer, gated-residual hyper-connections and n-gram "
                    "and per-layer embeddings, whose parameters, saved tensors and FLOPs are not modelled"),
    **dict.fromkeys(("granitemoehybrid", "nemotron_h", "jamba", "falcon_h1", "falcon_mamba", "mamba", "mamba2",
                     "bamba", "zamba", "zamba2", "lfm2", "lfm2_moe", "lfm3", "recurrent_gemma", "rwkv", "xlstm"), _RECURRENT),
    **dict.fromkeys(("gemma3n", "gemma3n_text"), _PER_LAYER_EMBEDDINGS),
    "gemma4_unified": _GEMMA4_TOWERS,
    # modeling_mistral_large4.py MistralLarge4TextIndexer (wq_b reads q_input_norm(hidden_states)) and
    # MistralLarge4TextSoftmaxScaling; DeepSeek-V3.2's and GLM-5's indexer is modelled (hf_moe_families.py)
    **dict.fromkeys(("mistral_large4", "mistral_large4_text"), _SPARSE_ATTENTION),
    # DeepseekV4/HYV4/Glm5NextText: an indexer beside hyper-connections (HyperConnection, HyperHead), and
    # DeepSeek-V4's attention compressors (CSACompressor, HCACompressor) or GLM-5-Next's linear attention
    **dict.fromkeys(("deepseek_v4", "hy_v4", "glm5_next", "glm5_next_text"), _HYPER_CONNECTIONS),
    # the other decoder families transformers 5.24 builds, each with the modeling code's part vramplan has no terms for
    **dict.fromkeys(("minimax", "bailing_hybrid"), _LINEAR_ATTENTION),  # MiniMaxLightningAttention, BailingHybridDeltaAttention
    **dict.fromkeys(("inkling", "inkling_text", "inkling2", "inkling2_text", "inkling2_loop", "inkling2_loop_text"),
                    _RECURRENT),  # InklingShortConvolution beside attention
    # LaraMiniConfig.__post_init__: linear, sliding, linear, full, sliding
    "lara_mini": ("three layer kinds (Qwen3.5's Gated DeltaNet, sliding and full attention) repeating every five layers, "
                  "which are not modelled"),
    "granitemoe_swa": "Granite SWA's attention in Granite MoE's layer, whose experts are not read beside it",
    # FlintAttention: sinks joined to fp32 scores without the row max gpt-oss subtracts, NoPE on the full layers;
    # FlintTopKRouter's fp32 weight
    "flint": "fp32 attention scores with learned sinks joined without a row-max subtraction, which are not modelled",
    # DoryModel.forward: n_recurrent_loops over n_recurrent_layers, lambda-weighted normalised residual updates
    "dory": "recurrent loops over a block of shared layers and normalised (nGPT-style) residual updates, which are not modelled",
    "zaya": "convolutional attention projections (ZayaCCAProjection), residual scaling and an MLP router, which are not modelled",
    # AXK2Attention / AXK2Indexer: an indexer beside gated RMSNorms
    "axk2": f"{_INDEXER} beside gated norms of its own, which are not modelled",
    # LongcatFlashDecoderLayer: two attention blocks a layer and zero-computation experts (ScMoE)
    "longcat_flash": "two attention blocks per layer and zero-computation experts, which are not modelled",
    "jetmoe": "a mixture of attention heads (JetMoeMoA) beside its MLP experts, which is not modelled",
    "diffllama": "differential attention (two softmax maps subtracted per head), which is not modelled",
    "doge": "dynamic-mask attention and cross-domain MoE (DogeCDMoE), which are not modelled",
    "bitnet": "ternary (1.58-bit) linear layers with their own sub-norms, which are not modelled",
    # DbrxConfig: attn_config / ffn_config objects
    "dbrx": "its attention and MoE settings nested in attn_config and ffn_config, which vramplan does not read",
    # HrmTextModel: an H and an L stack of num_layers_per_stack layers re-run H_cycles x (L_cycles + 1) times, gradients
    # routed through L_bp_cycles of them, and a prefix-LM mask
    "hrm_text": ("hierarchical recurrent cycles (two stacks of shared layers re-run H_cycles x (L_cycles + 1) times) and "
                 "a prefix-LM mask, which are not modelled"),
    # AriaForConditionalGeneration: Idefics3's vision tower and a cross-attention projector beside AriaTextForCausalLM
    "aria": "a vision tower and a cross-attention projector beside its decoder, which are not counted; its text_config "
            "saved as a config.json of its own reads as the decoder (aria_text)",
    # CohereCompassTextModel(Qwen3VLTextModel): Cohere 2's layers under Qwen3-VL's text model (mrope, DeepStack inputs)
    **dict.fromkeys(("cohere_compass", "cohere_compass_text"), "Cohere 2's layers inside Qwen3-VL's text model "
                    "(multimodal rotary sections and DeepStack visual inputs), which are not modelled"),
    # Dots3NoteTextAttention: MLA with g_proj (a sigmoid gate per head), k_rope_only_layernorm, scaled latents and
    # sliding layers, GLM-5's indexer (GlmMoeDsaIndexer); the wrapper adds vision and audio towers
    **dict.fromkeys(("dots3_note", "dots3_note_text"), f"MLA with a gate per head, a norm on the rope key and sliding "
                    f"layers beside {_INDEXER}, which are not modelled"),
    # MiniMaxM3VLTextModel: DeepseekV4Experts (hash-routed and clamped experts) under a CLIP vision tower
    **dict.fromkeys(("minimax_m3_vl", "minimax_m3_vl_text"), "DeepSeek-V4's experts beside a vision tower, which are "
                    "not modelled"),
    # Apertus1p5ForConditionalGeneration: Chameleon-style VQ vision and audio tokenizers beside Apertus1p5TextForCausalLM
    "apertus1p5": ("vision and audio tokenizers beside its decoder, which are not counted; its text_config saved as a "
                   "config.json of its own reads as the decoder (apertus1p5_text)"),
    # Gemma4AssistantForCausalLM: a draft model for speculative decoding that reads its target model's keys and values
    **dict.fromkeys(("gemma4_assistant", "gemma4_unified_assistant"), "no keys and values of its own: a speculative-"
                    "decoding draft model reading its target model's, which is not modelled"),
    # CodeGenAttention: qkv_proj split into mp_num interleaved blocks (a TPU layout) before RoPE
    "codegen": "a fused qkv_proj interleaved in mp_num blocks, which is not modelled",
}
