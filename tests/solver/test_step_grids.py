"""The step-time grids of solver/tables.py (a layout and count's data-parallel traffic, optimizer
step and bubble at every ZeRO stage, micro-batch and precision at once) hold exactly the numbers
models/ gives one plan at a time: the same float operations per cell, so the integer tables, and
every answer, are the same as cell-by-cell evaluation."""

from __future__ import annotations

import pytest

from vramplan.models.architecture.parallel import plan_split
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job
from vramplan.models.core.units import to_us
from vramplan.models.memory.recompute import stage_recomputed
from vramplan.models.time.performance import communication_phases_s, optimizer_time_s
from vramplan.models.time.pipeline_schedule import pp_bubble_s, pp_imbalance_s, stage_imbalance, stage_time_s
from vramplan.solver.choice_keys import NO_RECOMPUTE, MicroKey
from vramplan.solver.layouts import layout_plan
from vramplan.solver.tables import Tables

ZEROS = (0, 1, 2, 3)
ZERO_OFFLOADS = ((0, "none"), (1, "none"), (1, "optimizer"), (2, "none"), (2, "optimizer"), (3, "none"),
                 (3, "optimizer"), (3, "optimizer+params"))
PRECISIONS = ("bf16", "fp16")


def _plan(tables: Tables, layout: Layout, n: int, zero: int, offload: str, precision: str, micro: int):
    return layout_plan(layout, gpu="", num_gpus=n, zero=zero, recompute="none", recompute_layers=None,
                       precision=precision, micro_batch=micro, grad_accum=tables.accumulation(layout, n, micro),
                       offload=offload)


@pytest.mark.parametrize(("model", "layout", "n", "per_instance", "gpu"), [
    ("llama-3.1-8b", Layout(), 64, 8, "h100-sxm-80gb"),  # DP over 8 instances: the network
    ("llama-3.1-70b", Layout(tp=8, pp=4, sp=True), 128, 8, "a100-sxm-80gb"),
    ("mixtral-8x7b", Layout(tp=2, ep=4, sp=True), 16, 8, "mi300x-192gb"),  # expert parallel, inside... then across
    ("llama-3.1-8b", Layout(tp=2, sp=True), 8, 8, "l40s-48gb"),  # one instance: NVLink / PCIe
])
def test_grids_equal_one_plan_at_a_time(catalogue, model: str, layout: Layout, n: int, per_instance: int, gpu: str) -> None:
    arch, job, global_batch = catalogue.architecture(model), Job(seq_len=4096), 256
    tables, spec = Tables(arch, job, global_batch), catalogue.gpu(gpu)
    dp = n // layout.model_parallel
    micros = tuple(m for m in (1, 2, 4, 8) if global_batch % (m * dp) == 0)
    network = 50.0
    forward, backward = tables.comm_s(layout, n, ZEROS, micros, PRECISIONS, spec, per_instance, network)
    optimizer = tables.optimizer_us(layout, n, ZERO_OFFLOADS, micros, PRECISIONS, spec)
    for i, micro in enumerate(micros):
        for k, precision in enumerate(PRECISIONS):
            for z, zero in enumerate(ZEROS):
                plan = _plan(tables, layout, n, zero, "none", precision, micro)
                assert (forward[z, i, k], backward[z, i, k]) == communication_phases_s(arch, job, plan, spec, per_instance,
                                                                                       network)
            for zf, (zero, offload) in enumerate(ZERO_OFFLOADS):
                plan = _plan(tables, layout, n, zero, offload, precision, micro)
                assert optimizer[zf, i, k] == to_us(optimizer_time_s(arch, job, plan, spec))
    bubbles = tables.bubble_us(layout, n, _micro_keys(layout, micros), 1.7, 0.3, spec)
    assert bubbles.tolist() == [to_us(_stall(tables, _plan(tables, layout, n, 0, "none", "bf16", m), 1.7, 0.3))
                                for m in micros]
    assert layout.pp == 1 or bubbles.max() > 0


def _stall(tables: Tables, plan, compute_s: float, parallel_s: float) -> float:
    """models.parallel_time's pipeline stall of a plan: the slowest stage's bubble (its compute and
    the exposed model-parallel time its micro-batches wait on) and what that stage adds to the
    mean's (ParallelTime.pp_bubble_s + pp_imbalance_s)."""
    imbalance = stage_imbalance(tables.arch, tables.job.seq_len, plan_split(tables.arch, plan),
                                stage_recomputed(tables.arch, tables.job, plan))
    return pp_bubble_s(plan, stage_time_s(compute_s, imbalance, parallel_s)) + pp_imbalance_s(imbalance, compute_s)


def _micro_keys(layout: Layout, micros: tuple[int, ...], precision: str = "bf16") -> tuple[MicroKey, ...]:
    return tuple(MicroKey(layout.tp, layout.cp, layout.sp, NO_RECOMPUTE, m, precision) for m in micros)


@pytest.mark.parametrize(("layout", "n"), [(Layout(), 8), (Layout(tp=2, pp=4, sp=True), 16)])
def test_stalls_hold_the_exposed_activation_offload_transfer(catalogue, layout: Layout, n: int) -> None:
    """With activation offloading and a compute too short to hide it (0.05 s), each stall cell is
    the bubble plus models.performance's exposed transfer of the plan, rounded once."""
    from vramplan.models.memory.activations import offload_transfer_bytes
    from vramplan.models.time.performance import offload_exposed_s

    arch, job, global_batch = catalogue.architecture("llama-3.1-8b"), Job(seq_len=16384, activation_offload=True), 64
    tables = Tables(arch, job, global_batch)
    micros = (1, 2)
    stalls = tables.bubble_us(layout, n, _micro_keys(layout, micros), 0.05, 0.01, catalogue.gpu("h100-sxm-80gb"))
    for micro, stall in zip(micros, stalls.tolist()):
        plan = _plan(tables, layout, n, 0, "none", "bf16", micro)
        exposed = offload_exposed_s(offload_transfer_bytes(arch, job, plan), 0.05)
        assert exposed > 0
        assert stall == to_us(_stall(tables, plan, 0.05, 0.01) + exposed)


@pytest.mark.parametrize("seed", range(6))
def test_parallel_seconds_equal_the_four_terms(catalogue, seed: int) -> None:
    """parallel_seconds(parallel_traffic(plan)) on a shape is tp_time_s + pp_p2p_s + cp_exposed_s +
    ep_time_s of the plan, float for float, whichever degrees, precision, recompute and links."""
    import random

    from helpers.parallel_grid import assert_the_four_terms

    from vramplan.models.core.setup import Plan

    rng = random.Random(seed)
    model = rng.choice(["llama-3.1-70b", "mixtral-8x7b", "qwen3-30b-a3b"])
    arch = catalogue.architecture(model)
    job = Job(seq_len=rng.choice([4096, 32768]))
    for _ in range(40):
        tp, pp, cp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4]), rng.choice([1, 2, 4])
        dp = rng.choice([1, 2, 4])
        ep = rng.choice([e for e in (1, 2, 4, 8) if arch.num_experts % max(e, 1) == 0 and (dp * cp) % e == 0] or [1])
        plan = Plan(gpu="-", num_gpus=tp * pp * cp * dp, tp=tp, pp=pp, cp=cp, ep=ep, sequence_parallel=rng.random() < 0.5,
                    recompute=rng.choice(["none", "selective", "full"]), precision=rng.choice(["bf16", "fp32"]),
                    micro_batch=rng.choice([1, 2]), grad_accum=rng.choice([1, 4]))
        gpu = catalogue.gpu(rng.choice(["h100-sxm-80gb", "l40s-48gb"]))
        per_instance, network, compute = rng.choice([4, 8]), rng.choice([25.0, 50.0]), rng.uniform(0.1, 30.0)
        assert_the_four_terms(arch, job, plan, gpu, compute, per_instance, network)
