"""Gemma 4's text decoders (gemma4_text, gemma4_unified_text): counts equal transformers 5.24's, built on the
meta device from the same config (Gemma4ForCausalLM, Gemma4UnifiedForCausalLM), and the parts
models/catalogue/hf_gemma4.py reads. The per-layer saved bytes are measured in
tests/models/memory/test_saved_tensors_families.py (NEW_CONFIGS "gemma4*")."""

from __future__ import annotations

import pytest

from vramplan.models.architecture.params import count_params, layer_architecture, layer_groups
from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.memory.activation_terms import layer_terms, shared_terms
from vramplan.models.memory.saved_tensors import Shape

# Gemma 4 31B's text_config as the hub ships it (global_head_dim and num_global_key_value_heads, no per_layer_config)
GEMMA4_31B = {"model_type": "gemma4_text", "hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 60,
              "num_attention_heads": 32, "num_key_value_heads": 16, "num_global_key_value_heads": 4, "head_dim": 256,
              "global_head_dim": 512, "attention_k_eq_v": True, "sliding_window": 1024, "hidden_size_per_layer_input": 0,
              "vocab_size": 262144, "final_logit_softcapping": 30.0,
              "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                                     "rope_type": "proportional"},
                                  "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}}
# Gemma 4 12B (gemma4_unified_text): one KV head on its full layers
GEMMA4_12B = {"model_type": "gemma4_unified_text", "hidden_size": 3840, "intermediate_size": 15360,
              "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8,
              "num_global_key_value_heads": 1, "head_dim": 256, "global_head_dim": 512, "attention_k_eq_v": True,
              "sliding_window": 1024, "vocab_size": 262144, "final_logit_softcapping": 30.0}
# Gemma 4 26B-A4B: 128 experts (top 8, 704 wide) beside a 2,112-wide MLP in every layer
GEMMA4_26B_A4B = {**GEMMA4_31B, "hidden_size": 2816, "intermediate_size": 2112, "num_hidden_layers": 30,
                  "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2,
                  "enable_moe_block": True, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704}
# An E2B-shaped decoder: 35 layers 1,536 wide, one KV head, per-layer inputs 256 wide, the last 20 layers KV-shared
GEMMA4_E2B = {**{k: v for k, v in GEMMA4_31B.items() if k not in ("num_global_key_value_heads", "attention_k_eq_v")},
              "hidden_size": 1536, "intermediate_size": 6144, "num_hidden_layers": 35, "num_attention_heads": 8,
              "num_key_value_heads": 1, "sliding_window": 512, "hidden_size_per_layer_input": 256,
              "vocab_size_per_layer_input": 262144, "num_kv_shared_layers": 20, "use_double_wide_mlp": True}
# The same 31B as transformers 5.24 saves it (Gemma4TextConfig.to_dict): the full layers' overrides in
# per_layer_config, keyed by zero-padded layer index, and no global_head_dim / num_global_key_value_heads
SAVED_31B = {**{k: v for k, v in GEMMA4_31B.items() if k not in ("global_head_dim", "num_global_key_value_heads")},
             "per_layer_config": {f"{i:02d}": {"head_dim": 512, "num_key_value_heads": 4} for i in range(5, 60, 6)}}


def _read(config: dict):
    return architecture_from_config(config, name="gemma4", source="config.json")


@pytest.mark.parametrize(("config", "total"), [
    # each the sum of transformers 5.24's parameters on the meta device (AutoModelForCausalLM.from_config)
    (GEMMA4_31B, 30_697_345_280),  # Gemma 4 31B: 30.7B
    (SAVED_31B, 30_697_345_280),
    ({**GEMMA4_31B, "attention_k_eq_v": False}, 31_468_048_640),  # a v_proj on every layer, 16 KV heads everywhere
    (GEMMA4_12B, 11_907_350_272),
    ({**GEMMA4_31B, "num_hidden_layers": 7}, 4_872_106_752),  # layers 5 and 6 full: the last is forced full
    ({"model_type": "gemma4_text", "hidden_size_per_layer_input": 0}, 3_010_758_400),  # Gemma4TextConfig()'s shape
    (GEMMA4_26B_A4B, 25_233_141_760),  # Gemma 4 26B-A4B: 25.2B
    ({**GEMMA4_26B_A4B, "enable_moe_block": False}, 2_384_001_280),  # its expert counts then build nothing
    (GEMMA4_E2B, 4_621_490_944),  # per-layer inputs, the last 20 layers reusing keys and values, double-wide MLPs there
    ({**GEMMA4_E2B, "use_double_wide_mlp": False}, 4_055_259_904),
    ({"model_type": "gemma4_text"}, 5_077_177_856),  # Gemma4TextConfig(): per-layer inputs 256 wide by default
])
def test_counts_equal_transformers(config: dict, total: int) -> None:
    assert count_params(_read(config)).total == total


def test_full_layers_are_512_wide_with_their_own_kv_heads_and_no_value_projection() -> None:
    """The full layers (every 6th, the last included) are the architecture's shape, the sliding layers' the local one:
    Gemma4TextAttention builds k_proj only where attention_k_eq_v and not is_sliding, its values being k_proj's output."""
    arch = _read(GEMMA4_31B)
    assert (arch.head_dim, arch.num_kv_heads, arch.value_from_key, arch.value_norm) == (512, 4, True, True)
    assert (arch.local_head_dim, arch.local_kv_heads, arch.global_attention_every, arch.attention_window) == (256, 16, 6, 1024)
    assert arch.norm_kind == "rmsnorm_pow" and arch.partial_rotary_factor == 1.0  # proportional RoPE: the whole head
    local = layer_architecture(arch, True)
    assert (local.head_dim, local.num_kv_heads, local.value_from_key) == (256, 16, False)
    names = {group.local: {m.name for m in group.modules} for group in layer_groups(arch)}
    assert "v_proj" in names[True] and "v_proj" not in names[False]
    assert [group.count for group in layer_groups(arch)] == [50, 10]
    assert _read(SAVED_31B) == arch.model_copy(update={"source": "config.json"})


def test_the_last_layer_is_full_whatever_layer_types_says() -> None:
    """Gemma4TextConfig.__post_init__ forces the last layer to full_attention (with a warning) and builds five sliding
    layers to one full when layer_types is missing."""
    listed = _read({**GEMMA4_31B, "num_hidden_layers": 4, "layer_types": ["sliding_attention"] * 4})
    assert [listed.layer_is_local(i) for i in range(4)] == [True, True, True, False]
    default = _read({**GEMMA4_31B, "num_hidden_layers": 8})
    assert [default.layer_is_local(i) for i in range(8)] == [True] * 5 + [False, True, False]


def test_value_norm_and_the_pow_norms_save_what_torch_measured() -> None:
    """Per token of a 31B full layer (bf16): the v_norm keeps an fp32 copy of the values and pow's input and result
    per head; a block norm keeps its fp32 input, pow's two per token, the fp32 normalised value and an fp32 weight."""
    arch = _read(GEMMA4_31B)
    full = next(g for g in layer_groups(arch) if not g.local)
    terms = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "flash", Shape(b=1, s=1, e=2), group=full)}
    assert terms["v_norm.input_fp32"] == 4 * 4 * 512 and terms["v_norm.pow_input_output"] == 2 * 4 * 4
    assert "v_norm.normed_fp32" not in terms
    assert [terms[f"attn_norm.{part}"] for part in ("input_fp32", "pow_input_output", "normed_fp32", "weight_fp32")] == [
        4 * 5376, 2 * 4, 4 * 5376, 4 * 5376]
    assert terms["attn.linear_input"] == 2 * 5376 and terms["attn.k"] == 2 * 4 * 512


def test_each_head_width_has_its_rope_table() -> None:
    """Gemma4TextRotaryEmbedding keeps one inv_freq per layer type: the 256-wide sliding heads' cos/sin beside the
    512-wide full ones' (measured: the layer that first uses each table holds it)."""
    x = Shape(b=1, s=100, e=2)
    assert [t.num_bytes for t in shared_terms(_read(GEMMA4_31B), x)] == [2 * 2 * 100 * 512, 2 * 2 * 100 * 256]
    assert len(shared_terms(_read({**GEMMA4_31B, "global_head_dim": 256}), x)) == 1


@pytest.mark.parametrize(("change", "key", "why"), [
    ({"num_kv_shared_layers": 60}, "num_kv_shared_layers", "below num_hidden_layers (60)"),
    ({"num_kv_shared_layers": 55}, "num_kv_shared_layers", "without an earlier layer producing"),  # full: first is 5
    ({"num_kv_shared_layers": -1}, "num_kv_shared_layers", "whole number >= 0"),
    ({"hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 0}, "vocab_size_per_layer_input", "whole number >= 1"),
    ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention", "both ways"),
    ({**GEMMA4_26B_A4B, "top_k_experts": 129}, "top_k_experts", "more experts than num_experts"),
    ({**GEMMA4_26B_A4B, "num_experts": None}, "num_experts", "whole number >= 2"),
    ({"num_global_key_value_heads": 5}, "num_global_key_value_heads", "must divide num_attention_heads"),
    ({"per_layer_config": {"01": {"head_dim": 512}}}, "per_layer_config", "exactly the full-attention layers"),
    ({"per_layer_config": {f"{i:02d}": {"head_dim": 512, "sliding_window": 8} for i in range(5, 60, 6)}},
     "per_layer_config", "one shape for the full layers"),
    ({"per_layer_config": {f"{i:02d}": {"head_dim": 0} for i in range(5, 60, 6)}}, "per_layer_config.head_dim", "1-65,536"),
    ({"per_layer_config": [1]}, "per_layer_config", "exactly the full-attention layers"),
    ({"global_head_dim": True}, "global_head_dim", "whole number"),
])
def test_what_is_not_modelled_is_refused_in_one_line(change: dict, key: str, why: str) -> None:
    with pytest.raises(VramplanError) as caught:
        _read({**GEMMA4_31B, **change})
    message = str(caught.value)
    assert message.startswith(key) and why in message and "\n" not in message


def test_e2b_layers_reuse_keys_and_values_and_read_per_layer_inputs() -> None:
    """Gemma4TextAttention builds no k_proj, v_proj, k_norm or v_norm on the last num_kv_shared_layers layers (they read
    the last earlier layer of their kind's), Gemma4TextMLP doubles their width under use_double_wide_mlp, and every
    layer has per_layer_input_gate (h -> 256), per_layer_projection (256 -> h) and post_per_layer_input_norm."""
    arch = _read(GEMMA4_E2B)
    assert (arch.kv_shared_layers, arch.double_wide_shared_mlp, arch.per_layer_input_width) == (20, True, 256)
    shared = [g for g in layer_groups(arch) if g.kv_shared]
    own = [g for g in layer_groups(arch) if not g.kv_shared]
    assert sum(g.count for g in shared) == 20 and sum(g.count for g in own) == 15
    names = {m.name: m for m in shared[0].modules}
    assert "k_proj" not in names and "v_proj" not in names and names["up_proj"].out_features == 2 * 6144
    assert {"per_layer_input_gate", "per_layer_projection", "k_proj"} <= {m.name for m in own[0].modules}
    x = Shape(b=1, s=1, e=2)
    sdpa = {t.name for t in layer_terms(arch, "eager", "flash", x, group=shared[0])}
    assert "attn.k" not in sdpa and "k_norm.input_fp32" not in sdpa and "v_norm.input_fp32" not in sdpa
    assert {"per_layer_input.gate_input", "per_layer_input_norm.input_fp32"} <= sdpa


# Gemma4VisionModel's shape in tests: a SigLIP-so400m-sized tower (27 layers, 1,152 wide, 16 heads of 72)
VISION = {"model_type": "gemma4_vision", "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
          "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72}


@pytest.mark.parametrize(("config", "total", "vision"), [
    # Gemma4ForConditionalGeneration on the meta device (what AutoModelForCausalLM builds for a gemma4 file)
    ({"model_type": "gemma4", "text_config": GEMMA4_31B, "vision_config": {"model_type": "gemma4_vision"}},
     30_868_838_656, 171_493_376),  # Gemma4VisionConfig()'s tower
    ({"model_type": "gemma4", "text_config": GEMMA4_26B_A4B, "vision_config": VISION}, 25_805_933_872, 572_792_112),
    ({"model_type": "gemma4", "text_config": GEMMA4_31B, "audio_config": None}, 30_697_345_280, 0),  # no tower
])
def test_the_wrapper_counts_its_vision_tower(config: dict, total: int, vision: int) -> None:
    arch = _read(config)
    assert (count_params(arch).total, arch.vision_params, arch.model_type) == (total, vision, "gemma4_text")


def test_audio_towers_and_the_unified_wrapper_are_refused_naming_them() -> None:
    with pytest.raises(VramplanError, match="audio_config: the audio tower"):
        _read({"model_type": "gemma4", "text_config": GEMMA4_31B, "audio_config": {"model_type": "gemma4_audio"}})
    with pytest.raises(VramplanError, match="audio tower"):
        _read({"model_type": "gemma4_unified", "text_config": GEMMA4_12B})


def test_store_layers_hold_their_recomputed_keys_and_values_through_a_checkpointed_backward() -> None:
    """Gemma4TextConfig.kv_sharing_modes marks the last layer of each kind "store" even when no layer reuses its keys
    and values; the dict holding them keeps, under gradient checkpointing, their recomputed k/v and every tensor saved
    on the way (measured: 984,256 bytes on the 4-layer probe, 804,032 above the peak without them; the optional
    test_saved_tensors_families.py bounds that peak). Per token of the 31B's full store layer, bf16: the attention
    norm's fp32 input, pow's two values, fp32 normalised value and weight; k_proj's input; k_norm's (4 KV heads x
    512); v_norm's fp32 copy and pow values; k and v."""
    from vramplan.models.core.setup import Job, Plan
    from vramplan.models.memory.activation_terms import stored_kv_terms
    from vramplan.models.memory.activations import microbatch_activations

    arch = _read(GEMMA4_31B)
    h, kv, d = 5376, 4, 512
    full = sum(t.num_bytes for t in stored_kv_terms(arch, "eager", Shape(b=1, s=1, e=2), local=False))
    assert full == (4 * h + 8 + 4 * h + 4 * h) + 2 * h + (4 * kv * d + 8 * kv + 4 * kv * d + 4 * d) + (4 * kv * d + 8 * kv) \
        + 2 * (2 * kv * d)
    plain = arch.model_copy(update={"stored_kv": False})
    x = Shape(b=1, s=4096, e=2)
    held = sum(sum(t.num_bytes for t in stored_kv_terms(arch, "eager", x, local)) for local in (False, True))
    job = Job(seq_len=4096)
    for recompute, extra in (("full", held), ("none", 0)):
        plan = Plan(gpu="x", micro_batch=1, recompute=recompute)
        # each layer's backward working set (the loss's, before any layer is recomputed, has none of it)
        assert (microbatch_activations(arch, job, plan).layer_peak_bytes
                - microbatch_activations(plain, job, plan).layer_peak_bytes) == extra


@pytest.mark.parametrize("config", [GEMMA4_31B, SAVED_31B, {**GEMMA4_31B, "layer_types": None}])
def test_a_huge_layer_count_is_refused_without_building_its_layer_list(config: dict) -> None:
    """The hostile-input sweep of 2026-12-07: 2^63 layers spent minutes building the default layer list."""
    with pytest.raises(VramplanError, match="num_hidden_layers"):
        _read({**config, "num_hidden_layers": 2**63})


def test_26b_a4b_runs_routed_experts_beside_each_mlp() -> None:
    """Gemma4TextDecoderLayer with enable_moe_block: the dense MLP (intermediate_size) and Gemma4TextExperts
    (moe_intermediate_size, fused gate_up) side by side, three norms more, router.scale and per_expert_scale."""
    arch = _read(GEMMA4_26B_A4B)
    assert (arch.num_experts, arch.experts_per_token, arch.intermediate_size, arch.dense_intermediate_size) == (128, 8, 704, 2112)
    assert arch.moe_beside_mlp and all(group.moe for group in layer_groups(arch))
    names = {m.name for m in layer_groups(arch)[0].modules}
    assert {"gate_proj", "up_proj", "down_proj"} <= names and len(names) > 8
    active = count_params(arch).active
    assert 3.8e9 < active < 4.0e9  # "A4B": about 3.8B active of 25.2B


@pytest.mark.parametrize("config", [GEMMA4_E2B, GEMMA4_26B_A4B])
def test_zero3_partitions_every_decoder_parameter(config: dict) -> None:
    """DeepSpeed ZeRO-3's parameters (models/memory/zero3_live.py: the per-layer input table and projection are
    modules of their own, fetched before the first layer) add up to the count without a vision tower."""
    from vramplan.models.core.setup import Job
    from vramplan.models.memory.zero3_live import zero3_model

    arch = _read(config)
    model = zero3_model(arch, Job(seq_len=1024), 1, 2)
    assert sum(p.numel for p in model.params) + model.persistent_elements == count_params(arch).total
