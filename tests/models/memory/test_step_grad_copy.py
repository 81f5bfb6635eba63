"""Megatron's optimizer step copies a 16-bit gradient buffer to fp32 (models/memory/model_states.py
step_grad_copy_bytes, models/core/stack_behaviour.py STEP_FP32_GRAD_COPY_STACKS), and the rank's
peak is the larger of its activation peak and its step (models/memory/memory.py MemoryBreakdown).

Read at NVIDIA/Megatron-LM@d98e8a64: megatron/core/optimizer/optimizer.py
Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads L1097 `main_param.grad =
model_param.main_grad.float()` (every fp16/bf16 parameter that requires a gradient), called by
prepare_grads L751 before optimizer.step() L786; distrib_optimizer.py L2792 `shard_main_param.grad =
shard_model_grad.float()` (the rank's shard only); both freed by zero_grad(set_to_none=True) (L59-70
`setattr(param, grad_attr, None)`) at the next train_step's start (megatron/training/training.py
L3044), before its forward. Tensor.float() is self.to(torch.float32), which returns self when the
dtype already matches: an fp32 buffer (param_and_grad_buffer.py L924, grad_reduce_in_fp32 =
accumulate_allreduce_grads_in_fp32, on for bf16 unless --grad-reduce-in-bf16: arguments.py
L1204-1217; off for --fp16 unless given) is not copied.

Llama 3.1 8B has 8,030,261,248 parameters: embedding and lm_head 2 x 128256 x 4096 = 1,050,673,152,
32 layers of 4096^2 (q) + 2 x 4096 x 1024 (k, v) + 4096^2 (o) + 3 x 4096 x 14336 (MLP) + 2 x 4096
(norms) = 218,112,000, and the final norm's 4096."""

from __future__ import annotations

import pytest
from measured_peaks import breakdown, job_and_plan, load_runs, model_cell

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.model_states import model_states, step_grad_copy_bytes

LLAMA_8B_PARAMS = 2 * 128256 * 4096 + 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 4096


def _job(stack: str, **fields) -> Job:
    return Job(**with_preset({"stack": stack, "seq_len": 4096, **fields}, load_stacks()))


def test_the_hand_count() -> None:
    assert LLAMA_8B_PARAMS == 8_030_261_248


@pytest.mark.parametrize(("precision", "accounting", "zero", "num_gpus", "copy_bytes"), [
    ("fp16", "zero", 0, 1, 4 * LLAMA_8B_PARAMS),  # Float16Optimizer: every parameter's fp32 .grad
    ("fp16", "zero", 0, 8, 4 * LLAMA_8B_PARAMS),  # DDP replicas: each copies the whole model
    ("fp16", "zero", 1, 8, 4 * (LLAMA_8B_PARAMS // 8)),  # distributed optimizer: its shard (8 divides P)
    ("bf16", "zero", 1, 8, 4 * (LLAMA_8B_PARAMS // 8)),  # --grad-reduce-in-bf16
    ("fp8", "zero", 1, 8, 4 * (LLAMA_8B_PARAMS // 8)),  # --bf16 --fp8-format hybrid --grad-reduce-in-bf16
    ("fp16", "hf", 0, 1, 0),  # --accumulate-allreduce-grads-in-fp32: .float() returns the fp32 buffer
    ("bf16", "hf", 1, 8, 0),  # bf16's default
    ("fp32", "zero", 0, 1, 0),  # FP32Optimizer steps the buffer itself
])
def test_megatron_copies_a_16_bit_buffer_at_the_step(catalogue, precision, accounting, zero, num_gpus, copy_bytes) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=num_gpus, zero=zero, precision=precision)
    assert step_grad_copy_bytes(arch, _job("megatron", accounting=accounting), plan) == copy_bytes


def test_tensor_and_pipeline_ranks_copy_their_own_share(catalogue) -> None:
    """TP 2 x PP 2: each rank copies the parameters it holds (its model states' own count)."""
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, tp=2, pp=2, zero=0, precision="fp16")
    job = _job("megatron", accounting="zero")
    for stage in (0, 1):
        held = model_states(arch, job, plan, stage).num_trainable_params
        assert step_grad_copy_bytes(arch, job, plan, stage) == 4 * held


def test_other_stacks_and_an_offloaded_optimizer_do_not(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1, precision="fp16")
    assert step_grad_copy_bytes(arch, _job("hf", accounting="zero"), plan) == 0
    offloaded = plan.model_copy(update={"offload": "optimizer"})  # HybridDeviceOptimizer: not read
    assert step_grad_copy_bytes(arch, _job("megatron", accounting="zero"), offloaded) == 0


def test_the_copy_decides_the_fit_of_a_single_h200(catalogue) -> None:
    """Llama 3.1 8B, fp16 Megatron with an fp16 gradient buffer, ZeRO-0 and full recompute on one
    H200: the states (2 + 2 + 12 = 16 bytes a parameter, 119.7 GiB) and the activations fit under the
    limit, but the step's fp32 copy (4 bytes a parameter, 29.9 GiB) does not: the step is the peak."""
    arch = catalogue.architecture("llama-3.1-8b")
    gpu = catalogue.gpu("h200-sxm-141gb")
    plan = Plan(gpu=gpu.name, num_gpus=1, zero=0, precision="fp16", recompute="full")
    memory = memory_per_gpu(arch, _job("megatron", accounting="zero"), plan, gpu)
    copy = memory.states.step_grad_copy_bytes
    assert copy == 4 * LLAMA_8B_PARAMS
    assert memory.states.gpu_bytes == 16 * LLAMA_8B_PARAMS
    assert memory.activation_peak_bytes <= memory.limit_bytes < memory.step_peak_bytes
    assert memory.step_peak_bytes == memory.states.gpu_bytes + memory.overhead.total_bytes + copy
    assert memory.total_bytes == memory.step_peak_bytes and not memory.fits
    # With --accumulate-allreduce-grads-in-fp32 (accounting "hf") the buffer is fp32 and not copied:
    # 4 bytes of gradients a parameter during the backward instead, 18 in all
    fp32_buffer = memory_per_gpu(arch, _job("megatron", accounting="hf"), plan, gpu)
    assert fp32_buffer.states.step_grad_copy_bytes == 0
    assert fp32_buffer.total_bytes == fp32_buffer.activation_peak_bytes


def test_the_measured_runs_with_a_16_bit_buffer_peak_in_their_backward(catalogue) -> None:
    """The Megatron runs of tests/data/measured_peaks.csv with a 16-bit gradient buffer (GPT 345M
    fp16 with Float16Optimizer, Qwen3-30B-A3B bf16 with --grad-reduce-in-bf16 and the distributed
    optimizer): their copies stay under the activations' peak, so the step's peak moves none of them."""
    checked = 0
    for run in load_runs():
        if run.cells["stack"] != "megatron":
            continue
        job, plan = job_and_plan(run.cells)
        memory = breakdown(run, catalogue)
        copy = step_grad_copy_bytes(catalogue.architecture(model_cell(run.cells)), job, plan, memory.stage)
        assert copy == memory.states.step_grad_copy_bytes, run.id
        if copy:
            checked += 1
            assert copy < memory.activations.total_bytes, run.id
            assert memory.total_bytes == memory.activation_peak_bytes, run.id
    assert checked >= 5


def test_deepspeed_casts_one_step_unit_to_fp32(catalogue) -> None:
    """DeepSpeed's step flattens a step unit's 16-bit gradients and casts them to fp32 (2 + 4 bytes an
    element, both live at the cast): stage 1/2 the rank's partition (stage_1_and_2.py step), stage 3 a
    sub-group of at most sub_group_size = 1e9 elements (stage3.py _prepare_fp32_grad_for_sub_group).
    Measured on CPU with DeepSpeed 0.19.8 (tests/tools/deepspeed_step_probe.py): 12 bytes an element of
    the unit above the step's start under torch's CPU Adam, whose denominator adds two fp32 temporaries
    that DeepSpeed's FusedAdam on CUDA does not make; a sub-group of 100,000 cut it to one parameter's."""
    arch = catalogue.architecture("llama-3.1-8b")
    job = _job("deepspeed", accounting="zero")
    eight = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1, precision="bf16")
    for zero in (1, 2):
        plan = eight.model_copy(update={"zero": zero})
        assert step_grad_copy_bytes(arch, job, plan) == 6 * -(-LLAMA_8B_PARAMS // 8)
    two = eight.model_copy(update={"num_gpus": 2, "zero": 3})  # a 4.0B partition: one 1e9 sub-group at a time
    assert step_grad_copy_bytes(arch, job, two) == 6 * 10**9
    assert step_grad_copy_bytes(arch, job, eight.model_copy(update={"num_gpus": 16, "zero": 3})) == 6 * -(-LLAMA_8B_PARAMS // 16)
    assert step_grad_copy_bytes(arch, job, eight.model_copy(update={"offload": "optimizer"})) == 0  # the cast is on the host
    assert step_grad_copy_bytes(arch, job, eight.model_copy(update={"zero": 0})) == 0  # DeepSpeed's ZeRO optimizer only
