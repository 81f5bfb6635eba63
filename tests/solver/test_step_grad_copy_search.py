"""The search holds Megatron's optimizer-step peak (models/memory/model_states.py step_grad_copy_bytes:
with a 16-bit gradient buffer the step sets each fp32 main parameter's .grad to a copy of it and keeps
it to the next step's zero_grad): per checked rank, states + buffers + the copy under the limit beside
states + buffers + activations (solver/cpsat_model.py; solver/points.py memory_columns_mib for the
brute force and the verification). Llama 3.1 8B in fp16 with an fp16 buffer (accounting "zero") on
one H200: ZeRO-0 with full recompute holds 16 bytes a parameter and 5 GiB of activations (125.3 GiB,
under the 126.4 GiB limit), but its step adds a 4-byte copy (150.2 GiB): it does not fit."""

from __future__ import annotations

import pytest

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.memory import memory_per_gpu
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery


def _job(accounting: str) -> Job:
    return Job(**with_preset({"stack": "megatron", "seq_len": 4096, "accounting": accounting}, load_stacks()))


def _query(accounting: str, pins: Pins, max_gpus: int) -> SolveQuery:
    return SolveQuery(model="llama-3.1-8b", job=_job(accounting), gpus=("h200-sxm-141gb",), max_gpus=max_gpus,
                      global_batch=8, pins=pins, top_k=3, objective="cost")


def test_the_copy_decides_the_one_gpu_plan(catalogue) -> None:
    """With an fp32 buffer (accounting "hf", the preset) nothing is copied at the step; with the fp16
    buffer the same plan's step is over the limit though its activation peak is under it."""
    arch, gpu = catalogue.architecture("llama-3.1-8b"), catalogue.gpu("h200-sxm-141gb")
    plan = Plan(gpu=gpu.name, num_gpus=1, zero=0, precision="fp16", recompute="full", micro_batch=1, grad_accum=8)
    memory = memory_per_gpu(arch, _job("zero"), plan, gpu)
    assert memory.activation_peak_bytes <= memory.limit_bytes < memory.total_bytes == memory.step_peak_bytes


@pytest.mark.parametrize(("pins", "max_gpus"), [(Pins(precision="fp16", num_gpus=1), 1), (Pins(precision="fp16"), 2),
                                                (Pins(precision="fp16", zero=0, recompute="full"), 2)])
def test_both_engines_hold_the_step_and_agree(catalogue, pins, max_gpus) -> None:
    query = _query("zero", pins, max_gpus)
    cpsat = solve(catalogue, query)  # every plan is re-checked in exact bytes (solver/verify.py)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute", "time_limit_s": 600}))
    assert cpsat.status == brute.status == "optimal"
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
    for plan in cpsat.plans:
        assert plan.memory.gpu_fits
        one_zero0 = plan.plan.num_gpus == 1 and plan.plan.zero == 0 and plan.plan.offload == "none"
        assert not one_zero0  # the ZeRO-0 plans of one H200 all hold the 29.9 GiB copy at the step
    if pins.zero == 0:  # its one-GPU plan fits but for the step: two GPUs (TP 2 or PP 2) it is
        assert {p.plan.num_gpus for p in cpsat.plans} == {2}



def test_the_explanation_counts_the_step(catalogue) -> None:
    """With ZeRO-0 pinned one H200 holds no plan: the closest miss (solver/fitting.py's grids) is
    over the limit by its step's copy, as its exact-byte re-evaluation says."""
    result = solve(catalogue, _query("zero", Pins(precision="fp16", zero=0, offload="none"), 1))
    assert result.status == "infeasible"
    miss = result.explanation.closest_miss
    assert miss is not None and not miss.memory.gpu_fits
    assert result.explanation.over_limit_bytes > 0
