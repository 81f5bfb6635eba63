"""The stack's fused attention kernel (models/time/attention_kernel.py, catalogues/stacks.csv
`attention_kernel`): Transformer Engine's cuDNN attention in the megatron stack on Hopper and
Blackwell, FlashAttention-2's calibrated speed everywhere else."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.stack_columns import assert_stack_column

from vramplan.models.core.setup import Job, Plan
from vramplan.models.time import attention_kernel
from vramplan.models.time.attention_kernel import (
    attention_flops_per_token,
    attention_saved_flops_per_token,
    runs_cudnn,
)
from vramplan.models.time.flops import forward_flops_per_token
from vramplan.models.time.performance import compute_time_s

CAT = packaged_catalogue()
LLAMA_8B = CAT.architecture("llama-3.1-8b")
MEGATRON = Job(seq_len=8192, stack="megatron", kernels="fused", accounting="hf")
TORCHTITAN = Job(seq_len=8192, stack="torchtitan")
H100 = CAT.gpu("h100-sxm-80gb")


def test_every_stack_names_its_attention_kernel() -> None:
    """catalogues/stacks.csv `attention_kernel`, with the code that runs it in each row's source."""
    assert_stack_column("attention_kernel", {
        "hf": "flash2", "deepspeed": "flash2", "megatron": "cudnn", "torchtitan": "flash2",
        "torchtune": "flash2", "litgpt": "flash2", "unsloth": "flash2", "custom": "flash2"})


def test_cudnn_runs_where_transformer_engine_selects_it() -> None:
    """TE prefers FusedAttention at compute capability 9.0+: Hopper and Blackwell, not Ampere; eager
    (materialised) attention is no fused kernel at all."""
    assert runs_cudnn(MEGATRON, H100) and runs_cudnn(MEGATRON, CAT.gpu("b200-180gb"))
    assert not runs_cudnn(MEGATRON, CAT.gpu("a100-sxm-80gb"))
    assert not runs_cudnn(TORCHTITAN, H100)
    assert not runs_cudnn(Job(seq_len=8192, stack="megatron", kernels="fused", attention="eager"), H100)


@pytest.mark.parametrize(("recompute", "layers", "recomputed_share"), [
    ("none", None, 0.0), ("selective", None, 1.0), ("full", None, 1.0), ("full", 8, 0.25)])
def test_attention_flops_are_the_forward_recomputed_and_twice_it_backward(recompute, layers, recomputed_share) -> None:
    """Forward once plus what the recompute re-runs (selective: the attention; full: its share of the
    layers), the backward twice the forward."""
    plan = Plan(gpu=H100.name, num_gpus=8, recompute=recompute, recompute_layers=layers)
    attention = forward_flops_per_token(LLAMA_8B, 8192)[1]
    forward, backward = attention_flops_per_token(LLAMA_8B, MEGATRON, plan)
    assert backward == 2 * attention
    assert forward == pytest.approx(attention * (1 + recomputed_share), rel=1e-6)


def test_cudnn_saves_the_flash_attention_3_papers_share() -> None:
    """FA3 paper Figs. 5-6 (H100, head dim 128, 8k): 333 -> 529 TFLOPS forward, 318 -> 518 backward;
    without recompute the attention's time falls to 0.62 of FlashAttention-2's (1.62x)."""
    plan = Plan(gpu=H100.name, num_gpus=8)
    attention = forward_flops_per_token(LLAMA_8B, 8192)[1]
    saved = attention_saved_flops_per_token(LLAMA_8B, MEGATRON, plan, H100)
    assert 1 - saved / (3 * attention) == pytest.approx((333 / 529 + 2 * 318 / 518) / 3, rel=1e-9)
    assert 3 * attention / (3 * attention - saved) == pytest.approx(1.62, abs=0.01)
    assert attention_saved_flops_per_token(LLAMA_8B, TORCHTITAN, plan, H100) == 0.0


def test_compute_time_is_the_same_on_every_layout_of_a_count() -> None:
    """The saving depends on the model, the recompute and the GPU, not the layout: the solver's
    compute tables keep one compute time per count (solver/space_tables.py)."""
    def seconds(**layout: object) -> float:
        plan = Plan(gpu=H100.name, num_gpus=8, micro_batch=8 * int(layout.get("tp", 1)) * int(layout.get("pp", 1)) // 8,
                    **layout)
        return compute_time_s(LLAMA_8B, MEGATRON, plan, H100)
    assert seconds(tp=2) == pytest.approx(seconds(pp=2), rel=1e-12)


def test_the_megatron_8b_h100_run_gains_a_tenth(monkeypatch) -> None:
    """Megatron-Bridge 25.11 Llama 3 8B FP8 on 8 H100 (attention 28% of its predicted compute before):
    the compute falls by 11%, the prediction from 0.69 to 0.77 of the measured 14,451 tokens/s/GPU."""
    plan = Plan(gpu=H100.name, num_gpus=8, zero=1, micro_batch=1, grad_accum=16, recompute="full",
                recompute_layers=5, precision="fp8")
    cudnn = compute_time_s(LLAMA_8B, MEGATRON, plan, H100)
    monkeypatch.setattr(attention_kernel, "runs_cudnn", lambda job, gpu: False)
    flash = compute_time_s(LLAMA_8B, MEGATRON, plan, H100)
    assert cudnn / flash == pytest.approx(0.89, abs=0.01)
