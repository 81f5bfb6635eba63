"""Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5 dense and MoE): exact parameter counts, the layer kinds,
the linear layers' saved tensors and FLOPs, and the refusals where they are not modelled."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.architecture.lora import adapted_modules
from vramplan.models.architecture.params import attention_module_names, count_params, layer_group, layer_groups
from vramplan.models.catalogue.hf_config import architecture_from_config
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate
from vramplan.models.memory.activation_terms import layer_terms
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.saved_tensors import Shape
from vramplan.models.time.flops import forward_flops_per_token, gated_delta_forward_flops

SMALL_NEXT = {"num_hidden_layers": 8, "hidden_size": 512, "linear_num_key_heads": 4, "linear_num_value_heads": 12,
              "linear_key_head_dim": 32, "linear_value_head_dim": 48, "linear_conv_kernel_dim": 3, "num_experts": 16,
              "num_experts_per_tok": 4, "moe_intermediate_size": 96, "shared_expert_intermediate_size": 160,
              "decoder_sparse_step": 2, "intermediate_size": 700, "full_attention_interval": 2, "head_dim": 64,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 3000, "tie_word_embeddings": True}
SMALL_35 = {"num_hidden_layers": 6, "hidden_size": 384, "intermediate_size": 1000,
            "layer_types": ["linear_attention", "full_attention"] * 3, "linear_num_key_heads": 2,
            "linear_num_value_heads": 6, "linear_key_head_dim": 32, "linear_value_head_dim": 16, "head_dim": 32,
            "num_attention_heads": 6, "num_key_value_heads": 3, "vocab_size": 5000}
SMALL_35_MOE = {"num_hidden_layers": 8, "hidden_size": 256, "num_experts": 8, "num_experts_per_tok": 2,
                "moe_intermediate_size": 64, "shared_expert_intermediate_size": 96, "vocab_size": 4000}

# sum(p.numel() for p in AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **kwargs)).parameters())
# on the meta device, transformers 5.24.0 / torch 2.13.0. The class defaults are Qwen3-Next-80B-A3B's shape
# (80B total), Qwen3.5's 9B dense and 35B-A3B MoE shapes.
TRANSFORMERS_COUNTS = [
    ("qwen3_next", {}, 79_674_391_296),
    ("qwen3_next", SMALL_NEXT, 24_093_728),  # MoE every 2nd layer, full attention every 2nd, tied embeddings
    ("qwen3_5_text", {}, 8_953_803_264),
    ("qwen3_5_text", SMALL_35, 12_137_748),  # full attention from layer_types
    ("qwen3_5_moe_text", {}, 34_660_610_688),
    ("qwen3_5_moe_text", SMALL_35_MOE, 38_084_992),
]


def _arch(model_type: str, kwargs: dict | None = None):
    return architecture_from_config({"model_type": model_type, **(kwargs or {})}, name=model_type, source="config.json")


@pytest.mark.parametrize(("model_type", "kwargs", "expected"), TRANSFORMERS_COUNTS)
def test_counts_equal_transformers(model_type: str, kwargs: dict, expected: int) -> None:
    assert count_params(_arch(model_type, kwargs)).total == expected


def test_layer_kinds_and_module_names() -> None:
    nxt, dense, moe = _arch("qwen3_next"), _arch("qwen3_5_text"), _arch("qwen3_5_moe_text")
    # three linear-attention layers to one full-attention layer (full_attention_interval 4)
    assert [layer_group(nxt, i).linear for i in range(8)] == [True, True, True, False] * 2
    assert sum(g.count for g in layer_groups(nxt) if g.linear) == 36 and nxt.num_layers == 48
    assert {m.name for m in layer_group(nxt, 0).modules} >= {"in_proj_qkvz", "in_proj_ba", "linear_attn.out_proj"}
    assert {m.name for m in layer_group(dense, 0).modules} >= {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"}
    # the full-attention layer's q_proj emits the query and its output gate: h -> 2 x 16 heads x 256
    q_proj = next(m for m in layer_group(moe, 3).modules if m.name == "q_proj")
    assert (q_proj.in_features, q_proj.out_features) == (2048, 2 * 16 * 256)
    assert not layer_group(nxt, 0).qk_norm and layer_group(nxt, 3).qk_norm  # q/k L2-normalised in the kernel
    assert {"in_proj_qkvz", "linear_attn.out_proj", "q_proj"} <= attention_module_names(nxt)
    # LoRA on every linear by default, and a target naming a linear layer's projection is known
    assert "in_proj_ba" in {m.name for m in adapted_modules(nxt, None, layer_group(nxt, 0).modules)}
    assert [m.name for m in adapted_modules(dense, ("in_proj_z",), layer_group(dense, 0).modules)] == ["in_proj_z"]


def test_wrapper_configs_read_their_text_config() -> None:
    wrapped = architecture_from_config({"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text"},
                                        "vision_config": {"depth": 27}}, name="q", source="config.json")
    # AutoModelForCausalLM builds Qwen3_5ForCausalLM for a qwen3_5 file: the decoder alone, no vision tower
    assert (wrapped.model_type, wrapped.vision_params) == ("qwen3_5_text", 0)
    assert count_params(wrapped).total == 8_953_803_264
    moe = architecture_from_config({"model_type": "qwen3_5_moe", "text_config": {}}, name="q", source="config.json")
    assert count_params(moe).total == 34_660_610_688


# Qwen/Qwen3.5-27B's config.json as the hub serves it (a qwen3_5 wrapper; keys transformers 5.24 does not read
# kept: attn_output_gate, output_gate_type, mamba_ssm_dtype, the MTP layer's, M-RoPE's sections). transformers
# builds Qwen3_5ForCausalLM from it: 26,895,998,464 parameters on the meta device (the card's 27B).
QWEN3_5_27B = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"], "tie_word_embeddings": False,
               "text_config": {"attention_bias": False, "attn_output_gate": True, "full_attention_interval": 4,
                               "head_dim": 256, "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 17408,
                               "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
                               "linear_num_value_heads": 48, "linear_value_head_dim": 128, "mamba_ssm_dtype": "float32",
                               "max_position_embeddings": 262144, "model_type": "qwen3_5_text",
                               "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False,
                               "num_attention_heads": 24, "num_hidden_layers": 64, "num_key_value_heads": 4,
                               "output_gate_type": "swish", "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-6,
                               "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                                                   "partial_rotary_factor": 0.25, "rope_theta": 10000000,
                                                   "rope_type": "default"},
                               "tie_word_embeddings": False, "vocab_size": 248320},
               "vision_config": {"depth": 27, "hidden_size": 1152, "model_type": "qwen3_5"}}


def test_qwen3_5_27b_as_published() -> None:
    arch = architecture_from_config(QWEN3_5_27B, name="qwen3.5-27b", source="config.json")
    assert count_params(arch).total == 26_895_998_464
    assert (arch.full_attention_every, arch.partial_rotary_factor, arch.linear_value_heads) == (4, 0.25, 48)


# The linear layer's terms against autograd's saved tensors (tests/models/memory/test_saved_tensors_gated_delta.py,
# the CUDA kernels as CPU stand-ins): b = 2, s = 64, bf16, Qwen3.5's tiny layer (h 64, 2 x 16 key, 4 x 24 value
# heads) keeps 725,536 bytes, 32 of them exp(A_log) and its negation (per layer, not counted).
def test_linear_layer_terms_equal_the_measured_layer() -> None:
    arch = _arch("qwen3_5_text", {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
                                  "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1000, "linear_num_key_heads": 2,
                                  "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 24,
                                  "intermediate_size": 176})
    terms = layer_terms(arch, "eager", "flash", Shape(b=2, s=64, e=2), group=layer_group(arch, 0))
    assert sum(t.num_bytes for t in terms) == 725_536 - 32
    names = {t.name for t in terms}
    assert "linear_attn.chunk_inverse" in names and "attn.logsumexp" not in names and "q_norm.rsqrt" not in names


def test_the_recurrence_replaces_attention_flops() -> None:
    arch = _arch("qwen3_5_text")
    # per value head: 6 C K + 4 C V + 6 K V with C = 64, K = V = 128; 32 value heads
    assert gated_delta_forward_flops(arch) == 32 * (6 * 64 * 128 + 4 * 64 * 128 + 6 * 128 * 128)
    _, attention, _ = forward_flops_per_token(arch, 8192)
    full_layers = 8  # of 32: every 4th
    assert attention == 24 * gated_delta_forward_flops(arch) + full_layers * 2 * 8192 * 16 * (256 + 256)
    # the linear layers' cost does not grow with the sequence; the full layers' does
    assert forward_flops_per_token(arch, 16384)[1] - attention == full_layers * 2 * 8192 * 16 * 512


@pytest.mark.parametrize(("job", "plan", "field"), [
    (Job(seq_len=4096, stack="megatron"), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1), "stack"),
    (Job(seq_len=4096, stack="torchtitan"), Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=3), "stack"),
    (Job(seq_len=4096), Plan(gpu="h100-sxm-80gb", num_gpus=8, tp=2), "tp"),
    (Job(seq_len=4096), Plan(gpu="h100-sxm-80gb", num_gpus=8, cp=2), "cp"),
    (Job(seq_len=4096), Plan(gpu="h100-sxm-80gb", num_gpus=1, precision="fp32"), "precision"),
])
def test_what_is_not_modelled_is_refused_naming_the_field(tmp_path, job: Job, plan: Plan, field: str) -> None:
    path = tmp_path / "config.json"  # the stacks' refusals are their contracts' (estimate, as the command runs it)
    path.write_text('{"model_type": "qwen3_next"}')
    with pytest.raises(VramplanError) as caught:
        estimate(packaged_catalogue(), str(path), job, plan, 1e9)
    assert caught.value.field == field


def test_hf_and_deepspeed_estimate_it_and_say_what_it_assumes_installed(tmp_path) -> None:
    catalogue = packaged_catalogue()
    gpu = catalogue.gpu("h100-sxm-80gb")
    arch = _arch("qwen3_next")
    for job, plan in ((Job(seq_len=4096, method="lora"), Plan(gpu=gpu.name, num_gpus=8, zero=3)),
                      (Job(seq_len=4096, method="full", stack="deepspeed"), Plan(gpu=gpu.name, num_gpus=8, zero=3,
                                                                                  recompute="full"))):
        assert memory_per_gpu(arch, job, plan, gpu).total_bytes > 0
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "qwen3_next"}')
    result = estimate(catalogue, str(path), Job(seq_len=4096, method="lora"), Plan(gpu=gpu.name, num_gpus=8, zero=3), 1e9)
    assert any("flash-linear-attention and causal-conv1d installed" in w for w in result.warnings)


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"layer_types": ["linear_attention"] * 48}, "layer_types"),  # no full-attention layer
    ({"layer_types": ["linear_attention", "sliding_attention"] * 24}, "layer_types"),
    ({"layer_types": ["full_attention", "linear_attention"] * 24}, "layer_types"),  # not (i + 1) % N
    ({"linear_num_value_heads": 24, "linear_num_key_heads": 16}, "linear_value_heads"),
    ({"linear_conv_kernel_dim": 0}, "linear_conv_kernel_dim"),
    ({"full_attention_interval": "4"}, "full_attention_interval"),
])
def test_a_bad_linear_attention_value_is_one_line(kwargs: dict, named: str) -> None:
    with pytest.raises(VramplanError) as caught:
        _arch("qwen3_next", kwargs)
    assert named in str(caught.value) and "\n" not in str(caught.value)
