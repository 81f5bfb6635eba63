"""The families of the ninth session of 2026-12-06: their exact counts and the parts they read.

gemma, glm (GLM-4 9B), arcee, nemotron, granitemoe, granitemoeshared, dots1, minimax_m2, hunyuan_v1_moe,
glm4_moe_lite (GLM-4.7-Flash), mistral4, solar_open, exaone_moe, jais2 and hy_v3, each mapped from transformers
5.24's configuration_<type>.py / modeling_<type>.py (models/catalogue/hf_families.py, hf_moe_families.py).
Golden counts: transformers 5.24 on the meta device (AutoConfig.for_model(type, **keys), then
AutoModelForCausalLM.from_config, or Mistral4ForCausalLM, which only Mistral 3's wrapper registers); their
class defaults are in test_new_families.py CLASS_DEFAULT_COUNTS. Saved tensors: tests/models/memory/
test_saved_tensors_families.py (optional, torch and transformers installed).
"""

from __future__ import annotations

import pytest

from vramplan.models.architecture.params import count_params, layer_linear_modules
from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.memory.activation_terms import layer_terms
from vramplan.models.memory.saved_tensors import Shape

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
    ("exaone_moe", dict(first_k_dense_replace=2), 27_933_814_784),
    ("phi", {}, 1_418_270_720),  # PhiConfig's defaults: Phi-1.5's shape
    ("olmo", {}, 6_888_095_744),  # OlmoConfig's defaults: OLMo-7B
    # AfmoeConfig's defaults: transformers counts 19,232,600,000, 1,984 more: the frozen fp32 expert_bias (64 a MoE
    # layer, requires_grad False), not modelled
    ("afmoe", {}, 19_232_598_016),
    ("olmo", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=16,
                  tie_word_embeddings=True), 1_176_764_416),  # OLMo-1B's shape
    # Phi-2's shape (microsoft/phi-2: 2,779,683,840, its lm_head bias of 51,200 included)
    ("phi", dict(hidden_size=2560, intermediate_size=10240, num_hidden_layers=32, num_attention_heads=32,
                 partial_rotary_factor=0.4), 2_779_683_840),  # no mlp_layer_types: the count names the dense layers
    # Ministral-8B's shape (8.02B; MinistralConfig's head_dim None does not build in transformers itself), every
    # layer sliding as MinistralConfig makes them while sliding_window is set, and with layer_types alternating
    ("ministral", dict(vocab_size=131072, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=128, sliding_window=32768), 8_019_808_256),
    ("ministral", dict(vocab_size=131072, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=128, sliding_window=32768,
                       layer_types=["sliding_attention", "full_attention"] * 18), 8_019_808_256),
    ("minicpm3", dict(v_head_dim=32), 3_850_398_208),  # a value width of its own (the class derives None from hidden)
    # Apertus-70B's shape (swiss-ai's Megatron-LM launch arguments: 80 layers, 8,192 wide, xIELU MLP 43,008 wide,
    # 64 heads in 8 KV groups): 70.6B
    ("apertus", dict(hidden_size=8192, intermediate_size=43008, num_hidden_layers=80, num_attention_heads=64,
                     num_key_value_heads=8), 70_599_864_480),
    # nanochat d32's shape (karpathy/nanochat-d32: 32 layers, 2,048 wide, 16 heads, 65,536-token vocabulary): 1.88B
    ("nanochat", dict(hidden_size=2048, num_hidden_layers=32, num_attention_heads=16, vocab_size=65536), 1_879_048_192),
    # Phi-3.5-MoE as published (microsoft/Phi-3.5-MoE-instruct: attention_bias and lm_head_bias true): 41.9B, 6.6B active
    ("phimoe", dict(attention_bias=True, lm_head_bias=True), 41_873_153_344),
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
    # a token skips 56 of the 64 experts in each of the 32 layers: 32 x 56 x 3 x 4096 x 3072 parameters
    assert count_params(arch).total - count_params(arch).active == 32 * 56 * 3 * 4096 * 3072
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
    some hub files carry); it was refused there as Cohere's LayerNorm QK norm, which is read since the twelfth
    session (test_layernorm_qk_norms_of_cohere_phi_and_stablelm)."""
    for model_type in ("hunyuan_v1_dense", "minimax_m2", "exaone4"):
        for value in (True, False):
            arch = architecture_from_config({"model_type": model_type, "use_qk_norm": value}, name="x",
                                            source="config.json")
            assert arch.qk_norm != "none"
    # LlamaAttention never reads it either: no QK norm
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "vocab_size": 100, "use_qk_norm": True}
    assert architecture_from_config(llama, name="x", source="config.json").qk_norm == "none"


# transformers 5.24 on the meta device: Command R+'s shape (CohereForCausalLM, use_qk_norm), PhiConfig() with
# qk_layernorm, StableLM 2 12B's shape (qk_layernorm, use_parallel_residual)
_COMMAND_R_PLUS = {"model_type": "cohere", "hidden_size": 12288, "intermediate_size": 33792, "num_hidden_layers": 64,
                   "num_attention_heads": 96, "num_key_value_heads": 8, "vocab_size": 256000,
                   "max_position_embeddings": 131072, "use_qk_norm": True}
_STABLELM_2_12B = {"model_type": "stablelm", "vocab_size": 100352, "hidden_size": 5120, "intermediate_size": 13824,
                   "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "use_parallel_residual": True, "qk_layernorm": True}


@pytest.mark.parametrize(("config", "kind", "bias", "total", "norm_params"), [
    (_COMMAND_R_PLUS, "per_head", False, 103_810_674_688, (96 + 8) * 128),  # CohereLayerNorm((heads, head_dim))
    ({"model_type": "phi", "qk_layernorm": True}, "head", True, 1_418_276_864, 2 * 2 * 64),  # nn.LayerNorm(head_dim)
    (_STABLELM_2_12B, "per_head", False, 12_143_185_920, (32 + 8) * 160),  # a LayerNorm(head_dim, bias=False) a head
])
def test_layernorm_qk_norms_of_cohere_phi_and_stablelm(config: dict, kind: str, bias: bool, total: int,
                                                       norm_params: int) -> None:
    """Cohere's use_qk_norm and StableLM's qk_layernorm norm each head with its own weight (qk_norm per_head: (a + kv)
    x head_dim weights); Phi's qk_layernorm is one nn.LayerNorm(head_dim) with a bias for q and one for k (head, with
    qk_norm_bias). The norms take the block norms' form (Cohere's fp32 CohereLayerNorm keeps its fp32 weight copy, all
    heads' of it); Megatron-Core's q/k norms are one head_dim norm for every head, so megatron refuses per_head."""
    from vramplan.models.architecture.params import layer_group, layer_norm_params
    from vramplan.models.catalogue.stack_contract import architecture_parts

    arch = architecture_from_config(config, name="x", source="config.json")
    plain = architecture_from_config({**config, "use_qk_norm": False, "qk_layernorm": False}, name="x", source="config.json")
    assert (arch.qk_norm, arch.qk_norm_bias, count_params(arch).total) == (kind, bias, total)
    assert layer_norm_params(arch, layer_group(arch, 0)) - layer_norm_params(plain, layer_group(plain, 0)) == norm_params
    assert ("per_head_qk_norm" in architecture_parts(arch)) == (kind == "per_head")
    x = Shape(b=1, s=16, e=2)
    q_norm = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "flash", x) if t.name.startswith("q_norm.")}
    heads, width = arch.num_attention_heads, arch.num_attention_heads * arch.head_dim
    if arch.norm_kind == "layernorm_nobias":
        assert q_norm == {"q_norm.centred_fp32": 2 * 4 * 16 * width, "q_norm.rsqrt": 4 * 16 * heads,
                          "q_norm.normed_fp32": 4 * 16 * width, "q_norm.weight_fp32": 4 * width}
    else:  # nn.LayerNorm keeps its input (a view of q_proj's output) and fp32 mean and rstd per head
        assert q_norm == {"q_norm.input": 2 * 16 * width, "q_norm.stats": 2 * 4 * 16 * heads}


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
    assert count_params(mistral4).total == 118_972_826_624
    # + Mistral3Config's default Pixtral tower and projector at text width 4096: 428,472,320 outside
    # model.language_model in transformers 5.24's Mistral3ForConditionalGeneration on the meta device
    assert count_params(wrapped).total - count_params(mistral4).total == wrapped.vision_params == 428_472_320


def test_phi_has_one_norm_biases_and_a_biased_lm_head() -> None:
    """Phi-2: parallel attention and MLP behind one LayerNorm, biases on every linear and on lm_head, RoPE on
    part of each head, three dropouts read as one (qk_layernorm: test_layernorm_qk_norms_of_cohere_phi_and_stablelm)."""
    phi = architecture_from_config({"model_type": "phi", "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attention_dropout": 0.1},
                                   name="p", source="config.json")
    assert (phi.norm_kind, phi.norms_per_layer, phi.parallel_attention_mlp, phi.mlp_kind) == ("layernorm", 1, True, "gelu_new")
    assert (phi.qkv_bias, phi.linear_bias, phi.lm_head_bias, phi.dropout_prob, phi.partial_rotary_factor) == (
        True, True, True, 0.1, 0.5)
    assert count_params(phi).lm_head == 51200 * 2048 + 51200
    assert [m.name for m in layer_linear_modules(phi)] == ["q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2"]


def test_olmo_norms_have_no_parameters_and_clip_qkv_keeps_the_clamped_inputs() -> None:
    """OLMo 1's LayerNorm has no weight or bias and runs on an fp32 copy; clip_qkv (OLMo, OLMoE) clamps q, k and v
    in place, and autograd keeps each clamp's input (measured: test_saved_tensors_families.py)."""
    olmo = architecture_from_config({"model_type": "olmo", "clip_qkv": 8.0}, name="o", source="config.json")
    assert (olmo.norm_kind, olmo.clip_qkv, count_params(olmo).final_norm) == ("layernorm_noparams", True, 0)
    terms = {t.name: t.num_bytes for t in layer_terms(olmo, "eager", "flash", Shape(b=1, s=16, e=2))}
    assert terms["attn.clip_qkv_inputs"] == 2 * 16 * 3 * 4096  # MHA: q, k and v are each 4,096 wide
    assert terms["attn_norm.input_fp32"] == 4 * 16 * 4096
    assert not architecture_from_config({"model_type": "olmo"}, name="o", source="config.json").clip_qkv
    olmoe = architecture_from_config({"model_type": "olmoe", "clip_qkv": 8.0}, name="o", source="config.json")
    assert olmoe.clip_qkv
    with pytest.raises(VramplanError, match="clip_qkv"):
        architecture_from_config({"model_type": "olmo", "clip_qkv": "8"}, name="o", source="config.json")


def test_afmoe_gates_its_attention_output() -> None:
    """AFMoE: self_attn.gate_proj (hidden -> heads x head_dim) beside q/k/v, whose sigmoid and the gated product are
    kept (2 e t a d bytes a layer); PEFT's suffix match puts an adapter on it for target gate_proj too."""
    arch = architecture_from_config({"model_type": "afmoe"}, name="a", source="config.json")
    assert (arch.attention_output_gate, arch.norm_position, arch.norms_per_layer, arch.global_attention_every) == (
        True, "sandwich", 4, 4)
    names = [m.name for m in layer_linear_modules(arch)]
    assert names[:5] == ["q_proj", "k_proj", "v_proj", "self_attn.gate_proj", "o_proj"]
    terms = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "flash", Shape(b=1, s=16, e=2))}
    assert terms["attn.output_gate"] == 2 * 2 * 16 * 16 * 128


def test_dropout_roles_are_read_apart() -> None:
    """Each dropout role from the family's own key: Phi-2's file (resid_pdrop 0.1, embd_pdrop 0, attention_dropout 0)
    reads where one probability for all refused it; Llama's attention_dropout keeps no residual or embedding mask."""
    phi2 = architecture_from_config({"model_type": "phi", "resid_pdrop": 0.1, "embd_pdrop": 0.0, "attention_dropout": 0.0},
                                    name="p", source="config.json")
    assert (phi2.dropout_prob, phi2.embedding_dropout, phi2.attention_dropout) == (0.1, 0.0, 0.0)
    llama = architecture_from_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
                                      "max_position_embeddings": 64, "attention_dropout": 0.1}, name="l", source="config.json")
    assert (llama.dropout_prob, llama.embedding_dropout, llama.attention_dropout) == (0.0, 0.0, 0.1)
    names = {t.name for t in layer_terms(llama, "eager", "eager", Shape(b=1, s=16, e=2))}
    assert "attn.dropout_mask" in names and "attn_residual.dropout_mask" not in names
    gpt2 = architecture_from_config({"model_type": "gpt2"}, name="g", source="config.json")
    assert (gpt2.dropout_prob, gpt2.embedding_dropout, gpt2.attention_dropout) == (0.1, 0.1, 0.1)
    seed = architecture_from_config({"model_type": "seed_oss"}, name="s", source="config.json")
    assert (seed.dropout_prob, seed.embedding_dropout, seed.attention_dropout) == (0.1, 0.0, 0.1)
    for bad in (1.0, -0.1, True, "0.1", [0.1]):
        with pytest.raises(VramplanError, match="resid_pdrop"):
            architecture_from_config({"model_type": "phi", "resid_pdrop": bad}, name="p", source="config.json")


def test_apertus_xielu_mlp_has_no_gate_and_keeps_its_python_formula(tmp_path) -> None:
    """ApertusMLP: up_proj -> xIELU -> down_proj, two scalars (alpha_p, alpha_n) a layer; transformers' Python
    xIELU keeps x, alpha_p x, expm1's result, expm1(...) - x (16-bit) and the boolean condition, down_proj its input:
    5 e + 1 bytes a token and MLP channel; Megatron-Core has no xIELU."""
    from helpers.catalogue import packaged_catalogue

    from vramplan.models.core.setup import Job, Plan
    from vramplan.models.estimate import estimate

    arch = architecture_from_config({"model_type": "apertus"}, name="a", source="config.json")
    assert (arch.mlp_kind, arch.qk_norm) == ("xielu", "head")
    assert [m.name for m in layer_linear_modules(arch)][-2:] == ["up_proj", "down_proj"]
    x = Shape(b=1, s=16, e=2)
    mlp = [t for t in layer_terms(arch, "fused", "flash", x) if t.name.startswith("mlp.") and "linear_input" not in t.name]
    assert sum(t.num_bytes for t in mlp) == (5 * 2 + 1) * 16 * 14336  # the Python formula runs whatever the kernels
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "apertus", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1536}')
    with pytest.raises(VramplanError, match="xIELU"):
        estimate(packaged_catalogue(), str(path), Job(seq_len=2048, stack="megatron"),
                 Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1), 1e9)
    result = estimate(packaged_catalogue(), str(path), Job(seq_len=2048), Plan(gpu="h100-sxm-80gb", num_gpus=1), 1e9)
    assert any("transformers' Python formula" in w for w in result.warnings)


@pytest.mark.parametrize("keys", [{}, {"layer_types": ["full_attention"] + ["sliding_attention"] * 3}])
def test_cwm_attends_globally_on_the_first_of_every_four_layers(keys: dict) -> None:
    """CwmConfig: full_attention when i % 4 == 0, sliding (8,192) otherwise, from its default or from layer_types
    (global_attention_first); a pattern that is none of (i + 1) % N, i % N and MiMo-V2-Flash's i == 0 or
    (i + 1) % N is read as an explicit list of global layers."""
    layers = {"num_hidden_layers": 8}
    if keys:
        keys = {"layer_types": keys["layer_types"] * 2}
    arch = architecture_from_config({"model_type": "cwm", **layers, **keys}, name="c", source="config.json")
    assert [arch.layer_is_local(i) for i in range(8)] == [False, True, True, True] * 2
    assert (arch.global_attention_every, arch.global_attention_first, arch.attention_window) == (4, True, 8192)
    # the usual last-of-N pattern still reads as before
    olmo3 = architecture_from_config({"model_type": "olmo3", "num_hidden_layers": 8}, name="o", source="config.json")
    assert [olmo3.layer_is_local(i) for i in range(4)] == [True, True, True, False]
    # a list no periodic rule gives is read as its global layers (test_an_irregular_layer_pattern_is_read_as_a_list)
    irregular = architecture_from_config({"model_type": "cwm", "num_hidden_layers": 4, "layer_types": [
        "full_attention", "sliding_attention", "full_attention", "full_attention"]}, name="c", source="config.json")
    assert (irregular.global_layers, irregular.global_attention_every) == ("0 2 3", 0)


def test_nanochat_norms_have_no_weights_and_norm_the_embedding() -> None:
    """NanoChatRMSNorm (Llama4TextL2Norm) keeps x.float() and its rsqrt and has no parameter; the embedding is normed
    before the first layer by the final norm's module; q/k normed the same way (qk_norm l2); fc1 -> relu2 -> fc2;
    Megatron-Core's norms carry weights, so megatron refuses it (the contract's parameter_free_norm)."""
    from vramplan.models.architecture.params import count_params
    from vramplan.models.catalogue.stack_contract import architecture_parts
    from vramplan.models.memory.activation_terms import embedding_terms

    arch = architecture_from_config({"model_type": "nanochat"}, name="n", source="config.json")
    assert (arch.norm_kind, arch.qk_norm, arch.mlp_kind, arch.embedding_norm) == ("rmsnorm_noparams", "l2", "relu2", True)
    assert count_params(arch).final_norm == 0 and [m.name for m in layer_linear_modules(arch)][-2:] == ["fc1", "fc2"]
    x = Shape(b=1, s=16, e=2)
    assert sum(t.num_bytes for t in embedding_terms(arch, x)) == 8 * 16 + (4 * 768 + 4) * 16
    assert "parameter_free_norm" in architecture_parts(arch)


def test_axk1_norms_its_moe_output_in_moe_layers_only() -> None:
    """AXK1MoE.post_mlp_layernorm: an RMSNorm (h weights) on the MoE block's output, in MoE layers only, keeping its
    fp32 input, rsqrt and normalised value like the block norms; the dense first layer has none."""
    from vramplan.models.architecture.params import count_params, layer_group, layer_norm_params

    arch = architecture_from_config({"model_type": "axk1"}, name="a", source="config.json")
    dense, moe = layer_group(arch, 0), layer_group(arch, 1)
    plain = arch.model_copy(update={"moe_output_norm": False})
    assert layer_norm_params(arch, moe) - layer_norm_params(plain, moe) == 7168
    assert layer_norm_params(arch, dense) == layer_norm_params(plain, dense)
    assert count_params(arch).total - count_params(plain).total == 60 * 7168
    x = Shape(b=1, s=16, e=2)
    names = {t.name for t in layer_terms(arch, "eager", "flash", x, group=moe)}
    assert {"moe_output_norm.input_fp32", "moe_output_norm.rsqrt", "moe_output_norm.normed"} <= names
    assert not any(t.name.startswith("moe_output_norm") for t in layer_terms(arch, "eager", "flash", x, group=dense))


def test_mellum_reads_its_sliding_and_dense_layers_from_the_lists() -> None:
    """MellumConfig: every layer full and sparse by default; layer_types' sliding layers (window 1,024) and
    mlp_layer_types' leading dense layers (Qwen2-MoE's MLP of intermediate_size) are read; Qwen3-MoE's per-head q/k
    norms, no shared expert. Counts: transformers 5.24 on the meta device."""
    from vramplan.models.architecture.params import layer_group

    bare = architecture_from_config({"model_type": "mellum"}, name="m", source="config.json")
    assert (bare.global_attention_every, bare.first_dense_layers, bare.qk_norm) == (1, 0, "head")
    assert not any(bare.layer_is_local(i) for i in range(28))
    lists = {"layer_types": ["sliding_attention"] * 3 + ["full_attention"], "mlp_layer_types": ["dense"] + ["sparse"] * 27}
    arch = architecture_from_config({"model_type": "mellum", **lists, "layer_types": lists["layer_types"] * 7},
                                    name="m", source="config.json")
    assert [arch.layer_is_local(i) for i in range(4)] == [True, True, True, False]
    assert (arch.attention_window, arch.first_dense_layers, arch.dense_intermediate_size) == (1024, 1, 7168)
    assert count_params(arch).total == 11_802_959_104
    assert not layer_group(arch, 0).moe and layer_group(arch, 1).moe
    with pytest.raises(VramplanError, match="mlp_layer_types"):
        architecture_from_config({"model_type": "mellum", "mlp_layer_types": ["sparse", "dense"] * 14},
                                 name="m", source="config.json")


def test_kolibri1_is_exaone4_attention_in_a_sandwich_layer_with_a_shared_expert() -> None:
    """Kolibri1Config: layer i global (NoPE) when (i + 1) % 5 == 0, sliding (513) otherwise; GLM-4's four RMSNorms a
    layer; every layer MoE with one shared MLP of shared_expert_intermediate_size; an fp32 router."""
    arch = architecture_from_config({"model_type": "kolibri1"}, name="k", source="config.json")
    assert (arch.global_attention_every, arch.attention_window, arch.norm_position, arch.norms_per_layer) == (
        5, 513, "sandwich", 4)
    assert (arch.first_dense_layers, arch.shared_expert_intermediate_size, arch.router_fp32, arch.qk_norm) == (
        0, 512, True, "head")
    assert [arch.layer_is_local(i) for i in range(5)] == [True, True, True, True, False]


def test_stablelm_parallel_layers_have_one_norm_and_its_mlp_dropout_is_refused() -> None:
    """StableLmDecoderLayer: use_parallel_residual drops post_attention_layernorm (one LayerNorm feeds both
    branches); hidden_dropout follows the MLP only, which vramplan's residual dropout cannot say, so a nonzero one
    is refused in one line. Counts: transformers 5.24 on
    the meta device (StableLM 2 1.6B's shape: 1,644,515,328)."""
    base = {"model_type": "stablelm", "vocab_size": 100352, "hidden_size": 2048, "intermediate_size": 5632,
            "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 32, "use_qkv_bias": True}
    arch = architecture_from_config(base, name="s", source="config.json")
    assert (arch.parallel_attention_mlp, arch.norms_per_layer, arch.norm_kind, arch.partial_rotary_factor) == (
        False, 2, "layernorm", 0.25)
    assert (arch.qkv_bias, arch.linear_bias) == (True, False)
    assert count_params(arch).total == 1_644_515_328
    parallel = architecture_from_config({**base, "use_parallel_residual": True}, name="s", source="config.json")
    assert (parallel.parallel_attention_mlp, parallel.norms_per_layer) == (True, 1)
    assert count_params(arch).total - count_params(parallel).total == 24 * 2 * 2048
    with pytest.raises(VramplanError, match="MLP's output only") as caught:
        architecture_from_config({**base, "hidden_dropout": 0.1}, name="s", source="config.json")
    assert "hidden_dropout" in str(caught.value) and "\n" not in str(caught.value)


def test_mimo_v2_flash_sliding_layers_have_their_own_kv_heads_and_sinks() -> None:
    """MiMoV2FlashAttention: the sliding layers (window 129) have twice the KV heads and a sink per head, the full
    ones -- layer 0 and every sixth (MiMoV2FlashConfig's layer_types: i == 0 or (i + 1) % 6 == 0) -- neither; q/k 192
    wide, values 128; a third of each head rotated (int(192 x 0.334) = 64 channels). Counts: transformers 5.24 on the
    meta device. Megatron-Core's layers share one attention shape, so megatron refuses it; a context split is not
    modelled (the ring's KV chunks have one head count)."""
    from vramplan.models.architecture.params import layer_group, layer_norm_params
    from vramplan.models.catalogue.stack_contract import architecture_parts

    arch = architecture_from_config({"model_type": "mimo_v2_flash"}, name="m", source="config.json")
    assert [i for i in range(48) if not arch.layer_is_local(i)] == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    assert (arch.num_kv_heads, arch.local_kv_heads, arch.attention_sinks, arch.local_attention_sinks) == (4, 8, False, True)
    assert (arch.head_dim, arch.value_head_dim, arch.rotary_dim, arch.first_dense_layers) == (192, 128, 64, 1)
    full, sliding = layer_group(arch, 47), layer_group(arch, 1)
    width = {g.local: {m.name: m.out_features for m in g.modules} for g in (full, sliding)}
    assert (width[False]["k_proj"], width[False]["v_proj"], width[True]["k_proj"], width[True]["v_proj"]) == (
        4 * 192, 4 * 128, 8 * 192, 8 * 128)
    assert layer_norm_params(arch, sliding) - layer_norm_params(arch, full) == 64  # the sinks, one per head
    assert count_params(arch).total == 308_778_768_832
    listed = architecture_from_config({"model_type": "mimo_v2_flash", "num_hidden_layers": 12,
                                       "layer_types": ["full_attention"] + ["sliding_attention"] * 4 + ["full_attention"]
                                       + ["sliding_attention"] * 5 + ["full_attention"]}, name="m", source="config.json")
    assert (listed.global_attention_every, listed.global_first_layer) == (6, True)
    assert "local_attention_shape" in architecture_parts(arch)
    per_type = architecture_from_config({"model_type": "mimo_v2_flash", "rope_parameters": {
        "full_attention": {"rope_type": "default", "partial_rotary_factor": 0.5},
        "sliding_attention": {"rope_type": "default", "partial_rotary_factor": 0.25}}}, name="m", source="config.json")
    assert (per_type.partial_rotary_factor, per_type.local_partial_rotary_factor) == (0.5, 0.25)  # each type's share
    x = Shape(b=1, s=16, e=2)
    terms = {g.local: {t.name: t.num_bytes for t in layer_terms(arch, "eager", "eager", x, group=g)} for g in (full, sliding)}
    assert terms[True]["attn.softmax"] - terms[False]["attn.softmax"] == 2 * 64 * 16  # the sink column, bf16
    assert "attn.sink_max_indices" in terms[False]  # the eager forward subtracts the row max on every layer
    # the MoE block reads its input through an fp32 copy and gathers tokens by index: no 16-bit MLP input kept
    assert "mlp.linear_input" not in terms[False] and "moe.router_input_fp32" in terms[False]


def test_hyperclovax_post_norms_make_a_sandwich() -> None:
    """HyperCLOVAXDecoderLayer: Granite's layer with post_norm1 / post_norm2 on the attention's and the MLP's output
    when use_post_norm (the default): four RMSNorms a layer (h weights each more: 32 x 2 x 4,096 = 262,144 parameters
    over HyperCLOVAXConfig's 32 layers, transformers 5.24 on the meta device); without it, Granite's two."""
    arch = architecture_from_config({"model_type": "hyperclovax"}, name="h", source="config.json")
    plain = architecture_from_config({"model_type": "hyperclovax", "use_post_norm": False}, name="h", source="config.json")
    assert (arch.norm_position, arch.norms_per_layer, plain.norm_position, plain.norms_per_layer) == ("sandwich", 4, "pre", 2)
    assert count_params(arch).total - count_params(plain).total == 262_144
    names = {t.name for t in layer_terms(arch, "eager", "flash", Shape(b=1, s=16, e=2))}
    assert {"post_attn_norm.normed", "post_mlp_norm.normed"} <= names


@pytest.mark.parametrize(("change", "total", "norm_kind", "dense_width"), [
    ({}, 190_004_928_512, "layernorm_nobias", 0),
    ({"num_shared_experts": 1, "rms_norm_eps": 1e-5}, 212_150_853_632, "rmsnorm", 0),
    ({"mlp_layer_types": ["dense"] + ["sparse"] * 39, "prefix_dense_intermediate_size": 8192}, 185_777_004_544,
     "layernorm_nobias", 8192),
])
def test_command_a_plus_moe_variants(change: dict, total: int, norm_kind: str, dense_width: int) -> None:
    """Cohere2MoeConfig: Cohere 2's parallel layer with Mixtral's experts; num_shared_experts shared widths as one MLP,
    Llama's RMSNorm when rms_norm_eps is set (else Cohere's fp32 LayerNorm), leading dense layers of
    prefix_dense_intermediate_size. Counts: transformers 5.24 on the meta device."""
    arch = architecture_from_config({"model_type": "cohere2_moe", **change}, name="c", source="config.json")
    assert (count_params(arch).total, arch.norm_kind, arch.dense_intermediate_size) == (total, norm_kind, dense_width)
    assert (arch.parallel_attention_mlp, arch.norms_per_layer, arch.global_attention_every, arch.router_topk_softmax) == (
        True, 1, 4, True)


_LAGUNA_XS = {"model_type": "laguna", "layer_types": ["full_attention"] + ["sliding_attention"] * 3 + ["full_attention"]
              + ["sliding_attention"] * 3, "num_hidden_layers": 8, "num_attention_heads_per_layer": [64, 48, 48, 48] * 2}


def test_laguna_sliding_layers_have_their_own_heads_and_rope_share() -> None:
    """LagunaAttention: num_attention_heads_per_layer (one count for the full layers, one for the sliding ones), a
    rope_parameters per layer type (full: half of each head, sliding: all of it: LagunaConfig's defaults) and
    softplus(g_proj(x)) in fp32 per head on the output (g_proj h -> heads); LagunaTopKRouter's e_score_correction_bias
    is an nn.Parameter, counted. Counts: transformers 5.24 on the meta device."""
    from vramplan.models.architecture.params import layer_group, layer_norm_params
    from vramplan.models.time.flops import forward_flops_per_token

    arch = architecture_from_config({**_LAGUNA_XS}, name="l", source="config.json")
    assert (arch.num_attention_heads, arch.local_attention_heads, arch.partial_rotary_factor,
            arch.local_partial_rotary_factor, arch.global_attention_every) == (64, 48, 0.5, 1.0, 4)
    full, sliding = layer_group(arch, 4), layer_group(arch, 5)
    width = {g.local: {m.name: m.out_features for m in g.modules} for g in (full, sliding)}
    assert (width[False]["q_proj"], width[False]["self_attn.g_proj"], width[True]["q_proj"],
            width[True]["self_attn.g_proj"]) == (64 * 128, 64, 48 * 128, 48)
    assert layer_norm_params(arch, sliding) - layer_norm_params(arch, layer_group(arch, 1)) == 0
    assert count_params(arch).total == 6_376_756_992
    bare = architecture_from_config({"model_type": "laguna"}, name="l", source="config.json")
    assert count_params(bare).total == 33_189_975_808 and bare.local_attention_heads == 0
    listed = architecture_from_config({"model_type": "laguna", "num_attention_heads_per_layer": [64] * 40},
                                      name="l", source="config.json")  # every layer full: the list's one count
    assert (listed.num_attention_heads, count_params(listed).total) == (64, 33_526_830_848)
    # a sliding layer's attention scores 48 heads over its 512-token window, a full one 64 over the sequence
    _, attention, _ = forward_flops_per_token(arch, 4096)
    assert attention == 2 * 2 * 4096 * 64 * 256 + 6 * 2 * 512 * 48 * 256
    x = Shape(b=1, s=16, e=2)
    gate = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "flash", x, group=sliding)}["attn.output_gate"]
    assert gate == 4 * 16 * 48 + 2 * 16 * 48 + 2 * 16 * 48 * 128  # softplus's fp32 input, the cast, the ungated output


@pytest.mark.parametrize(("change", "key"), [
    ({"num_attention_heads_per_layer": [64, 48, 32, 48] * 2}, "num_attention_heads_per_layer"),
    ({"gating": "per-element"}, "gating"),
    ({"moe_router_logit_softcapping": 30.0}, "moe_router_logit_softcapping"),
    ({"moe_apply_router_weight_on_input": True}, "moe_apply_router_weight_on_input"),
])
def test_laguna_variants_not_modelled_are_one_line_errors(change: dict, key: str) -> None:
    with pytest.raises(VramplanError) as caught:
        architecture_from_config({**_LAGUNA_XS, **change}, name="l", source="config.json")
    assert key in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("shape", "total"), [
    ({}, 125_239_296),  # OPT-125m
    ({"hidden_size": 2048, "ffn_dim": 8192, "num_hidden_layers": 24, "num_attention_heads": 32,
      "word_embed_proj_dim": 2048}, 1_315_758_080),  # OPT-1.3b
    ({"hidden_size": 4096, "ffn_dim": 16384, "num_hidden_layers": 32, "num_attention_heads": 32,
      "word_embed_proj_dim": 4096}, 6_658_473_984),  # OPT-6.7b
])
def test_opt_learned_positions_carry_two_offset_rows(shape: dict, total: int) -> None:
    """OPTLearnedPositionalEmbedding: max_position_embeddings + 2 rows; fc1 -> relu -> fc2 with biases keeps one f-wide
    tensor (relu's output, fc2's input); dropout 0.1 after attention and fc2. Counts: transformers 5.24 on the meta
    device."""
    arch = architecture_from_config({"model_type": "opt", **shape}, name="o", source="config.json")
    assert count_params(arch).total == total
    assert (arch.mlp_kind, arch.position_embedding_offset, arch.dropout_prob, arch.norm_kind) == ("relu", 2, 0.1, "layernorm")
    assert count_params(arch).embedding == (50272 + 2048 + 2) * arch.hidden_size
    mlp = [t for t in layer_terms(arch, "eager", "flash", Shape(b=1, s=16, e=2)) if t.name.startswith("mlp.")]
    assert [t.name for t in mlp] == ["mlp.linear_input", "mlp.relu_output"]


@pytest.mark.parametrize(("change", "key"), [({"do_layer_norm_before": False}, "do_layer_norm_before"),
                                             ({"word_embed_proj_dim": 512}, "word_embed_proj_dim"),
                                             ({"layerdrop": 0.1}, "layerdrop"),
                                             ({"layer_norm_elementwise_affine": False}, "layer_norm_elementwise_affine")])
def test_opt_variants_not_modelled_are_one_line_errors(change: dict, key: str) -> None:
    """OPT-350m puts its norms after the residual adds and projects a 512-wide embedding in and out: refused in one line
    naming the key, as are layerdrop and parameter-free norms."""
    with pytest.raises(VramplanError) as caught:
        architecture_from_config({"model_type": "opt", **change}, name="o", source="config.json")
    assert key in str(caught.value) and "\n" not in str(caught.value)


def test_gpt_bigcode_is_gpt2_with_multi_query_attention() -> None:
    """GPTBigCodeAttention: one c_attn of h + 2 head_dim rows (one KV head) under multi_query, h + 2 h without; GPT-2's
    names, learned positions, LayerNorms, dropouts. Counts: transformers 5.24 on the meta device (StarCoder 15B's
    shape: 15,517,456,384)."""
    starcoder = architecture_from_config({"model_type": "gpt_bigcode", "n_embd": 6144, "n_layer": 40, "n_head": 48,
                                          "n_positions": 8192, "vocab_size": 49152}, name="s", source="config.json")
    assert (starcoder.num_kv_heads, starcoder.fused_qkv, starcoder.learned_position_embeddings) == (1, True, True)
    assert count_params(starcoder).total == 15_517_456_384
    assert [m.name for m in layer_linear_modules(starcoder)] == ["c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"]
    mha = architecture_from_config({"model_type": "gpt_bigcode", "multi_query": False}, name="s", source="config.json")
    assert (mha.num_kv_heads, count_params(mha).total) == (12, 124_439_808)
    # eager attention repeats the one KV head to every head and copies q (measured), SDPA keeps c_attn's output
    x = Shape(b=1, s=16, e=2)
    eager = {t.name for t in layer_terms(starcoder, "eager", "eager", x)}
    assert {"attn.q", "attn.k_repeated", "attn.v_repeated"} <= eager and "attn.qkv_output" not in eager
    assert "attn.qkv_output" in {t.name for t in layer_terms(starcoder, "eager", "flash", x)}


def test_gptj_parallel_layer_with_an_unbiased_out_proj_and_fp32_eager_scores() -> None:
    """GPTJBlock: one LayerNorm feeding attention and the MLP in parallel; q/k/v and out_proj without biases, fc_in /
    fc_out with them (out_bias apart from linear_bias), an lm_head with a bias; RoPE on rotary_dim (64) channels of each
    256-wide head, sin/cos repeat_interleaved for q and again for k (rope_tables per_call: four copies a layer), the
    parts concatenated before the transpose (no copy of SDPA's output); eager attention scores fp32 copies of q and k.
    Counts: transformers 5.24 on the meta device (GPT-J-6B: 6,050,882,784)."""
    arch = architecture_from_config({"model_type": "gptj"}, name="j", source="config.json")
    assert (arch.linear_bias, arch.out_bias, arch.qkv_bias, arch.lm_head_bias, arch.rotary_dim) == (True, False, False, True, 64)
    assert [m.name for m in layer_linear_modules(arch)] == ["q_proj", "k_proj", "v_proj", "out_proj", "fc_in", "fc_out"]
    assert count_params(arch).total == 6_050_882_784
    x = Shape(b=1, s=16, e=2)
    sdpa = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "flash", x)}
    assert sdpa["rope.cos_sin_copies"] == 4 * 2 * 16 * 64 and "attn.output_copy" not in sdpa
    eager = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "eager", x)}
    assert eager["attn.q"] == eager["attn.k_repeated"] == 4 * 16 * 4096  # fp32 copies


def test_granite_swa_sinks_scale_the_output_instead_of_joining_the_softmax() -> None:
    """GraniteSWAAttention: a sink per head (20 parameters a layer), applied as output * sigmoid(logsumexp(scores) - sink)
    in fp32; eager attention keeps the scores and their logsumexp, the fp32 sigmoid and its cast, the unscaled output,
    and no sink column or row max (gpt-oss's form). Layer i global when i % 4 == 0 (GraniteSWAConfig's layer_types).
    Count: transformers 5.24 on the meta device."""
    arch = architecture_from_config({"model_type": "granite_swa"}, name="g", source="config.json")
    assert (arch.attention_sinks, arch.sink_scaling, arch.global_attention_first, arch.attention_window) == (True, True, True, 128)
    assert count_params(arch).total == 2_144_463_840
    x = Shape(b=1, s=16, e=2)
    terms = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "eager", x)}
    a = arch.num_attention_heads
    assert terms["attn.softmax"] == 4 * a * 16 * 16 and "attn.sink_max_indices" not in terms
    assert terms["attn.sink_logsumexp"] == 2 * a * 16 * 16 + 2 * a * 16
    assert terms["attn.sink_scale"] == 4 * a * 16 + 2 * a * 16
    assert terms["attn.unscaled_output"] == 2 * 16 * a * arch.head_dim


def test_an_irregular_layer_pattern_is_read_as_a_list() -> None:
    """A layer_types list no periodic rule gives (Flint's: full on the first two layers, every fourth from 1 and the
    last; Command A+'s dense prefix with a pattern of its own) is read as the layers it names global (global_layers);
    its layer kinds, parameters and per-kind head counts follow the list. Refused in one line: a malformed list in a
    catalogue row."""
    from vramplan.models.architecture.params import layer_groups

    types = ["full_attention" if i < 2 or i % 4 == 1 or i == 11 else "sliding_attention" for i in range(12)]
    arch = architecture_from_config({"model_type": "ministral", "hidden_size": 512, "intermediate_size": 1024,
                                     "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 2,
                                     "vocab_size": 1000, "sliding_window": 64, "layer_types": types},
                                    name="m", source="config.json")
    assert arch.global_layers == "0 1 5 9 11" and arch.global_attention_every == 0
    assert [not arch.layer_is_local(i) for i in range(12)] == [t == "full_attention" for t in types]
    assert sorted((g.local, g.count) for g in layer_groups(arch)) == [(False, 5), (True, 7)]
    # a sliding layer's own shape needs local layers, not a periodic rule: MiMo-V2-Flash with a listed pattern
    mimo = architecture_from_config({"model_type": "mimo_v2_flash", "num_hidden_layers": 16,
                                     "layer_types": ["full_attention" if i in (0, 1, 7, 13) else "sliding_attention"
                                                     for i in range(16)]}, name="m", source="config.json")
    assert (mimo.global_layers, mimo.local_attention_sinks, mimo.local_kv_heads) == ("0 1 7 13", True, 8)
    from pydantic import ValidationError

    for bad in ("0 x", "3 1", "0 12"):  # the catalogue loader turns this into its one-line error naming the cell
        with pytest.raises(ValidationError, match="global_layers"):
            arch.model_validate({**arch.model_dump(), "global_layers": bad})
