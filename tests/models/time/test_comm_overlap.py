"""What each phase of a step can hide, NCCL's ring latency, and partial full recompute.

- NCCL's ring model (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel): all-gather /
  reduce-scatter latency = baseLat[Ring][Simple] 8.4 us + (nRanks - nNodes) NVLink steps x 3.4 us
  + (nNodes - 1) network steps x 9.6 us.
- FSDP / ZeRO-3 prefetches the next layer's gather during the forward, so forward gathers hide
  behind forward compute only; backward gathers and reduce-scatters behind the backward.
- Megatron's LinearWithGradAccumulationAndAsyncCommunication (megatron/core/tensor_parallel/
  layers.py) issues the backward's TP all-gather / reduce-scatter with async_op=True beside the
  grad-input and weight-gradient GEMMs: only the forward's TP collectives stay exposed.
- Megatron --recompute-num-layers N: N of the layers are checkpointed, so the recompute re-runs
  N / L of the forward (and of its TP collectives).
"""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.architecture.params import count_params
from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import BYTES_PER_GB
from vramplan.models.time.calibration import COMMUNICATION_EFFICIENCY
from vramplan.models.time.collectives import group_nodes, ring_latency_s
from vramplan.models.time.flops import plan_flops_per_token, training_flops_per_token
from vramplan.models.time.parallel_time import tp_time_s
from vramplan.models.time.performance import (
    communication_phases_s,
    compute_time_s,
    dp_traffic,
    dp_windows_s,
    exposed_communication_s,
    once_a_step_window_share,
    overlap_windows_s,
    performance,
)
from vramplan.solver.choice_keys import RecomputeChoice
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.space_build import build_space
from vramplan.solver.space_domains import PARTIAL_RECOMPUTE_SHARES

H100 = packaged_catalogue().gpu("h100-sxm-80gb")
LLAMA_405B = packaged_catalogue().architecture("llama-3.1-405b")
LLAMA_70B = packaged_catalogue().architecture("llama-3.1-70b")


def test_ring_latency_is_nccl_tuning_model() -> None:
    assert ring_latency_s(1, 1) == 0.0
    assert ring_latency_s(8, 1) == pytest.approx((8.4 + 7 * 3.4) * 1e-6)
    # 2,048 DP ranks of a TP2 layout: 4 per 8-GPU node, 512 nodes.
    assert group_nodes(2048, 2, 8) == 512
    assert ring_latency_s(2048, 512) == pytest.approx((8.4 + 1536 * 3.4 + 511 * 9.6) * 1e-6)
    assert group_nodes(4, 2, 8) == 1  # the whole group inside one instance


def test_zero3_forward_gathers_hide_behind_the_forward_only() -> None:
    """2,048-way ZeRO-3 on 405B with full recompute over a 60 GB/s network: the forward's gathers
    (67 ms of bytes at 0.8 x 60 GB/s + 10 ms of ring latency a layer) outlast the forward (59 ms a
    layer) while the backward has time to spare, which it cannot lend them: more is exposed than
    one window over the whole compute would say."""
    job = Job(seq_len=8192, kernels="fused")
    plan = Plan(gpu=H100.name, num_gpus=4096, tp=2, sequence_parallel=True, zero=3, recompute="full", grad_accum=1)
    forward, backward = communication_phases_s(LLAMA_405B, job, plan, H100, 8, 60.0)
    compute = compute_time_s(LLAMA_405B, job, plan, H100)
    share = plan_flops_per_token(LLAMA_405B, job, plan).forward_share
    window_forward, window_backward = overlap_windows_s(compute, share)
    traffic = dp_traffic(LLAMA_405B, job, plan)
    assert (traffic.forward_collectives, traffic.backward_collectives) == (126, 252)  # a unit per layer
    link_bytes_per_s = 60.0 * COMMUNICATION_EFFICIENCY.value * BYTES_PER_GB
    assert forward == pytest.approx(traffic.forward_bytes / link_bytes_per_s + 126 * ring_latency_s(2048, 512))
    assert forward > window_forward and backward < window_backward
    exposed = exposed_communication_s((forward, backward), (window_forward, window_backward), LLAMA_405B.num_layers)
    assert exposed == pytest.approx(forward - window_forward + (forward + backward) / LLAMA_405B.num_layers)
    assert exposed > max(forward + backward - compute, (forward + backward) / LLAMA_405B.num_layers)
    assert performance(LLAMA_405B, job, plan, H100, 8, 60.0).exposed_communication_s == pytest.approx(exposed)


def test_gradient_traffic_stays_in_the_backward() -> None:
    """ZeRO-0's all-reduce is the backward's; ZeRO-1's reduce-scatter too, and its all-gather of the
    updated parameters (bf16, as the gradients here) comes before a forward."""
    job = Job(seq_len=4096)
    ddp = dp_traffic(LLAMA_70B, job, Plan(gpu=H100.name, num_gpus=16, zero=0))
    zero1 = dp_traffic(LLAMA_70B, job, Plan(gpu=H100.name, num_gpus=16, zero=1))
    assert ddp.forward_bytes == 0 and ddp.backward_collectives == 0
    assert zero1.backward_bytes == pytest.approx(ddp.backward_bytes / 2)  # one reduce-scatter, not an all-reduce
    assert zero1.forward_bytes == pytest.approx(15 / 16 * count_params(LLAMA_70B).total * 2)  # (N-1)/N x bf16
    flops = training_flops_per_token(LLAMA_70B, 4096, "none")
    assert flops.forward_share == pytest.approx(1 / 3, rel=0.01)  # backward = 2 x forward


@pytest.mark.parametrize(("pp", "vpp", "accum", "share"), [
    (1, 1, 1, 1.0), (1, 1, 8, 1 / 8), (4, 1, 16, 1 / 16),  # the last micro-batch's backward
    (8, 8, 32, 57 / 256),  # interleaved: (vpp - 1) x pp + 1 of the m x vpp chunk-steps
    (2, 4, 1, 1.0),  # fewer chunk-steps than the cool-down: the whole step
])
def test_zero_0_and_1_hide_only_behind_the_last_micro_batch(pp, vpp, accum, share) -> None:
    """Megatron's schedules (forward_backward_no_pipelining: the first m - 1 micro-batches under no_sync;
    the pipelined ones enable the sync for the last backward, each chunk's interleaved), DDP's no_sync
    and DeepSpeed's ZeRO-1 (reduces at the accumulation boundary) reduce once a step. ZeRO-2/3 reduce
    every micro-batch: the whole phases."""
    assert once_a_step_window_share(pp, vpp, accum) == pytest.approx(share)
    forward, backward = overlap_windows_s(3.0, 1 / 3)
    assert dp_windows_s(3.0, 1 / 3, 2, pp, vpp, accum, "hf") == (forward, backward)
    assert dp_windows_s(3.0, 1 / 3, 0, pp, vpp, accum, "hf")[1] == pytest.approx(backward * share)
    # ZeRO-1's parameter all-gather: behind the first forward on Megatron (overlap_param_gather),
    # after DeepSpeed's step, hidden by nothing
    assert dp_windows_s(3.0, 1 / 3, 1, pp, vpp, accum, "megatron")[0] == pytest.approx(forward * share)
    assert dp_windows_s(3.0, 1 / 3, 1, pp, vpp, accum, "deepspeed")[0] == 0.0


def test_accumulation_exposes_zero_1_traffic() -> None:
    """The same 70B ZeRO-1 step over 16 H100 on two nodes: one micro-batch of 8 hides the gradients'
    reduce-scatter behind the whole backward; eight micro-batches of 1 only behind the last one's."""
    job = Job(seq_len=4096, stack="megatron")
    whole = Plan(gpu=H100.name, num_gpus=16, tp=8, zero=1, micro_batch=8, grad_accum=1)
    split = Plan(gpu=H100.name, num_gpus=16, tp=8, zero=1, micro_batch=1, grad_accum=8)
    one, eight = performance(LLAMA_70B, job, whole, H100, 8), performance(LLAMA_70B, job, split, H100, 8)
    assert one.communication_time_s == pytest.approx(eight.communication_time_s)
    assert eight.exposed_communication_s > one.exposed_communication_s


def test_tp_backward_collectives_overlap_the_backward_gemms() -> None:
    """With compute to hide behind, only the forward's two all-reduces per layer are exposed; full
    recompute re-runs them (x2), half the layers recomputed x1.5."""
    job = Job(seq_len=8192, kernels="fused")
    base = {"gpu": H100.name, "num_gpus": 8, "tp": 8, "sequence_parallel": True, "grad_accum": 4}
    none = tp_time_s(LLAMA_70B, job, Plan(**base), H100, compute_s=100.0)
    full = tp_time_s(LLAMA_70B, job, Plan(**base, recompute="full"), H100, compute_s=100.0)
    half = tp_time_s(LLAMA_70B, job, Plan(**base, recompute="full", recompute_layers=40), H100, compute_s=100.0)
    assert full == pytest.approx(2 * none) and half == pytest.approx(1.5 * none)
    exposed_backward = tp_time_s(LLAMA_70B, job, Plan(**base), H100, compute_s=0.0)
    assert exposed_backward == pytest.approx(2 * none)  # nothing to hide behind: both passes exposed


def test_partial_recompute_costs_its_share_of_the_forward() -> None:
    job = Job(seq_len=8192)
    plan = {"gpu": H100.name, "recompute": "full"}
    full = plan_flops_per_token(LLAMA_70B, job, Plan(**plan))
    half = plan_flops_per_token(LLAMA_70B, job, Plan(**plan, recompute_layers=40))
    none = plan_flops_per_token(LLAMA_70B, job, Plan(gpu=H100.name))
    assert half.model == full.model == none.model
    assert half.hardware - none.hardware == pytest.approx((full.hardware - none.hardware) / 2, abs=1)
    # The plan's choice wins over the job's recipe value.
    assert plan_flops_per_token(LLAMA_70B, Job(seq_len=8192, recompute_layers=20),
                                Plan(**plan, recompute_layers=40)).hardware == half.hardware


def _recomputes(stack: str, **fields) -> list[RecomputeChoice]:
    query = SolveQuery(model="llama-3.1-405b", job=Job(seq_len=8192, stack=stack, **fields.pop("job", {})),
                       global_batch=2048, max_gpus=64, gpus=("h100-sxm-80gb",), **fields)
    return build_space(packaged_catalogue(), query).recomputes


def test_partial_recompute_is_searched_where_the_stack_runs_it() -> None:
    assert {s.name: s.partial_recompute for s in load_stacks().values()}["megatron"] == "any"
    # Megatron has no per-op SAC (its contract's recomputes: none, selective, full).
    # Shares of each model chunk's layers, resolved per layout (Megatron's N per chunk): 126 layers
    # in one chunk checkpoint 15, 31, 47, 63 or 94 of them; 16 stages of at most 8 layers 1, 2, 3,
    # 4 or 6 each.
    megatron = _recomputes("megatron")
    assert megatron == [RecomputeChoice("none"), RecomputeChoice("selective"),
                        *(RecomputeChoice("full", share=share) for share in ((1, 8), (1, 4), (3, 8), (1, 2), (3, 4))),
                        RecomputeChoice("full")]
    assert [r.resolved(126, Layout()).layers for r in megatron[2:7]] == [15, 31, 47, 63, 94]
    assert [r.resolved(126, Layout(tp=8, pp=16)).layers for r in megatron[2:7]] == [1, 2, 3, 4, 6]
    assert [r.share for r in _recomputes("torchtitan")] == [None, None, None, (1, 4), (1, 2), None]
    assert len(PARTIAL_RECOMPUTE_SHARES["every-nth"]) == 2  # every 4th, every 2nd block
    assert all(r.layers is None and r.share is None for r in _recomputes("hf"))  # HF checkpoints every layer or none
    assert _recomputes("megatron", pins={"recompute": "full"}) == [RecomputeChoice("full")]
    # The job's count is the full mode's: every chunk checkpoints that many, no share is searched.
    assert _recomputes("megatron", job={"recompute_layers": 10})[-1] == RecomputeChoice("full", 10)
    assert all(r.share is None for r in _recomputes("megatron", job={"recompute_layers": 10}))


def test_partial_recompute_plan_is_reproduced_by_estimate(catalogue) -> None:
    """405B pre-training with Megatron's recipe on Llama 3's pipeline (PP 16; unpinned, Megatron-FSDP's
    TP 8 x DP 512 is faster): the best plan recomputes part of the layers, and `estimate` with the
    plan's recompute_layers gives its memory and step time exactly."""
    from vramplan.models.estimate import estimate
    from vramplan.solver.api import solve

    job = Job(seq_len=8192, kernels="fused", stack="megatron")
    query = SolveQuery(model="llama-3.1-405b", job=job, global_batch=2048, tokens=15.6e12, objective="time",
                       max_gpus=4096, gpus=("h100-sxm-80gb",), pins=Pins(pp=16))
    best = solve(catalogue, query).plans[0]
    choice = best.plan
    assert choice.recompute == "full" and 0 < choice.recompute_layers < LLAMA_405B.num_layers
    assert choice.pp > 1 and choice.recompute_label == f"full ({choice.recompute_layers} layers per stage)"
    plan = Plan(gpu=choice.gpu, offering=choice.offering, num_gpus=choice.num_gpus, zero=choice.zero,
                recompute="full", precision=choice.precision, micro_batch=choice.micro_batch,
                grad_accum=choice.grad_accum, offload=choice.offload, tp=choice.tp, pp=choice.pp, cp=choice.cp,
                ep=choice.ep, vpp=choice.vpp, sequence_parallel=choice.sequence_parallel)
    again = estimate(catalogue, "llama-3.1-405b", job.model_copy(update={"recompute_layers": choice.recompute_layers}),
                     plan, query.tokens)
    assert again.memory.total_bytes == best.memory.total_bytes
    assert again.performance.step_time_s == pytest.approx(best.performance.step_time_s, rel=1e-12)
