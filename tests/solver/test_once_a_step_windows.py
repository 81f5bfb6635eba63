"""The solver's data-parallel windows where ZeRO-0/1 reduce once a step (models/time/performance.py
dp_windows_s; solver/step_time.py): the last micro-batch's backward (and, on Megatron, its first
forward for ZeRO-1's parameter all-gather) instead of the whole step's, tabulated per accumulation
and chosen by the ZeRO stage inside the CP-SAT model (cpsat_model._dp_windows). CP-SAT and brute
force agree, every plan is re-checked against models/ (solver/verify.py), and the windows change the
answer: the time-optimal plan of a network-bound query moves off a deep accumulation."""

from __future__ import annotations

import pytest

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job
from vramplan.models.time import performance as perf_module
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery


def _job(stack: str) -> Job:
    return Job(**with_preset({"stack": stack, "seq_len": 4096, "method": "full"}, load_stacks()))


def _query(stack: str, **pins) -> SolveQuery:
    # two 8-GPU nodes: the data-parallel traffic of an 8B model crosses the network
    return SolveQuery(model="llama-3.1-8b", job=_job(stack), gpus=("h100-sxm-80gb",), max_gpus=16,
                      global_batch=64, pins=Pins(num_gpus=16, **pins), top_k=3, objective="time")


@pytest.mark.parametrize("stack", ["megatron", "deepspeed"])
def test_cpsat_and_brute_force_agree_with_every_zero_stage_free(catalogue, stack) -> None:
    """ZeRO 0-3 free beside every micro-batch: the model mixes once-a-step and per-micro-batch windows."""
    query = _query(stack, tp=1, pp=1, cp=1)
    cpsat = solve(catalogue, query)  # every plan re-evaluated by models/ (solver/verify.py)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute", "time_limit_s": 600}))
    assert cpsat.status == brute.status == "optimal"
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
    assert [p.objective_value for p in cpsat.plans] == [p.objective_value for p in brute.plans]


def test_zero_1_alone_agrees(catalogue) -> None:
    """Only ZeRO-1 (the once-a-step windows without the choice): CP-SAT and brute force agree."""
    query = _query("megatron", zero=1, tp=1, pp=1, cp=1)
    cpsat = solve(catalogue, query)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute", "time_limit_s": 600}))
    assert cpsat.status == brute.status == "optimal"
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
    assert {p.plan.zero for p in cpsat.plans} == {1}


def test_the_windows_change_the_time_optimal_plan(catalogue, monkeypatch) -> None:
    """Llama 3.1 8B on 16 H100 over two nodes, Megatron: with the whole step's backward as the window
    (the model before) ZeRO-1 at 4 micro-batches of 1 was fastest, its traffic hidden; with the last
    micro-batch's it is exposed, and the fastest plan takes one micro-batch of 4 and reduces it
    behind its own backward."""
    query = _query("megatron", tp=1, pp=1, cp=1)
    now = solve(catalogue, query).plans[0]
    monkeypatch.setattr(perf_module, "once_a_step_window_share", lambda pp, vpp, grad_accum: 1.0)
    before = solve(catalogue, query).plans[0]
    assert (before.plan.zero, before.plan.micro_batch, before.plan.grad_accum) == (1, 1, 4)
    assert now.plan.grad_accum == 1
    assert before.performance.step_time_s < now.performance.step_time_s  # the old windows were optimistic
