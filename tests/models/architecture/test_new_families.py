"""gpt_oss, mistral3, glm4, granite and cohere2 config.json files: their parts and exact counts.

Fixtures (tests/fixtures/hf_configs/):
- gpt-oss-20b.json: openai/gpt-oss-20b's config.json as a public mirror keeps it (EchoCog/gpt-oss-20b,
  commit 52971a1), whose quantization_config says "gptq"; restored to the hub's "mxfp4", which
  other copies of the file show (e.g. a test of the kiln project quoting
  huggingface.co/openai/gpt-oss-120b/raw/main/config.json).
- gpt-oss-120b.json: the 20b file with num_hidden_layers 36, num_local_experts 128 and 36
  layer_types, as that quoted 120b config.json has them (every other key is equal).
- granite-3.3-8b.json: ibm-granite/granite-3.3-8b-instruct's config.json as a public model dump quotes it.
- glm-4.5-air.json: zai-org/GLM-4.5-Air's config.json as ms-swift's debug log prints it on loading the
  checkpoint (transformers 4.54.1's Glm4MoeConfig, every key of the file).
- glm-4-9b-0414.json, command-r7b.json, mistral-small-3.1-24b.json: not fetched (the hub is not
  reachable here); reconstructed from the published values of THUDM/GLM-4-9B-0414,
  CohereLabs/c4ai-command-r7b-12-2024 and mistralai/Mistral-Small-3.1-24B-Instruct-2503 (the
  transformers docs' defaults for Mistral 3 and the model cards' shapes). Their counts equal the
  hub's rounded figures (9.4B, 8.03B, 24.0B with the vision tower).
Golden counts: transformers 5.24 on the meta device (tests/golden_params.py, with their hub sources).
"""

from __future__ import annotations

import json

import pytest
from golden_params import HF_PARAM_COUNTS
from helpers.paths import HF_CONFIGS

from vramplan.models.architecture.params import count_params, layer_group, layer_groups, layer_linear_modules
from vramplan.models.catalogue.hf_config import SUPPORTED_MODEL_TYPES, architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activation_terms import Shape, layer_terms
from vramplan.models.memory.activations import activations
from vramplan.models.time.flops import forward_flops_per_token

NEW = {"gpt-oss-20b": "gpt_oss", "gpt-oss-120b": "gpt_oss", "glm-4-9b-0414": "glm4", "granite-3.3-8b": "granite",
       "command-r7b": "cohere2", "glm-4.5-air": "glm4_moe"}


def _fixture(name: str) -> dict:
    return json.loads((HF_CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


def _arch(name: str, **change):
    return architecture_from_config(_fixture(name) | change, name=name, source="config.json")


def test_the_new_families_are_supported() -> None:
    assert {"gpt_oss", "mistral3", "glm4", "granite", "cohere2", "glm4_moe", "smollm3", "ministral3"} <= set(
        SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("name", sorted(NEW))
def test_counts_equal_transformers_and_the_catalogue(catalogue, name: str) -> None:
    arch, golden = _arch(name), HF_PARAM_COUNTS[name]
    counts = count_params(arch)
    assert arch.model_type == NEW[name]
    assert (counts.total, counts.active, counts.layers, counts.per_layer, counts.lm_head) == (
        golden["total"], golden["active"], golden["layers"], golden["per_layer"], golden["lm_head"])
    assert catalogue.architecture(name).model_dump(exclude={"name", "source"}) == arch.model_dump(exclude={"name", "source"})


def test_gpt_oss_parts() -> None:
    arch = _arch("gpt-oss-20b")
    assert (arch.attention_sinks, arch.moe_bias, arch.clamped_swiglu, arch.router_topk_softmax) == (True, True, True, True)
    assert (arch.local_attention, arch.attention_window, arch.global_attention_every) == ("sliding", 128, 2)
    assert sum(g.count for g in layer_groups(arch) if g.local) == 12  # layer_types: sliding, full, ...
    assert (arch.qkv_bias, arch.linear_bias, arch.norm_kind, arch.checkpoint_quantization) == (
        True, True, "rmsnorm_fp32_weight", "mxfp4")
    names = {m.name: m for m in layer_linear_modules(arch)}
    assert names["router"].has_bias and names["experts.gate_up_proj"].out_features == 2 * 2880
    assert names["experts.gate_up_proj"].copies_per_layer == 32 and names["experts.down_proj"].has_bias
    # the model card's 3.61B / 5.13B active exclude the embedding (not the unembedding)
    assert round((count_params(arch).active - count_params(arch).embedding) / 1e7) == 361
    big = _arch("gpt-oss-120b")
    assert round((count_params(big).active - count_params(big).embedding) / 1e7) == 513


def test_gpt_oss_layer_types_or_the_config_default() -> None:
    config = _fixture("gpt-oss-20b")
    del config["layer_types"]  # GptOssConfig.__post_init__: sliding on even layers, full on odd ones
    arch = architecture_from_config(config, name="x", source="config.json")
    assert arch.global_attention_every == 2 and sum(g.count for g in layer_groups(arch) if g.local) == 12


def test_glm4_parts() -> None:
    arch = _arch("glm-4-9b-0414")
    assert (arch.qkv_bias, arch.linear_bias, arch.fused_gate_up) == (True, False, True)  # o_proj has no bias
    assert (arch.norm_position, arch.norms_per_layer, arch.norm_kind) == ("sandwich", 4, "rmsnorm")
    assert (arch.partial_rotary_factor, arch.rotary_dim, arch.rope_tables) == (0.5, 64, "per_layer")
    no_bias = _arch("glm-4-9b-0414", attention_bias=False)
    assert count_params(arch).total - count_params(no_bias).total == 40 * (4096 + 2 * 256)


def test_glm4_moe_parts() -> None:
    """GLM-4.5-Air: DeepSeek-V3's MoE block (one leading dense layer, a shared expert, the router on an
    fp32 copy) under GQA with q/k/v biases only and half-rotary RoPE. The counts that change with a switch
    are transformers 5.24's on the meta device: use_qk_norm adds 11,776 (46 x (128 + 128), q_norm and
    k_norm over head_dim), attention_bias False removes 659,456 (46 x (96 + 8 + 8) x 128)."""
    arch = _arch("glm-4.5-air")
    assert (arch.num_experts, arch.experts_per_token, arch.first_dense_layers) == (128, 8, 1)
    assert (arch.intermediate_size, arch.dense_intermediate_size, arch.shared_expert_intermediate_size) == (
        1408, 10944, 1408)
    assert (arch.qkv_bias, arch.linear_bias, arch.router_fp32, arch.qk_norm) == (True, False, True, "none")
    assert (arch.head_dim, arch.partial_rotary_factor, arch.rotary_dim) == (128, 0.5, 64)
    assert count_params(_arch("glm-4.5-air", use_qk_norm=True)).total - count_params(arch).total == 11_776
    assert _arch("glm-4.5-air", use_qk_norm=True).qk_norm == "head"
    assert count_params(arch).total - count_params(_arch("glm-4.5-air", attention_bias=False)).total == 659_456
    # the report's 12B active leaves out the embedding and lm_head, as gpt-oss's card does
    assert round((count_params(arch).active - 2 * count_params(arch).embedding) / 1e8) == 122


def test_glm4_moe_saves_the_reshaped_attention_output() -> None:
    """Partial RoPE concatenates the rotated and pass-through dims, so q comes out head-major and
    o_proj's input is a copy of SDPA's output (measured: tests/models/memory/test_saved_tensors_families.py)."""
    shape = Shape(b=1, s=4096, e=2)
    names = [t.name for t in layer_terms(_arch("glm-4.5-air"), "eager", "flash", shape, group=layer_group(_arch("glm-4.5-air"), 0))]
    assert "attn.output_copy" in names
    llama_like = _arch("glm-4.5-air", partial_rotary_factor=1.0)
    assert "attn.output_copy" not in [t.name for t in layer_terms(llama_like, "eager", "flash", shape,
                                                                     group=layer_group(llama_like, 0))]


# transformers 5.24's config classes with every default (AutoConfig.for_model(<type>)), counted on the
# meta device: SmolLM3Config() is SmolLM3-3B's shape (the card's 3.08B), Ministral3Config() the decoder
# of Ministral 3 8B (its vision tower not counted), Olmo3Config() OLMo 3 7B's layers with OLMo 2's
# 50,304-token vocabulary; Glm4MoeConfig() has no head_dim, so its heads are
# hidden / heads = 42 wide (Glm4MoeAttention's getattr fallback), not GLM-4.5-Air's 128.
CLASS_DEFAULT_COUNTS = {"smollm3": 3_075_098_624, "ministral3": 8_489_553_920, "glm4_moe": 103_481_200_640,
                        "olmo3": 6_888_624_128, "exaone4": 9_429_069_824, "seed_oss": 28_921_040_896,
                        "ernie4_5": 360_748_032, "qwen2_moe": 14_315_784_192, "olmoe": 13_361_612_800,
                        # the ninth session's: transformers 5.24 on the meta device, AutoConfig.for_model(type)
                        "gemma": 8_537_680_896, "glm": 9_399_951_360, "arcee": 4_022_766_080,
                        "granitemoe": 37_039_116_288, "granitemoeshared": 37_039_116_288,
                        "minimax_m2": 228_689_748_992, "glm4_moe_lite": 29_943_390_976, "mistral4": 118_972_826_624,
                        "solar_open": 102_651_793_408, "exaone_moe": 28_550_639_616, "jais2": 8_090_401_280,
                        "hy_v3": 295_033_528_320}


@pytest.mark.parametrize("model_type", sorted(CLASS_DEFAULT_COUNTS))
def test_a_bare_config_reads_as_the_class_defaults(model_type: str) -> None:
    """A config.json that names only its model_type is transformers' config class with every default."""
    arch = architecture_from_config({"model_type": model_type}, name=model_type, source="config.json")
    assert count_params(arch).total == CLASS_DEFAULT_COUNTS[model_type]


def test_olmo3_is_olmo2_with_sliding_layers() -> None:
    """Olmo3Config's default layer_types: sliding (4096) on three layers of four, OLMo 2's layer otherwise."""
    arch = architecture_from_config({"model_type": "olmo3"}, name="olmo3", source="config.json")
    assert (arch.local_attention, arch.attention_window, arch.global_attention_every) == ("sliding", 4096, 4)
    assert sum(g.count for g in layer_groups(arch) if g.local) == 24
    olmo2 = architecture_from_config({"model_type": "olmo2", "hidden_size": 4096, "intermediate_size": 11008,
                                      "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 50304,
                                      "max_position_embeddings": 2048}, name="olmo3", source="config.json")
    assert arch.model_dump(exclude={"model_type", "local_attention", "attention_window", "global_attention_every"}) == (
        olmo2.model_dump(exclude={"model_type", "local_attention", "attention_window", "global_attention_every"}))
    full = architecture_from_config({"model_type": "olmo3", "layer_types": ["full_attention"] * 32},
                                    name="olmo3", source="config.json")
    assert full.global_attention_every == 1


def test_exaone4_parts() -> None:
    """EXAONE 4.0: post-norms (Llama's RMSNorm), per-head q/k norms, sliding layers three of four; a
    string sliding_window_pattern ("LLLG") without layer_types is not a period vramplan reads."""
    arch = architecture_from_config({"model_type": "exaone4"}, name="exaone4", source="config.json")
    assert (arch.norm_position, arch.norm_kind, arch.qk_norm) == ("post", "rmsnorm", "head")
    assert (arch.local_attention, arch.attention_window, arch.global_attention_every) == ("sliding", 4096, 4)
    with pytest.raises(VramplanError, match="sliding_window_pattern"):
        architecture_from_config({"model_type": "exaone4", "sliding_window_pattern": "LLLG"}, name="e", source="config.json")
    no_window = architecture_from_config({"model_type": "exaone4", "sliding_window": None}, name="e", source="config.json")
    assert no_window.local_attention == "none"  # EXAONE 4.0 1.2B: every layer global, with RoPE


def test_seed_oss_biases_and_dropout() -> None:
    """Seed-OSS: q/k/v biases (attention_bias), o_proj's own switch (attention_out_bias) beside the MLP's
    (mlp_bias), dropout 0.1 by default. transformers 5.24 on the meta device: attention_bias False
    removes 786,432 (64 x (80 + 8 + 8) x 128); o_proj and MLP biases add 4,063,232."""
    arch = architecture_from_config({"model_type": "seed_oss"}, name="seed", source="config.json")
    assert (arch.qkv_bias, arch.linear_bias, arch.dropout_prob) == (True, False, 0.1)
    no_qkv = architecture_from_config({"model_type": "seed_oss", "attention_bias": False}, name="seed", source="config.json")
    assert count_params(arch).total - count_params(no_qkv).total == 786_432
    biased = architecture_from_config({"model_type": "seed_oss", "attention_out_bias": True, "mlp_bias": True},
                                      name="seed", source="config.json")
    assert count_params(biased).total - count_params(arch).total == 4_063_232
    with pytest.raises(VramplanError, match="attention_out_bias and mlp_bias differ"):
        architecture_from_config({"model_type": "seed_oss", "attention_out_bias": True}, name="seed", source="config.json")


def test_ernie4_5_rope_copies_are_fp32_and_not_reordered() -> None:
    """ERNIE 4.5 (Ernie4_5Config() is ERNIE-4.5-0.3B's shape, the card's 0.36B): its RoPE rotates
    q.float() by cos/sin repeat_interleaved in every layer, so each layer keeps two fp32 copies and no
    pair is shared; the rotation keeps q's layout, so o_proj's input is SDPA's output, not a copy
    (measured: tests/models/memory/test_saved_tensors_families.py). use_bias is every linear's bias."""
    arch = architecture_from_config({"model_type": "ernie4_5"}, name="ernie", source="config.json")
    assert (arch.rope_tables, arch.tie_word_embeddings, arch.qkv_bias, arch.linear_bias) == ("per_layer_fp32", True, False, False)
    shape = Shape(b=1, s=4096, e=2)
    terms = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "flash", shape, group=layer_group(arch, 0))}
    assert terms["rope.cos_sin_copies"] == 2 * 4 * 4096 * 128 and "attn.output_copy" not in terms
    biased = architecture_from_config({"model_type": "ernie4_5", "use_bias": True}, name="ernie", source="config.json")
    assert (biased.qkv_bias, biased.linear_bias) == (True, True)
    assert count_params(biased).total - count_params(arch).total == 360_941_568 - 360_748_032


def test_ernie4_5_moe_parts() -> None:
    """ERNIE 4.5 MoE (Ernie4_5_MoeConfig() is ERNIE-4.5-21B-A3B's shape, the card's 21B / 3B active):
    one dense layer, then 27 MoE layers of 64 experts (top 6) and 2 shared ones of 1,536. transformers
    5.24 counts 21,825,437,888 on the meta device: 1,728 more than vramplan, the frozen fp32
    e_score_correction_bias of every MoE layer (Ernie4_5_MoeStatics: 64 a layer, requires_grad=False,
    6.9 KB in all), which is not modelled. Trailing dense layers (moe_layer_end_index before the last)
    are refused."""
    arch = architecture_from_config({"model_type": "ernie4_5_moe"}, name="ernie-moe", source="config.json")
    counts = count_params(arch)
    assert counts.total + 27 * 64 == 21_825_437_888
    assert (arch.num_experts, arch.experts_per_token, arch.first_dense_layers, arch.shared_expert_intermediate_size) == (
        64, 6, 1, 2 * 1536)
    assert (arch.router_fp32, arch.rope_tables, arch.dense_intermediate_size) == (True, "per_layer_fp32", 12288)
    assert round((counts.total - counts.inactive) / 1e8) == 34  # 3.35B active, the tied embedding counted once
    with pytest.raises(VramplanError, match="moe_layer_end_index"):
        architecture_from_config({"model_type": "ernie4_5_moe", "moe_layer_end_index": 20}, name="e", source="config.json")
    last = architecture_from_config({"model_type": "ernie4_5_moe", "moe_layer_end_index": 27}, name="e", source="config.json")
    assert count_params(last).total == counts.total


def test_hunyuan_v1_dense_parts() -> None:
    """Hunyuan dense: per-head q/k norms (after RoPE: the same tensors kept, measured by the probe). Its
    config class defaults head_dim to None, which transformers 5.24 itself cannot build (head_dim ** -0.5);
    with head_dim 128 both count 8,859,684,864. attention_bias puts a bias on o_proj but never on the MLP,
    which vramplan models together: refused, naming the keys."""
    arch = architecture_from_config({"model_type": "hunyuan_v1_dense", "head_dim": 128}, name="hy", source="config.json")
    assert count_params(arch).total == 8_859_684_864 and arch.qk_norm == "head"
    with pytest.raises(VramplanError, match="attention_bias and mlp_bias differ"):
        architecture_from_config({"model_type": "hunyuan_v1_dense", "attention_bias": True}, name="hy", source="config.json")


def test_qwen2_moe_parts() -> None:
    """Qwen2-MoE (Qwen2MoeConfig() is Qwen1.5-MoE-A2.7B's shape: 14.3B, 2.7B active): q/k/v biases from
    qkv_bias, a shared expert of shared_expert_intermediate_size and its sigmoid gate (h parameters a MoE
    layer; the product keeps the expert's t x h output, measured), MoE layers every decoder_sparse_step-th
    but mlp_only_layers. transformers 5.24 on the meta device counts the same under each switch."""
    arch = architecture_from_config({"model_type": "qwen2_moe"}, name="qwen2-moe", source="config.json")
    counts = count_params(arch)
    assert (arch.qkv_bias, arch.linear_bias, arch.shared_expert_gate, arch.shared_expert_intermediate_size) == (
        True, False, True, 5632)
    assert arch.moe_block_class == "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock"  # a ZeRO-3 leaf
    assert counts.total - counts.inactive == 2_689_173_504
    for change, total in (({"qkv_bias": False}, 14_315_636_736), ({"mlp_only_layers": [0, 1]}, 13_277_444_096),
                          ({"decoder_sparse_step": 2}, 8_085_743_616)):
        assert count_params(architecture_from_config({"model_type": "qwen2_moe", **change}, name="q",
                                                     source="config.json")).total == total
    names = {m.name for m in layer_linear_modules(arch)}
    assert {"shared_expert_gate", "shared_expert.gate_proj"} <= names


@pytest.mark.parametrize(("model_type", "why"), [("qwen3_5", "linear attention"), ("qwen3_next", "Gated DeltaNet"),
                                                ("granitemoehybrid", "state-space"), ("gemma4", "per-layer input embeddings"),
                                                ("deepseek_v32", "lightning indexer"), ("apertus", "xIELU"),
                                                ("glm_moe_dsa", "lightning indexer"), ("deepseek_v4", "hyper-connections"),
                                                ("qwen4_exp", "Gated DeltaNet"), ("olmo_hybrid", "linear attention"),
                                                ("lfm3", "recurrent")])
def test_families_vramplan_does_not_model_say_why(model_type: str, why: str) -> None:
    """Families transformers builds but vramplan has no terms for are refused saying what is missing,
    in one line naming the type (from vramplan's own list: a value read from a file is never echoed)."""
    with pytest.raises(VramplanError) as caught:
        architecture_from_config({"model_type": model_type}, name="x", source="config.json")
    message = str(caught.value)
    assert why in message and f"model_type {model_type} has" in message and "\n" not in message
    with pytest.raises(VramplanError) as unknown:
        architecture_from_config({"model_type": "qwen9_secret"}, name="x", source="config.json")
    assert "qwen9_secret" not in str(unknown.value) and "is not supported" in str(unknown.value)


def test_one_familys_parts_are_not_read_from_anothers_file() -> None:
    """Qwen2-MoE's shared_expert_intermediate_size, ERNIE's moe_layer_end_index and Seed-OSS's
    attention_out_bias mean nothing to Qwen3-MoE's or GLM-4's modeling code, so a file of those
    families that carries them reads as without them."""
    plain = _arch("qwen3-30b-a3b")
    stray = _arch("qwen3-30b-a3b", shared_expert_intermediate_size=4096, moe_layer_end_index=3)
    assert stray.model_dump() == plain.model_dump() and plain.shared_expert_intermediate_size == 0
    glm = _fixture("glm-4-9b-0414")
    assert _arch("glm-4-9b-0414", attention_out_bias=True).model_dump() == architecture_from_config(
        glm, name="glm-4-9b-0414", source="config.json").model_dump()


def test_smollm3_and_ministral3_are_llama_layers() -> None:
    """Both keep Llama's per-layer tensors (measured: tests/models/memory/test_saved_tensors_families.py);
    SmolLM3's NoPE layers change no count and no saved byte."""
    smol = architecture_from_config({"model_type": "smollm3", "no_rope_layers": [1, 1, 1, 0] * 9},
                                    name="smollm3", source="config.json")
    as_llama = architecture_from_config({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 11008,
                                         "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 4,
                                         "vocab_size": 128256, "max_position_embeddings": 32768,
                                         "tie_word_embeddings": True}, name="smollm3", source="config.json")
    assert smol.model_dump(exclude={"model_type"}) == as_llama.model_dump(exclude={"model_type"})
    # Ministral 3 checkpoints wrap the decoder in Mistral 3's text_config
    wrapped = architecture_from_config({"model_type": "mistral3", "text_config": {"model_type": "ministral3"}},
                                       name="ministral-3-8b", source="config.json")
    assert (wrapped.model_type, count_params(wrapped).total) == ("ministral3", CLASS_DEFAULT_COUNTS["ministral3"])


def test_granite_multipliers_change_nothing(catalogue) -> None:
    arch = _arch("granite-3.3-8b")
    plain = _arch("granite-3.3-8b", embedding_multiplier=1.0, residual_multiplier=1.0, attention_multiplier=1.0,
                  logits_scaling=1.0)
    assert arch.model_dump() == plain.model_dump()
    as_llama = architecture_from_config(_fixture("granite-3.3-8b") | {"model_type": "llama"}, name="granite-3.3-8b",
                                        source="config.json")
    assert arch.model_dump(exclude={"model_type"}) == as_llama.model_dump(exclude={"model_type"})


def test_cohere2_parts() -> None:
    arch = _arch("command-r7b")
    assert (arch.norm_kind, arch.norms_per_layer, arch.parallel_attention_mlp, arch.tie_word_embeddings) == (
        "layernorm_nobias", 1, True, True)
    assert (arch.local_attention, arch.attention_window, arch.global_attention_every) == ("sliding", 4096, 4)
    assert sum(g.count for g in layer_groups(arch) if not g.local) == 8  # 32 layers, every 4th global (NoPE)
    # Cohere2Config.__post_init__ sets head_dim = hidden / heads whatever config.json says
    assert _arch("command-r7b", head_dim=64).head_dim == 128
    types = ["sliding_attention"] * 3 + ["full_attention"]
    assert _arch("command-r7b", layer_types=types * 8).model_dump() == arch.model_dump()


def test_mistral3_reads_its_text_config() -> None:
    arch = _arch("mistral-small-3.1-24b")
    assert arch.model_type == "mistral" and arch.local_attention == "none"  # sliding_window: null
    # The decoder as transformers builds it (the hub's 24,011,361,280 adds the 438,958,080 parameters
    # of the Pixtral tower and projector); text_config does not tie lm_head.
    assert count_params(arch).total == 23_572_403_200 and not arch.tie_word_embeddings
    with pytest.raises(VramplanError) as caught:
        architecture_from_config({"model_type": "mistral3"}, name="x", source="config.json")
    assert "text_config" in str(caught.value)


def test_new_families_estimate_end_to_end(catalogue) -> None:
    job, plan = Job(seq_len=4096), Plan(gpu="h100-sxm-80gb", micro_batch=1)
    for name in NEW:
        arch = catalogue.architecture(name)
        assert activations(arch, job, plan).total_bytes > 0
        assert sum(forward_flops_per_token(arch, 4096)) > 0


def test_gpt_oss_sliding_layers_score_the_window() -> None:
    arch = _arch("gpt-oss-20b")
    _, attention, _ = forward_flops_per_token(arch, 8192)
    assert attention == 12 * 4 * 8192 * 64 * 64 + 12 * 4 * 128 * 64 * 64


def test_a_config_without_model_type_names_the_missing_key() -> None:
    config = _fixture("llama-3.1-8b")
    del config["model_type"]
    with pytest.raises(VramplanError) as caught:
        architecture_from_config(config, name="x", source="my/config.json")
    message = str(caught.value)
    assert "model_type: missing; vramplan reads a Hugging Face config.json by its model_type" in message
    assert "my/config.json" in message and "\n" not in message and "not supported" not in message


# Shapes of published checkpoints, counted by transformers 5.24 on the meta device (AutoConfig.for_model
# with these keys): Gemma 2B (2,506,172,416, the count google/gemma-2b's model card rounds to 2.51B),
# Granite 3.0 3B-A800M's shape (3.3B), Minitron-style Nemotron with 8 KV heads (NemotronConfig's default
# num_key_value_heads None does not build in transformers itself), Granite MoE with a shared MLP.
PUBLISHED_SHAPES = [
    ("gemma", dict(hidden_size=2048, intermediate_size=16384, num_hidden_layers=18, num_attention_heads=8,
                   num_key_value_heads=1, head_dim=256), 2_506_172_416),
    ("granitemoe", dict(hidden_size=1536, intermediate_size=512, num_hidden_layers=32, num_attention_heads=24,
                        num_key_value_heads=8, num_local_experts=40, num_experts_per_tok=8, vocab_size=49155,
                        tie_word_embeddings=True), 3_298_793_472),
    ("nemotron", dict(num_key_value_heads=8), 15_628_775_424),
    ("nemotron", dict(num_key_value_heads=8, attention_bias=True, mlp_bias=True), 15_630_217_216),
    ("arcee", dict(attention_bias=True, mlp_bias=True), 4_023_765_504),
    ("glm", dict(attention_bias=False), 9_399_767_040),
    ("gemma", dict(num_key_value_heads=1, tie_word_embeddings=False), 8_663_510_016),
    ("granitemoeshared", dict(shared_intermediate_size=1024), 37_441_769_472),
    # dots.llm1's shape (rednote-hilab/dots.llm1.base: 142B total, 14B active)
    ("dots1", dict(n_routed_experts=128, n_shared_experts=2, num_experts_per_tok=6, first_k_dense_replace=1,
                   hidden_size=4096, max_position_embeddings=32768), 142_774_373_888),
    # MiniMax-M2's released file names rotary_dim 64 (of head_dim 128): the count is unchanged (230B total)
    ("minimax_m2", dict(rotary_dim=64, use_qk_norm=True), 228_689_748_992),
    # Hunyuan-A13B's shape (80B total, 13B active): 64 experts of 3,072 beside one shared MLP, top-8 given per
    # layer, 8 KV heads, tied embeddings; transformers reads neither moe_intermediate_size nor num_shared_expert
    ("hunyuan_v1_moe", dict(num_experts=64, moe_topk=[8] * 32, intermediate_size=3072, num_key_value_heads=8,
                            head_dim=128, vocab_size=128167, tie_word_embeddings=True, use_qk_norm=True,
                            moe_intermediate_size=[3072] * 32, num_shared_expert=[1] * 32), 80_393_183_232),
    ("solar_open", dict(attention_bias=True), 102_652_284_928),  # q/k/v biases only: o_proj never has one
    ("exaone_moe", dict(first_k_dense_replace=2), 27_933_814_784),  # no mlp_layer_types: the count names the dense layers
]


@pytest.mark.parametrize(("model_type", "keys", "count"), PUBLISHED_SHAPES)
def test_ninth_session_families_count_as_transformers(model_type: str, keys: dict, count: int) -> None:
    arch = architecture_from_config({"model_type": model_type, **keys}, name=model_type, source="config.json")
    assert count_params(arch).total == count


def test_squared_relu_mlps_have_no_gate() -> None:
    """Arcee and Nemotron: up_proj -> relu2 -> down_proj (two matrices); Nemotron's LayerNorm1P has a bias and
    RoPE turns half of each head; relu2 under a gated MLP is no activation vramplan models."""
    arcee = architecture_from_config({"model_type": "arcee"}, name="a", source="config.json")
    nemotron = architecture_from_config({"model_type": "nemotron"}, name="n", source="config.json")
    for arch in (arcee, nemotron):
        assert arch.mlp_kind == "relu2"
        assert [m.name for m in layer_linear_modules(arch)][-2:] == ["up_proj", "down_proj"]
    assert (nemotron.norm_kind, nemotron.partial_rotary_factor) == ("layernorm", 0.5)
    terms = {t.name for t in layer_terms(arcee, "eager", "flash", Shape(b=1, s=16, e=2))}
    assert {"mlp.relu_output", "mlp.down_input"} <= terms
    with pytest.raises(VramplanError, match="hidden_act"):
        architecture_from_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
                                  "max_position_embeddings": 64, "hidden_act": "relu2"}, name="l", source="config.json")


def test_gemma_glm_and_granite_moe_parts() -> None:
    gemma = architecture_from_config({"model_type": "gemma", "hidden_act": "gelu"}, name="g", source="config.json")
    assert (gemma.norm_kind, gemma.mlp_kind, gemma.head_dim, gemma.tie_word_embeddings) == (
        "rmsnorm_offset", "geglu", 256, True)  # the hub files' legacy "gelu" is the tanh GeGLU
    glm = architecture_from_config({"model_type": "glm"}, name="glm", source="config.json")
    assert (glm.fused_gate_up, glm.rope_tables, glm.qkv_bias, glm.linear_bias, glm.norm_position) == (
        True, "per_layer", True, False, "pre")
    moe = architecture_from_config({"model_type": "granitemoe"}, name="m", source="config.json")
    assert (moe.num_experts, moe.experts_per_token, moe.router_topk_softmax, moe.shared_expert_intermediate_size) == (
        8, 2, True, 0)
    names = [m.name for m in layer_linear_modules(moe)]
    assert names[-3:] == ["router", "experts.gate_up_proj", "experts.down_proj"]
    shared = architecture_from_config({"model_type": "granitemoeshared", "shared_intermediate_size": 1024},
                                      name="s", source="config.json")
    assert shared.shared_expert_intermediate_size == 1024
    assert [m.name for m in layer_linear_modules(shared)][-2:] == ["shared_mlp.input_linear", "shared_mlp.output_linear"]


def test_dots1_needs_its_expert_counts_and_minimax_m2_reads_rotary_dim() -> None:
    """Dots1Config defaults its expert counts to None, which transformers cannot build: a file without them
    is refused naming the key, never read as a dense model. MiniMax-M2's legacy rotary_dim is read as
    partial_rotary_factor = rotary_dim / head_dim (MiniMaxM2Config.convert_rope_params_to_dict)."""
    with pytest.raises(VramplanError, match="lacks 'n_routed_experts'"):
        architecture_from_config({"model_type": "dots1"}, name="d", source="config.json")
    with pytest.raises(VramplanError, match="lacks 'n_shared_experts'"):
        architecture_from_config({"model_type": "dots1", "n_routed_experts": 8, "num_experts_per_tok": 2},
                                 name="d", source="config.json")
    dots = architecture_from_config({"model_type": "dots1", "n_routed_experts": 128, "n_shared_experts": 2,
                                     "num_experts_per_tok": 6, "first_k_dense_replace": 1}, name="d", source="config.json")
    assert (dots.qk_norm, dots.router_fp32, dots.first_dense_layers, dots.shared_expert_intermediate_size) == (
        "head", True, 1, 2 * 1408)
    minimax = architecture_from_config({"model_type": "minimax_m2", "rotary_dim": 64}, name="m", source="config.json")
    assert (minimax.partial_rotary_factor, minimax.qk_norm, minimax.num_experts, minimax.experts_per_token) == (
        0.5, "width", 256, 8)
    with pytest.raises(VramplanError, match="rotary_dim"):
        architecture_from_config({"model_type": "minimax_m2", "rotary_dim": 256}, name="m", source="config.json")


def test_hunyuan_moe_reads_one_top_k_for_every_layer() -> None:
    """moe_topk may list one value per layer (Family.layer_lists): read when all are equal, refused naming
    the key otherwise; one expert beside the shared MLP (the config class's default) is refused."""
    base = {"model_type": "hunyuan_v1_moe", "num_experts": 64, "intermediate_size": 3072}
    arch = architecture_from_config(base | {"moe_topk": [8] * 32}, name="h", source="config.json")
    assert (arch.experts_per_token, arch.shared_expert_intermediate_size, arch.router_fp32, arch.qk_norm) == (
        8, 3072, True, "head")
    assert round(count_params(arch).active / 1e8) != round(count_params(arch).total / 1e8)
    with pytest.raises(VramplanError, match="moe_topk.*varies by layer"):
        architecture_from_config(base | {"moe_topk": [8] * 31 + [4]}, name="h", source="config.json")
    with pytest.raises(VramplanError, match="moe_topk"):
        architecture_from_config(base | {"moe_topk": []}, name="h", source="config.json")
    with pytest.raises(VramplanError, match="num_experts.*single routed expert"):
        architecture_from_config({"model_type": "hunyuan_v1_moe", "num_experts": 1, "moe_topk": 1}, name="h",
                                 source="config.json")
    names = [m.name for m in layer_linear_modules(arch)]
    assert {"gate.wg", "shared_mlp.gate_proj", "experts.down_proj"} <= set(names)


def test_use_qk_norm_is_ignored_where_the_modeling_code_always_norms() -> None:
    """Hunyuan's, Qwen 3's and MiniMax-M2's modeling code builds its QK norms whatever use_qk_norm says (a key
    some hub files carry); it was refused there as Cohere's LayerNorm QK norm. Cohere's is still refused."""
    for model_type in ("hunyuan_v1_dense", "minimax_m2", "exaone4"):
        for value in (True, False):
            arch = architecture_from_config({"model_type": model_type, "use_qk_norm": value}, name="x",
                                            source="config.json")
            assert arch.qk_norm != "none"
    with pytest.raises(VramplanError, match="Cohere"):
        architecture_from_config({"model_type": "cohere", "use_qk_norm": True, "hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100},
                                 name="x", source="config.json")


def test_glm_4_7_flash_and_mistral_4_are_deepseek_v3_layers() -> None:
    """GLM-4.7-Flash (glm4_moe_lite): DeepSeek-V3's MLA and MoE, the dense layers from mlp_layer_types
    (transformers 5.24 on the meta device: 29,392,757,504 with two dense layers). Mistral 4: the same layer
    without the router's fp32 input copy, also read from a Mistral 3 checkpoint's text_config."""
    lite = architecture_from_config({"model_type": "glm4_moe_lite"}, name="g", source="config.json")
    assert (lite.is_mla, lite.first_dense_layers, lite.router_fp32, lite.v_head_dim) == (True, 1, True, 256)
    two = architecture_from_config({"model_type": "glm4_moe_lite", "mlp_layer_types": ["dense"] * 2 + ["sparse"] * 45},
                                   name="g", source="config.json")
    assert (two.first_dense_layers, count_params(two).total) == (2, 29_392_757_504)
    with pytest.raises(VramplanError, match="mlp_layer_types"):
        architecture_from_config({"model_type": "glm4_moe_lite", "mlp_layer_types": ["sparse", "dense"] + ["sparse"] * 45},
                                 name="g", source="config.json")
    mistral4 = architecture_from_config({"model_type": "mistral4"}, name="m", source="config.json")
    assert (mistral4.is_mla, mistral4.first_dense_layers, mistral4.router_fp32) == (True, 0, False)
    wrapped = architecture_from_config({"model_type": "mistral3", "text_config": {"model_type": "mistral4"}},
                                       name="m", source="config.json")
    assert count_params(wrapped).total == CLASS_DEFAULT_COUNTS["mistral4"]
