"""torchtitan's FSDP under pipeline parallelism keeps each stage's parameters gathered and its
gradients unsharded all step (models/memory/model_states.py keeps_stage_gathered; issue 32, where
FSDP + PP runs were predicted at 0.26-0.49x of their measured peaks)."""

from __future__ import annotations

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import BYTES_PER_GIB
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.model_states import model_states
from vramplan.models.memory.parallel_states import rank_params

TORCHTITAN = Job(**with_preset({"seq_len": 8192, "stack": "torchtitan"}, load_stacks()))
# torchtitan benchmarks/llama3_h100_202412_torchtitan.md Table 5: Llama 3.1 405B, 512 H100 (FSDP 8,
# TP 8, PP 8), local batch 32 (micro-batch 1), seq 8192, full AC, Float8, 1F1B: 82.5 GiB reserved.
PLAN = Plan(gpu="h100-sxm-80gb", num_gpus=512, tp=8, pp=8, zero=3, micro_batch=1, grad_accum=32, recompute="full",
            sequence_parallel=True, precision="fp8")
MEASURED_GIB = 82.5


def test_the_stage_is_gathered_and_its_gradients_unsharded(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-405b")
    with_pp = model_states(arch, TORCHTITAN, PLAN)
    other_stack = model_states(arch, TORCHTITAN.model_copy(update={"stack": "custom"}), PLAN)
    stage = rank_params(arch, 8, 8, 1, 0).total
    assert with_pp.weights_bytes - other_stack.weights_bytes == 2 * stage  # the bf16 stage, gathered
    assert with_pp.gradients_bytes - other_stack.gradients_bytes == 4 * stage  # fp32 reduce dtype, unsharded
    no_pp = PLAN.model_copy(update={"pp": 1, "num_gpus": 64})
    assert model_states(arch, TORCHTITAN, no_pp).gradients_bytes == model_states(
        arch, TORCHTITAN.model_copy(update={"stack": "custom"}), no_pp).gradients_bytes


def test_zero_2_accumulates_the_stage_unsharded_too(catalogue) -> None:
    """The pipeline stage's no-sync backwards do not depend on the reshard policy: ZeRO-2 (whole
    parameters, fsdp_reshard_after_forward never) accumulates the stage's gradients unsharded as ZeRO-3
    does. Found by a metamorphic review: Qwen3-32B on 16 H100 with PP 4 read 4.0 GiB of gradients under
    ZeRO-2 against 36.0 under ZeRO-3, and ZeRO-2 'fit'."""
    arch = catalogue.architecture("qwen3-32b")
    job = Job(**with_preset({"seq_len": 4096, "stack": "torchtitan"}, load_stacks()))
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=16, pp=4, zero=2, recompute="full", micro_batch=1, grad_accum=8)
    zero2, zero3 = model_states(arch, job, plan), model_states(arch, job, plan.model_copy(update={"zero": 3}))
    other_stack = model_states(arch, job.model_copy(update={"stack": "custom"}), plan)
    stage = rank_params(arch, 1, 4, 1, 0).total
    assert zero2.gradients_bytes - other_stack.gradients_bytes == 4 * stage  # fp32, unsharded, beside the partition
    assert zero2.gradients_bytes == zero3.gradients_bytes
    assert zero2.weights_bytes == other_stack.weights_bytes < zero3.weights_bytes  # whole parameters once
    assert not memory_per_gpu(arch, job, plan, catalogue.gpu("h100-sxm-80gb")).gpu_fits


def test_torchtitans_405b_run_is_predicted_at_0_72_not_0_3(catalogue) -> None:
    """Predicted / measured: 0.72 (59.0 of 82.5 GiB); 0.30 before. What is still missing is not
    modelled: torch.compile and AsyncTP's symmetric-memory buffers, FSDP's all-gather and
    reduce-scatter staging of whole stages (kept in docs/fidelity.md's misses)."""
    gpu = catalogue.gpu("h100-sxm-80gb")
    memory = memory_per_gpu(catalogue.architecture("llama-3.1-405b"), TORCHTITAN, PLAN, gpu)
    ratio = memory.total_bytes / (MEASURED_GIB * BYTES_PER_GIB)
    assert 0.68 < ratio < 0.76
