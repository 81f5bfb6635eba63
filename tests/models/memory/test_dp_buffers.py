"""The data-parallel buffers of ZeRO-0/1/2 per stack (models/memory/dp_buffers.py): torch DDP's
bucket copy of the gradients, DeepSpeed ZeRO-1/2's two IPG buffers (deepspeedai/DeepSpeed v0.19.5
runtime/zero/stage_1_and_2.py setup_buckets L2467-2489), nothing for Megatron's in-place buffers or
DeepSpeed's ZeRO-0, FSDP's unit gradient and reduce-scatter input under ZeRO-2."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.dp_buffers import dp_buffer_bytes, fsdp_gradient_bytes
from vramplan.models.memory.fsdp import units, working_set_bytes
from vramplan.models.memory.model_states import model_states
from vramplan.models.memory.overhead import overhead
from vramplan.models.memory.zero3_live import REDUCE_BUCKET_ELEMENTS


def _plan(zero: int, num_gpus: int = 8, **kw) -> Plan:
    return Plan(gpu="h100-sxm-80gb", num_gpus=num_gpus, zero=zero, recompute="full", **kw)


@pytest.mark.parametrize("method", ["full", "lora"])
@pytest.mark.parametrize("zero", [1, 2])
def test_deepspeed_zero12_holds_two_ipg_buffers_whatever_trains(catalogue, method: str, zero: int) -> None:
    arch = catalogue.architecture("llama-2-7b")
    job = Job(stack="deepspeed", method=method, **({} if method == "full" else {"lora_rank": 8}))
    assert overhead(arch, job, _plan(zero)).comm_buckets_bytes == 2 * REDUCE_BUCKET_ELEMENTS * 2
    assert dp_buffer_bytes(arch, job, _plan(zero, precision="fp32")) == 2 * REDUCE_BUCKET_ELEMENTS * 4


def test_deepspeed_zero0_and_megatron_hold_nothing_during_the_backward(catalogue) -> None:
    """DeepSpeed's ZeRO-0 all-reduces after the backward (engine.py allreduce_gradients); Megatron
    reduces and gathers in place in its contiguous grad and param buffers (param_and_grad_buffer.py)."""
    arch = catalogue.architecture("llama-2-7b")
    assert dp_buffer_bytes(arch, Job(stack="deepspeed", method="full"), _plan(0)) == 0
    for zero in (0, 1):
        assert overhead(arch, Job(stack="megatron", method="full"), _plan(zero)).comm_buckets_bytes == 0


@pytest.mark.parametrize(("stack", "method"), [("hf", "full"), ("hf", "lora"), ("unsloth", "lora"), ("torchtitan", "full")])
def test_torch_ddp_buckets_are_a_second_copy_of_the_gradients(catalogue, stack: str, method: str) -> None:
    """gradient_as_bucket_view False (torch's default, nobody sets it): the Reducer's buckets copy
    every trainable gradient, as many bytes as the ZeRO-0 gradient pillar."""
    arch = catalogue.architecture("llama-2-7b")
    job = Job(stack=stack, method=method, **({} if method == "full" else {"lora_rank": 8}))
    plan = _plan(0)
    assert dp_buffer_bytes(arch, job, plan) == model_states(arch, job, plan).gradients_bytes > 0


def test_fsdp_zero2_holds_the_unit_gradient_and_the_previous_reduce_scatter_input(catalogue) -> None:
    """torchtitan's ZeRO-2 (reshard_after_forward never): the gathered parameters are the states'
    whole weights, so the buffers are ZeRO-3's working set less the gathered units."""
    arch = catalogue.architecture("llama-3.1-8b")
    job = Job(stack="torchtitan", method="full")
    plan = _plan(2)
    _, backward = units(arch, job, plan)
    expected = max(u.grad_bytes + (backward[i - 1].reduce_bytes if i else 0) for i, u in enumerate(backward))
    assert dp_buffer_bytes(arch, job, plan) == expected > 0
    assert expected < working_set_bytes(arch, job, plan.model_copy(update={"zero": 3}))
    # torchtune's ZeRO-0 on several GPUs runs FSDP: the same buffers
    tune = Job(stack="torchtune", method="full")
    assert dp_buffer_bytes(arch, tune, _plan(0)) == fsdp_gradient_bytes(arch, tune, _plan(0))


def test_hf_zero2_is_bounded_by_the_larger_of_its_two_engines(catalogue) -> None:
    """FSDP2, or DeepSpeed with offload "optimizer" or EP, which the overhead's key does not carry."""
    arch = catalogue.architecture("llama-2-7b")
    job = Job(stack="hf", method="full")
    plan = _plan(2)
    assert dp_buffer_bytes(arch, job, plan) == max(fsdp_gradient_bytes(arch, job, plan), 2 * REDUCE_BUCKET_ELEMENTS * 2)
    assert dp_buffer_bytes(arch, job, _plan(0, tp=2)) == 0  # ZeRO-0 with TP over replicas: DeepSpeed's


@pytest.mark.parametrize(("stack", "zero"), [("hf", 0), ("unsloth", 0), ("deepspeed", 1), ("hf", 2), ("torchtitan", 2),
                                             ("torchtune", 2), ("megatron", 1)])
def test_the_buffers_depend_only_on_what_the_solver_keys_them_by(catalogue, stack: str, zero: int) -> None:
    """solver/tables.py `_states_mib` keys the overhead by (zero, precision, tp, communicators,
    zero_group > 1, pp > 1): not the data-parallel size, micro-batch, accumulation, recompute or offload."""
    arch = catalogue.architecture("llama-2-7b")
    job = Job(stack=stack, method="full")
    base = dp_buffer_bytes(arch, job, _plan(zero))
    variants = [_plan(zero, num_gpus=64), _plan(zero, micro_batch=4, grad_accum=8),
                _plan(zero).model_copy(update={"recompute": "none"})]
    if zero:
        variants.append(_plan(zero, offload="optimizer"))
    for variant in variants:
        assert dp_buffer_bytes(arch, job, variant) == base
    assert dp_buffer_bytes(arch, job, _plan(zero, num_gpus=1)) == 0
