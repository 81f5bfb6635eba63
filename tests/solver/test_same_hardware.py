"""solver/same_hardware.py: a cluster whose every point a cheaper same-hardware cluster accepts
(host RAM budget at least its own, step cap no tighter) has an empty CP-SAT model on every branch,
which the engine therefore neither builds nor solves; the answers are the brute-force oracle's."""

from __future__ import annotations

from ortools.sat.python import cp_model

from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.clusters import branch_of
from vramplan.solver.cpsat_bounds import branch_layouts
from vramplan.solver.cpsat_model import build_cluster_model
from vramplan.solver.points import step_cap_us
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.same_hardware import cheaper_twins, dominated
from vramplan.solver.space_build import build_space

# Several providers' 8 x H100 instances under --objective time, where the price prunes nothing.
QUERY = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096), global_batch=64, tokens=1e9, objective="time",
                   gpus=("h100-sxm-80gb",), max_gpus=16, pins=Pins(num_gpus=16))


def test_a_dominated_clusters_models_are_empty(catalogue) -> None:
    space = build_space(catalogue, QUERY)
    flagged = [c for c in range(len(space.clusters)) if dominated(space, c)]
    assert flagged and len(flagged) < len(space.clusters)  # some offerings are, some are not
    for c in flagged:
        shape = space.clusters[c].shape
        for branch in {branch_of(space.layouts[li]) for li in space.cluster_layouts(shape)}:
            layouts = branch_layouts(space, shape, branch)
            model = build_cluster_model(space, c, step_cap_us(space, c), cheaper_twins(space, c), layouts)
            if model is None:
                continue
            model.model.minimize(model.step)
            status = cp_model.CpSolver().solve(model.model)
            assert status == cp_model.INFEASIBLE, (c, branch)


def test_the_answer_is_the_oracles(catalogue) -> None:
    cpsat = solve(catalogue, QUERY.model_copy(update={"top_k": 3}))
    brute = solve(catalogue, QUERY.model_copy(update={"top_k": 3, "engine": "brute"}))
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
