"""Activation golden vectors: Korthikanti et al. 2022 (arXiv:2205.05198) and per-architecture
closed forms measured with saved_tensors_hooks on transformers 5.24 (tests/tools/saved_tensors_probe.py,
re-measured by tests/models/memory/test_saved_tensors.py when torch is installed)."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activation_terms import layer_terms, output_terms
from vramplan.models.memory.activations import activations
from vramplan.models.memory.saved_tensors import Shape

MIB = 2**20


def _layer(arch: Architecture, kernels: str, attention: str, b: int, s: int, recompute: str = "none", **job) -> int:
    result = activations(
        arch, Job(seq_len=s, kernels=kernels, attention=attention, **job), Plan(gpu="x", micro_batch=b, recompute=recompute)
    )
    return result.per_layer_bytes


def _stats(arch: Architecture, b: int, s: int) -> int:
    # fp32 mean and rstd of the two LayerNorms: Korthikanti neglect these "small buffers".
    return 2 * 8 * b * s


GPT3 = packaged_catalogue().architecture("gpt3-175b")


@pytest.mark.parametrize(("b", "s"), [(1, 2048), (4, 2048), (1, 512), (2, 8192)])
def test_gpt3_layer_is_korthikanti_34_plus_5as_over_h(b: int, s: int) -> None:
    # Korthikanti eq. (1): sbh(34 + 5as/h) bytes per layer, 16-bit activations, 1-byte masks.
    h, a = GPT3.hidden_size, GPT3.num_attention_heads
    expected = s * b * h * 34 + 5 * a * s * s * b
    assert _layer(GPT3, "fused", "eager", b, s) == expected + _stats(GPT3, b, s)


def test_gpt3_175b_per_layer_mib_reference_values() -> None:
    # GPT-3 175B, s = 2048, b = 1: no recompute 2736 MiB, selective 34sbh = 816 MiB (the paper's
    # TP+SP+selective 102 MiB x t=8), full recompute 2sbh = 48 MiB.
    assert _layer(GPT3, "fused", "eager", 1, 2048) // MIB == 2736
    assert _layer(GPT3, "fused", "eager", 1, 2048, "selective") // MIB == 816
    assert _layer(GPT3, "fused", "eager", 1, 2048, "full") == 2 * 2048 * 12288 == 48 * MIB


def test_megatron_general_mlp_width_form() -> None:
    # For MLP width f the same derivation gives sb(18h + 4f + 5as) (Megatron's form).
    arch = GPT3.model_copy(update={"intermediate_size": 3 * GPT3.hidden_size + 128})
    b, s, h, f, a = 2, 1024, arch.hidden_size, arch.intermediate_size, arch.num_attention_heads
    assert _layer(arch, "fused", "eager", b, s) == s * b * (18 * h + 4 * f + 5 * a * s) + _stats(arch, b, s)


def test_flash_attention_stores_no_s_by_s_matrix(catalogue) -> None:
    for name in ("gpt3-175b", "llama-3.1-8b", "mistral-7b", "gemma-2-9b", "mixtral-8x7b"):
        arch = catalogue.architecture(name)
        for kernels in ("eager", "fused"):
            flash = [_layer(arch, kernels, "flash", 1, s) for s in (1024, 2048, 4096)]
            # affine in s (gemma2's fp32 (1 + w) vectors are a constant): no s^2 term
            assert flash[2] - 2 * flash[1] == flash[1] - 2 * flash[0], (name, kernels)
            eager = [_layer(arch, kernels, "eager", 1, s) for s in (1024, 2048, 4096)]
            assert eager[2] - 2 * eager[1] > eager[1] - 2 * eager[0]  # eager has one


# Measured per-layer closed forms (HF transformers 5.24, bf16, saved_tensors_hooks), T = b*s:
#   llama family, sdpa:  T (16h + 4ad + 4kd + 8f + 4a + 8)
#   llama family, eager: T (16h + 8ad + 8f + 8) + 6 b a s^2
#   gemma2, eager:       T (36h + 16 + 8ad + 8f) + 16h + 8 b a s^2
def _llama_sdpa(arch: Architecture, b: int, s: int) -> int:
    h, a, k, d, f = arch.hidden_size, arch.num_attention_heads, arch.num_kv_heads, arch.head_dim, arch.intermediate_size
    return b * s * (16 * h + 4 * a * d + 4 * k * d + 8 * f + 4 * a + 8)


def _llama_eager(arch: Architecture, b: int, s: int) -> int:
    h, a, d, f = arch.hidden_size, arch.num_attention_heads, arch.head_dim, arch.intermediate_size
    return b * s * (16 * h + 8 * a * d + 8 * f + 8) + 6 * b * a * s * s


@pytest.mark.parametrize("name", ["llama-2-7b", "llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "qwen2.5-7b"])
@pytest.mark.parametrize(("b", "s"), [(1, 4096), (2, 1024)])
def test_llama_family_layer_matches_measured_closed_form(catalogue, name: str, b: int, s: int) -> None:
    arch = catalogue.architecture(name)
    assert _layer(arch, "eager", "flash", b, s) == _llama_sdpa(arch, b, s)
    assert _layer(arch, "eager", "eager", b, s) == _llama_eager(arch, b, s)


def test_gemma2_layer_matches_measured_closed_form(catalogue) -> None:
    arch = catalogue.architecture("gemma-2-9b")
    b, s = 1, 2048
    h, a, d, f = arch.hidden_size, arch.num_attention_heads, arch.head_dim, arch.intermediate_size
    expected = b * s * (36 * h + 16 + 8 * a * d + 8 * f) + 16 * h + 8 * b * a * s * s
    assert _layer(arch, "eager", "eager", b, s) == expected


def test_swiglu_layer_is_not_gpt_34(catalogue) -> None:
    # A Llama layer does not save sbh(34 + 5as/h): the derived coefficient differs.
    arch = catalogue.architecture("llama-3.1-8b")
    b, s, h, a = 1, 4096, arch.hidden_size, arch.num_attention_heads
    assert _layer(arch, "fused", "eager", b, s) != s * b * h * 34 + 5 * a * s * s * b
    # fused SwiGLU + RMSNorm + GQA: norms 2(eTh + 4T), linear inputs 2eTh, q + repeated k,v + out 4eTad,
    # core softmax e*bas^2, gate/up 2eTf, down input eTf.
    e, d, f = 2, arch.head_dim, arch.intermediate_size
    expected = b * s * (2 * (e * h + 4) + 2 * e * h + 4 * e * a * d + 3 * e * f) + e * b * a * s * s
    assert _layer(arch, "fused", "eager", b, s) == expected


def test_full_recompute_keeps_layer_input_and_peak_rebuilds_one_layer(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    job = Job(seq_len=4096)
    full = activations(arch, job, Plan(gpu="x", recompute="full"))
    none = activations(arch, job, Plan(gpu="x", recompute="none"))
    assert full.per_layer_bytes == 2 * 4096 * arch.hidden_size  # 2sbh
    assert full.layers_bytes == arch.num_layers * 2 * 4096 * arch.hidden_size + 2 * 2 * 4096 * arch.head_dim
    # The backward peak holds one rebuilt layer (its no-recompute set) unless the loss's
    # temporaries are larger.
    assert full.backward_peak_extra_bytes >= none.per_layer_bytes or full.backward_peak_extra_bytes == 8 * 4096 * 128256


def test_loss_keeps_fp32_logits_gib_per_sequence_at_128k_vocab(catalogue) -> None:
    # Llama-3 vocabulary 128,256 at 8k context: the fp32 log-probs alone are 4 s v = 3.9 GiB per
    # sequence, and HF's cross entropy backward adds two more fp32 T x v buffers (measured).
    arch = catalogue.architecture("llama-3.1-8b")
    x = Shape(b=1, s=8192, e=2)
    log_probs = next(t for t in output_terms(arch, "eager", x) if t.name == "loss.log_probs_fp32")
    assert log_probs.num_bytes == 4 * 8192 * 128256
    assert log_probs.num_bytes / 2**30 > 3.9
    result = activations(arch, Job(seq_len=8192), Plan(gpu="x", recompute="full"))
    assert result.backward_peak_extra_bytes == 2 * 4 * 8192 * 128256


def test_activations_scale_linearly_with_micro_batch_without_s_squared(catalogue) -> None:
    arch = catalogue.architecture("qwen2.5-7b")
    one = activations(arch, Job(seq_len=2048), Plan(gpu="x", micro_batch=1))
    four = activations(arch, Job(seq_len=2048), Plan(gpu="x", micro_batch=4))
    assert four.per_layer_bytes == 4 * one.per_layer_bytes


def test_lora_adds_rank_sized_adapter_outputs(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    b, s, r = 1, 1024, 64
    base = _layer(arch, "eager", "flash", b, s)
    lora = _layer(arch, "eager", "flash", b, s, method="lora", lora_rank=r)
    assert lora - base == 7 * 2 * b * s * r  # q, k, v, o, gate, up, down: lora_A output e*T*r each


def test_mixtral_routing_counts_top_k_tokens_per_layer(catalogue) -> None:
    arch = catalogue.architecture("mixtral-8x7b")
    terms = {t.name: t.num_bytes for t in layer_terms(arch, "eager", "flash", Shape(b=1, s=1024, e=2))}
    t, k, h, f = 1024, 2, arch.hidden_size, arch.intermediate_size
    assert terms["moe.gate_up_act_product"] == 4 * 2 * t * k * f
    assert terms["moe.gathered_input"] == terms["moe.expert_output"] == 2 * t * k * h
