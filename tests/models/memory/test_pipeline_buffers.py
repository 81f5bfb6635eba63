"""torch's pipelining keeps a receive buffer per micro-batch (models/memory/pipeline_buffers.py).

Read in torch/distributed/pipelining/stage.py (pytorch/pytorch main, 2026): _prepare_forward_infra
makes `args_recv_info[chunk]` with a buffer from _make_tensor_from_meta for every chunk in
range(num_microbatches), _prepare_backward_infra `grad_recv_info[mb_index]` likewise, both at
setup and kept all step (pytorch/pytorch#136380; #193872 / #196463 would allocate them just in
time, not landed by 2026-09), and forward_one_chunk keeps `fwd_cache[fwd_chunk_id] =
(output_tuple, flat_input_args)` until backward_one_chunk pops it. Before pytorch/pytorch#164329
(2025-10) each stage input's gradient stayed on its buffer's .grad until the next step."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from vramplan.models.architecture.parallel import interleaving_refusal, microbatches_per_round, torch_interleaving_refuses
from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.models.memory.parallel_activations import first_stage_inflight, inflight_chunks
from vramplan.models.memory.pipeline_buffers import pipeline_buffer_units
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery


def _job(stack: str, **fields) -> Job:
    return Job(**with_preset({"stack": stack, "seq_len": 8192, **fields}, load_stacks()))


@pytest.mark.parametrize(("first", "last", "input_grads", "units"), [
    (False, False, False, 2 * 8),  # m activation + m gradient buffers; the w outputs replace the w inputs counted
    (True, False, False, 8 + 3),  # no activation buffers; m gradient buffers and w outputs
    (False, True, False, 8 - 3),  # m activation buffers less the w in flight; no gradient buffers, no output kept
    (False, False, True, 3 * 8),  # + the m input gradients kept until the next step
    (True, True, True, 0),  # one stage holds the whole model: nothing
])
def test_units_of_a_1f1b_rank(first, last, input_grads, units) -> None:
    assert pipeline_buffer_units(8, 3, 1, first, last, input_grads) == units


def test_interleaved_ranks_hold_a_set_per_stage() -> None:
    """vpp stages on a rank: each stage but the pipeline's first receives, each but its last sends.
    PP 4, vpp 2, 8 micro-batches (2 rounds of 4): the first rank has 11 in flight, 8 of them on the
    pipeline's first stage (torch's order: 4 + 4 forwards of stage 0 before its first backward), so
    3 of its 8 receive buffers are stage inputs the activations hold; the last rank has 5 in flight,
    one on the last stage, whose output is the loss."""
    assert pipeline_buffer_units(8, 9, 2, False, False, False) == 2 * 8 + 2 * 8  # (16 - 9) + 16 + 9
    assert first_stage_inflight(4, 2, 8, torch_rounds=True) == 8
    assert pipeline_buffer_units(8, 11, 2, True, False, False, first_stage_inflight(4, 2, 8, torch_rounds=True)) == (8 - 3) + 16 + 11
    assert pipeline_buffer_units(8, 5, 2, False, True, False) == (16 - 5) + 8 + (5 - 1)
    assert pipeline_buffer_units(0, 5, 2, False, False, True) == 0  # no pipeline


def test_the_first_rank_counts_what_is_on_its_first_stage() -> None:
    """PP 4, vpp 2, 16 micro-batches: 11 in flight, 8 of them on the first stage (2 rounds of 4),
    so 3 of the 16 activation buffers of its second stage are inputs the activations hold."""
    assert first_stage_inflight(4, 2, 16, torch_rounds=True) == 8
    assert pipeline_buffer_units(16, 11, 2, True, False, False, 8) == (16 - 3) + 32 + 11


def _megatron_interleaved_peak(pp: int, vpp: int, m: int, rank: int, a2a_overlap: bool = False) -> tuple[int, int]:
    """Megatron-LM's interleaved order replayed (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/pipeline_parallel/schedules.py): get_schedule_table (L989) lists each group of
    microbatch_group_size_per_vp_stage = pp micro-batches (model_parallel_config.py L567-568) on
    chunk 0, then on chunk 1, ...; forward k runs chunk model_chunk_id_table[k % (m vpp)],
    backward j the reverse chunk, vpp - 1 - that (get_model_chunk_id L1244); the rank runs
    (pp - rank - 1) x 2 + (vpp - 1) x pp warm-up forwards (get_pp_rank_microbatches L964-965), then
    one forward and one backward a step. With `a2a_overlap` (Megatron's MoE all-to-all overlap) one
    more warm-up forward (L966-969), and each step's forward runs beside its backward layer by layer
    (combined_1f1b.py; model_chunk_schedule_plan.py run: forward layer i with backward layer n - 1 - i),
    so between steps, not after the forward, is when the chunks are counted (the pair's one layer more
    is models/memory/activations.py a2a_pair_bytes). Returns the most chunks in flight and, among the
    moments holding that many, the most on chunk 0 (the pipeline's first stage on rank 0)."""
    total = m * vpp
    table = [chunk for group in range(0, m, pp) for chunk in range(vpp) for _ in range(group, min(group + pp, m))]
    held = [0] * vpp
    warmup = min((pp - rank - 1) * 2 + (vpp - 1) * pp + a2a_overlap, total)
    for k in range(warmup):
        held[table[k]] += 1
    best = (sum(held), held[0])
    for j in range(total - warmup):
        held[table[warmup + j]] += 1  # the 1F1B step's forward, then its backward
        if not a2a_overlap:
            best = max(best, (sum(held), held[0]))
        held[vpp - 1 - table[j]] -= 1
        best = max(best, (sum(held), held[0]))
    for j in range(total - warmup, total):  # cool-down: backwards only
        held[vpp - 1 - table[j]] -= 1
    return best


def test_megatrons_interleaved_order_gives_the_counts() -> None:
    """For every m Megatron runs (a multiple of pp, PP_GROUPED_INTERLEAVING_STACKS), pp 2-8, vpp
    2-4: each rank's peak is inflight_chunks (Megatron's rounds), and at the first rank's peak
    first_stage_inflight micro-batches are on chunk 0, min(m, 2 pp): the embedding outputs it
    keeps. The old count, ceil(w / vpp), was 10 where Megatron holds 16 (pp 8, vpp 4)."""
    for pp in range(2, 9):
        for vpp in range(2, 5):
            for m in range(pp, 4 * pp + 1, pp):
                for rank in range(pp):
                    peak, on_first = _megatron_interleaved_peak(pp, vpp, m, rank)
                    assert peak == inflight_chunks(pp, m, vpp, rank), (pp, vpp, m, rank)
                    if rank == 0:
                        assert on_first == first_stage_inflight(pp, vpp, m) == min(m, 2 * pp), (pp, vpp, m)
    assert -(-inflight_chunks(8, 32, 4, 0) // 4) == 10 and first_stage_inflight(8, 4, 32) == 16


def test_megatrons_moe_all_to_all_overlap_keeps_the_in_flight_counts() -> None:
    """Megatron's --overlap-moe-expert-parallel-comm adds a warm-up micro-batch to the interleaved
    schedule (schedules.py L966-969) and pairs each step's forward with its backward layer by layer:
    replayed, every rank's peak in-flight chunks and the first rank's micro-batches on the first
    stage are the counts without it, so the estimate keeps inflight_chunks and first_stage_inflight
    and adds the pair's one layer (models/memory/activations.py a2a_pair_bytes)."""
    for pp in range(2, 9):
        for vpp in range(2, 5):
            for m in range(pp, 4 * pp + 1, pp):
                for rank in range(pp):
                    assert _megatron_interleaved_peak(pp, vpp, m, rank, a2a_overlap=True) == \
                        _megatron_interleaved_peak(pp, vpp, m, rank), (pp, vpp, m, rank)


def _generated_counts() -> list[dict[str, str]]:
    """torch 2.13.0's ScheduleInterleaved1F1B orders, counted by tests/models/memory/interleaved_orders.py."""
    lines = (Path(__file__).parent / "interleaved_1f1b_inflight.csv").read_text().splitlines()
    return [row for row in csv.DictReader(line for line in lines if not line.startswith("#")) if row["peak"] != "refused"]


def test_the_ends_match_torchs_interleaved_order() -> None:
    """Over pp 2-8, vpp 2-4, m up to 3 pp + 1: at the first rank's peak min(m, 2 r) micro-batches are
    on the pipeline's first stage, and the last rank's last stage holds one while it runs, none more."""
    rows = _generated_counts()
    assert len(rows) > 1000
    for row in rows:
        pp, vpp, m, rank = (int(row[key]) for key in ("pp", "vpp", "micro_batches", "rank"))
        if rank == 0:
            assert first_stage_inflight(pp, vpp, m, torch_rounds=True) == int(row["first_stage_max"]), row
        if rank == pp - 1:
            assert int(row["last_stage_at_its_op"]) == 1 and int(row["last_stage_max"]) <= 1, row


def test_the_in_flight_count_is_torchs() -> None:
    """inflight_chunks (models/memory/parallel_activations.py) with torch's rounds is the peak of
    torch's own order for every m it runs; Megatron's rounds of pp give the same where m is a
    multiple of pp (r = pp) and differ elsewhere (r = m // max(1, m // pp): m alone below pp)."""
    differ = 0
    for row in _generated_counts():
        pp, vpp, m, rank = (int(row[key]) for key in ("pp", "vpp", "micro_batches", "rank"))
        r = microbatches_per_round(pp, m)
        assert int(row["peak"]) == min((vpp - 1) * r + 2 * (pp - 1 - rank) + 1, m * vpp), row
        assert inflight_chunks(pp, m, vpp, rank, torch_rounds=True) == int(row["peak"]), row
        if m % pp == 0:
            assert inflight_chunks(pp, m, vpp, rank) == int(row["peak"]), row
        differ += inflight_chunks(pp, m, vpp, rank) != int(row["peak"])
    assert differ > 100  # the rounds matter: Megatron's count is not torch's


def test_the_micro_batches_torch_refuses() -> None:
    """ScheduleInterleaved1F1B.__init__ refuses m that is not a multiple of its rounds: the
    generated orders mark them, torch_interleaving_refuses names the same ones, and an estimate or
    a search under torchtitan's interleaved schedule never takes one (Megatron's does)."""
    lines = (Path(__file__).parent / "interleaved_1f1b_inflight.csv").read_text().splitlines()
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    for row in rows:
        pp, m = int(row["pp"]), int(row["micro_batches"])
        assert torch_interleaving_refuses(pp, m) == (row["peak"] == "refused"), row
    assert torch_interleaving_refuses(4, 9) and not torch_interleaving_refuses(4, 10)


def test_torchtitan_ranks_hold_them_and_megatrons_do_not(catalogue) -> None:
    """Llama 3.1 70B, PP 4 at TP 1, 16 micro-batches of one 8k sequence: a unit is 8192 x 8192 x 2
    bytes (128 MiB); a middle rank holds 2 x 16 of them, the first 16 + 4 (4 in flight), the last 16 - 1."""
    arch = catalogue.architecture("llama-3.1-70b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=4, pp=4, zero=1, micro_batch=1, grad_accum=16, recompute="full")
    unit = 8192 * 8192 * 2
    titan = activations(arch, _job("torchtitan"), plan, stage=1)
    assert titan.pipeline_buffers_bytes == 2 * 16 * unit
    assert activations(arch, _job("torchtitan"), plan, stage=0).pipeline_buffers_bytes == (16 + 4) * unit
    assert activations(arch, _job("torchtitan"), plan, stage=3).pipeline_buffers_bytes == (16 - 1) * unit
    assert activations(arch, _job("torchtitan-root-fsdp"), plan, stage=1).pipeline_buffers_bytes == 3 * 16 * unit
    assert activations(arch, _job("megatron"), plan, stage=1).pipeline_buffers_bytes == 0
    longer = plan.model_copy(update={"grad_accum": 64})  # the term grows with the step's micro-batches
    assert activations(arch, _job("torchtitan"), longer, stage=1).pipeline_buffers_bytes == 2 * 64 * unit


def test_they_replace_megatrons_two_p2p_buffers(catalogue) -> None:
    arch = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=4, pp=4, zero=1, micro_batch=1, grad_accum=8, recompute="full")
    titan = memory_per_gpu(arch, _job("torchtitan"), plan, catalogue.gpu("h100-sxm-80gb"))
    megatron = memory_per_gpu(arch, _job("megatron"), plan, catalogue.gpu("h100-sxm-80gb"))
    assert titan.overhead.pp_p2p_bytes == 0 and megatron.overhead.pp_p2p_bytes == 2 * 8192 * 4096 * 2


def test_both_engines_carry_the_micro_batch_count_and_agree(catalogue) -> None:
    """Llama 3.1 8B over up to 16 A10G in 4 stages, 256 sequences a step: the buffers decide which
    micro-batch and accumulation fit (without them in the search's tables its plans fail the exact
    re-check, solver/verify.py); CP-SAT and brute force agree. (Up to 8 GPUs until torchtitan's
    pipeline was held to FSDP over two ranks or more: SHARDED_MODEL_PARALLEL_STACKS.)"""
    query = SolveQuery(model="llama-3.1-8b", job=_job("torchtitan", seq_len=4096), gpus=("a10g-24gb",), max_gpus=16,
                       global_batch=256, tokens=1e9, pins=Pins(pp=4), top_k=3, objective="cost")
    cpsat = solve(catalogue, query)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute", "time_limit_s": 600}))
    assert cpsat.status == brute.status == "optimal"
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
    assert all(p.memory.activations_bytes > 0 for p in cpsat.plans)


def test_a_middle_rank_is_checked_where_it_outweighs_the_ends(catalogue) -> None:
    """Llama 3.1 70B in 8 stages, 128 micro-batches of 2 sequences: rank 1 holds 2 x 128 units of
    256 MiB (64 GiB), rank 0 128 + 8 and the last 127, so rank 1 is the most loaded; Megatron's
    schedule keeps two buffers wherever, and its first rank stays the heaviest of its layers."""
    arch, gpu = catalogue.architecture("llama-3.1-70b"), catalogue.gpu("h100-sxm-80gb")
    plan = Plan(gpu=gpu.name, num_gpus=8, pp=8, zero=1, micro_batch=2, grad_accum=128, recompute="full")
    titan = memory_per_gpu(arch, _job("torchtitan"), plan, gpu)
    assert titan.stage == 1 and [rank for rank, _ in titan.checked_ranks] == [0, 1, 7]
    assert activations(arch, _job("torchtitan"), plan, stage=1).pipeline_buffers_bytes == 2 * 128 * 2 * 8192 * 8192 * 2
    megatron = memory_per_gpu(arch, _job("megatron"), plan, gpu)
    assert [rank for rank, _ in megatron.checked_ranks] == [0, 7]


def test_the_search_checks_that_middle_rank(catalogue) -> None:
    """Llama 3.1 8B over A10G in 8 stages, 512 sequences of 4k a step: the first middle rank of a
    plan on 16 GPUs (256 micro-batches of one sequence) outweighs both ends and is over the limit.
    The search sees it only with that rank among its checked columns: without it, it returned such
    a plan, which the exact re-check refused (solver/verify.py); with it nothing fits."""
    arch, gpu = catalogue.architecture("llama-3.1-8b"), catalogue.gpu("a10g-24gb")
    job = _job("torchtitan", seq_len=4096)
    plan = Plan(gpu=gpu.name, num_gpus=16, pp=8, zero=2, micro_batch=1, grad_accum=256, recompute="selective")
    memory = memory_per_gpu(arch, job, plan, gpu)
    assert memory.stage == 1 and not memory.gpu_fits
    query = SolveQuery(model="llama-3.1-8b", job=job, gpus=(gpu.name,), max_gpus=16, global_batch=512, tokens=1e9,
                       pins=Pins(pp=8), top_k=3, objective="cost")
    assert solve(catalogue, query).status == "infeasible"


@pytest.mark.parametrize(("stack", "runs", "refuses"), [
    ("torchtitan", (4, 6, 12, 36), (9, 18)),  # torch: a multiple of its m // pp rounds (6: one round of 6)
    ("megatron", (4, 12, 36), (6, 9, 18)),  # Megatron: whole groups of pp (PP_GROUPED_INTERLEAVING_STACKS)
])
def test_an_interleaved_plan_runs_the_micro_batches_its_schedule_takes(catalogue, stack, runs, refuses) -> None:
    """Llama 3.1 8B in 4 stages of 2 virtual stages, 36 sequences a step: each stack's interleaved
    schedule refuses some micro-batch counts (models.architecture.parallel.interleaving_refusal),
    so the estimate names grad_accum and the search (both engines alike) never plans them."""
    arch, gpu = catalogue.architecture("llama-3.1-8b"), catalogue.gpu("h100-sxm-80gb")
    for m in runs + refuses:
        plan = Plan(gpu=gpu.name, num_gpus=4, pp=4, vpp=2, zero=1, micro_batch=36 // m, grad_accum=m, recompute="full")
        if m in refuses:
            with pytest.raises(VramplanError, match="grad_accum"):
                memory_per_gpu(arch, _job(stack), plan, gpu)
        else:
            assert memory_per_gpu(arch, _job(stack), plan, gpu).total_bytes > 0
        assert (interleaving_refusal(stack, 4, m) is not None) == (m in refuses)
    query = SolveQuery(model="llama-3.1-8b", job=_job(stack), gpus=(gpu.name,), max_gpus=8, global_batch=36,
                       tokens=1e9, pins=Pins(tp=1, pp=4, vpp=2), top_k=5, objective="time")
    cpsat = solve(catalogue, query)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute", "time_limit_s": 600}))
    assert cpsat.status == brute.status == "optimal"
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
    assert all(interleaving_refusal(stack, 4, p.plan.grad_accum) is None for p in cpsat.plans)
