"""Megatron's flex dispatcher buffers (models/memory/dispatcher_buffers.py): DeepEP's and HybridEP's
communication buffers, derived from their allocation code (DeepEP dd758caf csrc/legacy/config.hpp
L53-99, deep_ep/buffers/legacy.py L245-288; the hybrid-ep branch 94a9f8f6 buffer/intranode.cu,
buffer/internode_doca.cu, extension/allgather.cu), counted in the overhead pillar outside torch's
allocator. The figures below were evaluated from those sources by a separate derivation of the
allocation code, not from this module; no GPU measured them."""

from __future__ import annotations

import pytest
from helpers.cli import invoke
from measured_peaks import predicted_bytes

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import BYTES_PER_MIB
from vramplan.models.memory.dispatcher_buffers import deepep_bytes, dispatcher_buffer_bytes, hybridep_bytes
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.overhead import overhead
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery


@pytest.mark.parametrize(("hidden", "ranks", "nvl_mib", "rdma_mib"), [
    (2048, 16, 135.18, 32.94),  # Qwen3-30B-A3B, EP 16 over two 8-GPU nodes: Nn 288, Nr 140
    (7168, 64, 360.18, 320.48),  # DeepSeek-V3, EP 64 over eight: Nn 288, Nr 128
    (2048, 8, 120.16, 0.0),  # EP 8 inside one node: no RDMA buffer, no NVSHMEM
    (7168, 8, 320.16, 0.0),
])
def test_deepep_buffers(hidden: int, ranks: int, nvl_mib: float, rdma_mib: float) -> None:
    """The NVLink buffer, the RDMA buffer on NVSHMEM's heap in 512 MiB granules, and the 32 MiB
    workspace, at Megatron's 20 SMs (10 channels) and bf16 (hidden bytes 2h)."""
    heap = 512 * (rdma_mib > 0)
    assert deepep_bytes(hidden, 2, ranks) / BYTES_PER_MIB == pytest.approx(nvl_mib + heap + 32, abs=0.01)
    assert deepep_bytes(hidden, 4, ranks) > deepep_bytes(hidden, 2, ranks)  # fp32 inputs: 4h hidden bytes
    assert deepep_bytes(hidden, 1, ranks) == deepep_bytes(hidden, 2, ranks)  # fp8: at least 2 bytes


@pytest.mark.parametrize(("hidden", "tokens", "ranks", "local", "experts", "mib"), [
    (2048, 4096, 16, 8, 128, 353.5),  # Qwen3-30B-A3B, EP 16 = 2 x 8
    (7168, 4096, 64, 4, 256, 4989.5),  # DeepSeek-V3, EP 64 = 8 x 8: 2 T R h is 3.5 GiB of it
    (2048, 4096, 8, 16, 128, 150.0),
    (7168, 4096, 8, 32, 256, 495.0),
])
def test_hybridep_buffers(hidden: int, tokens: int, ranks: int, local: int, experts: int, mib: float) -> None:
    assert hybridep_bytes(hidden, tokens, ranks, local, experts) / BYTES_PER_MIB == pytest.approx(mib, abs=0.05)
    # sized for the worst case: every token of the group on one rank, so it grows with the tokens
    assert hybridep_bytes(hidden, 2 * tokens, ranks, local, experts) > 1.9 * hybridep_bytes(hidden, tokens, ranks, local,
                                                                                               experts)
    assert hybridep_bytes(hidden, 100, ranks, local, experts) == hybridep_bytes(hidden, 512, ranks, local, experts)


def test_only_megatrons_flex_dispatcher_with_ep_holds_them(catalogue) -> None:
    arch = catalogue.architecture("deepseek-v3")
    plan = Plan(gpu="h200-sxm-141gb", num_gpus=512, ep=64, pp=8, zero=1, micro_batch=1, grad_accum=8, precision="fp8")
    megatron = Job(seq_len=4096, stack="megatron")
    assert dispatcher_buffer_bytes(arch, megatron, plan) == 0  # alltoall: NCCL's buffers
    hybrid = megatron.model_copy(update={"moe_dispatcher": "hybridep"})
    deep = megatron.model_copy(update={"moe_dispatcher": "deepep"})
    assert dispatcher_buffer_bytes(arch, hybrid, plan) / BYTES_PER_MIB == pytest.approx(4989.5, abs=0.05)
    assert dispatcher_buffer_bytes(arch, deep, plan) / BYTES_PER_MIB == pytest.approx(360.18 + 512 + 32, abs=0.01)
    assert dispatcher_buffer_bytes(arch, hybrid, plan.model_copy(update={"ep": 1, "num_gpus": 8})) == 0
    assert dispatcher_buffer_bytes(catalogue.architecture("llama-3.1-8b"), hybrid, plan.model_copy(update={"ep": 1})) == 0
    # torchtitan v0.2.2's DeepEP backend sizes the same legacy buffer (deepep.py L294-317); hf has none
    torchtitan = Job(seq_len=4096, stack="torchtitan", moe_dispatcher="deepep")
    assert dispatcher_buffer_bytes(arch, torchtitan, plan) == dispatcher_buffer_bytes(arch, deep, plan)
    assert dispatcher_buffer_bytes(arch, Job(seq_len=4096, stack="custom", moe_dispatcher="deepep"), plan) == 0
    over = overhead(arch, hybrid, plan)
    assert over.dispatcher_buffers_bytes == dispatcher_buffer_bytes(arch, hybrid, plan)
    assert over.total_bytes - overhead(arch, megatron, plan).total_bytes == over.dispatcher_buffers_bytes


def test_the_estimate_holds_them_and_torchs_counters_do_not(catalogue) -> None:
    """They count in the device's memory; a run's max_memory_allocated or reserved does not see them
    (tests/measured_peaks.py compares those without them)."""
    arch, gpu = catalogue.architecture("qwen3-30b-a3b"), catalogue.gpu("h100-sxm-80gb")
    plan = Plan(gpu=gpu.name, num_gpus=16, ep=16, zero=1, micro_batch=1, grad_accum=4)
    plain = memory_per_gpu(arch, Job(seq_len=4096, stack="megatron"), plan, gpu)
    hybrid = memory_per_gpu(arch, Job(seq_len=4096, stack="megatron", moe_dispatcher="hybridep"), plan, gpu)
    assert hybrid.total_bytes - plain.total_bytes == hybrid.overhead.dispatcher_buffers_bytes > 300 * BYTES_PER_MIB

    class Run:
        def __init__(self, measure: str) -> None:
            self.cells = {"measure": measure}

    for measure in ("allocated", "reserved"):
        assert predicted_bytes(Run(measure), hybrid) == predicted_bytes(Run(measure), plain)  # type: ignore[arg-type]
    assert predicted_bytes(Run("device"), hybrid) - predicted_bytes(Run("device"), plain) == \
        hybrid.overhead.dispatcher_buffers_bytes  # type: ignore[arg-type]


def test_the_search_plans_with_them_and_the_engines_agree(catalogue) -> None:
    """HybridEP's buffer grows with the micro-batch's tokens and the group: the search's buffer
    tables carry it per (tp, ep, micro-batch), and CP-SAT's optimum is brute force's."""
    job = Job(seq_len=4096, stack="megatron", moe_dispatcher="hybridep")
    query = SolveQuery(model="qwen3-30b-a3b", job=job, global_batch=64, tokens=1e9, gpus=("h100-sxm-80gb",),
                       max_gpus=32, top_k=3, objective="throughput", pins=Pins(ep=8))
    cpsat = solve(catalogue, query, explain_infeasible=False)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute"}), explain_infeasible=False)
    assert cpsat.status == brute.status == "optimal"
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
    for solved in cpsat.plans:
        assert solved.memory.overhead.dispatcher_buffers_bytes >= 150 * BYTES_PER_MIB  # EP 8, T >= 512


def test_a_plan_that_fits_with_the_all_to_all_does_not_with_hybridep(catalogue) -> None:
    """Qwen3-30B-A3B on 16 H100, EP 16, every decision pinned: 0.5918 of the GPU with the alltoall
    dispatcher, 0.5961 with HybridEP's 354 MiB; at a capacity fraction between them both engines
    find the one plan with the first and none with the second (unpinned, the offload: HybridEP's plan
    then moves the optimizer to the host)."""
    pins = Pins(num_gpus=16, ep=16, tp=1, pp=1, cp=1, zero=1, offload="none", micro_batch=1, recompute="full",
                precision="bf16")
    for engine in ("cpsat", "brute"):
        statuses = []
        for dispatcher in ("alltoall", "hybridep"):
            job = Job(**with_preset({"seq_len": 4096, "stack": "megatron", "moe_dispatcher": dispatcher,
                                     "capacity_fraction": 0.594}, load_stacks()))
            query = SolveQuery(model="qwen3-30b-a3b", job=job, global_batch=64, tokens=1e9, gpus=("h100-sxm-80gb",),
                               max_gpus=16, pins=pins, engine=engine)
            statuses.append(solve(catalogue, query, explain_infeasible=False).status)
        assert statuses == ["optimal", "infeasible"], engine


def test_the_estimate_says_it_holds_them() -> None:
    base = ["estimate", "--model", "qwen3-30b-a3b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb", "--num-gpus", "16",
            "--ep", "16", "--zero", "1", "--stack", "megatron"]
    line = "includes the MoE dispatcher's own buffers, 0.35 GiB"
    assert line in invoke(*base, "--moe-dispatcher", "hybridep").stdout
    assert "dispatcher's own buffers" not in invoke(*base).stdout


@pytest.mark.parametrize("command", ["estimate", "solve"])
@pytest.mark.parametrize("dispatcher", ["deepep", "hybridep"])
def test_a_flex_dispatcher_on_a_dense_model_is_refused(command: str, dispatcher: str) -> None:
    """A dense model dispatches no tokens: the option changed nothing (memory, time and the launch
    config as with the all-to-all) and was accepted silently; the overlap is refused there too."""
    result = invoke(command, "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb", "--num-gpus", "8",
                    "--stack", "megatron", "--moe-dispatcher", dispatcher)
    assert result.exit_code == 2
    assert result.stderr == (f"error: moe_dispatcher='{dispatcher}': llama-3.1-8b is a dense model (no experts to "
                             "dispatch tokens to); drop --moe-dispatcher\n")


def test_the_search_keeps_them_per_ep_degree(catalogue) -> None:
    """The solver's buffer table is keyed by what the buffers read: with a flex dispatcher the tp x ep
    group (HybridEP's grows with it), without one not the EP degree (one entry for every EP)."""
    from vramplan.models.core.layout import Layout
    from vramplan.solver.tables import Tables
    arch = catalogue.architecture("qwen3-30b-a3b")
    hybrid = Tables(arch, Job(seq_len=4096, stack="megatron", moe_dispatcher="hybridep"), 64)
    by_ep = [hybrid.buffer_mib(Layout(ep=ep), 1, "bf16") for ep in (8, 16)]
    assert by_ep[1] > by_ep[0] >= 150  # 150 and 354 MiB of HybridEP's buffers (test_hybridep_buffers)
    plain = Tables(arch, Job(seq_len=4096, stack="megatron"), 64)
    assert plain.buffer_class(Layout(ep=8)) == plain.buffer_class(Layout(ep=16))
    assert plain.buffer_mib(Layout(ep=8), 1, "bf16") == plain.buffer_mib(Layout(ep=16), 1, "bf16") == 0
