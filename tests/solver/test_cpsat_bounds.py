"""The branch-and-bound's lower bounds (solver/cpsat_bounds.py, solver/bound_arrays.py) never exceed a real point's step
time: a bound above a point would prune it and return a worse plan as "optimal". Checked point by
point against the brute-force enumeration of the same space, on seeded queries that span
instances (data-parallel and pipeline traffic over the offering's network), and the property of
models/ that the data-parallel bound relies on."""

from __future__ import annotations

import random

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.performance import communication_bytes_per_step
from vramplan.solver.brute import feasible_points
from vramplan.solver.cpsat_bounds import LAST_TIER, UnitBounds, branch_layouts, branch_of
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.space_build import build_space


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_data_parallel_traffic_never_falls_with_accumulation(catalogue, zero: int, precision: str) -> None:
    """_least_comm_us evaluates each ZeRO stage at accumulation 1 as its least traffic."""
    arch = catalogue.architecture("llama-3.1-8b")
    job = Job(seq_len=4096)
    volumes = [communication_bytes_per_step(arch, job, Plan(gpu="-", num_gpus=16, tp=2, zero=zero, precision=precision,
                                                            grad_accum=accum)) for accum in (1, 2, 4, 16)]
    assert volumes == sorted(volumes) and volumes[0] > 0


def _query(seed: int) -> SolveQuery:
    rng = random.Random(seed)
    model = rng.choice(["llama-3.1-8b", "mistral-7b", "llama-2-13b", "mixtral-8x7b"])
    return SolveQuery(
        model=model, job=Job(seq_len=rng.choice([2048, 4096]), optimizer=rng.choice(["adamw", "adamw-8bit"]), stack="custom"),
        global_batch=rng.choice([16, 32]), tokens=1e9, max_gpus=rng.choice([16, 32]),
        gpus=(rng.choice(["h100-sxm-80gb", "a100-sxm-80gb", "l40s-48gb", "mi300x-192gb"]),),
        pins=Pins(recompute=rng.choice([None, "full"]), micro_batch=rng.choice([None, 1])),
    )


@pytest.mark.parametrize("seed", range(12))
def test_lower_bounds_hold_at_every_feasible_point(catalogue, seed: int) -> None:
    _check_every_tier_at_every_point(build_space(catalogue, _query(seed)))


def test_lower_bounds_hold_on_a_moe_with_every_degree_free(catalogue) -> None:
    """The tier-1 and tier-2 terms are arrays over each shape's layouts x precisions x recomputes
    (solver/bound_arrays.py): checked here on a space where every term of them shows, a MoE on
    Megatron at 16k with TP, PP, CP and EP all free, partial recompute, across instances."""
    query = SolveQuery(model="deepseek-v2-lite", job=Job(seq_len=16384, stack="megatron"), global_batch=8, tokens=1e9,
                       max_gpus=8, gpus=("h100-sxm-80gb",))
    space = build_space(catalogue, query)
    layouts = {space.layouts[choice.layout] for choice, _ in feasible_points(space)}
    assert all(any(getattr(layout, degree) > 1 for layout in layouts) for degree in ("tp", "pp", "cp", "ep"))
    assert any(r.share is not None for r in space.recomputes), "partial recompute should be searched"
    _check_every_tier_at_every_point(space)


def _check_every_tier_at_every_point(space) -> None:
    bounds = UnitBounds(space)
    points = feasible_points(space)
    assert points, "the query should have plans"
    crossing = tight = 0
    tighter = [0] * LAST_TIER  # points where tier i + 1 is above tier i
    for choice, metrics in points:
        layout = space.layouts[choice.layout]
        branch = (layout.pp, layout.tp)
        cheap = bounds.compute_step_us(choice.cluster)
        collectives = bounds.parallel_step_us(choice.cluster, branch)
        timing = bounds.lower_step_us(choice.cluster, branch, memory=False)
        refined = bounds.lower_step_us(choice.cluster, branch)
        fitted = bounds.fitted_step_us(choice.cluster, branch)
        tiers = [bounds.step_bound_us(choice.cluster, branch, tier) for tier in range(LAST_TIER + 1)]
        assert tiers == [cheap, collectives, timing, refined, fitted], "step_bound_us names the tiers in order"
        assert None not in tiers and bounds.may_fit(choice.cluster), (choice, tiers)
        assert tiers == sorted(tiers) and fitted <= metrics.step_us, (choice, tiers, metrics.step_us)
        tight += fitted == metrics.step_us
        for i in range(LAST_TIER):
            tighter[i] += tiers[i] < tiers[i + 1]
        crossing += space.clusters[choice.cluster].num_gpus > space.clusters[choice.cluster].offering.num_gpus
    assert crossing, "some points should span instances"
    assert tight, "the last tier should be exact at some unit's best point"
    # Each tier's own term shows somewhere: the collectives and bubble, the data-parallel traffic,
    # and the ZeRO x offload's own traffic and optimizer step. (The memory tier 3 only rises above
    # tier 2 on units whose fastest terms cannot fit, which these spaces' feasible points never sit on.)
    assert tighter[0] and tighter[1] and tighter[3], tighter


@pytest.mark.parametrize("seed", range(4))
def test_branch_layouts_partition_each_shapes_layouts_in_order(catalogue, seed: int) -> None:
    """branch_layouts reads a grouping made once per count and TP reach: for every cluster shape,
    each branch's layouts are exactly the shape's layouts on that branch, in cluster_layouts' order,
    and the branches together hold every layout of the shape once."""
    space = build_space(catalogue, _query(seed).model_copy(update={"gpus": ()}))
    shapes = {cluster.shape for cluster in space.clusters}
    assert len({shape[2] for shape in shapes}) > 1, "the shapes should differ in GPUs per instance (TP reach)"
    for shape in shapes:
        layouts = space.cluster_layouts(shape)
        branches = {branch_of(space.layouts[layout]) for layout in layouts}
        assert len(branches) > 1 or len(layouts) == 1
        for branch in branches:
            assert branch_layouts(space, shape, branch) == [layout for layout in layouts
                                                             if branch_of(space.layouts[layout]) == branch]
        assert sorted(layout for branch in branches for layout in branch_layouts(space, shape, branch)) == sorted(layouts)
        assert branch_layouts(space, shape, (999, 999)) == []


@pytest.mark.parametrize(("offload", "count"), [("none", 16), ("optimizer", 2)])
def test_count_bound_drops_only_counts_that_cannot_hold_the_states(catalogue, offload: str, count: int) -> None:
    """may_fit: 1/n of the single-GPU states per GPU (and of the offloaded ones per GPU of host RAM).
    A 70B full fine-tune (~1.1 TiB of states) cannot fit 16 L40S (48 GB each) without offload
    however it is split, nor 2 with the optimizer states in host RAM; the brute force finds no plan
    at a count the bound drops."""
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=2048), global_batch=32, tokens=1e9, max_gpus=32,
                       gpus=("l40s-48gb",), pins=Pins(offload=offload), min_mfu=0, max_days=0)  # memory alone
    space = build_space(catalogue, query)
    bounds = UnitBounds(space)
    fitting_counts = {space.clusters[c].num_gpus for c in range(len(space.clusters)) if bounds.may_fit(c)}
    dropped = {space.clusters[c].num_gpus for c in range(len(space.clusters))} - fitting_counts
    assert count in dropped and fitting_counts, (dropped, fitting_counts)
    points = feasible_points(space)
    assert points and all(space.clusters[choice.cluster].num_gpus in fitting_counts for choice, _ in points)


def _monotone_cases() -> list[tuple[str, dict]]:
    """Every architecture under the default recipe, and the recipes whose activation terms are
    shaped otherwise (chunked and fused loss, activation offload, partial recompute, LoRA/QLoRA)."""
    cases = [(model, {"stack": "hf"}) for model in sorted(packaged_catalogue().architectures)]
    cases += [("llama-3.1-8b", {"stack": stack}) for stack in ("torchtune", "unsloth", "torchtitan", "megatron", "litgpt")]
    cases += [("llama-3.1-8b", {"stack": "hf", "method": "lora"}), ("mixtral-8x7b", {"stack": "hf", "method": "qlora"})]
    return cases


@pytest.mark.parametrize(("model", "fields"), _monotone_cases(), ids=lambda value: str(value))
def test_activations_never_fall_as_the_micro_batch_grows(catalogue, model: str, fields: dict) -> None:
    """_leanest_dynamic takes each rank's least activations + buffers at the smallest valid
    micro-batch; that is a lower bound only if they never fall as the micro-batch grows (in flight
    on a pipeline rank: min(depth, accumulation) micro-batches, accumulation = global batch /
    (micro-batch x dp)). Checked on every count, layout (pipelined ones included, interleaved with
    --vpp 2), precision, recompute and checked rank of each space."""
    for vpp in (None, 2):
        query = query_from_fields({"model": model, "seq_len": 1024, "global_batch": 64, "max_gpus": 16,
                                   "gpus": "h100-sxm-80gb", "tokens": 1e9, "vpp": vpp, **fields})
        try:
            space = build_space(catalogue, query)
        except VramplanError:
            assert vpp is not None, "only the pinned interleaving may not apply to a model"
            continue
        pipelined = 0
        for n, layouts in space.count_layouts.items():
            for layout in layouts:
                batches = space.valid_batches[n, layout]
                space.on_use.fill_count(n, [layout], space.gpu_precisions[0])
                pipelined += space.layouts[layout].pp > 1 and len(batches) > 1
                for p in space.gpu_precisions[0]:
                    for r in range(len(space.recomputes)):
                        rows = [[space.buffer_mib[b, p, layout] + mib for mib in space.on_use.ranks_activation_mib(r, b, p, layout, n)]
                                for b in batches]
                        for j, column in enumerate(zip(*rows)):
                            assert list(column) == sorted(column), (space.counts[n], space.layouts[layout], p, r, j, column)
        assert pipelined or vpp is None, "interleaved pipelines should be checked"
