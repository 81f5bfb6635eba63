"""The branch-and-bound's tier-1 step-time terms (solver/cpsat_bounds.py) as numpy arrays: per
cluster shape (GPU, count, GPUs per instance, network), over all its layouts x precisions x
recomputes at once, shared by its (pp, tp) branches, which slice it (tier 2 adds the least
data-parallel traffic per branch to the same arrays, cpsat_bounds._timed).

A term is compute + the model-parallel collectives (TP, PP p2p, CP, EP) + the least bubble, each
rounded up to whole microseconds: the three integers the step tables hold for every point of the
layout (solver/space_tables.py fill_step_tables, solver/step_time.py), the bubble at the layout's
largest accumulation, so it is at most every step time of the layout, precision and recompute.
The collectives are models/time/parallel_time.py parallel_seconds of the same GPU-independent
traffic (Tables.parallel_s' memo entry: the same models/ evaluations), written here with numpy over
the grid: the same float operations in the same order per cell, so each cell is the scalar
function's value to the bit. A models/ change to parallel_seconds (or what it calls) must be
mirrored here: tests/solver/test_bound_arrays.py compares every cell of dense, MoE (grouped and
loop kernels), CP, fp8, fp16, single- and multi-instance spaces with Tables.parallel_s and fails
otherwise. One scalar call cost ~10 us, half of it the expert GEMM slowdown (models/time/moe_gemm.py),
which depends only on the layout's expert shape, the GPU and the precision: kept once per those.

The traffic cells are kept numbered per (count, precisions, recomputes) in the Tables (solver/traffic_cells.py CountCells:
each distinct Tables.parallel_traffic memo entry one row, a layout's cells row numbers), their
arrays per (count, layout set, precisions) and the terms per shape (SearchSpace.unit_shape: by
value) in the family's UnitMemo, so every query of the family reads them whatever clusters it allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np

from vramplan.models.catalogue.stack import MoeKernel
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Precision
from vramplan.models.core.units import BYTES_PER_GB, to_us, to_us_array
from vramplan.models.time.calibration import COMMUNICATION_EFFICIENCY, expert_efficiency
from vramplan.models.time.fp8 import fp8_gemm_speedup
from vramplan.models.time.moe_dispatch import Dispatch, dispatch_shares
from vramplan.models.time.moe_gemm import ExpertShape, expert_slowdown, loop_overhead_s
from vramplan.models.time.pipeline_schedule import bubble_s
from vramplan.models.time.rates import hbm_stream_seconds, peak_tflops, rate_precision
from vramplan.solver.choice_keys import RecomputeChoice
from vramplan.solver.clusters import Branch, Shape, branch_of
from vramplan.solver.space import SearchSpace
from vramplan.solver.tables import Tables
from vramplan.solver.traffic_cells import EP_FIELDS, TRAFFIC_FIELDS, count_cells

_TERA = 10**12


# A shape with at most this many (layout, precision, recompute) cells takes the scalar path
# (Tables.parallel_s per cell, the reference the arrays equal): numpy's fixed cost per operation
# (~1 us, some 40 of them a shape) is more than a few scalar calls of ~5 us (dense models, the
# batch's usual shapes, cost 4-14% more CPU on bench/solve_bench.py's headline rows with arrays
# throughout; docs/performance.md#solve).
SCALAR_CELLS = 8


@dataclass
class CountTraffic:
    """One count's layouts (of one TP reach), in the space's order (cluster_layouts, so a branch's
    rows ascend too), and what they move per step, GPU-independent (made on first use: cells):
    each field of ParallelTraffic as a float64 array over (layout, precision, recompute), the
    layouts' degrees and largest accumulation (the least bubble) as (layout, 1, 1) integer arrays,
    which terms some layout has at all, and each branch's rows."""

    layouts: tuple[Layout, ...]
    accums: list[int]  # the largest accumulation (the smallest valid micro-batch) per layout
    rows: dict[Branch, np.ndarray]
    parallel: dict[str, bool]  # tp, pp, cp, ep: whether some layout's degree is above 1
    count: int
    names: tuple[str, ...]
    recomputes: tuple[RecomputeChoice, ...]
    _grid: tuple | None = None  # (degrees, grid, shapes, kernel, dispatch), gathered by cells()
    slowdowns: dict[str, np.ndarray] = field(default_factory=dict)  # by GPU name: _ep_seconds_grid's expert slowdowns
    _branch_layouts: dict[Branch, tuple[Layout, ...]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.layouts) * len(self.names) * len(self.recomputes)

    def branch_layouts(self, branch: Branch) -> tuple[Layout, ...]:
        """A branch's layouts, in its rows' order (kept: a memo key of the data-parallel rows, Tables.comm_rows_s)."""
        layouts = self._branch_layouts.get(branch)
        if layouts is None:
            layouts = self._branch_layouts[branch] = tuple(self.layouts[i] for i in self.rows[branch].tolist())
        return layouts

    def cells(self, tables: Tables) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list, MoeKernel,
                                             Dispatch | None]:
        """(degrees: tp, pp, cp, ep, vpp, accum as (L, 1, 1) int64; grid: TRAFFIC_FIELDS and EP_FIELDS
        as (L, P, R) float64; the expert shape per layout and precision; the MoE kernel; the EP
        dispatcher with the model's experts and top-k, EpTraffic.dispatch: the job's, every layout's)."""
        if self._grid is None:
            cells = count_cells(tables, self.count, self.names, self.recomputes)
            layout_cells = [cells.of_layout(tables, layout) for layout in self.layouts]
            size = (len(self.layouts), len(self.names), len(self.recomputes), len(TRAFFIC_FIELDS) + len(EP_FIELDS))
            rows = np.array([rows for rows, _ in layout_cells], dtype=np.intp).reshape(size[:3])
            grid = cells.array()[rows]  # (L, P, R, fields): each cell's values, read by its row
            columns = np.array([(*layout[:5], accum) for layout, accum in zip(self.layouts, self.accums)],
                               dtype=np.int64).reshape(len(self.layouts), 6)
            degrees = {name: columns[:, i].reshape(len(self.layouts), 1, 1)
                       for i, name in enumerate(("tp", "pp", "cp", "ep", "vpp", "accum"))}
            self._grid = (degrees, {name: grid[..., i] for i, name in enumerate(TRAFFIC_FIELDS + EP_FIELDS)},
                          [layout_shapes for _, (layout_shapes, _, _) in layout_cells],
                          layout_cells[0][1][1] if layout_cells and self.names else "grouped",
                          layout_cells[0][1][2] if layout_cells and self.names else None)
        return self._grid


@dataclass
class ShapeTerms:
    """A shape's tier-1 terms: compute_us (L, P, R), bound_us (L, P, R) = compute + collectives + least
    bubble, whole microseconds; each branch's least term (tier 1), and on use its sorted terms
    (tier 4's walk) and its tier-2 terms (+ the least exposed data-parallel traffic, cpsat_bounds)."""

    traffic: CountTraffic
    precisions: tuple[int, ...]
    compute_us: np.ndarray
    bound_us: np.ndarray
    least: dict[Branch, int]
    timed: dict[Branch, np.ndarray | None] = field(default_factory=dict)  # tier 2 (Lb, P, R)
    timed_least: dict[Branch, int | None] = field(default_factory=dict)

    def parallel_least(self, branch: Branch) -> int | None:
        """Tier 1: the least term of a branch (None: no layout or no precision)."""
        return self.least.get(branch)

    def sorted_terms(self, branch: Branch, grid: np.ndarray | None = None) -> list[tuple[int, Layout, int, int]]:
        """(bound, Layout, precision, recompute) of a branch, least first, ties in (layout, precision,
        recompute) order (the space's layout order): grid is the branch's (Lb, P, R) terms, by
        default its tier-1 ones."""
        return self.cell_terms(self.sorted_cells(branch, grid))

    def sorted_cells(self, branch: Branch, grid: np.ndarray | None = None) -> list[tuple[int, int]]:
        """sorted_terms as (bound, cell): a cell is the term's flat index in the count's (layout,
        precision, recompute) grid (bound_us'), which ascends with (layout, precision, recompute)
        as a branch's rows do, so it breaks ties alike."""
        rows = self.traffic.rows.get(branch)
        if rows is None or not self.bound_us.size:
            return []
        grid = self.bound_us[rows] if grid is None else grid
        width = grid.shape[1] * grid.shape[2]
        # (a branch's terms are a few hundred at most: Python's sort beats numpy's calls)
        return sorted(zip(grid.ravel().tolist(), [row * width + k for row in rows.tolist() for k in range(width)]))

    def cell_terms(self, cells: list[tuple[int, int]]) -> list[tuple[int, Layout, int, int]]:
        """(bound, cell) pairs as (bound, Layout, precision, recompute)."""
        num_p, num_r = self.bound_us.shape[1], self.bound_us.shape[2]
        layouts, ps = self.traffic.layouts, self.precisions
        return [(bound, layouts[cell // (num_p * num_r)], ps[cell // num_r % num_p], cell % num_r) for bound, cell in cells]


def shape_terms(space: SearchSpace, shape: Shape) -> ShapeTerms:
    """The shape's tier-1 terms, kept in the family's UnitMemo by value (SearchSpace.unit_shape)."""
    memo = space.shared.shape_terms
    key = space.unit_shape(shape)
    terms = memo.get(key)
    if terms is None:
        terms = memo[key] = _shape_terms(space, shape)
    return terms


def _shape_terms(space: SearchSpace, shape: Shape) -> ShapeTerms:
    g, n, per_instance, network = shape
    gpu, ps = space.gpus[g], space.gpu_precisions[g]
    traffic = count_traffic(space, shape)
    recomputes = range(len(space.recomputes))
    if not traffic.layouts or not ps:
        empty = np.zeros((len(traffic.layouts), len(ps), len(recomputes)), dtype=np.int64)
        return ShapeTerms(traffic, ps, empty, empty, {})
    # Each layout's compute (its chunking's: a partial full recompute counts its layers per model chunk).
    chunks = [space.layout_chunk[li] for li in space.cluster_layouts(shape)]
    if traffic.size <= SCALAR_CELLS:
        compute = [[[space.chunk_compute_s[g, n, r, p, k] for r in recomputes] for p in ps] for k in chunks]
        by_cell = _scalar_terms(space, shape, traffic, compute)
        bound = np.array(by_cell, dtype=np.int64).reshape(traffic.size // (len(ps) * len(recomputes)), len(ps), -1)
        compute_us = np.array([[[to_us(c) for c in row] for row in rows] for rows in compute], dtype=np.int64)
        by_layout = [min(cells) for cells in by_cell_rows(by_cell, len(traffic.layouts))]
    else:
        # one (P, R) row per compute class of the count (a few), which each layout reads by its class
        classes = {k: i for i, k in enumerate(dict.fromkeys(chunks))}
        by_class = np.array([[[space.chunk_compute_s[g, n, r, p, k] for r in recomputes] for p in ps] for k in classes],
                            dtype=np.float64)
        compute_s = by_class[np.array([classes[k] for k in chunks], dtype=np.intp)]
        compute_us = to_us_array(compute_s)  # models.performance.compute_time_s (space.compute_s), rounded up
        tables = space.tables
        assert tables is not None  # build_space sets it
        degrees, grid, shapes, kernel, _ = traffic.cells(tables)
        names = tuple(space.precisions[p] for p in ps)
        seconds = parallel_seconds_grid(tables, traffic, names, compute_s, gpu, space.counts[n] > per_instance,
                                        per_instance, network)
        bound = compute_us + to_us_array(seconds)  # models.parallel_time.parallel_seconds (Tables.parallel_s), to the bit
        if traffic.parallel["pp"]:  # (pp = 1 has no bubble: 0 us)
            # models.pipeline_schedule.bubble_s at the layout's largest accumulation (its smallest valid
            # micro-batch): the least bubble of any of its micro-batches (bubble_s falls as it grows)
            bound = bound + to_us_array(bubble_s(degrees["pp"], degrees["vpp"], degrees["accum"], compute_s))
        by_layout = bound.reshape(len(traffic.layouts), -1).min(axis=1).tolist()
    least = {branch: min(by_layout[i] for i in rows.tolist()) for branch, rows in traffic.rows.items()}
    return ShapeTerms(traffic, ps, compute_us, bound, least)


def by_cell_rows(values: list[int], num_layouts: int) -> list[list[int]]:
    """A flat (layout, precision, recompute) list cut into its layouts' rows."""
    width = len(values) // num_layouts
    return [values[i * width:(i + 1) * width] for i in range(num_layouts)]


def _scalar_terms(space: SearchSpace, shape: Shape, traffic: CountTraffic, compute: list[list[list[float]]]) -> list[int]:
    """The terms of a small shape, flat in (layout, precision, recompute) order, one scalar call a
    cell: to_us of the compute (models.performance.compute_time_s), of Tables.parallel_s
    (models.parallel_time.parallel_seconds) and of bubble_s at the layout's largest accumulation:
    what the array path computes, and what it is checked against."""
    g, n, per_instance, network = shape
    tables, gpu, count = space.tables, space.gpus[g], space.counts[n]
    assert tables is not None  # build_space sets it
    precisions = [space.precisions[p] for p in space.gpu_precisions[g]]
    return [to_us(seconds) + to_us(tables.parallel_s(layout, count, recompute, precision, gpu, per_instance, network,
                                                     seconds))
            + to_us(bubble_s(layout.pp, layout.vpp, accum, seconds))
            for layout, accum, rows in zip(traffic.layouts, traffic.accums, compute)
            for precision, row in zip(precisions, rows) for recompute, seconds in zip(space.recomputes, row)]


def count_traffic(space: SearchSpace, shape: Shape) -> CountTraffic:
    """The GPU-independent traffic of a shape's layouts, kept in the family's UnitMemo per (count,
    layout set: SearchSpace.unit_shape, precisions): the shapes of every GPU and offering with this
    count and these layouts share it."""
    g, n, per_instance, _ = shape
    names = tuple(space.precisions[p] for p in space.gpu_precisions[g])
    key = (space.counts[n], space.unit_shape(shape).layout_set, names)
    memo = space.shared.count_traffic
    traffic = memo.get(key)
    if traffic is None:
        traffic = memo[key] = _count_traffic(space, shape, names)
    return traffic


def _count_traffic(space: SearchSpace, shape: Shape, names: tuple[str, ...]) -> CountTraffic:
    n = shape[1]
    tables, count = space.tables, space.counts[n]
    indices = space.cluster_layouts(shape)
    layouts = tuple(space.layouts[li] for li in indices)
    rows: dict[Branch, list[int]] = {}
    for i, layout in enumerate(layouts):
        rows.setdefault(branch_of(layout), []).append(i)
    micro = space.micro_batches
    assert tables is not None  # build_space sets it
    accums = [tables.accumulation(layout, count, micro[space.valid_batches[n, li][0]])  # valid_batches ascend
              for li, layout in zip(indices, layouts)]
    parallel = {name: any(getattr(layout, name) > 1 for layout in layouts) for name in ("tp", "pp", "cp", "ep")}
    return CountTraffic(layouts, accums, {b: np.array(r, dtype=np.intp) for b, r in rows.items()}, parallel, count,
                        names, tuple(space.recomputes))


def _link_denominator(link_gb_per_s: float) -> float:
    """models.collectives.link_seconds' divisor: seconds = bytes / this (the same product, in order)."""
    return link_gb_per_s * COMMUNICATION_EFFICIENCY.value * BYTES_PER_GB


def parallel_seconds_grid(tables: Tables, t: CountTraffic, names: tuple[str, ...], compute_s: np.ndarray, gpu,
                          spans_instances: bool, per_instance: int, network: float) -> np.ndarray:
    """models.parallel_time.parallel_seconds of every (layout, precision, recompute) cell of a
    count's traffic on a shape (compute_s: (L, P, R) seconds), as one (L, P, R) array: each term is
    the scalar function's expression, operation for operation (numpy's float64 +, -, *, / and
    maximum round as Python's floats do), so each cell equals the scalar value. A term no layout
    has (every degree 1: 0.0 in every cell) is left out of the sum, which adding 0.0 leaves as is."""
    d, f, shapes, _, _ = t.cells(tables)
    has = t.parallel
    intra = _link_denominator(gpu.intra_node_bandwidth_gb_per_s)
    net = _link_denominator(network)
    total = np.zeros(f["tp_exposed_bytes"].shape)
    if has["tp"]:
        # TP: parallel_time._tp_seconds: the exposed collectives in full, the overlapped (the
        # backward's) beyond the backward compute, compute_s * (1 - forward_share), the
        # forward-overlapped (tp_overlap: the forward's) beyond the forward compute, compute_s * forward_share
        total = np.where(d["tp"] > 1, f["tp_exposed_bytes"] / intra + np.maximum(
            0.0, f["tp_overlapped_bytes"] / intra - compute_s * (1 - f["forward_share"])) + np.maximum(
            0.0, f["tp_forward_overlapped_bytes"] / intra - compute_s * f["forward_share"]), 0.0)
    if has["pp"]:
        # PP p2p: parallel_time._pp_seconds over the network when the job spans instances, else
        # NVLink: the blocking transfers in full, the overlapped ones beyond the compute
        pp_link = net if spans_instances else intra
        total = total + np.where(d["pp"] > 1, f["pp_bytes"] / pp_link + np.maximum(
            0.0, f["pp_overlapped_bytes"] / pp_link - compute_s), 0.0)
    if has["cp"]:
        # CP: parallel_time._cp_seconds on parallel_time._cp_link (the network when tp x cp leaves
        # the instance): the ring beyond the attention's share of the compute
        cp_link = np.where(d["tp"] * d["cp"] > per_instance, net, intra)
        total = total + np.where(d["cp"] > 1, np.maximum(
            0.0, f["cp_bytes"] / cp_link - compute_s * f["attention_flops"] / f["forward_flops"]), 0.0)
    if shapes and shapes[0] and shapes[0][0] is not None:  # MoE: expert GEMMs on every layout
        total = total + _ep_seconds_grid(tables, t, names, gpu, per_instance, intra, net, compute_s)
    return total  # parallel_seconds' sum tp + pp + cp + ep, in its order


def _ep_seconds_grid(tables: Tables, t: CountTraffic, names: tuple[str, ...], gpu, per_instance: int, intra: float,
                     net: float, compute_s: np.ndarray) -> np.ndarray:
    """ep_time.ep_seconds: all_to_all_seconds (beyond the compute under the job's moe_a2a_overlap) +
    _expert_gemm_seconds + the permutations' hbm_stream_seconds, per cell."""
    d, f, shapes, kernel, dispatch = t.cells(tables)
    all_to_all: float | np.ndarray = 0.0
    if t.parallel["ep"]:
        ep, routed = d["ep"], f["routed_bytes"]
        # ep_time._ep_members_inside: EP peers tp x cp ranks apart inside the instance
        inside = np.maximum(1, np.minimum(ep, per_instance // (d["tp"] * d["cp"])))
        # ep_time.all_to_all_seconds: the NVLink share and the network share at once, the slower one
        if dispatch is not None and dispatch.deduplicates:
            # a node-deduplicating dispatcher's shares (models/time/moe_dispatch.py dispatch_shares):
            # the same Python floats per layout, then routed x share / link as _seconds does
            shares = [dispatch_shares(dispatch, tp, e, inner) if e > 1 else (0.0, 0.0) for tp, e, inner in
                      zip(d["tp"].ravel().tolist(), ep.ravel().tolist(), inside.ravel().tolist())]
            nvlink_share, network_share = (np.array(column, dtype=np.float64).reshape(ep.shape) for column in zip(*shares))
            nvlink = routed * nvlink_share / intra
            across = routed * network_share / net
        else:
            nvlink = routed * (inside - 1) / ep / intra
            across = routed * (ep - inside) / ep / net
        all_to_all = np.where(ep > 1, np.where(inside == ep, nvlink, np.maximum(nvlink, across)), 0.0)
        if tables.job.moe_a2a_overlap:  # ep_time.a2a_overlapped (0.0 where ep = 1 either way)
            all_to_all = np.maximum(0.0, all_to_all - compute_s)
    # ep_time._expert_gemm_seconds: dense_s x (slowdown - 1) + the loop kernel's calls
    efficiency = expert_efficiency(gpu)  # ep_time._expert_gemm_seconds
    dense_rate = np.array([peak_tflops(gpu, rate_precision(cast(Precision, name))) * _TERA * efficiency.value for name in names],
                          dtype=np.float64).reshape(1, len(names), 1)
    # fp8 expert FLOPs run fp8.fp8_gemm_speedup faster (the others divided by 1.0: exact)
    speedup = np.array([fp8_gemm_speedup(gpu, efficiency) if name == "fp8" else 1.0 for name in names],
                       dtype=np.float64).reshape(1, len(names), 1)
    work = f["expert_flops"] / speedup
    slowdown = t.slowdowns.get(gpu.name)
    if slowdown is None:  # the same for every shape of the GPU with these layouts: kept with the traffic
        slowdown = t.slowdowns[gpu.name] = np.array(
            [[_slowdown(tables, shape, gpu, name) for shape, name in zip(row, names)] for row in shapes],
            dtype=np.float64).reshape(len(shapes), len(names), 1)
    # + rates.hbm_stream_seconds of the dispatcher's permutation bytes, after the GEMMs' term (its order)
    return (all_to_all + (work / dense_rate * (slowdown - 1) + loop_overhead_s(kernel, f["calls"]))
            + hbm_stream_seconds(f["permute_bytes"], gpu))


def _slowdown(tables: Tables, shape: ExpertShape, gpu, precision: str) -> float:
    """models.moe_gemm.expert_slowdown of one expert shape on a GPU, kept in the Tables (most of
    a scalar parallel_seconds call, and the same for every count and recompute)."""
    return tables.kept(("expert-slowdown", shape, gpu.name, precision),
                       lambda: expert_slowdown(shape, peak_tflops(gpu, cast(Precision, precision)), gpu.hbm_bandwidth_gb_per_s))

