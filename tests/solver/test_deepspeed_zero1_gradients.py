"""DeepSpeed's ZeRO-1 keeps only the rank's gradient partition when a step has one micro-batch, and
every gradient whole while it accumulates (models/core/stack_behaviour.py HOOK_REDUCED_ZERO1_STACKS).

What the code does (deepspeedai/DeepSpeed edaa72212 deepspeed/runtime/zero/stage_1_and_2.py), with
the `overlap_comm: true` that launch/deepspeed.py writes: the gradient hooks exist (L639-641),
process_gradients reduces `if self.partition_gradients or self.overlap_comm` (L1764) through
reduce_ready_partitions_and_remove_grads, which for stage 1 acts only at the accumulation boundary
(L1768): the gradient is copied into the IPG bucket and its own tensor freed, the partition's share
kept in grads_in_partition (L1665-1680), or sent to the host under cpu_offload (L1650-1663). The
ZeRO paper's stage 1 (arXiv:1910.02054 Fig. 1, P_os: 2 + 2 + K/N bytes a parameter) holds the
gradients whole, as Megatron's distributed optimizer does (its contiguous grad buffer), so the
megatron and custom stacks keep that accounting.

Checked on the real implementation: tests/tools/deepspeed_zero1_probe.py runs DeepSpeed 0.19.8 on CPU
(gloo, 2 ranks) with that config; at accumulation 1 no param.grad is left after the backward and the
reduced partition holds P / 2 elements, at accumulation 3 every gradient is held whole after the first
two micro-batches, and with offload "optimizer" none stays on the device at accumulation 1."""

from __future__ import annotations

import pytest

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.model_states import model_states, unsharded_accumulation_bytes
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery

LLAMA_8B_PARAMS = 8_030_261_248  # Hugging Face meta-llama/Llama-3.1-8B num_parameters()


def _job(stack: str, **fields) -> Job:
    return Job(**with_preset({"stack": stack, "seq_len": 2048, "method": "full", **fields}, load_stacks()))


def _gradients(catalogue, stack: str, **plan_fields) -> int:
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, zero=1, micro_batch=1, **plan_fields)
    return model_states(catalogue.architecture("llama-3.1-8b"), _job(stack), plan).gradients_bytes


@pytest.mark.parametrize("stack", ["deepspeed", "hf"])
def test_one_micro_batch_keeps_the_partition_accumulating_keeps_them_whole(catalogue, stack) -> None:
    partition = 2 * -(-LLAMA_8B_PARAMS // 8)  # bf16 gradients, DeepSpeed pads the flat partition
    assert _gradients(catalogue, stack, grad_accum=1) == partition
    assert _gradients(catalogue, stack, grad_accum=4) == 2 * LLAMA_8B_PARAMS
    # under ZeRO-Offload the partition goes to the host, what accumulates stays on the GPU
    assert _gradients(catalogue, stack, grad_accum=1, offload="optimizer") == 0
    assert _gradients(catalogue, stack, grad_accum=4, offload="optimizer") == 2 * LLAMA_8B_PARAMS


@pytest.mark.parametrize("stack", ["megatron", "custom"])
def test_the_papers_stage_1_holds_them_whole(catalogue, stack) -> None:
    assert _gradients(catalogue, stack, grad_accum=1) == _gradients(catalogue, stack, grad_accum=4)
    assert _gradients(catalogue, stack, grad_accum=1) >= 2 * LLAMA_8B_PARAMS


def test_expert_parameters_keep_their_own_groups_partition(catalogue) -> None:
    """A MoE full fine-tune's experts are partitioned over the expert-data-parallel group, its dense
    parameters over the whole data-parallel group; accumulation adds each group's whole less its part."""
    arch = catalogue.architecture("qwen3-30b-a3b")
    job = _job("deepspeed")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=16, zero=1, ep=4, micro_batch=1, grad_accum=1)
    states = model_states(arch, job, plan)
    whole = model_states(arch, job, plan.model_copy(update={"zero": 0})).gradients_bytes  # the rank's EP share
    assert states.gradients_bytes < whole // 4  # dense over 16 ranks, experts over 4
    accumulating = plan.model_copy(update={"grad_accum": 2})
    assert states.gradients_bytes + unsharded_accumulation_bytes(arch, job, accumulating) == whole
    assert model_states(arch, job, accumulating).gradients_bytes == whole


def test_both_engines_carry_it_and_agree(catalogue) -> None:
    """Global batches of 8 and 64 on up to 8 GPUs: among the best plans some accumulate, some do not;
    CP-SAT and brute force agree, and each plan's gradients are the regime's."""
    seen = set()
    for global_batch in (8, 64):
        query = SolveQuery(model="llama-3.1-8b", job=_job("deepspeed", seq_len=4096), gpus=("h100-sxm-80gb",),
                           max_gpus=8, global_batch=global_batch, pins=Pins(zero=1), top_k=3, objective="cost")
        cpsat = solve(catalogue, query)  # every plan is re-checked in exact bytes (solver/verify.py)
        brute = solve(catalogue, query.model_copy(update={"engine": "brute", "time_limit_s": 600}))
        assert cpsat.status == brute.status == "optimal"
        assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
        for plan in cpsat.plans:
            rank_params = plan.memory.weights_bytes // 2  # ZeRO-1 keeps the rank's (TP share of the) bf16 weights whole
            seen.add(plan.plan.grad_accum > 1)
            if plan.plan.grad_accum > 1:
                assert plan.memory.gradients_bytes == 2 * rank_params
            else:
                assert plan.memory.gradients_bytes == 2 * -(-rank_params // (plan.plan.dp * plan.plan.cp))
    assert seen == {True, False}
