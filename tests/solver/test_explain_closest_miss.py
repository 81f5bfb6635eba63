"""The closest miss (explain.closest_miss) reads each point's step time alone and takes each
cluster's step cap once, and skips a shape whose least compute (the tier-0 bound) is above every
member's cap: it must name the point that the walk over every point of every shape names (the
engines' inner_metrics and cluster_accepts, memory ignored): the least overshoot, then the
fastest, the first such in shape and point order."""

from __future__ import annotations

import random

import pytest
from helpers.queries import random_query

from vramplan.models.core.setup import Job
from vramplan.solver import explain
from vramplan.solver.explain import closest_miss
from vramplan.solver.fitting import least_peak_mib, shape_points
from vramplan.solver.points import Choice, cluster_accepts, inner_metrics, step_cap_us
from vramplan.solver.query import SolveQuery
from vramplan.solver.space_build import build_space
from vramplan.solver.table_memo import TableMemo

# Llama 3.1 405B pre-training on H100s (bench/solve_bench.py's infeasible row): --max-days 365
# caps every count's step below its least compute, so no shape is walked.
PRETRAIN_405B = SolveQuery(model="llama-3.1-405b", job=Job(seq_len=8192, kernels="fused"), global_batch=2048,
                           tokens=15.6e12, objective="time", max_gpus=4096, gpus=("h100-sxm-80gb",))


def _every_point(space) -> tuple[Choice, int] | None:
    """The oracle: every point of every shape, no level cut and no shape skipped."""
    best = None
    for shape in sorted({c.shape for c in space.clusters}):
        limit = space.limit_mib[shape[0]]
        for peak, inner in shape_points(space, shape):
            metrics = inner_metrics(space, shape, inner, memory=False)
            assert metrics is not None, "every point of shape_points is valid"
            cluster = next((c for c in space.clusters_of_shape(shape)
                            if cluster_accepts(space, c, metrics, memory=False)), None)
            key = (peak - limit, metrics.step_us)
            if cluster is not None and (best is None or key < best[0]):
                best = (key, Choice(cluster, *inner))
    return None if best is None else (best[1], best[0][0])


def _skipped_shapes(space) -> set:
    """Shapes whose least compute is above every member's step cap."""
    skipped = set()
    for shape in {c.shape for c in space.clusters}:
        caps = [step_cap_us(space, c) for c in space.clusters_of_shape(shape)]
        least = space.least_compute_us.get((shape[0], shape[1]))
        if least is not None and None not in caps and least > max(caps):
            skipped.add(shape)
    return skipped


@pytest.mark.parametrize("seed", range(0, 60, 3))
def test_closest_miss_is_the_least_overshoot_of_every_point(catalogue, seed: int) -> None:
    query = random_query(random.Random(seed))
    space = build_space(catalogue, query, memo=TableMemo())
    assert closest_miss(space) == _every_point(space)


@pytest.mark.parametrize("update", [
    {"deadline_hours": 2.0},  # the deadline caps every cluster alike
    {"budget_usd": 30.0},  # the budget caps each cluster by its price
    {"max_days": 1.0},
])
def test_capped_shapes_are_skipped_and_the_miss_is_the_same(catalogue, update: dict) -> None:
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9, max_gpus=64,
                       gpus=("a100-sxm-40gb", "l4-24gb"), **update)
    space = build_space(catalogue, query, memo=TableMemo())
    assert _skipped_shapes(space)
    assert closest_miss(space) == _every_point(space)


def test_the_405b_row_walks_no_shape(catalogue) -> None:
    space = build_space(catalogue, PRETRAIN_405B, memo=TableMemo())
    walked = {c.shape for c in space.clusters} - _skipped_shapes(space)
    # Only the 4,096-GPU shapes are walked, and they hold no data-parallel point at global batch 2048.
    assert walked and all(space.counts[shape[1]] == 4096 and not any(shape_points(space, shape)) for shape in walked)
    assert closest_miss(space) is None
    assert _every_point(space) is None


@pytest.mark.parametrize(("pins", "budget"), [({}, None), ({"tp": 4}, None), ({}, 1e6)])
def test_the_summary_names_the_layout_the_closest_miss_was_searched_on(catalogue, pins: dict, budget) -> None:
    """The walk covers the least parallel layout only: the summary said "the closest plan", and a
    user read 1,351.6 GiB over on one GPU where a TP 8 x EP 8 plan comes within 11.3 GiB."""
    from vramplan.solver.api import solve
    from vramplan.solver.query import Pins

    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=8, gpus=("h100-sxm-80gb",),
                       max_gpus=8, pins=Pins(recompute="none", micro_batch=1, **pins), budget_usd=budget)
    why = solve(catalogue, query).explanation
    assert why is not None and why.closest_miss is not None
    layout = "TP4" if pins else "data parallelism alone"
    within = " within the budget" if budget else ""  # the budget's, after the layout (it read as the layout's)
    assert f"the closest plan of the least parallel layout ({layout}){within} is " in why.summary
    assert why.closest_miss.plan.tp == pins.get("tp", 1)


@pytest.mark.parametrize("seed", range(1, 60, 6))
def test_a_shapes_least_peak_is_at_most_each_of_its_points(catalogue, seed: int) -> None:
    """fitting.least_peak_mib, the bound the walk orders and stops on, is at most every point's peak
    (the grid before the stack's refusals), None only where the shape has no point."""
    query = random_query(random.Random(seed))
    space = build_space(catalogue, query, memo=TableMemo())
    for shape in sorted({c.shape for c in space.clusters}):
        peaks = [peak for peak, _ in shape_points(space, shape)]
        least = least_peak_mib(space, shape)
        assert (least is None and not peaks) or (least is not None and all(least <= peak for peak in peaks))


def test_shapes_that_cannot_overshoot_less_are_not_walked(catalogue, monkeypatch) -> None:
    """70B at 8k on up to 64 A100-40GB or L4: every shape misses. Walked by their least peak, the
    first shape's miss leaves the shapes whose least overshoot is larger unwalked, and the miss is
    the oracle's (every point of every shape)."""
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9, max_gpus=64,
                       gpus=("a100-sxm-40gb", "l4-24gb"), pins={"recompute": "none"})
    space = build_space(catalogue, query, memo=TableMemo())
    walked = []

    def counted(space, shape):
        walked.append(shape)
        return shape_points(space, shape)

    monkeypatch.setattr(explain, "shape_points", counted)
    miss = closest_miss(space)
    shapes = {c.shape for c in space.clusters} - _skipped_shapes(space)
    assert miss is not None and miss[1] > 0
    assert 0 < len(walked) < len(shapes) // 4  # 8 of 112 when written
    assert miss == _every_point(space)
