"""QLoRA of a MoE model through transformers 5 and bitsandbytes (UNQUANTISED_EXPERTS_STACKS: hf,
deepspeed): BitsAndBytesConfig replaces only nn.Linear modules, and transformers 5 stores every MoE
family's routed experts as fused 3-D parameters, so the experts stay in the 16-bit load dtype, and
PEFT's prepare_model_for_kbit_training casts them to fp32 with every other non-Params4bit parameter
(models/core/memory_behaviours.py cites the code; bitsandbytes#1849).

Before, vramplan counted them at 4 bits: Qwen3-30B-A3B QLoRA on one A100 80 GB under hf read 56 GiB
and "fits"; its experts alone are 29.0 B weights, 108 GiB in fp32.

`test_bitsandbytes_leaves_fused_experts_16_bit` and `test_fp32_experts_run_their_grouped_gemms_in_fp32`
measure the two facts with transformers, torch and bitsandbytes on CPU when they are installed
(skipped otherwise: CI has none of them)."""

from __future__ import annotations

import collections

import pytest

from vramplan.models.architecture.params import layer_groups
from vramplan.models.architecture.quantization import (
    WeightFormat,
    frozen_base_format,
    matrix_bytes,
    unquantised_experts,
    unquantised_experts_note,
)
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import layer_saved_terms
from vramplan.models.memory.model_states import frozen_base_bytes

PLAN = Plan(gpu="a100-sxm-80gb", micro_batch=1)


def _qlora(stack: str, prep: str = "16bit", bits: int = 4) -> Job:
    return Job(method="qlora", stack=stack, qlora_prep=prep, qlora_bits=bits, seq_len=2048)


def _expert_modules(arch):
    group = next(g for g in layer_groups(arch) if g.moe)
    return group.count, [m for m in group.modules if m.copies_per_layer > 1]


def test_only_transformers_bitsandbytes_stacks_keep_moe_experts_16_bit(catalogue) -> None:
    moe, dense = catalogue.architecture("qwen3-30b-a3b"), catalogue.architecture("llama-3.1-8b")
    assert unquantised_experts(moe, _qlora("hf")) and unquantised_experts(moe, _qlora("deepspeed"))
    assert unquantised_experts(moe, _qlora("hf", bits=8))  # LLM.int8 replaces the same nn.Linear modules
    for stack in ("unsloth", "litgpt", "torchtune", "custom"):  # their own quantisation reaches the experts
        assert not unquantised_experts(moe, _qlora(stack))
    assert not unquantised_experts(dense, _qlora("hf"))
    assert not unquantised_experts(moe, Job(method="lora", stack="hf"))
    assert frozen_base_format(moe, _qlora("hf")) == WeightFormat("nf4", double_quant=True, experts=False)
    assert "holds the experts in fp32" in unquantised_experts_note(moe, _qlora("hf", "peft"))
    assert "holds the experts in 16 bits" in unquantised_experts_note(moe, _qlora("hf"))
    assert unquantised_experts_note(moe, _qlora("unsloth")) is None


def test_the_experts_are_held_16_bit_or_fp32_instead_of_nf4(catalogue) -> None:
    """The frozen base differs from the custom stack's (every expert NF4) by exactly the experts:
    their 16-bit (or fp32) bytes in place of their NF4 storage, matrix by matrix."""
    arch = catalogue.architecture("qwen3-30b-a3b")
    layers, experts = _expert_modules(arch)
    nf4 = WeightFormat("nf4", double_quant=True)
    weights = layers * sum(m.copies_per_layer * m.in_features * m.out_features for m in experts)
    stored = layers * sum(m.copies_per_layer * matrix_bytes(nf4, m.in_features, m.out_features) for m in experts)
    assert weights == 28_991_029_248  # 48 layers x 128 experts x 3 x 2048 x 768
    quantised = frozen_base_bytes(arch, _qlora("custom"), "bf16")
    assert frozen_base_bytes(arch, _qlora("hf"), "bf16") - quantised == 2 * weights - stored
    prepared = frozen_base_bytes(arch, _qlora("custom", "peft"), "bf16")
    assert frozen_base_bytes(arch, _qlora("hf", "peft"), "bf16") - prepared == 4 * weights - stored


def test_fp32_experts_keep_their_grouped_gemm_activations_in_fp32(catalogue) -> None:
    """Under PEFT's preparation the experts are fp32 and transformers' grouped_mm casts its input to
    them: the experts' activations double; the rest of the layer is as the custom stack's."""
    arch = catalogue.architecture("qwen3-30b-a3b")
    group = next(g for g in layer_groups(arch) if g.moe)

    def terms(stack: str) -> dict[str, int]:
        return {t.name: t.num_bytes for t in layer_saved_terms(arch, _qlora(stack, "peft"), PLAN, group)}

    hf, custom = terms("hf"), terms("custom")
    expert_terms = ("moe.gathered_input", "moe.gate_up_act_product", "moe.expert_output")
    for name in hf:
        assert hf[name] == (2 * custom[name] if name in expert_terms else custom[name]), name
    assert {t.name: t.num_bytes for t in layer_saved_terms(arch, _qlora("hf"), PLAN, group)} == \
        {t.name: t.num_bytes for t in layer_saved_terms(arch, _qlora("custom"), PLAN, group)}


def test_a_moe_qlora_that_fit_on_one_a100_no_longer_does(catalogue) -> None:
    from vramplan.models.memory.memory import memory_per_gpu

    arch, gpu = catalogue.architecture("qwen3-30b-a3b"), catalogue.gpu("a100-sxm-80gb")
    assert memory_per_gpu(arch, _qlora("custom", "peft"), PLAN, gpu).gpu_fits
    assert not memory_per_gpu(arch, _qlora("hf", "peft"), PLAN, gpu).gpu_fits
    assert memory_per_gpu(arch, _qlora("unsloth"), PLAN, gpu).gpu_fits


def _tiny_moe_configs(transformers):
    common = dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
    return {
        "qwen3_moe": transformers.Qwen3MoeConfig(**common, intermediate_size=512, moe_intermediate_size=128,
                                                 num_experts=8, num_experts_per_tok=2, head_dim=64),
        "mixtral": transformers.MixtralConfig(**common, intermediate_size=512, num_local_experts=8, num_experts_per_tok=2),
    }


def test_bitsandbytes_leaves_fused_experts_16_bit(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", minversion="5")
    pytest.importorskip("bitsandbytes")
    pytest.importorskip("accelerate")
    config = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                             bnb_4bit_compute_dtype=torch.bfloat16)
    for name, model_config in _tiny_moe_configs(transformers).items():
        transformers.AutoModelForCausalLM.from_config(model_config, dtype=torch.bfloat16).save_pretrained(tmp_path / name)
        model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / name, quantization_config=config, device_map="cpu")
        kinds = {n: (type(p).__name__, p.dtype) for n, p in model.named_parameters() if "layers.0." in n}
        assert kinds["model.layers.0.self_attn.q_proj.weight"][0] == "Params4bit", name
        experts = {n: kind for n, kind in kinds.items() if ".experts." in n}
        assert experts and all(kind == ("Parameter", torch.bfloat16) for kind in experts.values()), (name, experts)


def test_fp32_experts_run_their_grouped_gemms_in_fp32() -> None:
    """What the experts' forward saves under bf16 autocast: with fp32 (PEFT-prepared) weights every
    floating tensor it saves, but the weights themselves, is fp32 and twice the bytes of the bf16 run."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", minversion="5")
    model = transformers.AutoModelForCausalLM.from_config(_tiny_moe_configs(transformers)["qwen3_moe"], dtype=torch.bfloat16)
    experts, tokens = model.model.layers[0].mlp.experts, 64

    def saved_bytes(dtype) -> dict:
        experts.to(dtype)
        weights = {p.data_ptr() for p in experts.parameters()}
        found: collections.Counter = collections.Counter()

        def pack(tensor):
            if tensor.is_floating_point() and tensor.data_ptr() not in weights:
                found[tensor.dtype] += tensor.numel() * tensor.element_size()
            return tensor

        hidden = torch.randn(tokens, 256, dtype=torch.bfloat16, requires_grad=True)
        index = torch.randint(0, 8, (tokens, 2))
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            experts(hidden, index, torch.rand(tokens, 2, dtype=torch.bfloat16))
        return found

    half, full = saved_bytes(torch.bfloat16), saved_bytes(torch.float32)
    expert_half = half[torch.bfloat16] - 2 * tokens * 2  # less the bf16 routing weights, saved in both runs
    assert full[torch.float32] == 2 * expert_half and full[torch.bfloat16] == 2 * tokens * 2
