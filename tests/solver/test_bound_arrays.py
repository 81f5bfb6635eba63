"""The branch-and-bound's tier-1 and tier-2 terms as arrays (solver/bound_arrays.py,
solver/cpsat_bounds.py) are the scalar terms they replaced, cell for cell: the model-parallel
seconds equal Tables.parallel_s (models.parallel_time.parallel_seconds) to the bit (on every shape,
the small ones the bounds compute with the scalar calls included), the terms
compute + collectives + least bubble (+ the least exposed data-parallel traffic) are the integers
the scalar code summed, and each branch's sorted terms come in the scalar code's order. Checked on
dense and MoE models (EP searched, grouped and loop expert kernels), context parallelism, fp8 and
fp16 GPUs, partial recompute, the node-deduplicating HybridEP dispatcher, and shapes inside and
across instances. The bounds' soundness
against every point is tests/solver/test_cpsat_bounds.py."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.parallel_grid import checked_grid, grid_shapes

from vramplan.models.core.units import to_us
from vramplan.models.time.pipeline_schedule import bubble_s
from vramplan.solver.bound_arrays import SCALAR_CELLS, _count_traffic, count_traffic, shape_terms
from vramplan.solver.cpsat_bounds import UnitBounds, branch_layouts, branch_of
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.space_build import build_space
from vramplan.solver.step_time import tail_us
from vramplan.solver.table_memo import TableMemo
from vramplan.solver.tables import Tables
from vramplan.solver.traffic_cells import EP_FIELDS, TRAFFIC_FIELDS

CASES = {
    # DeepSeek-V2-Lite on Megatron: 64 experts, EP free, partial recompute, 8-GPU instances and NVL72 trays
    "moe-megatron": {"model": "deepseek-v2-lite", "seq_len": 4096, "global_batch": 256, "max_gpus": 256,
                     "stack": "megatron", "gpus": "h100-sxm-80gb;gb200-186gb"},
    # the same on Megatron's flex dispatcher with HybridEP: a token once per remote node over the
    # network, once per rank over NVLink (models/time/moe_dispatch.py dispatch_shares per layout)
    "moe-hybridep": {"model": "deepseek-v2-lite", "seq_len": 4096, "global_batch": 256, "max_gpus": 256,
                     "stack": "megatron", "gpus": "h100-sxm-80gb;gb200-186gb", "moe_dispatcher": "hybridep"},
    # Mixtral in fp8 at 32k: EP and CP searched, fp8 expert GEMMs
    "moe-fp8-cp": {"model": "mixtral-8x7b", "seq_len": 32768, "global_batch": 64, "max_gpus": 64, "precision": "fp8",
                   "gpus": "h100-sxm-80gb;b200-180gb"},
    # litgpt runs the experts in a loop (moe_kernel loop: a fixed cost per expert call)
    "moe-loop": {"model": "qwen3-30b-a3b", "seq_len": 4096, "global_batch": 64, "max_gpus": 64, "stack": "litgpt",
                 "gpus": "h100-sxm-80gb"},
    # Megatron's MoE all-to-all overlap: the all-to-alls beyond the compute (ep_time.a2a_overlapped)
    "moe-a2a-overlap": {"model": "qwen3-30b-a3b", "seq_len": 4096, "global_batch": 64, "max_gpus": 64,
                        "stack": "megatron", "moe_a2a_overlap": True, "gpus": "h100-sxm-80gb;b200-180gb"},
    # a dense model with CP, on GPUs with and without bf16 (V100: fp16)
    "dense-cp": {"model": "llama-3.1-8b", "seq_len": 32768, "global_batch": 32, "max_gpus": 64,
                 "gpus": "h100-sxm-80gb;v100-sxm-32gb;l40s-48gb"},
}


def _space(name: str):
    return build_space(packaged_catalogue(), query_from_fields({"tokens": 1e9, **CASES[name]}))


def _shapes(space) -> list[tuple]:
    shapes = grid_shapes(space)
    return shapes[::max(1, len(shapes) // 40)]  # ~40 shapes: every count range, inside and across instances


@pytest.mark.parametrize("name", sorted(CASES))
def test_parallel_seconds_grid_is_the_scalar_function_to_the_bit(name: str) -> None:
    space = _space(name)
    shapes = _shapes(space)
    assert any(space.counts[n] > per_instance for _, n, per_instance, _ in shapes), "some shapes span instances"
    assert any(space.counts[n] <= per_instance for _, n, per_instance, _ in shapes), "some fit one instance"
    cells, _ = checked_grid(space, shapes)
    assert cells > 40


def _scalar_parallel_terms(space, shape, branch) -> list[tuple[int, int, int, int]]:
    """The tier-1 terms as the scalar code summed them, sorted (bound, layout index, p, r)."""
    g, n, per_instance, network = shape
    tables, gpu, count = space.tables, space.gpus[g], space.counts[n]
    terms = []
    for li in branch_layouts(space, shape, branch):
        layout = space.layouts[li]
        accum = tables.accumulation(layout, count, min(space.micro_batches[b] for b in space.valid_batches[n, li]))
        for p in space.gpu_precisions[g]:
            for r, recompute in enumerate(space.recomputes):
                compute = space.chunk_compute_s[g, n, r, p, space.layout_chunk[li]]
                terms.append((to_us(compute) + to_us(tables.parallel_s(layout, count, recompute, space.precisions[p], gpu,
                                                                       per_instance, network, compute))
                              + to_us(bubble_s(layout.pp, layout.vpp, accum, compute)), li, p, r))
    return sorted(terms)


@pytest.mark.parametrize("name", sorted(CASES))
def test_tier_terms_are_the_scalar_sums_in_the_scalar_order(name: str) -> None:
    space = _space(name)
    bounds = UnitBounds(space)
    zeros = tuple(sorted({z for z, _ in space.zero_offloads}))
    checked, paths = 0, set()
    for shape in _shapes(space)[::4]:
        g, n, per_instance, network = shape
        paths.add(count_traffic(space, shape).size <= SCALAR_CELLS)  # the scalar path for small shapes
        names = tuple(space.precisions[p] for p in space.gpu_precisions[g])
        c = space.clusters_of_shape(shape)[0]
        for branch in {branch_of(space.layouts[li]) for li in space.cluster_layouts(shape)}:
            scalar = _scalar_parallel_terms(space, shape, branch)
            arrays = bounds._parallel_terms(shape, branch)
            assert [(b, space.layouts[li], p, r) for b, li, p, r in scalar] == arrays
            assert bounds.parallel_step_us(c, branch) == scalar[0][0]
            # tier 2: each term + max(traffic - compute, one layer's tail) of the least DP traffic
            timed = []
            for rest, li, p, r in scalar:
                comm = dict(zip(space.gpu_precisions[g], bounds._least_comm_us(
                    space.layouts[li], space.counts[n], zeros, names, space.gpus[g], per_instance, network)))[p]
                compute = to_us(space.chunk_compute_s[g, n, r, p, space.layout_chunk[li]])
                timed.append((rest + max(comm - compute, tail_us(comm, space.arch.num_layers)), li, p, r))
            timed.sort()
            assert [(b, space.layouts[li], p, r) for b, li, p, r in timed] == bounds._time_terms(shape, branch)
            assert bounds.lower_step_us(c, branch, memory=False) == timed[0][0]
            checked += 1
    assert checked > 5
    assert paths == ({True} if name == "moe-loop" else {True, False}), "both paths of _shape_terms are checked"


def test_terms_are_shared_by_the_branches_and_kept_by_value() -> None:
    """One ShapeTerms per shape, whatever branch asks; each branch's rows are its layouts."""
    space = _space("moe-megatron")
    shape = _shapes(space)[-1]
    terms = shape_terms(space, shape)
    branches = {branch_of(space.layouts[li]) for li in space.cluster_layouts(shape)}
    assert len(branches) > 1
    for branch in branches:
        UnitBounds(space).step_bound_us(space.clusters_of_shape(shape)[0], branch, 1)
        assert shape_terms(space, shape) is terms
        assert [terms.traffic.layouts[i] for i in terms.traffic.rows[branch]] == \
            [space.layouts[li] for li in branch_layouts(space, shape, branch)]


def _bounds(space, counts: tuple[int, ...]) -> dict[tuple, list]:
    """Every tier of every branch of the H100 clusters of these counts, by offering and count."""
    bounds, found = UnitBounds(space), {}
    for c, cluster in enumerate(space.clusters):
        if cluster.num_gpus in counts and space.gpus[cluster.gpu_index].name == "h100-sxm-80gb":
            for branch in sorted({branch_of(space.layouts[li]) for li in space.cluster_layouts(cluster.shape)}):
                found[cluster.offering.name, cluster.num_gpus, branch] = [
                    bounds.step_bound_us(c, branch, tier) for tier in range(1, 5)]
    return found


def test_family_queries_with_other_degree_limits_keep_their_own_terms(catalogue) -> None:
    """A query that allows GB200 NVL72 trays searches EP up to 64 on every shape, H100s included
    (layouts.degree_limit); one of the same family that allows H100s alone searches EP up to 8. The
    family's UnitMemo keeps each one's terms apart (SearchSpace.unit_shape), so neither reads a bound over the
    other's layouts: the same bounds as each space alone."""
    fields = {"model": "deepseek-v2-lite", "seq_len": 4096, "global_batch": 256, "max_gpus": 256, "tokens": 1e10,
              "objective": "time"}
    narrow = query_from_fields({**fields, "gpus": "h100-sxm-80gb"})
    wide = query_from_fields({**fields, "gpus": "h100-sxm-80gb;gb200-186gb"})
    counts = (64, 256)
    for first, second in ((narrow, wide), (wide, narrow)):
        memo = TableMemo()
        before = build_space(catalogue, first, memo=memo)
        _bounds(before, counts)
        space = build_space(catalogue, second, memo=memo)
        assert before.shared is space.shared and before.max_tp != space.max_tp
        assert _bounds(space, counts) == _bounds(build_space(catalogue, second), counts)


# -- issue 35: the cells, the data-parallel rows and the memory walk as values ------------------------------------


def _traffic_keys(tables: Tables, layouts, count: int, names, recomputes) -> set[tuple]:
    """Tables.parallel_traffic's memo keys that the per-layout cells read: each layout's every
    (precision, recompute), and for a split its split-free layout's too (which its cells but the
    partial recomputes' are)."""
    keys = set()
    for layout in layouts:
        for each in {layout, layout._replace(split=None)}:
            for recompute in recomputes:
                base, _, what = tables._traffic_key(each, recompute)
                keys.update(("parallel-traffic", base, count, what, precision) for precision in names)
    return keys


@pytest.mark.parametrize("name", ["moe-megatron", "moe-fp8-cp", "dense-cp"])
def test_count_cells_are_tables_parallel_traffic_field_for_field(name: str) -> None:
    """CountCells keeps each distinct traffic cell once and a layout's cells as row numbers (a split's
    partial recomputes its own rows, its other cells its split-free layout's): every (layout,
    precision, recompute) cell of a count's grid is Tables.parallel_traffic's value field for field,
    each expert shape the split-free layout's, and a fresh Tables evaluates exactly the memo
    entries the per-layout cells read (models/ evaluations, as before issue 35)."""
    space = _space(name)
    checked, splits, partial = 0, 0, 0
    for shape in _shapes(space)[::3]:
        names = tuple(space.precisions[p] for p in space.gpu_precisions[shape[0]])
        traffic = _count_traffic(space, shape, names)  # not the family's: its cells are made below
        if traffic.size <= SCALAR_CELLS:
            continue
        fresh = Tables(space.arch, space.job, space.global_batch)
        degrees, grid, shapes, kernel, dispatch = traffic.cells(fresh)
        assert fresh.evaluations == len(_traffic_keys(fresh, traffic.layouts, traffic.count, traffic.names,
                                                      traffic.recomputes))
        reference = Tables(space.arch, space.job, space.global_batch)
        for i, layout in enumerate(traffic.layouts):
            splits += layout.split is not None
            for k, precision in enumerate(traffic.names):
                for r, recompute in enumerate(traffic.recomputes):
                    t = reference.parallel_traffic(layout, traffic.count, recompute, precision)
                    assert [grid[f][i, k, r] for f in TRAFFIC_FIELDS] == [getattr(t, f) for f in TRAFFIC_FIELDS], (layout, recompute)
                    assert [grid[f][i, k, r] for f in EP_FIELDS] == [getattr(t.ep, f) for f in EP_FIELDS]
                    partial += layout.split is not None and recompute.share is not None
                    checked += 1
                first = reference.parallel_traffic(layout._replace(split=None), traffic.count, traffic.recomputes[0],
                                                   precision)
                assert shapes[i][k] == first.ep.shape and kernel == first.ep.kernel and dispatch == first.ep.dispatch
            assert degrees["accum"][i, 0, 0] == traffic.accums[i]
    assert checked > 100
    assert splits and partial or name != "moe-megatron", "uneven splits with partial recompute are checked"


@pytest.mark.parametrize("name", ["moe-megatron", "moe-hybridep", "dense-cp"])
def test_data_parallel_rows_are_comm_s_per_layout(name: str) -> None:
    """Tables.comm_rows_s (tier 2's traffic of a branch's layouts as one array) gives each row what
    comm_s gives its layout, to the bit, and leaves the same memo entries and evaluations."""
    space = _space(name)
    zeros = tuple(sorted({z for z, _ in space.zero_offloads}))
    checked, crossing = 0, set()
    for shape in _shapes(space)[::4]:
        g, n, per_instance, network = shape
        names, count, gpu = tuple(space.precisions[p] for p in space.gpu_precisions[g]), space.counts[n], space.gpus[g]
        # a branch's rows at a time in the bounds; here the shape's every layout at once, whose DP
        # groups span more or less (pp) and have other latencies (tp x pp)
        for layouts in [*space.branch_layout_lists(shape).values(), space.cluster_layouts(shape)]:
            values = tuple(space.layouts[li] for li in layouts)
            micros = tuple(space.global_batch * layout.model_parallel // count for layout in values)
            rows = Tables(space.arch, space.job, space.global_batch)
            forward, backward = rows.comm_rows_s(values, count, zeros, micros, names, gpu, per_instance, network)
            one = Tables(space.arch, space.job, space.global_batch)
            for i, (layout, micro) in enumerate(zip(values, micros)):
                f, b = one.comm_s(layout, count, zeros, (micro,), names, gpu, per_instance, network)
                assert forward[i].tobytes() == f.tobytes() and backward[i].tobytes() == b.tobytes()
                crossing.add(one._dp_crossing(layout, count, micro, names[0], per_instance)[0])
                checked += 1
            assert rows.evaluations == one.evaluations
            assert {k for k in rows.time_memo if k[0] == "comm-grid"} == {k for k in one.time_memo if k[0] == "comm-grid"}
    assert checked > 40 and crossing == {False, True}


def _scalar_memory_walk(bounds: UnitBounds, shape, branch, host_mib: int) -> int | None:
    """Tier 3 as the walk before issue 35: the tier-2 terms least first, each checked by _leanest."""
    space = bounds.space
    limit = space.limit_mib[shape[0]]
    for bound, layout, p, r in bounds._time_terms(shape, branch):
        li = space.layout_index[layout]
        if bounds._leanest(shape[1], li, p, None, host_mib) <= limit and bounds._leanest(shape[1], li, p, r, host_mib) <= limit:
            return bound
    return None


TIGHT = {  # spaces where many tier-2 terms do not fit: the walks pass terms whose model states alone do not
    "moe-l40s": {"model": "deepseek-v2-lite", "seq_len": 4096, "global_batch": 256, "max_gpus": 64, "stack": "megatron",
                 "gpus": "l40s-48gb"},
    "mixtral-a100": {"model": "mixtral-8x7b", "seq_len": 4096, "global_batch": 64, "max_gpus": 32, "gpus": "a100-sxm-40gb"},
}


@pytest.mark.parametrize("name", sorted(TIGHT))
def test_memory_walk_is_the_scalar_walk_and_fills_the_same_tables(name: str) -> None:
    """Tier 3 reads each term's leanest memory per cell of the count's grid (_cell_memory) where the
    scalar walk looked it up by value: the same bound on every branch and host budget, and the same
    tables filled (model states of the terms a walk reaches, activations only where those fit),
    so the same models/ evaluations."""
    arrays, scalar = (build_space(packaged_catalogue(), query_from_fields({"tokens": 1e9, **TIGHT[name]}))
                      for _ in range(2))
    on_arrays, on_scalar = UnitBounds(arrays), UnitBounds(scalar)
    checked, found = 0, set()
    for c, cluster in enumerate(arrays.clusters):
        for branch in sorted({branch_of(arrays.layouts[li]) for li in arrays.cluster_layouts(cluster.shape)}):
            expected = _scalar_memory_walk(on_scalar, cluster.shape, branch, scalar.host_budget_mib_per_gpu[c])
            assert on_arrays.lower_step_us(c, branch) == expected
            found.add(expected is None)
            checked += 1
    assert checked > 50 and found == {False, True}
    fills = ("filled_states", "static_mib", "activations_mib")
    assert all(getattr(arrays.on_use, f) == getattr(scalar.on_use, f) for f in fills)
    assert arrays.evaluations == scalar.evaluations
