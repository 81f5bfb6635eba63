"""Optional: the newer families' activation terms against what autograd really saves.

Skipped unless torch and transformers are installed (torch 2.13.0 CPU, transformers 5.24.0).
gpt-oss (attention sinks, clamped GLU experts with biases, top-k-softmax router), GLM-4 (per-layer
RoPE copies, head-major q/k), Granite and Cohere 2 are exact per layer but for Cohere 2's sliding
layer (the sliding mask, as gemma3). GLM-4.5 (glm4_moe: partial RoPE concatenated, so SDPA's
output is copied for o_proj; per-head q/k RMSNorm; DeepSeek-V3's MoE block) is exact on its dense
layer and 1.005-1.007 on its MoE layer (the group-limited router's state, as deepseek_v3).
Tiny configs (tests/tools/saved_tensors_probe.py SMALL_CONFIGS), b = 2, s = 64, bf16, one training
forward under saved_tensors_hooks; per decoder layer, unique saved storages / vramplan's terms for
that layer's kind. CPU conversions as in tests/models/memory/test_saved_tensors.py (LayerNorm statistics in the
activation dtype, dropout masks in the activation dtype). The ratio is pinned per family and
attention: 1 where the terms are exact; the others are documented gaps (README "### Architectures"):

- falcon sdpa: with multi_query (Falcon-7B, kv = 1) transformers 5.24 runs its own fp32 bmm
  attention (1.816); the new decoder architecture (Falcon-40B/180B) repeats k/v to all heads and
  saves the mask for SDPA instead of keeping q/k/v as views of query_key_value (0.965). Eager is exact.
- qwen3_moe (0.995 / 0.997): its router saves 2 bytes per routed token less than Mixtral's terms.
- deepseek sdpa (1.28-1.36): CPU SDPA runs MLA's unequal q/k and v head widths through its math
  path (the measured sets equal eager's); vramplan's flash terms are those of a fused kernel, which
  CPU runs where the widths are equal: exact there, MLA's head-major output copied for o_proj
  (tests/models/memory/test_saved_tensors_sparse_attention.py). Eager is exact for the dense layers;
  MoE layers 1.005 / 0.998 (group-limited routing state).
- llama4 / gemma3 sdpa, local layers: SDPA with an explicit chunk / sliding mask repeats k/v to all
  heads and saves the b x 1 x s x s mask (flash-attention kernels do neither). llama4's MoE layers
  are exact: HF runs every expert on every token (moe_all_experts). llama4 eager 0.79 / 0.83.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tools.probe_terms import B, E, S, cpu_bytes, layer_ratios  # noqa: E402
from tools.saved_tensors_probe import SMALL_CONFIGS, probe  # noqa: E402
from transformers import AutoConfig  # noqa: E402

from vramplan.models.architecture.params import layer_group  # noqa: E402
from vramplan.models.catalogue.hf_config import architecture_from_config  # noqa: E402
from vramplan.models.memory.activation_terms import layer_terms  # noqa: E402
from vramplan.models.memory.saved_tensors import Shape  # noqa: E402

# family -> {attn: measured / estimated per layer, in layer order}
RATIOS = {
    "qwen3": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "olmo2": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "cohere": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "starcoder2": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "gpt_neox": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "phi3": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "falcon": {"sdpa": (1.816, 1.816), "eager": (1.0, 1.0)},
    "falcon_new": {"sdpa": (0.965, 0.965), "eager": (1.0, 1.0)},
    "qwen3_moe": {"sdpa": (0.995, 0.995), "eager": (0.997, 0.997)},
    "deepseek_v3": {"sdpa": (1.332, 1.292), "eager": (1.0, 1.005)},
    "deepseek_v2": {"sdpa": (1.356, 1.276), "eager": (1.0, 0.998)},
    "llama4": {"sdpa": (1.079, 1.000, 1.079, 1.000), "eager": (0.791, 0.831, 0.791, 0.831)},
    "gemma3": {"sdpa": (1.074, 1.011), "eager": (1.008, 1.008)},
}


# The families added with gpt-oss (tiny configs of their own; the probe builds them as it builds
# SMALL_CONFIGS'): measured / estimated per layer, in layer order, transformers 5.24.0, torch 2.13.0 CPU.
# gpt_oss has no SDPA path in transformers (GptOssPreTrainedModel._supports_sdpa = False). cohere2's
# sliding layer under SDPA/eager is the gemma3 gap (the explicit sliding mask); its global layer is exact.
_TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=176, vocab_size=1000)
_GEMMA4 = dict(_TINY, num_hidden_layers=4, num_key_value_heads=2, num_global_key_value_heads=1, head_dim=16,
               global_head_dim=32, attention_k_eq_v=True, sliding_window=16, hidden_size_per_layer_input=0,
               layer_types=["sliding_attention", "full_attention"] * 2)
_GEMMA4_E = dict(_GEMMA4, num_key_value_heads=1, hidden_size_per_layer_input=8, vocab_size_per_layer_input=1000,
                 num_kv_shared_layers=2, use_double_wide_mlp=True)
NEW_CONFIGS = {
    "gpt_oss": ("gpt_oss", dict(_TINY, head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=16,
                                layer_types=None)),
    "glm4": ("glm4", dict(_TINY, head_dim=16, partial_rotary_factor=0.5, pad_token_id=0)),
    "granite": ("granite", dict(_TINY, embedding_multiplier=12.0, residual_multiplier=0.22,
                                attention_multiplier=0.0078125, logits_scaling=16.0)),
    "cohere2": ("cohere2", dict(_TINY, sliding_window=16, layer_types=["sliding_attention", "full_attention"])),
    # GLM-4.5: one leading dense layer, then DeepSeek-V3's MoE block (shared expert, fp32-copy router)
    "glm4_moe": ("glm4_moe", dict(_TINY, head_dim=16, partial_rotary_factor=0.5, attention_bias=True,
                                  use_qk_norm=True, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                                  moe_intermediate_size=48, first_k_dense_replace=1, n_group=1, topk_group=1)),
    # SmolLM3: the third layer has no RoPE (no_rope_layers), q/k views of their projections (three layers,
    # so that the cos/sin pair is shared by two and counted as the model's, as in every RoPE family)
    "smollm3": ("smollm3", dict(_TINY, num_hidden_layers=3, no_rope_layers=[1, 1, 0], no_rope_layer_interval=3,
                                pad_token_id=0)),
    # Ministral 3: Llama 4's attention scale on q before RoPE
    "ministral3": ("ministral3", dict(_TINY, head_dim=16)),
    # OLMo 3: OLMo 2's layer, sliding and full attention; each kind has its own fp32 cos/sin pair (four
    # layers, so that each pair is shared by two and counted as the model's)
    "olmo3": ("olmo3", dict(_TINY, num_hidden_layers=4, sliding_window=16,
                            layer_types=["sliding_attention", "full_attention"] * 2)),
    # ERNIE 4.5: fp32 interleaved RoPE with per-layer cos/sin copies
    "ernie4_5": ("ernie4_5", dict(_TINY, head_dim=16, pad_token_id=0)),
    # ERNIE 4.5 MoE: a dense first layer, then shared + routed experts behind an fp32 softmax router
    "ernie4_5_moe": ("ernie4_5_moe", dict(_TINY, head_dim=16, pad_token_id=0, moe_num_experts=4, moe_k=2,
                                          moe_num_shared_experts=1, moe_intermediate_size=48, moe_layer_start_index=1)),
    # Qwen2-MoE: routed experts beside a sigmoid-gated shared expert, q/k/v biases
    "qwen2_moe": ("qwen2_moe", dict(_TINY, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
                                    shared_expert_intermediate_size=96)),
    # OLMoE: width q/k norms, every layer MoE
    "olmoe": ("olmoe", dict(_TINY, num_experts=4, num_experts_per_tok=2)),
    # Hunyuan dense: per-head q/k norms after RoPE
    "hunyuan_v1_dense": ("hunyuan_v1_dense", dict(_TINY, head_dim=16, pad_token_id=0)),
    # Seed-OSS: q/k/v biases, dropout 0.1 on the attention probabilities and after o_proj and down_proj
    "seed_oss": ("seed_oss", dict(_TINY, head_dim=16)),
    "seed_oss_no_dropout": ("seed_oss", dict(_TINY, head_dim=16, attention_dropout=0.0, residual_dropout=0.0)),
    # EXAONE 4.0: post-norms, per-head q/k norms, sliding layers with RoPE and NoPE global layers
    "exaone4": ("exaone4", dict(_TINY, num_hidden_layers=4, head_dim=16, sliding_window=16,
                                layer_types=["sliding_attention", "full_attention"] * 2)),
    # the families of the ninth session of 2026-12-06: Gemma's (1 + w) RMSNorm and GeGLU; GLM-4's attention
    # under two pre-norms; squared-ReLU MLPs without a gate (Arcee; Nemotron with LayerNorm1P and partial
    # RoPE); Granite MoE's fp32 top-k-softmax router and fused experts, with and without the shared MLP
    "gemma": ("gemma", dict(_TINY, head_dim=16)),
    "glm": ("glm", dict(_TINY, head_dim=16, pad_token_id=0)),
    "arcee": ("arcee", dict(_TINY, head_dim=16)),
    "nemotron": ("nemotron", dict(_TINY, head_dim=16)),
    "granitemoe": ("granitemoe", dict(_TINY, num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=12.0,
                                      residual_multiplier=0.22, attention_multiplier=0.0078125, logits_scaling=16.0)),
    "granitemoeshared": ("granitemoeshared", dict(_TINY, num_local_experts=4, num_experts_per_tok=2,
                                                  shared_intermediate_size=96)),
    # dots.llm1: a dense first layer, then DeepSeek-V3's MoE block under Qwen 3's attention
    "dots1": ("dots1", dict(_TINY, head_dim=16, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
                            moe_intermediate_size=48, first_k_dense_replace=1)),
    # MiniMax-M2: width q/k norms, RoPE on rotary_dim of each head, a sigmoid fp32 router, every layer MoE
    "minimax_m2": ("minimax_m2", dict(_TINY, head_dim=16, num_local_experts=4, num_experts_per_tok=2, rotary_dim=8)),
    # Hunyuan MoE: per-head q/k norms after RoPE, an fp32 router on an fp32 copy of its input, experts beside a
    # shared MLP in every layer, moe_topk given per layer
    "hunyuan_v1_moe": ("hunyuan_v1_moe", dict(_TINY, head_dim=16, num_experts=4, moe_topk=[2, 2], pad_token_id=0)),
    # GLM-4.7-Flash and Mistral 4: DeepSeek-V3's MLA and MoE (Mistral 4's router softmaxes activation-dtype
    # logits, and q takes Ministral 3's position-dependent scale)
    "glm4_moe_lite": ("glm4_moe_lite", dict(_TINY, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2,
                                            n_shared_experts=1, moe_intermediate_size=48, q_lora_rank=32,
                                            kv_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16)),
    "mistral4": ("mistral4", dict(_TINY, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2,
                                  n_shared_experts=1, moe_intermediate_size=48, q_lora_rank=32, kv_lora_rank=24,
                                  qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, first_k_dense_replace=1)),
    # Solar Open: Llama's attention over GLM-4.5's (DeepSeek-V3's) MoE block in every layer
    "solar_open": ("solar_open", dict(_TINY, head_dim=16, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                                      moe_intermediate_size=48)),
    # K-EXAONE: EXAONE 4.0's attention (sliding and NoPE global layers) under pre-norms, a dense first layer,
    # then DeepSeek-V3's MoE block
    "exaone_moe": ("exaone_moe", dict(_TINY, num_hidden_layers=4, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                      num_shared_experts=1, moe_intermediate_size=48, sliding_window=16,
                                      sliding_window_pattern=2, first_k_dense_replace=1, mlp_layer_types=None)),
    # Jais 2: LayerNorms with bias, biased attention, a squared-ReLU MLP without a gate
    "jais2": ("jais2", dict(_TINY, head_dim=16)),
    # Hy3: Apertus's attention (per-head q/k norms), a dense first layer, MiniMax-M2's MoE block with a shared
    # expert and an fp32 router on an fp32 copy of its input
    "hy_v3": ("hy_v3", dict(_TINY, head_dim=16, num_experts=4, num_experts_per_tok=2, num_shared_experts=1,
                            moe_intermediate_size=48)),
    # Phi-2: one LayerNorm for parallel attention and MLP, biases, partial RoPE concatenated, gelu_new; with its
    # three dropouts at 0.1 too (eager: CPU SDPA with dropout runs its math path, as Seed-OSS)
    "phi": ("phi", dict(_TINY, num_key_value_heads=4)),
    "phi_dropout": ("phi", dict(_TINY, num_key_value_heads=4, resid_pdrop=0.1, embd_pdrop=0.1, attention_dropout=0.1)),
    # OLMo 1: the parameter-free fp32 LayerNorm; q/k/v clamped in place (clip_qkv), each clamp keeping its input;
    # OLMoE likewise
    # Phi-2's own dropouts (resid_pdrop 0.1, the others 0) and GPT-NeoX's hidden_dropout alone: each role read apart
    "phi2_dropouts": ("phi", dict(_TINY, num_key_value_heads=4, resid_pdrop=0.1, embd_pdrop=0.0, attention_dropout=0.0)),
    "neox_dropouts": ("gpt_neox", dict(_TINY, num_key_value_heads=4, hidden_dropout=0.1, attention_dropout=0.0)),
    "olmo": ("olmo", dict(_TINY, clip_qkv=8.0)),
    "olmoe_clip_qkv": ("olmoe", dict(_TINY, num_experts=4, num_experts_per_tok=2, clip_qkv=8.0)),
    # AFMoE: sandwich norms, per-head q/k norms, the attention output gate, sliding (RoPE) and global (NoPE) layers, a
    # dense first layer, shared + routed experts behind a sigmoid router
    "afmoe": ("afmoe", dict(_TINY, num_hidden_layers=4, head_dim=16, num_experts=4, num_experts_per_tok=2,
                            num_shared_experts=1, moe_intermediate_size=48, num_dense_layers=1, sliding_window=16,
                            global_attn_every_n_layers=2, layer_types=None)),
    # the eleventh session's: Ministral (Mistral's layer, sliding then full attention from layer_types), VaultGemma
    # (Gemma 2's layer with two pre-norms, soft-capped attention: no SDPA path in transformers), FlexOlmo (OLMo 2's
    # layer with OLMoE's block)
    "ministral": ("ministral", dict(_TINY, head_dim=16, sliding_window=16,
                                    layer_types=["sliding_attention", "full_attention"])),
    "vaultgemma": ("vaultgemma", dict(_TINY, head_dim=16, sliding_window=16)),
    "flex_olmo": ("flex_olmo", dict(_TINY, num_experts=4, num_experts_per_tok=2, pad_token_id=0, eos_token_id=1)),
    # Youtu-LLM and MiniCPM3: MLA in a dense layer; SDPA with q/k and v heads equally wide (16 + 8 = 24), so that CPU
    # runs the fused kernel (MLA's unequal widths take its math path: deepseek_v3's gap)
    "youtu": ("youtu", dict(_TINY, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8,
                            qk_nope_head_dim=16, v_head_dim=24, bos_token_id=0, eos_token_id=1)),
    "minicpm3": ("minicpm3", dict(_TINY, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8,
                                  qk_nope_head_dim=16, v_head_dim=24)),
    # Apertus: per-head QK norms, the xIELU MLP without a gate (transformers' Python formula; its two scalars' 4 bytes
    # a layer are not counted)
    "apertus": ("apertus", dict(_TINY, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    # CWM: Llama's layer, the first of every four layers global, the others sliding
    "cwm": ("cwm", dict(_TINY, num_hidden_layers=4, head_dim=16, sliding_window=16, bos_token_id=0, eos_token_id=1)),
    # Helium: per-layer interleaved cos/sin copies over the whole head (no concatenation, so no o_proj input copy),
    # norms multiplying an fp32 copy of their weight (4 h bytes a norm and layer, not counted)
    "helium": ("helium", dict(_TINY, head_dim=16)),
    # nanochat: RMSNorms without weights (also on the embedding), q/k normed after RoPE, fc1 -> relu2 -> fc2
    "nanochat": ("nanochat", dict(_TINY)),
    # Phi-3.5-MoE: biased attention, LayerNorms, Mixtral's experts behind the sparsemixer router, whose two top-1
    # passes keep their masks, softmaxes, indices and multipliers: about 16 bytes a token more than Mixtral's router
    # terms at 4 experts (1.002-1.003 here; a far smaller share at 16 experts and h 4,096)
    "phimoe": ("phimoe", dict(_TINY, num_local_experts=4, num_experts_per_tok=2, attention_bias=True, bos_token_id=0,
                              eos_token_id=1)),
    # A.X-K1: DeepSeek-V3's layer with an RMSNorm on the MoE output (MoE layers only); q/k and v equally wide so that
    # CPU SDPA runs its fused kernel
    "axk1": ("axk1", dict(_TINY, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8,
                          qk_nope_head_dim=16, v_head_dim=24, n_routed_experts=4, num_experts_per_tok=2,
                          moe_intermediate_size=48, n_group=1, topk_group=1, bos_token_id=0, eos_token_id=1)),
    # the twelfth session's: Mellum (Qwen3-MoE's layer with sliding layers and leading dense ones from the lists; two
    # layers of each attention kind, so each kind's cos/sin tables are shared as in a real model), Kolibri-1 (EXAONE
    # 4.0's attention, GLM-4's sandwich norms, a shared expert beside the experts), StableLM (partial RoPE, LayerNorms,
    # q/k/v biases; and its parallel layer with one norm)
    "mellum": ("mellum", dict(_TINY, num_hidden_layers=4, head_dim=16, sliding_window=16, num_experts=4,
                              num_experts_per_tok=2, moe_intermediate_size=48,
                              layer_types=["sliding_attention", "full_attention"] * 2,
                              mlp_layer_types=["dense", "dense", "sparse", "sparse"])),
    "kolibri1": ("kolibri1", dict(_TINY, num_hidden_layers=4, head_dim=16, sliding_window=16, num_experts=4,
                                  num_experts_per_tok=2, moe_intermediate_size=48, shared_expert_intermediate_size=48,
                                  layer_types=["sliding_attention", "full_attention"] * 2)),
    "stablelm": ("stablelm", dict(_TINY, use_qkv_bias=True)),
    "stablelm_parallel": ("stablelm", dict(_TINY, use_parallel_residual=True, partial_rotary_factor=0.5)),
    # LayerNorm QK norms: Cohere's CohereLayerNorm((heads, head_dim)) in fp32 (Command R+), Phi's nn.LayerNorm(head_dim)
    # with a bias, StableLM's LayerNorm per head (StableLM 2 12B, with its parallel layer)
    "cohere_qk": ("cohere", dict(_TINY, use_qk_norm=True, bos_token_id=0, eos_token_id=1, pad_token_id=2)),
    "phi_qk": ("phi", dict(_TINY, num_key_value_heads=4, qk_layernorm=True)),
    "stablelm_qk": ("stablelm", dict(_TINY, qk_layernorm=True, use_parallel_residual=True)),
    # MiMo-V2-Flash: q/k 24 wide and values 16; its sliding layers with twice the KV heads and sinks, its full layers
    # with neither (eager only: no SDPA path); dense layers first, then DeepSeek-V3's MoE block without a shared expert
    "mimo_v2_flash": ("mimo_v2_flash", dict(_TINY, num_hidden_layers=4, head_dim=24, v_head_dim=16, sliding_window=16,
                                            n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
                                            layer_types=["full_attention", "sliding_attention"] * 2,
                                            mlp_layer_types=["dense", "dense", "sparse", "sparse"])),
    # HyperCLOVA X SEED: Granite's layer with its post-norms (and without); Command A+ (cohere2_moe): Cohere 2's parallel
    # layer with Mixtral's experts behind a top-k fp32-softmax router, and the sigmoid router with a shared expert, a
    # dense first layer and RMSNorms
    "hyperclovax": ("hyperclovax", dict(_TINY, head_dim=16)),
    "hyperclovax_pre_norm": ("hyperclovax", dict(_TINY, head_dim=16, use_post_norm=False)),
    "cohere2_moe": ("cohere2_moe", dict(_TINY, num_hidden_layers=4, head_dim=16, sliding_window=16, sliding_window_pattern=2,
                                        num_experts=4, num_experts_per_tok=2, bos_token_id=0, eos_token_id=1, pad_token_id=2)),
    "cohere2_moe_sigmoid": ("cohere2_moe", dict(_TINY, num_hidden_layers=4, head_dim=16, sliding_window=16,
                                                sliding_window_pattern=2, num_experts=4, num_experts_per_tok=2,
                                                bos_token_id=0, eos_token_id=1, pad_token_id=2, expert_selection_fn="sigmoid",
                                                num_shared_experts=1, rms_norm_eps=1e-5,
                                                shared_expert_combination_strategy="sum",
                                                mlp_layer_types=["dense", "sparse", "sparse", "sparse"])),
    # Laguna: 4 heads on the full layers, 8 on the sliding ones (num_attention_heads_per_layer), half the head rotated on
    # the full layers and all of it on the sliding ones, softplus(g_proj(x)) per head on the output; dense layers, then
    # experts beside a shared MLP behind a sigmoid router with a correction parameter
    "laguna": ("laguna", dict(_TINY, num_hidden_layers=4, head_dim=16, sliding_window=16, num_experts=4, num_experts_per_tok=2,
                              moe_intermediate_size=48, shared_expert_intermediate_size=48,
                              layer_types=["full_attention", "sliding_attention"] * 2, num_attention_heads_per_layer=[4, 8, 4, 8],
                              mlp_layer_types=["dense", "dense", "sparse", "sparse"])),
    # OPT: learned positions (two offset rows), biases, fc1 -> relu -> fc2, dropout 0.1 after attention and fc2 (its
    # default) and without it
    "opt": ("opt", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, ffn_dim=176, vocab_size=1000,
                        max_position_embeddings=128)),
    "opt_no_dropout": ("opt", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, ffn_dim=176, vocab_size=1000,
                                   max_position_embeddings=128, dropout=0.0)),
    # GPTBigCode (StarCoder): GPT-2's layer with one KV head (multi_query) and without; CPU SDPA with dropout runs its
    # math path (seed_oss's gap), so the dropout case is eager
    "gpt_bigcode": ("gpt_bigcode", dict(n_layer=2, n_embd=64, n_head=4, n_inner=176, vocab_size=1000, n_positions=128,
                                        bos_token_id=0, eos_token_id=1)),
    "gpt_bigcode_no_dropout": ("gpt_bigcode", dict(n_layer=2, n_embd=64, n_head=4, n_inner=176, vocab_size=1000,
                                                   n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                                   bos_token_id=0, eos_token_id=1)),
    "gpt_bigcode_mha": ("gpt_bigcode", dict(n_layer=2, n_embd=64, n_head=4, n_inner=176, vocab_size=1000, n_positions=128,
                                            multi_query=False, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                            bos_token_id=0, eos_token_id=1)),
    # GPT-J: the parallel layer, interleaved RoPE on 8 of 16 channels with sin/cos repeated for q and for k, fp32 eager
    # scores, an unbiased out_proj beside a biased MLP
    "gptj": ("gptj", dict(n_layer=2, n_embd=64, n_head=4, n_inner=176, vocab_size=1000, n_positions=128, rotary_dim=8,
                          bos_token_id=0, eos_token_id=1)),
    # Granite SWA: sinks scaling the output by sigmoid(logsumexp - sink), the first of every four layers global (eager
    # only: no SDPA path)
    "granite_swa": ("granite_swa", dict(_TINY, num_hidden_layers=4, sliding_window=16, bos_token_id=0, eos_token_id=1)),
    # Gemma 4: sliding layers 16 wide with 2 KV heads, full layers 32 wide with 1 KV head whose values are their keys
    # (attention_k_eq_v), a weightless v_norm everywhere; with a v_proj on every layer; the Unified decoder; dropout
    "gemma4": ("gemma4_text", _GEMMA4),
    "gemma4_values": ("gemma4_text", dict(_GEMMA4, attention_k_eq_v=False)),
    "gemma4_unified": ("gemma4_unified_text", {k: v for k, v in _GEMMA4.items() if k != "hidden_size_per_layer_input"}),
    "gemma4_dropout": ("gemma4_text", dict(_GEMMA4, attention_dropout=0.1)),
    # Gemma 4 26B-A4B's layer: routed experts (grouped_mm) beside the MLP, each between norms of its own
    "gemma4_moe": ("gemma4_text", dict(_GEMMA4, enable_moe_block=True, num_experts=4, top_k_experts=2,
                                       moe_intermediate_size=48)),
    # Gemma 4 E2B's layers: per-layer input embeddings (8 wide), one KV head, the last two layers reusing the first two's
    # keys and values with a double-wide MLP; and with as many KV heads as heads
    "gemma4_e": ("gemma4_text", _GEMMA4_E),
    "gemma4_e_mha": ("gemma4_text", dict(_GEMMA4_E, num_key_value_heads=4, num_global_key_value_heads=4,
                                         use_double_wide_mlp=False)),
    # config classes another family's modeling code builds (hf_alias_families.py): InternLM3 with its biases (Llama),
    # EXAONE (Llama), Sarvam MoE (GLM-4-MoE with the whole head rotated by concatenation), Sarvam MLA (DeepSeek-V3
    # without a query latent)
    "internlm3": ("internlm3", dict(_TINY, head_dim=16, qkv_bias=True, bias=True)),
    "exaone": ("exaone", dict(_TINY)),
    "sarvam_moe": ("sarvam_moe", dict(_TINY, head_dim=16, moe_intermediate_size=48, n_routed_experts=4,
                                      num_experts_per_tok=2, first_k_dense_replace=1)),
    # Apertus 1.5's decoder: Apertus's layer, its output head pruned to 600 of 1,000 rows
    "apertus1p5_text": ("apertus1p5_text", dict(_TINY, output_vocab_size=600, tie_word_embeddings=False)),
    # BLOOM: ALiBi, per-head q/k/v copies of its fused projection, a LayerNorm on the embedding (eager only); and with
    # its dropouts
    "bloom": ("bloom", dict(n_layer=2, hidden_size=64, n_head=4, vocab_size=1000)),
    "bloom_dropout": ("bloom", dict(n_layer=2, hidden_size=64, n_head=4, vocab_size=1000, hidden_dropout=0.1,
                                    attention_dropout=0.1)),
    # MPT: ALiBi in fp32, per-head q/k/v copies, the boolean causal mask masked_fill keeps, bias-free LayerNorms; and with
    # clip_qkv (transformers' MptAttentionConfig takes an integer attn_pdrop only)
    "mpt": ("mpt", dict(n_layers=2, d_model=64, n_heads=4, vocab_size=1000, max_seq_len=128)),
    "mpt_clip": ("mpt", dict(n_layers=2, d_model=64, n_heads=4, vocab_size=1000, max_seq_len=128,
                             attn_config={"clip_qkv": 6.0})),
    # GPT-Neo: q/k/v apart, fp32 eager scores, learned positions, local layers masked in a full score matrix (its mask
    # buffers are not activations); and with its dropouts. No SDPA path (eager, or FlashAttention-2 on a GPU)
    "gpt_neo": ("gpt_neo", dict(num_layers=2, hidden_size=64, num_heads=4, vocab_size=1000, max_position_embeddings=128,
                                attention_types=[[["global", "local"], 1]], window_size=16, bos_token_id=0, eos_token_id=1)),
    "gpt_neo_dropout": ("gpt_neo", dict(num_layers=2, hidden_size=64, num_heads=4, vocab_size=1000,
                                        max_position_embeddings=128, attention_types=[[["global", "local"], 1]],
                                        window_size=16, bos_token_id=0, eos_token_id=1, resid_dropout=0.1,
                                        embed_dropout=0.1, attention_dropout=0.1)),
    # Aria's decoder: Llama attention, a top-k-softmax router, fused experts beside two shared experts
    "aria_text": ("aria_text", dict(_TINY, intermediate_size=48, moe_num_experts=4, moe_topk=2, moe_num_shared_experts=2)),
    "sarvam_mla": ("sarvam_mla", dict(_TINY, num_key_value_heads=4, moe_intermediate_size=48, n_routed_experts=4,
                                      num_experts_per_tok=2, first_k_dense_replace=1, kv_lora_rank=32,
                                      qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16)),
}
NEW_RATIOS = {
    "gpt_oss": {"eager": (1.0, 1.0)},
    "glm4": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "granite": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "cohere2": {"sdpa": (1.106, 1.0), "eager": (1.007, 1.0)},
    # the MoE layer: DeepSeek-V3's group-limited router state, as deepseek_v3's (its group top-2 values'
    # indices, the group index and the expert mask: 16 n_group + 8 topk_group + E bytes a token, not modelled)
    "glm4_moe": {"sdpa": (1.0, 1.007), "eager": (1.0, 1.005)},
    "smollm3": {"sdpa": (1.0, 1.0, 1.0), "eager": (1.0, 1.0, 1.0)},
    "ministral3": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    # OLMo 3's sliding layers under SDPA: the explicit sliding mask, the gemma3 / cohere2 gap
    "olmo3": {"sdpa": (1.066, 1.0, 1.066, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    # EXAONE 4.0's sliding layers under SDPA: the explicit mask, k/v repeated to every head (the gemma3 gap)
    "exaone4": {"sdpa": (1.074, 1.0, 1.074, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    # with dropout, CPU SDPA runs its math path (fp32 scores and probabilities: 2.15); CUDA's flash and
    # memory-efficient kernels drop out in the kernel (a seed and offset), which the flash terms hold
    "seed_oss": {"eager": (1.0, 1.0)},
    "seed_oss_no_dropout": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "ernie4_5": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "ernie4_5_moe": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "hunyuan_v1_dense": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "olmoe": {"sdpa": (0.997, 0.997), "eager": (0.998, 0.998)},  # the router's 2 bytes a routed token, as qwen3_moe's
    # the gated shared expert exact; the router keeps 2 bytes a routed token less, as qwen3_moe's (0.995 / 0.997)
    "qwen2_moe": {"sdpa": (0.996, 0.996), "eager": (0.997, 0.997)},
    "gemma": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "glm": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "arcee": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    # LayerNorm1P keeps its weight + 1 (h elements) for each of the two norms: 2 e h bytes a layer, not modelled
    "nemotron": {"sdpa": (1.0011, 1.0011), "eager": (1.0006, 1.0006)},
    # the router's softmax over the k logits runs in fp32 (GraniteMoeTopKRouter): 2 bytes a routed token
    # more than gpt-oss's activation-dtype softmax, which the terms share
    "granitemoe": {"sdpa": (1.0008, 1.0008), "eager": (1.0006, 1.0006)},
    "granitemoeshared": {"sdpa": (1.0007, 1.0007), "eager": (1.0006, 1.0006)},
    # the MoE layer: the group-limited router's state (its group top-2's int64 indices, 16 n_group bytes a
    # token at n_group 1), as deepseek_v3's and glm4_moe's
    "dots1": {"sdpa": (1.0, 1.0039), "eager": (1.0, 1.0028)},
    "minimax_m2": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "hunyuan_v1_moe": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    # MLA under CPU SDPA runs its math path (deepseek_v3's documented gap), so eager: GLM-4.7-Flash reads as
    # deepseek_v3 (its MoE layer's group-limited router state); Mistral 4's dense layer keeps its q scale's
    # b x 1 x s x 1 factor (not modelled) and its MoE layer the group state
    "glm4_moe_lite": {"eager": (1.0, 1.0049)},
    "mistral4": {"eager": (1.0002, 1.002)},
    # the MoE layers: DeepSeek-V3's group-limited router state (16 n_group + 8 topk_group + E bytes a token); K-EXAONE's
    # sliding layers under CPU SDPA: the explicit window mask (EXAONE 4.0's gap)
    "solar_open": {"sdpa": (1.0081, 1.0081), "eager": (1.0055, 1.0055)},
    "exaone_moe": {"sdpa": (1.0744, 1.0069, 1.0701, 1.0069), "eager": (1.0, 1.0049, 1.0049, 1.0049)},
    "jais2": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "hy_v3": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "phi": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "phi_dropout": {"eager": (1.0, 1.0)},
    "phi2_dropouts": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "neox_dropouts": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "olmo": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "olmoe_clip_qkv": {"sdpa": (0.997, 0.997), "eager": (0.998, 0.998)},  # the router's 2 bytes, as olmoe's
    # the sliding layers under CPU SDPA: the explicit window mask (the gemma3 / olmo3 gap); eager exact
    "afmoe": {"sdpa": (1.0495, 1.0, 1.0463, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    # Ministral's sliding layer under CPU SDPA: the explicit window mask (the gemma3 gap); FlexOlmo's router keeps 2
    # bytes a routed token less, as OLMoE's
    "ministral": {"sdpa": (1.0901, 1.0), "eager": (1.0, 1.0)},
    "vaultgemma": {"eager": (1.0, 1.0)},
    "flex_olmo": {"sdpa": (0.9973, 0.9973), "eager": (0.9979, 0.9979)},
    "youtu": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "minicpm3": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "apertus": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    # CWM's sliding layers under CPU SDPA: the explicit window mask (the gemma3 gap)
    "cwm": {"sdpa": (1.0, 1.0901, 1.0901, 1.0901), "eager": (1.0, 1.0, 1.0, 1.0)},
    "helium": {"sdpa": (1.0013, 1.0013), "eager": (1.0008, 1.0008)},
    "nanochat": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "phimoe": {"sdpa": (1.0028, 1.0028), "eager": (1.002, 1.002)},
    # the MoE layer: DeepSeek-V3's group-limited router state, as deepseek_v3's
    "axk1": {"sdpa": (1.0, 1.0057), "eager": (1.0, 1.0046)},
    # Mellum's sliding layers under CPU SDPA: the explicit window mask (the gemma3 gap); its MoE layers' router keeps 2
    # bytes a routed token less, as qwen3_moe's. Kolibri-1's router keeps the int64 top-k indices, the gathered fp32
    # logits and their sigmoid and hands the experts fp32 weights: a few bytes a token more than the terms (1.0006)
    "mellum": {"sdpa": (1.0744, 1.0, 1.0739, 0.9988), "eager": (1.0, 1.0, 0.9992, 0.9992)},
    "kolibri1": {"sdpa": (1.0539, 1.0008, 1.0539, 1.0008), "eager": (1.0006, 1.0006, 1.0006, 1.0006)},
    "stablelm": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "stablelm_parallel": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "cohere_qk": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "phi_qk": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "stablelm_qk": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    # the MoE layers: DeepSeek-V3's group-limited router state (16 n_group + 8 topk_group + E bytes a token), as
    # deepseek_v3's
    "mimo_v2_flash": {"eager": (1.0, 1.0, 1.0075, 1.0075)},
    "hyperclovax": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "hyperclovax_pre_norm": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    # Command A+'s sliding layers under CPU SDPA: the explicit window mask (Cohere 2's gap); its router's k-wide softmax
    # in fp32 keeps 2 bytes a routed token more than the terms (granitemoe's), the sigmoid router a few bytes
    "cohere2_moe": {"sdpa": (1.0553, 1.0009, 1.0553, 1.0009), "eager": (1.0006, 1.0006, 1.0006, 1.0006)},
    "cohere2_moe_sigmoid": {"sdpa": (1.1102, 1.0003, 1.0451, 1.0003), "eager": (1.0, 1.0003, 1.0003, 1.0003)},
    # Laguna's sliding layers under CPU SDPA: the explicit window mask with k/v repeated to 8 heads (the gemma3 gap); its
    # MoE layers' router keeps a few bytes a token less than the terms
    "laguna": {"sdpa": (1.0, 1.1739, 0.999, 1.1601), "eager": (1.0, 1.0, 0.9993, 0.9995)},
    "opt": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "opt_no_dropout": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "gpt_bigcode": {"eager": (1.0, 1.0)},
    "gpt_bigcode_no_dropout": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "gpt_bigcode_mha": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "gptj": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "granite_swa": {"eager": (1.0, 1.0, 1.0, 1.0)},
    # Gemma 4's sliding layers under CPU SDPA: the explicit window mask (the gemma3 gap); dropout eager only (CPU SDPA
    # with dropout runs its math path)
    "gemma4": {"sdpa": (1.0501, 1.0, 1.0501, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    "gemma4_values": {"sdpa": (1.0501, 1.0, 1.0501, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    "gemma4_unified": {"sdpa": (1.0501, 1.0, 1.0501, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    "gemma4_dropout": {"eager": (1.0, 1.0, 1.0, 1.0)},
    "gemma4_moe": {"sdpa": (1.0298, 1.0, 1.0298, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    # E2B's first two layers produce the keys and values the last two reuse: under SDPA both keep them, so the probe
    # counts them in neither layer (the producers read low; test_whole_model_saved_bytes_equal_the_terms counts
    # them once, exactly), beside the sliding layers' window mask
    "gemma4_e": {"sdpa": (1.0116, 0.9805, 1.0192, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    "gemma4_e_mha": {"sdpa": (0.9799, 0.9372, 1.0243, 1.0), "eager": (1.0, 1.0, 1.0, 1.0)},
    "internlm3": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "exaone": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    # the MoE layer: GLM-4.5's group-limited router state (as glm4_moe's); Sarvam MLA under SDPA runs CPU's math path
    # (as deepseek_v3), so eager only
    "sarvam_moe": {"sdpa": (1.0, 1.0067), "eager": (1.0, 1.0049)},
    "sarvam_mla": {"eager": (1.0, 1.0051)},
    "aria_text": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "apertus1p5_text": {"sdpa": (1.0, 1.0), "eager": (1.0, 1.0)},
    "bloom": {"eager": (1.0, 1.0)},
    "bloom_dropout": {"eager": (1.0, 1.0)},
    "mpt": {"eager": (1.0, 1.0)},
    "mpt_clip": {"eager": (1.0, 1.0)},
    "gpt_neo": {"eager": (1.0, 1.0)},
    "gpt_neo_dropout": {"eager": (1.0, 1.0)},
}


@pytest.mark.parametrize(("name", "attn"), [(n, a) for n, by in NEW_RATIOS.items() for a in by])
def test_new_family_layer_saved_bytes_ratio(name: str, attn: str) -> None:
    model_type, kwargs = NEW_CONFIGS[name]
    assert layer_ratios(model_type, kwargs, attn, name) == pytest.approx(NEW_RATIOS[name][attn], abs=5e-4)


# the whole-model cases and their changes: Gemma 4's window (128) covers the sequence, so SDPA builds no mask
WHOLE_MODEL = {"gemma4": {"sliding_window": 128}, "gemma4_e": {"sliding_window": 128},
               "gemma4_e_mha": {"sliding_window": 128}, "gemma4_moe": {"sliding_window": 128}, "bloom": {}, "mpt": {},
               "mpt_clip": {}, "gpt_neo": {}}


@pytest.mark.parametrize(("name", "attn"), [(name, attn) for name in WHOLE_MODEL for attn in NEW_RATIOS[name]])
def test_whole_model_saved_bytes_equal_the_terms(name: str, attn: str) -> None:
    """Every tensor the model saves, counted once (a KV-shared layer's keys and values are its producer's), equals the
    layers', the embedding's (per-layer inputs included), the RoPE tables' and the output's terms, but the logits the
    output holds (the probe counts what autograd saves). BLOOM: no RoPE tables, its embedding LayerNorm's input and
    statistics."""
    from vramplan.models.memory.activation_terms import embedding_terms, output_terms, shared_terms

    model_type, kwargs = NEW_CONFIGS[name]
    kwargs = dict(kwargs, **WHOLE_MODEL[name])
    arch = architecture_from_config(AutoConfig.for_model(model_type, **kwargs).to_dict(), name=name, source="test")
    x, attention = Shape(b=B, s=S, e=E), "flash" if attn == "sdpa" else "eager"
    layers = sum(cpu_bytes(t, arch) for i in range(arch.num_layers)
                 for t in layer_terms(arch, "eager", attention, x, group=layer_group(arch, i)))
    rest = sum(cpu_bytes(t, arch) for t in shared_terms(arch, x) + embedding_terms(arch, x) + output_terms(arch, "eager", x)
               if t.name != "output.logits")
    assert probe(model_type, kwargs, B, S, torch.bfloat16, attn).total_unique_bytes == layers + rest


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("name", sorted(RATIOS))
def test_layer_saved_bytes_ratio(name: str, attn: str) -> None:
    model_type, kwargs = SMALL_CONFIGS[name]
    arch = architecture_from_config(AutoConfig.for_model(model_type, **kwargs).to_dict(), name=name, source="test")
    measured = probe(model_type, kwargs, B, S, torch.bfloat16, attn)
    attention = "flash" if attn == "sdpa" else "eager"
    ratios = []
    for index in measured.layer_indices:
        terms = layer_terms(arch, "eager", attention, Shape(b=B, s=S, e=E), group=layer_group(arch, index))
        ratios.append(measured.layer_bytes(index) / sum(cpu_bytes(t, arch) for t in terms))
    assert ratios == pytest.approx(RATIOS[name][attn], abs=5e-4)


# Peak bound over a full forward + backward (torch MemTracker, as tests/models/memory/test_saved_tensors.py):
# b = 2, s = 128, h = 128, f = 352. Measured/estimated 0.70-0.99 (README). Out of this test, as
# documented gaps: DeepSeek under CPU SDPA (math path, 1.13-1.26), Llama 4 under SDPA with its chunk
# mask (1.00), Falcon-7B (multi_query) under SDPA (1.59-1.79).
PEAK_FAMILIES = ("qwen3", "olmo2", "cohere", "starcoder2", "gemma3", "qwen3_moe", "phi3", "gpt_neox")
EAGER_ONLY = ("deepseek_v3", "deepseek_v2", "llama4", "falcon", "falcon_new", "glm4_moe_lite", "mistral4")
# One case per family (and full recompute for two), to keep the optional suite near a minute; the
# other combinations measured 0.70-0.99 as well (README "### Architectures").
PEAK_CASES = ([(n, "sdpa", False) for n in PEAK_FAMILIES] + [(n, "eager", False) for n in EAGER_ONLY]
              + [("qwen3", "sdpa", True), ("deepseek_v3", "eager", True)]
              # the families of the eighth session of 2026-12-06 (NEW_CONFIGS); OLMo 3's sliding layers
              # under SDPA carry the explicit-mask gap, so eager
              + [("glm4_moe", "sdpa", False), ("smollm3", "sdpa", False), ("ministral3", "sdpa", False),
                 ("olmo3", "eager", False), ("exaone4", "eager", False), ("seed_oss_no_dropout", "sdpa", False),
                 ("ernie4_5", "sdpa", False)]  # not ERNIE 4.5 MoE: MemTracker hooks every parameter, and
              # its frozen e_score_correction_bias (requires_grad=False) takes no hook
              # the ninth session's (NEW_CONFIGS)
              + [("gemma", "sdpa", False), ("glm", "sdpa", False), ("arcee", "sdpa", False),
                 ("nemotron", "sdpa", False), ("granitemoeshared", "sdpa", False), ("dots1", "sdpa", False),
                 ("minimax_m2", "sdpa", False), ("hunyuan_v1_moe", "sdpa", False), ("solar_open", "sdpa", False),
                 ("exaone_moe", "eager", False), ("jais2", "sdpa", False), ("phi", "sdpa", False),
                 ("olmo", "sdpa", False)]  # not AFMoE: its frozen expert_bias takes no MemTracker hook (ERNIE's case)
              # the eleventh session's
              + [("ministral", "sdpa", False), ("flex_olmo", "sdpa", False), ("youtu", "eager", False),
                 ("minicpm3", "eager", False), ("apertus", "sdpa", False), ("apertus", "sdpa", True),
                 ("cwm", "eager", False), ("nanochat", "sdpa", False),
                 ("nanochat", "sdpa", True)]
              # the twelfth session's
              + [("mellum", "eager", False), ("kolibri1", "eager", False), ("stablelm", "sdpa", False),
                 ("stablelm", "sdpa", True), ("stablelm_parallel", "sdpa", False), ("cohere_qk", "sdpa", False),
                 ("phi_qk", "sdpa", False), ("stablelm_qk", "sdpa", False), ("mimo_v2_flash", "eager", False),
                 ("hyperclovax", "sdpa", False), ("cohere2_moe", "eager", False), ("cohere2_moe_sigmoid", "eager", False),
                 ("opt_no_dropout", "sdpa", False), ("gpt_bigcode_no_dropout", "sdpa", False), ("gptj", "sdpa", False),
                 ("granite_swa", "eager", False)]
              # the thirteenth session's
              + [("gemma4", "eager", False), ("gemma4", "eager", True), ("gemma4_unified", "eager", False),
                 ("gemma4_moe", "eager", False), ("gemma4_e", "eager", False), ("gemma4_e", "eager", True),
                 ("internlm3", "sdpa", False), ("exaone", "sdpa", False), ("sarvam_moe", "sdpa", False),
                 ("sarvam_mla", "eager", False), ("aria_text", "sdpa", False), ("apertus1p5_text", "sdpa", False),
                 ("bloom", "eager", False), ("bloom", "eager", True), ("mpt", "eager", False), ("mpt", "eager", True),
                 ("gpt_neo", "eager", False), ("gpt_neo", "eager", True)])
# (not OPT with full recompute: at h 128 it reads 0.650 of the pillar, its fragmentation reserve and loss terms weighing
# most at this size, at the test's floor)
              # not Laguna: its frozen e_score_correction_bias (requires_grad=False) takes no MemTracker hook (ERNIE's case)


def _peak_kwargs(name: str) -> tuple[str, dict]:
    model_type, kwargs = SMALL_CONFIGS[name] if name in SMALL_CONFIGS else NEW_CONFIGS[name]
    kwargs = dict(kwargs, hidden_size=128, intermediate_size=352, vocab_size=64)
    if name in ("qwen3_moe", "deepseek_v3", "deepseek_v2", "glm4_moe", "dots1", "glm4_moe_lite", "mistral4", "solar_open",
                "exaone_moe", "mellum", "kolibri1", "mimo_v2_flash", "laguna", "gemma4_moe", "sarvam_moe", "sarvam_mla"):
        kwargs["moe_intermediate_size"] = 96
    if name in ("deepseek_v3", "glm4_moe_lite", "mistral4"):
        kwargs.update(q_lora_rank=64, kv_lora_rank=48)
    if name == "llama4":
        kwargs.update(intermediate_size=96, intermediate_size_mlp=352)
    if "output_vocab_size" in kwargs:  # a pruned head within the 64-token vocabulary
        kwargs["output_vocab_size"] = 40
    return model_type, kwargs


@pytest.mark.parametrize(("name", "attn", "checkpointing"), PEAK_CASES)
def test_activation_pillar_bounds_measured_peak(name: str, attn: str, checkpointing: bool) -> None:
    from tools.probe_peak import measured_activation_peak

    from vramplan.models.core.setup import Job, Plan
    from vramplan.models.memory.activations import activations

    model_type, kwargs = _peak_kwargs(name)
    arch = architecture_from_config(AutoConfig.for_model(model_type, **kwargs).to_dict(), name=name, source="test")
    job = Job(seq_len=128, attention="flash" if attn == "sdpa" else "eager")
    estimate = activations(arch, job, Plan(gpu="x", micro_batch=2, recompute="full" if checkpointing else "none"))
    measured = measured_activation_peak(model_type, kwargs, 2, 128, attn, checkpointing)
    assert 0.65 * estimate.total_bytes <= measured <= estimate.total_bytes, measured / estimate.total_bytes
