"""Balanced pipelines (issue 36): the split is a value of the unit model's layout decision and the
partial recompute a count per model chunk, so CP-SAT chooses both, and the brute-force oracle over
the same space agrees. Llama 3.1 8B's 128k-token output layer is about 2.4 of its layers' FLOPs:
on 4 stages the last one is the slowest, and the fastest split gives it a layer fewer (9, 8, 8, 7).
Llama 3.1 70B on 80 GB A100s at TP 4 takes a layer off the first stage, which keeps 4 micro-batches
in flight under 1F1B (19, 20, 20, 21), and recomputes 2 layers of each."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery


def _query(model: str, gpu: str, tp: int | None = None, max_gpus: int = 16) -> SolveQuery:
    return SolveQuery(model=model, job=Job(seq_len=4096, stack="megatron"), global_batch=16, tokens=1e9,
                      objective="time", gpus=(gpu,), max_gpus=max_gpus, pins=Pins(pp=4, tp=tp))


def _plans(catalogue, query: SolveQuery, engine: str) -> list:
    result = solve(catalogue, query.model_copy(update={"engine": engine, "time_limit_s": 600}), explain_infeasible=False)
    return [(p.plan, p.objective_value) for p in result.plans]


@pytest.mark.parametrize(("model", "gpu", "tp", "split"), [
    ("llama-3.1-8b", "h100-sxm-80gb", None, (9, 8, 8, 7)),
    ("llama-3.1-70b", "a100-sxm-80gb", 4, (19, 20, 20, 21)),
])
def test_cpsat_chooses_the_split_the_oracle_finds(catalogue, model: str, gpu: str, tp: int | None, split: tuple) -> None:
    query = _query(model, gpu, tp, max_gpus=32)
    cpsat, brute = _plans(catalogue, query, "cpsat"), _plans(catalogue, query, "brute")
    assert [plan for plan, _ in cpsat] == [plan for plan, _ in brute]
    assert [value for _, value in cpsat] == pytest.approx([value for _, value in brute], rel=1e-12)
    assert cpsat[0][0].stage_layers == split


def test_the_chosen_split_beats_the_default_and_estimate_reproduces_it(catalogue) -> None:
    """The 8B plan's split, given to `estimate`, gives its memory and step exactly; the same plan on
    the default split (8, 8, 8, 8) is slower: its last stage runs 8 layers and the output layer."""
    query = _query("llama-3.1-8b", "h100-sxm-80gb")
    best = solve(catalogue, query).plans[0]
    choice = best.plan
    fields = dict(gpu=choice.gpu, offering=choice.offering, num_gpus=choice.num_gpus, zero=choice.zero,
                  recompute=choice.recompute, recompute_layers=choice.recompute_layers, precision=choice.precision,
                  micro_batch=choice.micro_batch, grad_accum=choice.grad_accum, offload=choice.offload,
                  **choice.layout.plan_fields())
    job = query.job
    again = estimate(catalogue, query.model, job, Plan(**fields), query.tokens)
    assert again.memory.total_bytes == best.memory.total_bytes
    assert again.performance.step_time_s == pytest.approx(best.performance.step_time_s, rel=1e-12)
    assert again.memory.stage_layers == [9, 8, 8, 7]
    default = estimate(catalogue, query.model, job, Plan(**(fields | {"stage_layers": None})), query.tokens)
    assert default.performance.step_time_s > again.performance.step_time_s
    assert default.performance.pipeline_imbalance_s > again.performance.pipeline_imbalance_s


def test_llama3_405b_on_metas_layout_fits_with_the_least_recompute_per_stage(catalogue) -> None:
    """Llama 3.1 405B on Meta's layout: TP 8 x PP 16 x DP 64 on 8,192 H100, 8k context, global
    batch 2048 (Llama 3 report, Table 4), Megatron's recipe. Without recompute the second rank (8
    layers, 15 micro-batches in flight under 1F1B) needs 80.9 GiB; every layer recomputed fits at
    25.8% MFU (23.1% before Megatron's kernel speed, calibration.STACK_KERNEL_SPEED). Counted per
    stage, as Megatron's --recompute-num-layers is, the first 2 of each stage's 7-8 layers are the
    least that fits (1 does not), at 32.4% MFU (28.9%): the split 7, 8 x 14, 7
    (Meta's: a layer off the first and the last stage) is the default one here, and the second
    rank, not the first, binds, so no uneven split fits with less."""
    from vramplan.models.catalogue.catalogue import load_stacks
    from vramplan.models.catalogue.stack import restacked

    job = restacked(Job(seq_len=8192, kernels="fused"), "megatron", load_stacks())
    query = SolveQuery(model="llama-3.1-405b", job=job, global_batch=2048, tokens=15.6e12, objective="time",
                       gpus=("h100-sxm-80gb",), max_gpus=8192, pins=Pins(num_gpus=8192, tp=8, pp=16))
    best = solve(catalogue, query).plans[0]
    plan = best.plan
    assert (plan.dp, plan.recompute, plan.recompute_layers, plan.stage_layers) == (64, "full", 2, None)
    assert best.memory.stage_layers == [7] + [8] * 14 + [7]
    assert best.memory.total_bytes <= best.memory.limit_bytes
    assert 0.31 < best.performance.mfu_fraction < 0.34  # published 38-43% (docs/fidelity.md, docs/known-limits.md)
    fields = dict(gpu=plan.gpu, offering=plan.offering, num_gpus=plan.num_gpus, zero=plan.zero, recompute="full",
                  precision=plan.precision, micro_batch=plan.micro_batch, grad_accum=plan.grad_accum, tp=8, pp=16,
                  sequence_parallel=True)
    one = estimate(catalogue, query.model, job, Plan(**fields, recompute_layers=1), query.tokens)
    assert one.memory.total_bytes > one.memory.limit_bytes  # one layer less per stage does not fit


def test_only_stacks_that_take_a_split_get_one(monkeypatch) -> None:
    """catalogues/stack_capabilities.csv uneven_split: Megatron (first/last rank counts) and
    torchtitan (model parts by name) take a split of their own; a stack with pipelines but no
    such option (a catalogue of your own) is searched on the default split and refuses a given one."""
    from vramplan.models.catalogue import catalogue as catalogue_module
    from vramplan.models.catalogue.stack_contract import layout_refusal
    from vramplan.models.core.layout import Layout
    from vramplan.solver import layouts as layouts_module
    from vramplan.solver.layouts import valid_layouts

    caps = catalogue_module.load_stack_capabilities()
    assert {name for name, c in caps.items() if c.uneven_split} == {"megatron", "torchtitan", "torchtitan-root-fsdp", "custom"}
    split = Layout(pp=4, split=(9, 8, 8, 7))
    assert layout_refusal(caps["megatron"], "full", split) is None
    no_split = caps["megatron"].model_copy(update={"uneven_split": False})
    assert layout_refusal(no_split, "full", split) == ("stage_layers", "9,8,8,7", "uneven pipeline splits")
    arch = packaged_catalogue().architecture("llama-3.1-8b")
    job = Job(seq_len=4096, stack="megatron")
    assert any(lay.split for lay in valid_layouts(arch, job, Pins(pp=4)))
    monkeypatch.setattr(layouts_module, "load_stack_capabilities", lambda: {**caps, "megatron": no_split})
    searched = valid_layouts(arch, job, Pins(pp=4))
    assert searched and not any(lay.split for lay in searched)
