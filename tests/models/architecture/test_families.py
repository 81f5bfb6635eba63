"""The family registry (models/catalogue/hf_families.py): every supported model_type maps its config.json onto
the parts, and the memory model reads only the parts. Golden counts: transformers 5.24 on the meta
device (tests/golden_params.py); configs: the models' published config.json (tests/fixtures)."""

from __future__ import annotations

import ast
import json

import pytest
from golden_params import HF_PARAM_COUNTS
from helpers.paths import HF_CONFIGS, REPO

from vramplan.models.architecture.params import count_params, layer_groups
from vramplan.models.catalogue.hf_config import SUPPORTED_MODEL_TYPES, architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations
from vramplan.models.time.flops import forward_flops_per_token

REQUIRED_FAMILIES = ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "phi3", "olmo2", "deepseek_v2", "deepseek_v3",
                     "llama4", "gpt_neox", "falcon", "cohere", "starcoder2", "llama", "mistral", "mixtral", "qwen2",
                     "gemma2", "gpt2")


def _fixture(name: str) -> dict:
    return json.loads((HF_CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


def test_every_required_family_is_supported() -> None:
    assert set(REQUIRED_FAMILIES) <= set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("name", sorted(n for n in HF_PARAM_COUNTS if (HF_CONFIGS / f"{n}.json").exists()))
def test_config_json_counts_equal_transformers(catalogue, name: str) -> None:
    arch = architecture_from_config(_fixture(name), name=name, source="test")
    counts, golden = count_params(arch), HF_PARAM_COUNTS[name]
    assert (counts.total, counts.active, counts.layers, counts.per_layer) == (
        golden["total"], golden["active"], golden["layers"], golden["per_layer"])
    twin = catalogue.architecture(name)
    assert arch.model_dump(exclude={"name", "source"}) == twin.model_dump(exclude={"name", "source"})


def test_the_newer_families_rows_are_in_the_catalogue(catalogue) -> None:
    for name in ("qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "llama-4-scout",
                 "llama-4-maverick", "gemma-3-27b", "phi-4", "olmo-2-13b"):
        assert name in catalogue.architectures


def test_deepseek_v3_parts(catalogue) -> None:
    arch = catalogue.architecture("deepseek-v3")
    assert (arch.q_lora_rank, arch.kv_lora_rank, arch.qk_rope_head_dim, arch.head_dim, arch.v_head_dim) == (
        1536, 512, 64, 192, 128)
    assert (arch.num_experts, arch.experts_per_token, arch.first_dense_layers) == (256, 8, 3)
    assert arch.shared_expert_intermediate_size == 2048 and arch.dense_intermediate_size == 18432
    groups = layer_groups(arch)
    assert [(g.count, g.moe) for g in groups] == [(3, False), (58, True)]
    # 671B total, 37B activated (DeepSeek-V3 technical report, arXiv:2412.19437 sec. 1)
    counts = count_params(arch)
    assert round(counts.total / 1e9) == 671 and round(counts.active / 1e9) == 38  # 37.55B


def test_llama4_interleaves_moe_and_chunked_layers(catalogue) -> None:
    maverick, scout = catalogue.architecture("llama-4-maverick"), catalogue.architecture("llama-4-scout")
    assert sum(g.count for g in layer_groups(maverick) if g.moe) == 24  # interleave_moe_layer_step 2
    assert sum(g.count for g in layer_groups(scout) if g.moe) == 48
    assert sum(g.count for g in layer_groups(scout) if g.local) == 36  # NoPE global every 4th layer
    assert scout.local_attention == "chunked" and scout.attention_window == 8192
    assert scout.qk_norm == "l2" and maverick.qk_norm == "none"
    assert sum(g.count for g in layer_groups(scout) if g.qk_norm) == 36  # L2 norm on the RoPE layers only


def test_gemma3_sliding_window_pattern_and_flops(catalogue) -> None:
    arch = catalogue.architecture("gemma-3-27b")
    assert (arch.local_attention, arch.attention_window, arch.global_attention_every) == ("sliding", 1024, 6)
    assert sum(g.count for g in layer_groups(arch) if g.local) == 52  # 62 layers, 10 global (5:1)
    # attention scores+values: global layers score all s keys, local ones 1024
    s, a, d = 8192, arch.num_attention_heads, arch.head_dim
    _, attention, _ = forward_flops_per_token(arch, s)
    assert attention == 10 * 4 * s * a * d + 52 * 4 * 1024 * a * d


def test_mla_attention_flops_use_both_head_widths(catalogue) -> None:
    arch = catalogue.architecture("deepseek-v3")
    _, attention, _ = forward_flops_per_token(arch, 4096)
    assert attention == 61 * 2 * 4096 * 128 * (192 + 128)


def test_parallel_and_fused_families(catalogue) -> None:
    falcon, neox = catalogue.architecture("falcon-7b"), catalogue.architecture("pythia-6.9b")
    assert (falcon.num_kv_heads, falcon.norms_per_layer, falcon.parallel_attention_mlp, falcon.fused_qkv) == (
        1, 1, True, True)  # multi_query, one input_layernorm (modeling_falcon.py)
    assert (neox.partial_rotary_factor, neox.rotary_dim, neox.parallel_attention_mlp) == (0.25, 32, True)
    phi = catalogue.architecture("phi-4")
    assert phi.fused_qkv and phi.fused_gate_up
    cohere = catalogue.architecture("command-r-35b")
    assert (cohere.norm_kind, cohere.norms_per_layer, cohere.tie_word_embeddings) == ("layernorm_nobias", 1, True)


def test_activations_sum_over_layer_kinds(catalogue) -> None:
    arch = catalogue.architecture("deepseek-v3")
    job, plan = Job(seq_len=2048), Plan(gpu="x", micro_batch=1)
    whole = activations(arch, job, plan)
    dense = activations(arch.model_copy(update={"num_experts": 1, "experts_per_token": 1}), job, plan)
    moe_only = activations(arch.model_copy(update={"first_dense_layers": 0}), job, plan)
    shared = whole.layers_bytes - 3 * dense.per_layer_bytes - 58 * moe_only.per_layer_bytes
    assert shared == moe_only.layers_bytes - 61 * moe_only.per_layer_bytes  # only RoPE's shared tables remain


@pytest.mark.parametrize(("key", "value"), [("num_hidden_layers", True), ("num_hidden_layers", 2.0),
                                            ("hidden_size", "4096"), ("num_key_value_heads", False)])
def test_booleans_and_non_integers_are_not_counts(key: str, value: object) -> None:
    config = _fixture("qwen3-8b") | {key: value}
    with pytest.raises(VramplanError) as caught:
        architecture_from_config(config, name="x", source="config.json")
    message = str(caught.value)
    assert key in message and "\n" not in message


def test_unknown_model_type_lists_the_supported_ones() -> None:
    with pytest.raises(VramplanError) as caught:
        architecture_from_config({"model_type": "t5"}, name="x", source="config.json")
    message = str(caught.value)
    # The value is not echoed (a config file may hold anything: hostile input), the list is. (A family
    # vramplan knows it does not model, such as mamba, is named with the reason: test_new_families.py.)
    assert "t5" not in message and "not supported" in message
    assert "deepseek_v3" in message and "starcoder2" in message and "\n" not in message


def test_unmodelled_variants_are_one_line_errors() -> None:
    cases = [("falcon-7b", {"alibi": True}, "alibi"), ("qwen3-8b", {"use_sliding_window": True}, "use_sliding_window"),
             ("qwen3-30b-a3b", {"mlp_only_layers": [1]}, "mlp_only_layers"),
             ("deepseek-v3", {"moe_layer_freq": 2}, "moe_layer_freq")]
    for name, change, key in cases:
        with pytest.raises(VramplanError) as caught:
            architecture_from_config(_fixture(name) | change, name="x", source="config.json")
        assert key in str(caught.value), name


def test_catalogue_names_are_case_insensitive(catalogue) -> None:
    assert catalogue.architecture("Qwen3-8B") is catalogue.architecture("qwen3-8b")


# Every module of the memory, time and estimate model (models/catalogue/ maps config.json's
# model_type to architecture fields; nothing after it may branch on the family's name).
MEMORY_MODEL = sorted(str(path.relative_to(REPO / "models")) for path in (REPO / "models").rglob("*.py")
                      if path.relative_to(REPO / "models").parts[0] != "catalogue")


@pytest.mark.parametrize("module", MEMORY_MODEL)
def test_memory_model_never_branches_on_model_type(module: str) -> None:
    tree = ast.parse((REPO / "models" / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            names = [n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)]
            assert "model_type" not in names, f"{module}:{node.lineno} compares model_type"
