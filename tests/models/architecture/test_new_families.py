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
from vramplan.models.memory.activation_terms import layer_terms
from vramplan.models.memory.activations import activations
from vramplan.models.memory.saved_tensors import Shape
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
    """Glm4Moe's RoPE concatenates the rotated and pass-through dims, so q comes out head-major and
    o_proj's input is a copy of SDPA's output, also where the whole head rotates (Sarvam MoE: an empty
    pass-through part; measured: tests/models/memory/test_saved_tensors_families.py)."""
    shape = Shape(b=1, s=4096, e=2)

    def copies(arch) -> bool:
        return "attn.output_copy" in [t.name for t in layer_terms(arch, "eager", "flash", shape, group=layer_group(arch, 0))]

    assert copies(_arch("glm-4.5-air")) and copies(_arch("glm-4.5-air", partial_rotary_factor=1.0))
    llama_rope = _arch("glm-4.5-air", partial_rotary_factor=1.0).model_copy(update={"rope_concatenated": False})
    assert not copies(llama_rope)


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
                        "hy_v3": 295_033_528_320,
                        # the eleventh session's (transformers 5.24, meta device): VaultGemmaConfig() and
                        # FlexOlmoConfig() (FlexOlmo-7x7B), both read as transformers builds them
                        "vaultgemma": 2_614_222_080, "flex_olmo": 33_270_665_216,
                        # YoutuConfig() (Youtu-LLM-2B) and MiniCPM3Config() (MiniCPM3-4B, values hidden / heads wide)
                        "youtu": 1_961_560_064, "minicpm3": 4_073_875_968,
                        "apertus": 6_979_596_352,  # ApertusConfig()
                        "cwm": 32_581_097_472,  # CwmConfig(): CWM 32B
                        "helium": 2_172_643_840,  # HeliumConfig(): Helium-1 2B
                        "nanochat": 256_573_440,  # NanoChatConfig(): nanochat d12
                        "phimoe": 41_872_793_600,  # PhimoeConfig(): Phi-3.5-MoE's shape without its biases
                        "axk1": 518_983_052_288,  # AXK1Config(): A.X-K1's 519B
                        # the twelfth session's (transformers 5.24, meta device)
                        "mellum": 12_149_923_072,  # MellumConfig(): Mellum2-12B-A2.5B
                        "kolibri1": 78_103_055_360,  # Kolibri1Config(): Kolibri-1
                        "stablelm": 2_795_443_200,  # StableLmConfig(): StableLM-3B-4E1T's 2.8B
                        "mimo_v2_flash": 308_778_768_832,  # MiMoV2FlashConfig(): MiMo-V2-Flash's 309B
                        "hyperclovax": 6_738_677_760,  # HyperCLOVAXConfig(): GraniteConfig's shape, four norms a layer
                        "cohere2_moe": 190_004_928_512,  # Cohere2MoeConfig(): 8 experts of 22,528 in 40 layers
                        "laguna": 33_189_975_808,  # LagunaConfig(): every layer full, 48 heads, a dense first layer
                        "opt": 125_239_296,  # OPTConfig(): OPT-125m
                        "gpt_bigcode": 111_446_784,  # GPTBigCodeConfig(): GPT-2 small's shape with one KV head
                        "gptj": 6_050_882_784,  # GPTJConfig(): GPT-J-6B
                        "granite_swa": 2_144_463_840}  # GraniteSWAConfig(): granite-swash-2b's shape


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
    removes 786,432 (64 x (80 + 8 + 8) x 128); o_proj and MLP biases add 4,063,232, o_proj's alone 262,144."""
    arch = architecture_from_config({"model_type": "seed_oss"}, name="seed", source="config.json")
    assert (arch.qkv_bias, arch.linear_bias, arch.dropout_prob) == (True, False, 0.1)
    no_qkv = architecture_from_config({"model_type": "seed_oss", "attention_bias": False}, name="seed", source="config.json")
    assert count_params(arch).total - count_params(no_qkv).total == 786_432
    biased = architecture_from_config({"model_type": "seed_oss", "attention_out_bias": True, "mlp_bias": True},
                                      name="seed", source="config.json")
    assert count_params(biased).total - count_params(arch).total == 4_063_232
    out_only = architecture_from_config({"model_type": "seed_oss", "attention_out_bias": True}, name="seed",
                                        source="config.json")  # o_proj's bias apart from the MLP's (Architecture.out_bias)
    assert (out_only.out_bias, out_only.linear_bias, count_params(out_only).total) == (True, False, 28_921_303_040)


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
    with head_dim 128 both count 8,859,684,864. attention_bias puts a bias on q/k/v and o_proj but never on the MLP
    (out_bias apart from linear_bias): 8,860,209,152 with it."""
    arch = architecture_from_config({"model_type": "hunyuan_v1_dense", "head_dim": 128}, name="hy", source="config.json")
    assert count_params(arch).total == 8_859_684_864 and arch.qk_norm == "head"
    biased = architecture_from_config({"model_type": "hunyuan_v1_dense", "head_dim": 128, "attention_bias": True},
                                      name="hy", source="config.json")  # q/k/v and o_proj biased, the MLP not
    assert (biased.qkv_bias, biased.out_bias, biased.linear_bias, count_params(biased).total) == (
        True, True, False, 8_860_209_152)


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


@pytest.mark.parametrize(("model_type", "why"), [("kimi_linear", "linear attention"),
                                                ("granitemoehybrid", "state-space"),
                                                ("gemma3n", "per-layer input embeddings"), ("gemma4_unified", "audio tower"),
                                                ("hrm_text", "hierarchical recurrent"), ("aria", "cross-attention projector"),
                                                ("cohere_compass_text", "Qwen3-VL"), ("dots3_note_text", "gate per head"),
                                                ("minimax_m3_vl_text", "DeepSeek-V4's experts"),
                                                ("apertus1p5", "audio tokenizers"),
                                                ("gemma4_assistant", "speculative-decoding draft"),
                                                ("mistral_large4", "lightning indexer of its own"),
                                                ("deepseek_v4", "hyper-connections"),
                                                ("qwen4_exp", "sparse-attention indexer"),
                                                ("olmo_hybrid", "Gated DeltaNet layers of its own"),
                                                ("lfm3", "recurrent"), ("minimax", "linear attention"),
                                                ("lara_mini", "three layer kinds"),
                                                ("granitemoe_swa", "experts"), ("flint", "fp32 attention scores"),
                                                ("dory", "recurrent loops"), ("dbrx", "attn_config")])
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
    # the decoder, and Mistral3Config's default Pixtral tower and projector (428,472,320 outside
    # model.language_model in transformers 5.24's Mistral3ForConditionalGeneration on the meta device)
    assert (wrapped.model_type, count_params(wrapped).total - wrapped.vision_params, wrapped.vision_params) == (
        "ministral3", CLASS_DEFAULT_COUNTS["ministral3"], 428_472_320)


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
    # The decoder as transformers builds it, 23,572,403,200, and the Pixtral tower and projector,
    # 438,958,080 (the hub's 24,011,361,280); text_config does not tie lm_head.
    assert count_params(arch).total == 23_572_403_200 + 438_958_080 and not arch.tie_word_embeddings
    assert count_params(arch).active == 23_572_403_200
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
