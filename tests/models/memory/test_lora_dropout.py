"""PEFT LoRA with lora_dropout > 0 (issue 32's false fit): every adapted linear runs
lora_B(lora_A(dropout(x))) (peft/tuners/lora/layer.py Linear.forward), so it keeps its own
dropped-out copy of its input (bf16) and a 1-byte mask; with dropout 0 the adapters share the base
linear's input. A CPU probe with PEFT 0.21.2 and torch 2.13.0 (saved_tensors_hooks, a 3-linear
block with in-widths 256, 256, 512, 512 tokens, bf16) saw exactly one extra 2-byte copy per
adapted module: 1,048,576 bytes = 2 x 512 x (256 + 256 + 512); CUDA's native_dropout keeps its
bool mask as well."""

from __future__ import annotations

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations


def test_dropout_adds_each_adapters_input_copy_and_mask(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", recompute="none")
    without = activations(arch, Job(method="lora", seq_len=4096), plan)
    with_dropout = activations(arch, Job(method="lora", seq_len=4096, lora_dropout=0.05), plan)
    inputs = 6 * 4096 + 14336  # q, k, v, o, gate, up read h = 4096; down reads f = 14336 (all-linear)
    assert with_dropout.layers_bytes - without.layers_bytes == 32 * (2 + 1) * 4096 * inputs  # 15.3 GB
    assert {t.name for t in with_dropout.terms} >= {"lora.dropout_outputs", "lora.dropout_masks"}


def test_checkpointed_layers_keep_only_their_input_whatever_the_dropout(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", recompute="full")
    assert activations(arch, Job(method="lora", seq_len=4096), plan).layers_bytes == activations(
        arch, Job(method="lora", seq_len=4096, lora_dropout=0.1), plan).layers_bytes


def test_litgpt_shares_one_dropout_across_its_fused_qkv_adapters(catalogue) -> None:
    """litgpt runs q, k and v as one linear with one LoRA dropout (litgpt/lora.py LoRAQKVLinear.forward:
    `F.linear(self.lora_dropout(x), self.lora_A)`): q + v adapters keep one dropped-out input, not two
    (its resource table's LoRA rows read 6-9% high with two)."""
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", recompute="none")

    def extra(stack: str) -> int:
        base = Job(method="lora", seq_len=4096, lora_targets=("q_proj", "v_proj"), stack=stack)
        dropped = base.model_copy(update={"lora_dropout": 0.05})
        return activations(arch, dropped, plan).layers_bytes - activations(arch, base, plan).layers_bytes

    assert extra("hf") == 32 * 3 * 4096 * 2 * 4096  # PEFT: q_proj and v_proj each keep a copy of x
    assert extra("litgpt") == 32 * 3 * 4096 * 4096  # one copy for the fused qkv
