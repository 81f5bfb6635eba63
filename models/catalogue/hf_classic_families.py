"""The registry's GPT-2-era and parallel-block families (models/catalogue/hf_families.py says what a `Family` holds):
learned positions, fused or biased projections, LayerNorms, one norm feeding attention and the MLP in parallel."""

from __future__ import annotations

from vramplan.models.catalogue.hf_family_parts import LLAMA_DEFAULTS, Family

CLASSIC_FAMILIES: dict[str, Family] = {
    # GPT2Config: n_layer 12, n_embd 768, n_head 12, n_inner None (4h), n_positions 1024, vocab 50257,
    # activation gelu_new, resid/embd/attn_pdrop 0.1; modeling_gpt2: Conv1D c_attn with biases, LayerNorm.
    "gpt2": Family(
        keys={"num_layers": "n_layer", "hidden_size": "n_embd", "num_attention_heads": "n_head",
              "intermediate_size": "n_inner", "max_position_embeddings": "n_positions",
              "hidden_act": "activation_function", "residual_dropout": "resid_pdrop",
              "embedding_dropout": "embd_pdrop", "attention_dropout": "attn_pdrop"},
        defaults={"num_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": None,
                  "max_position_embeddings": 1024, "vocab_size": 50257, "hidden_act": "gelu_new",
                  "residual_dropout": 0.1, "embedding_dropout": 0.1, "attention_dropout": 0.1,
                  "tie_word_embeddings": True, "attention_bias": True, "mlp_bias": True},
        parts={"learned_position_embeddings": True, "fused_qkv": True, "norm_kind": "layernorm",
               "eager_softmax_fp32": False, "gated_mlp": False},
    ),
    # OPT (configuration_opt.py / modeling_opt.py, Meta): pre-LayerNorm layers (with bias), q/k/v/out_proj and
    # fc1 -> relu -> fc2 with biases (enable_bias), q scaled by a Python float (nothing kept), learned positions in a
    # table of max_position_embeddings + 2 rows (OPTLearnedPositionalEmbedding's offset), dropout after attention and
    # after fc2 (dropout, 0.1 by default; none on the embedding), eager softmax in fp32; OPTConfig's defaults
    # (OPT-125m). Refused in one line: do_layer_norm_before false (OPT-350m's norms after the residual add), a
    # word_embed_proj_dim other than hidden_size (OPT-350m's project_in / project_out), norms without parameters
    # (layer_norm_elementwise_affine false), layerdrop and _remove_final_layer_norm.
    "opt": Family(
        keys={"intermediate_size": "ffn_dim", "hidden_act": "activation_function", "residual_dropout": "dropout",
              "attention_bias": "enable_bias", "mlp_bias": "enable_bias", "num_kv_heads": None, "head_dim": None},
        defaults={"vocab_size": 50272, "hidden_size": 768, "num_layers": 12, "intermediate_size": 3072,
                  "max_position_embeddings": 2048, "num_attention_heads": 12, "hidden_act": "relu",
                  "residual_dropout": 0.1, "attention_dropout": 0.0, "tie_word_embeddings": True,
                  "attention_bias": True, "mlp_bias": True},
        parts={"learned_position_embeddings": True, "position_embedding_offset": 2, "norm_kind": "layernorm",
               "gated_mlp": False, "embedding_projection_key": "word_embed_proj_dim",
               "refused_if_unset": {"do_layer_norm_before": "puts the norms after the residual adds (OPT-350m's "
                                                            "layout), which is not modelled",
                                    "layer_norm_elementwise_affine": "makes the LayerNorms parameter-free, which is not "
                                                                     "modelled for OPT"},
               "refused_if_set": {"layerdrop": "skips layers at random in training, which is not modelled",
                                  "_remove_final_layer_norm": "leaves out the final LayerNorm, which is not modelled"}},
    ),
    # StarCoder / SantaCoder / WizardCoder (GPTBigCode: configuration_gpt_bigcode.py / modeling_gpt_bigcode.py): GPT-2's
    # layer (one c_attn with biases, learned positions, LayerNorms, c_fc -> gelu_pytorch_tanh -> c_proj, dropout on the
    # embedding, the probabilities and after both projections) with multi-query attention (multi_query: one KV head,
    # which eager attention repeats to every head); the softmax runs in fp32 (eager_attention_forward);
    # GPTBigCodeConfig's defaults.
    "gpt_bigcode": Family(
        keys={"num_layers": "n_layer", "hidden_size": "n_embd", "num_attention_heads": "n_head",
              "intermediate_size": "n_inner", "max_position_embeddings": "n_positions",
              "hidden_act": "activation_function", "residual_dropout": "resid_pdrop",
              "embedding_dropout": "embd_pdrop", "attention_dropout": "attn_pdrop", "multi_query": None,
              "single_kv_head": "multi_query", "num_kv_heads": None, "head_dim": None},
        defaults={"num_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": None,
                  "max_position_embeddings": 1024, "vocab_size": 50257, "hidden_act": "gelu_pytorch_tanh",
                  "residual_dropout": 0.1, "embedding_dropout": 0.1, "attention_dropout": 0.1,
                  "tie_word_embeddings": True, "attention_bias": True, "mlp_bias": True, "single_kv_head": True},
        parts={"learned_position_embeddings": True, "fused_qkv": True, "norm_kind": "layernorm", "gated_mlp": False,
               "kv_heads_from_flag": True,
               "refused_if_set": {"add_cross_attention": "adds cross-attention layers, which are not modelled"}},
    ),
    # GPT-J (configuration_gptj.py / modeling_gptj.py, EleutherAI): one LayerNorm (with bias) feeding attention and the
    # MLP in parallel, q/k/v and out_proj without biases, fc_in -> gelu_new -> fc_out with biases, RoPE on rotary_dim
    # channels of each head in interleaved pairs (rotate_every_two) with sin/cos repeat_interleaved in each call, the
    # rotated and pass-through parts concatenated; eager attention scores fp32 copies of q and k; dropout after
    # out_proj and fc_out (resid_pdrop), on the embedding and the probabilities; an lm_head with a bias
    # (GPTJForCausalLM); GPTJConfig's defaults (GPT-J-6B).
    "gptj": Family(
        keys={"num_layers": "n_layer", "hidden_size": "n_embd", "num_attention_heads": "n_head",
              "intermediate_size": "n_inner", "max_position_embeddings": "n_positions",
              "hidden_act": "activation_function", "residual_dropout": "resid_pdrop",
              "embedding_dropout": "embd_pdrop", "attention_dropout": "attn_pdrop", "rotary_dim": "rotary_dim",
              "num_kv_heads": None, "head_dim": None},
        defaults={"vocab_size": 50400, "max_position_embeddings": 2048, "hidden_size": 4096, "num_layers": 28,
                  "num_attention_heads": 16, "rotary_dim": 64, "intermediate_size": None, "hidden_act": "gelu_new",
                  "residual_dropout": 0.0, "embedding_dropout": 0.0, "attention_dropout": 0.0,
                  "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": True},
        parts={"gated_mlp": False, "norm_kind": "layernorm", "parallel_attention_mlp": True, "norms_per_layer": 1,
               "lm_head_bias": True, "rope_tables": "per_call", "eager_scores_fp32": True},
    ),
    # StableLM 2 / StableLM-3B-4E1T / StableLM Zephyr (configuration_stablelm.py / modeling_stablelm.py): LayerNorms with
    # weight and bias; q/k/v biases from use_qkv_bias, o_proj and the gated SwiGLU MLP never biased; RoPE on
    # partial_rotary_factor (0.25) of each head, the rotated and pass-through parts concatenated; with
    # use_parallel_residual one LayerNorm feeding attention and the MLP in parallel (post_attention_layernorm None);
    # hidden_dropout on the MLP's output only (a nonzero one refused: vramplan's residual dropout follows attention
    # too); StableLmConfig's defaults (StableLM-3B-4E1T). qk_layernorm: a LayerNorm without bias for each head
    # (StableLmLayerNormPerHead), so a weight per head and channel.
    "stablelm": Family(
        # StableLmAttention: head_dim = hidden_size // num_heads whatever the file says
        keys={"attention_bias": "use_qkv_bias", "use_qk_norm": "qk_layernorm", "residual_dropout": "hidden_dropout",
              "head_dim": None},
        defaults={**LLAMA_DEFAULTS, "max_position_embeddings": 4096, "vocab_size": 50304, "hidden_size": 2560,
                  "intermediate_size": 6912, "num_layers": 32, "num_attention_heads": 32, "partial_rotary_factor": 0.25,
                  "use_parallel_residual": False, "residual_dropout": 0.0},
        parts={"norm_kind": "layernorm", "attention_bias_qkv_only": True, "parallel_one_norm": True,
               "residual_dropout_mlp_only": True, "qk_norm_kind": "per_head"},
    ),
    # Phi-1.5 / Phi-2 (configuration_phi.py / modeling_phi.py): one LayerNorm (with bias) feeding attention and
    # the MLP in parallel; q/k/v and dense with biases; RoPE on partial_rotary_factor (0.5) of each head, the
    # rotated and pass-through halves concatenated; fc1 -> gelu_new -> fc2 with biases; dropout after attention
    # and after the MLP (resid_pdrop), on the embedding (embd_pdrop) and on the probabilities
    # (attention_dropout); an lm_head with a bias (PhiForCausalLM); qk_layernorm: one nn.LayerNorm(head_dim) with a bias
    # for every head of q and one for k.
    "phi": Family(
        keys={"residual_dropout": "resid_pdrop", "embedding_dropout": "embd_pdrop", "use_qk_norm": "qk_layernorm"},
        defaults={**LLAMA_DEFAULTS, "vocab_size": 51200, "hidden_size": 2048, "intermediate_size": 8192,
                  "num_layers": 24, "num_attention_heads": 32, "hidden_act": "gelu_new", "partial_rotary_factor": 0.5,
                  "attention_bias": True, "mlp_bias": True, "residual_dropout": 0.0, "embedding_dropout": 0.0},
        parts={"gated_mlp": False, "norm_kind": "layernorm", "parallel_attention_mlp": True, "norms_per_layer": 1,
               "lm_head_bias": True, "qk_norm_kind": "head", "qk_norm_bias": True},
    ),
    # OLMo 1 (configuration_olmo.py / modeling_olmo.py): Llama's layer with OlmoLayerNorm, a LayerNorm without
    # weight or bias run on an fp32 copy of its input (norm_kind layernorm_noparams); clip_qkv clamps q/k/v in
    # place, each clamp keeping its input (Architecture.clip_qkv).
    "olmo": Family(
        keys={"clip_qkv": "clip_qkv"},
        defaults={**LLAMA_DEFAULTS, "vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008,
                  "num_layers": 32, "num_attention_heads": 32},
        parts={"norm_kind": "layernorm_noparams"},
    ),
    # MPT (configuration_mpt.py / modeling_mpt.py, MosaicML): LayerNorms with their bias removed (norm_1, norm_2, norm_f),
    # one Wqkv chunked and reshaped into per-head copies of q, k and v, ALiBi biases (fp32, so the scores are fp32) and
    # the boolean causal mask applied by masked_fill (which keeps it), an fp32 softmax, a 4 x hidden GELU MLP, no biases,
    # attn_config.attn_pdrop on the probabilities, after attention and after the MLP; clip_qkv clamps Wqkv's output.
    # transformers' MptModel builds these whatever expansion_ratio, attn_type, qk_ln, learned_pos_emb or no_bias say,
    # and so does vramplan. Eager attention only.
    "mpt": Family(
        keys={"num_layers": "n_layers", "hidden_size": "d_model", "num_attention_heads": "n_heads",
              "max_position_embeddings": "max_seq_len", "residual_dropout": "attn_config.attn_pdrop",
              "attention_dropout": "attn_config.attn_pdrop", "clip_qkv": "attn_config.clip_qkv",
              "intermediate_size": None, "num_kv_heads": None, "head_dim": None, "sliding_window": None,
              "hidden_act": None, "attention_bias": None, "mlp_bias": None},
        defaults={"num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "intermediate_size": None,
                  "vocab_size": 50368, "max_position_embeddings": 2048, "hidden_act": "gelu", "residual_dropout": 0.0,
                  "attention_dropout": 0.0, "tie_word_embeddings": True},
        parts={"norm_kind": "layernorm_weight", "fused_qkv": True, "qkv_head_copies": True, "alibi": True,
               "mask_kept": True, "gated_mlp": False}),
    # BLOOM / BLOOMZ (configuration_bloom.py / modeling_bloom.py, BigScience): a LayerNorm on the token embedding
    # (word_embeddings_layernorm), pre-LayerNorm layers with biases everywhere, one query_key_value projection viewed
    # as (heads, 3, head_dim) and reshaped into per-head copies of q, k and v, ALiBi biases added by baddbmm (eager
    # attention only), an fp32 softmax, the tanh GELU as an autograd function keeping its input, dropout_add after
    # attention and the MLP (hidden_dropout); BloomConfig's defaults (a 2-layer, 64-wide toy) and n_embed as
    # hidden_size's old name. apply_residual_connection_post_layernorm (the residual taken after the norm) is refused.
    "bloom": Family(
        keys={"num_layers": "n_layer", "num_attention_heads": "n_head", "hidden_size": ["hidden_size", "n_embed"],
              "residual_dropout": "hidden_dropout", "intermediate_size": None, "num_kv_heads": None,
              "head_dim": None, "sliding_window": None, "hidden_act": None},
        defaults={"num_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "intermediate_size": None,
                  "vocab_size": 250880, "max_position_embeddings": 2048, "hidden_act": "bloom_gelu",
                  "residual_dropout": 0.0, "attention_dropout": 0.0, "tie_word_embeddings": True,
                  "attention_bias": True, "mlp_bias": True},
        parts={"norm_kind": "layernorm", "fused_qkv": True, "qkv_head_copies": True, "alibi": True,
               "embedding_norm": True, "gated_mlp": False, "refused_if_set": {
                   "apply_residual_connection_post_layernorm": "takes the residual after each LayerNorm, which is not "
                                                               "modelled"}}),
    # GPT-Neo (configuration_gpt_neo.py / modeling_gpt_neo.py, EleutherAI: 125M to 2.7B): GPT-2's layer with q/k/v
    # projections apart and unbiased, a biased out_proj and MLP, learned positions, eager scores from fp32 copies of q and
    # k (GPTNeoSelfAttention._attn), and in every layer a causal-mask buffer of max_position_embeddings^2 booleans
    # (mask_buffers). Its local layers mask a full score matrix to window_size: computed and kept as full attention.
    "gpt_neo": Family(
        keys={"num_layers": ["num_layers", "num_hidden_layers"], "num_attention_heads": ["num_heads", "num_attention_heads"],
              "hidden_act": "activation_function", "residual_dropout": "resid_dropout",
              "embedding_dropout": "embed_dropout", "num_kv_heads": None, "head_dim": None, "sliding_window": None},
        defaults={"num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "intermediate_size": None,
                  "vocab_size": 50257, "max_position_embeddings": 2048, "hidden_act": "gelu_new", "residual_dropout": 0.0,
                  "embedding_dropout": 0.0, "attention_dropout": 0.0, "tie_word_embeddings": True,
                  "attention_bias": False, "mlp_bias": True},
        parts={"learned_position_embeddings": True, "norm_kind": "layernorm", "gated_mlp": False,
               "attention_bias_qkv_only": True, "eager_scores_fp32": True, "mask_buffers": True}),
}
