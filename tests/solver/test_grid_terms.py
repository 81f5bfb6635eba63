"""The grid forms of two models/ terms the solver tabulates, and the Tables methods that use them:
models/time/parallel_time.py parallel_traffic_over_recomputes (every recompute of a layout, count
and precision in one call) and models/memory/model_states.py model_states_over_zero (every ZeRO
stage and offload of a rank in one call) compute once what the recompute (the ZeRO stage and
offload) does not change. Each grid equals the scalar function of each of its plans, field for
field, and the Tables keep the same values under the same keys with the same evaluation count."""

from __future__ import annotations

from itertools import product

import pytest
from helpers.queries import TRAFFIC_QUERIES

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.model_states import model_states, model_states_over_zero
from vramplan.models.time.parallel_time import parallel_traffic, parallel_traffic_over_recomputes
from vramplan.solver.query import SolveQuery
from vramplan.solver.space_build import build_space
from vramplan.solver.tables import Tables

TRAFFIC_CASES = {
    **TRAFFIC_QUERIES,
    # a dense model, op-level SAC (torchtitan's selective = "op"), float8 TP
    "llama 8b torchtitan op": SolveQuery(model="llama-3.1-8b", job=Job(seq_len=8192, stack="torchtitan", selective="op"),
                                         global_batch=64, tokens=1e9, max_gpus=32, gpus=("h100-sxm-80gb",)),
}


def _fields(traffic) -> dict:
    return {name: getattr(traffic, name) for name in traffic.__dataclass_fields__}


@pytest.mark.parametrize("case", sorted(TRAFFIC_CASES))
def test_traffic_over_recomputes_is_each_recomputes_traffic(catalogue, case: str) -> None:
    space = build_space(catalogue, TRAFFIC_CASES[case])
    arch, job = space.arch, space.job
    tables = Tables(arch, job, space.global_batch)
    modes = set()
    for n_i, layouts in sorted(space.count_layouts.items()):
        for li, precision in product(layouts[::3], space.precisions):
            layout, n = space.layouts[li], space.counts[n_i]
            plans = [tables._replica_plan(layout, n, r.resolved(arch.num_layers, layout), precision) for r in space.recomputes]
            plain = [_fields(parallel_traffic(arch, job, plan)) for plan in plans]
            grid = parallel_traffic_over_recomputes(arch, job, plans)
            assert [_fields(t) for t in grid] == plain, (layout, n, precision)
            # what the recompute does not change read from another recompute's traffic (the solver's)
            again = parallel_traffic_over_recomputes(arch, job, plans[::-1], grid[-1])
            assert [_fields(t) for t in again] == plain[::-1], (layout, n, precision)
            modes.update(plan.recompute for plan in plans)
    assert {"full", "selective"} <= modes


@pytest.mark.parametrize("case", sorted(TRAFFIC_CASES))
def test_tables_traffics_are_tables_traffic(catalogue, case: str) -> None:
    """Tables.parallel_traffics (one models/ call per new layout, count and precision) keeps what
    Tables.parallel_traffic keeps one recompute at a time, under the same keys, one evaluation each."""
    space = build_space(catalogue, TRAFFIC_CASES[case])
    recomputes = tuple(space.recomputes)
    grid, single = (Tables(space.arch, space.job, space.global_batch) for _ in range(2))
    for n_i, layouts in sorted(space.count_layouts.items()):
        for li, precision in product(layouts[::2], space.precisions):
            layout, n = space.layouts[li], space.counts[n_i]
            many = grid.parallel_traffics(layout, n, recomputes, precision)
            one = [single.parallel_traffic(layout, n, r, precision) for r in recomputes]
            assert [_fields(t) for t in many] == [_fields(t) for t in one], (layout, n, precision)
    assert grid.evaluations == single.evaluations > 0
    assert {k for k in grid._memo if k[0] == "parallel-traffic"} == {k for k in single._memo if k[0] == "parallel-traffic"}


STATES_CASES = [
    # (model, job, tp, pp, ep, precision): the stacks whose states read the ZeRO stage or offload their own way
    ("llama-3.1-8b", Job(stack="megatron"), 2, 2, 1, "bf16"),
    ("llama-3.1-8b", Job(stack="deepspeed"), 1, 1, 1, "bf16"),  # ZeRO-1 reduced in hooks
    ("llama-3.1-8b", Job(stack="torchtitan"), 2, 2, 1, "fp8"),  # the stage kept gathered, fp8 weight copies
    ("llama-3.1-8b", Job(stack="litgpt-fsdp1", method="lora"), 1, 1, 1, "bf16"),  # FSDP1's mixed units
    ("llama-3.1-8b", Job(method="qlora"), 1, 1, 1, "bf16"),  # the resident quant state
    ("mixtral-8x7b", Job(stack="megatron"), 2, 2, 4, "bf16"),  # dense and expert flat buffers
]
ZERO_OFFLOADS = ((0, "none"), (1, "none"), (1, "optimizer"), (2, "none"), (2, "optimizer"), (3, "none"),
                 (3, "optimizer"), (3, "optimizer+params"))


@pytest.mark.parametrize("case", range(len(STATES_CASES)))
def test_states_over_zero_are_each_plans_states(catalogue, case: int) -> None:
    model, job, tp, pp, ep, precision = STATES_CASES[case]
    arch = catalogue.architecture(model)
    plans = [Plan(gpu="-", num_gpus=32, zero=zero, offload=offload, tp=tp, pp=pp, ep=ep, precision=precision,
                  grad_accum=accum, sequence_parallel=tp > 1)
             for accum, (zero, offload) in product((1, 4), ZERO_OFFLOADS)]
    for stage in range(pp):
        assert model_states_over_zero(arch, job, plans, stage) == [model_states(arch, job, plan, stage) for plan in plans]


@pytest.mark.parametrize("case", range(len(STATES_CASES)))
def test_tables_states_grid_is_each_cells_states(catalogue, case: int) -> None:
    """Tables.states_grid (each rank's states over the ZeRO x offload choices in one models/ call)
    gives each cell's states_mib and accumulation_mib, and keeps rank_states under the same keys
    with the same evaluation count as one cell at a time."""
    model, job, tp, pp, ep, precision = STATES_CASES[case]
    arch = catalogue.architecture(model)
    space = build_space(catalogue, SolveQuery(model=model, job=job, global_batch=64, tokens=1e9, max_gpus=32,
                                              gpus=("h100-sxm-80gb",)))
    layouts = [lay for lay in space.layouts if (lay.tp, lay.pp, lay.ep) == (tp, pp, ep)] or space.layouts[:4]
    grid, single = (Tables(arch, space.job, 64) for _ in range(2))
    stages = tuple(range(pp))
    checked = 0
    for layout, n in product(layouts, (8, 16, 32)):
        if n % layout.model_parallel or (n // layout.model_parallel * layout.cp) % layout.ep:
            continue
        cells = grid.states_grid(layout, n, precision, ZERO_OFFLOADS, stages)
        for (zero, offload), row in zip(ZERO_OFFLOADS, cells):
            assert row == [(*single.states_mib(layout, zero, offload, n, precision, stage),
                            single.accumulation_mib(layout, zero, offload, n, precision, stage)) for stage in stages]
            checked += 1
    assert checked
    assert grid.evaluations == single.evaluations > 0
    assert {k for k in grid._memo if k[0] in ("states", "overhead")} == {k for k in single._memo if k[0] in ("states", "overhead")}
