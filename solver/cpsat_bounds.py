"""Lower bounds of a cluster's step time and objective for the CP-SAT engine's branch-and-bound
(solver/cpsat_engine.py), from the integer tables alone, in five tiers that never decrease:
0 the least compute of the cluster's GPU and count, 1 + the model-parallel collectives and the
smallest bubble, 2 + the least exposed data-parallel traffic, 3 the tier-2 terms of the first
layout x precision x recompute whose leanest memory fits the GPU, 4 the step time per layout x
precision x recompute x ZeRO-offload whose leanest memory fits (its own traffic and optimizer
step), least over the micro-batches, for a unit about to get a model. Each tier costs more than
the one before and is asked only of the units the one before could not prune. Every bound is at
most the step time of every point it covers (tests/solver/test_cpsat_bounds.py checks it point by point
against the brute-force enumeration), so pruning on it is exact. Before any tier, may_fit drops
the clusters whose GPU count cannot hold the job's model states at all (1/n of them per GPU, in
GPU memory and host RAM): no layout is tabulated for them.

Tiers 1 and 2 are numpy arrays over all the layouts x precisions x recomputes of a cluster shape
at once (solver/bound_arrays.py: the scalar terms to the bit, one array per shape instead of a
models/ call per cell), which each (pp, tp) branch slices; tiers 3 and 4 walk a branch's terms
least first. The values are kept by value in the family's UnitMemo (solver/space.py; bound_arrays.
SearchSpace.unit_shape): queries of one model, job, global batch and pins share them whatever clusters they allow.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from vramplan.models.core.layout import Layout
from vramplan.models.core.units import to_us, to_us_array
from vramplan.solver.bound_arrays import ShapeTerms, shape_terms
from vramplan.solver.cluster_screen import ClusterScreen
from vramplan.solver.clusters import Branch, Shape, branch_of
from vramplan.solver.points import Inner, step_us
from vramplan.solver.space import SearchSpace
from vramplan.solver.step_time import exposed_lower_us

__all__ = ["LAST_TIER", "Branch", "UnitBounds", "branch_layouts", "branch_of", "huge"]

LAST_TIER = 4  # step_bound_us: the tier a unit reaches just before its CP-SAT model
# A branch of at most this many layouts takes tier 2's data-parallel traffic per layout (comm_s,
# _least_comm_us) rather than as one array (Tables.comm_rows_s): numpy's ~20 calls a branch cost
# more than a few layouts' scalar ones (a dense model's usual branches; docs/performance.md).
SCALAR_ROWS = 4


def branch_layouts(space: SearchSpace, shape: Shape, branch: Branch) -> list[int]:
    """The layouts of a cluster shape on one branch (what one unit's bound and CP-SAT model cover;
    the space's list, not a copy)."""
    return space.branch_layout_lists(shape).get(branch, [])


def _within(by_host: tuple[list[int], list[int]], host_mib: int) -> int:
    """The least memory of _leanest_by_host's choices whose host RAM fits host_mib (huge: none)."""
    hosts_mib, least_mib = by_host
    i = bisect.bisect_right(hosts_mib, host_mib)
    return least_mib[i - 1] if i else huge()


def huge() -> int:
    """Larger than any step time or memory in the tables: 'nothing fits' in a min()."""
    return 2**63 - 1


@dataclass
class UnitBounds(ClusterScreen):
    """The bounds of one space's (cluster, branch) units."""

    space: SearchSpace
    _terms: dict[tuple, ShapeTerms] = field(default_factory=dict, repr=False)  # this space's shapes' UnitMemo entries
    _fits: dict[int, bool] = field(default_factory=dict, repr=False)  # may_fit per cluster (ClusterScreen)
    _fit_each: list[bool] | None = field(default=None, repr=False)  # may_fit_each (ClusterScreen)
    _memory: dict[Shape, tuple[dict, dict]] = field(default_factory=dict, repr=False)  # _cell_memory per shape

    def _shape_terms(self, shape: Shape) -> ShapeTerms:
        """bound_arrays.shape_terms, looked up once per shape of this space (the UnitMemo's key
        is by value: a tuple made per lookup)."""
        terms = self._terms.get(shape)
        if terms is None:
            terms = self._terms[shape] = shape_terms(self.space, shape)
        return terms

    def lower_step_us(self, c: int, branch: Branch, memory: bool = True) -> int | None:
        """A lower bound of the cluster's step time on a branch (None: nothing can fit);
        memory=False skips the memory relaxation (cheaper, looser)."""
        host = self.space.host_budget_mib_per_gpu[c] if memory else None
        shape = self.space.clusters[c].shape
        key = (self.space.unit_shape(shape), branch, host)
        bounds = self.space.shared.lower_bounds  # the family's queries share the bounds
        if key not in bounds:
            bounds[key] = self._lower_step_us(shape, branch, host)
        return bounds[key]

    def _lower_step_us(self, shape: Shape, branch: Branch, host_mib: int | None) -> int | None:
        """Relaxation: over the branch's layouts and the recompute x precision the GPU runs,
        the least of compute + model-parallel collectives + the smallest bubble (the largest
        accumulation) + the least exposed data-parallel traffic (see _least_comm_us). With a host
        budget, only the layout x precision x recompute for which some ZeRO x offload within that
        host RAM fits every checked pipeline rank with each rank's leanest activations and
        buffers (_leanest): the terms are tried least first, so memory is only tabulated up to
        the first that fits. The leanest memory of each term the walks reach is kept per cell of
        the count's grid (_cell_memory), so the walks of the count's other shapes, branches and
        host budgets, which meet the same cells in another order, read it without a lookup by value:
        the same tables are filled, as a term's memory is only asked where a walk reaches it (its
        model states, then its activations where those fit)."""
        if host_mib is None:
            terms = self._shape_terms(shape)
            if branch not in terms.timed_least:
                timed = self._timed(shape, branch)
                terms.timed_least[branch] = int(timed.min()) if timed is not None and timed.size else None
            return terms.timed_least[branch]
        g, n = shape[0], shape[1]
        limit = self.space.limit_mib[g]
        terms = self._shape_terms(shape)
        states, with_activations = self._cell_memory(shape)
        num_r = terms.bound_us.shape[2]
        for bound, cell in self._time_cells(shape, branch):
            static = states.get(cell // num_r)  # (layout, precision): the recompute's cells share it
            if static is None:
                static = states[cell // num_r] = self._cell_leanest(terms, n, cell, False)
            if _within(static, host_mib) > limit:
                continue
            dynamic = with_activations.get(cell)
            if dynamic is None:
                dynamic = with_activations[cell] = self._cell_leanest(terms, n, cell, True)
            if _within(dynamic, host_mib) <= limit:
                return bound
        return None

    def _cell_memory(self, shape: Shape) -> tuple[dict[int, tuple[list[int], list[int]]], dict[int, tuple[list[int], list[int]]]]:
        """_leanest_by_host of the count grid's cells the walks reached: per (layout, precision)
        without activations, per cell with; kept in the family's UnitMemo by the count's grid
        (count, layout set, precisions) and the checked ranks."""
        memory = self._memory.get(shape)
        if memory is None:
            space = self.space
            unit = space.unit_shape(shape)
            key = (unit.num_gpus, unit.layout_set, space.gpu_precisions[shape[0]], space.num_rank_columns)
            memory = space.shared.cell_memory.get(key)
            if memory is None:
                memory = space.shared.cell_memory[key] = ({}, {})
            self._memory[shape] = memory
        return memory

    def _cell_leanest(self, terms: ShapeTerms, n: int, cell: int, activations: bool) -> tuple[list[int], list[int]]:
        """_leanest_by_host of a term, a cell of the count's (layout, precision, recompute) grid:
        its model states alone, or with its leanest activations and buffers."""
        num_p, num_r = terms.bound_us.shape[1], terms.bound_us.shape[2]
        row, p, r = cell // (num_p * num_r), terms.precisions[cell // num_r % num_p], cell % num_r
        return self._leanest_by_host(n, self.space.layout_index[terms.traffic.layouts[row]], p, r if activations else None)

    def _time_cells(self, shape: Shape, branch: Branch) -> list[tuple[int, int]]:
        """(step-time lower bound, cell) of a shape's layouts on a branch, least first (ties in the
        space's layout order, then precision, recompute): the tier-1 terms plus the least exposed
        data-parallel traffic (_timed); a cell is the term's flat index in the count's (layout,
        precision, recompute) grid (ShapeTerms.sorted_cells), kept in the family's UnitMemo."""
        memo, key = self.space.shared.time_terms, (self.space.unit_shape(shape), branch)
        if key not in memo:
            timed = self._timed(shape, branch)
            memo[key] = [] if timed is None else self._shape_terms(shape).sorted_cells(branch, timed)
        return memo[key]

    def _time_terms(self, shape: Shape, branch: Branch) -> list[tuple[int, Layout, int, int]]:
        """_time_cells as (bound, Layout, precision, recompute)."""
        return self._shape_terms(shape).cell_terms(self._time_cells(shape, branch))

    def _timed(self, shape: Shape, branch: Branch) -> np.ndarray | None:
        """Tier 2's terms of a branch, (layout, precision, recompute) whole microseconds (None: no
        layout or precision): each tier-1 term (compute + collectives + the least bubble) plus
        step_time.exposed_lower_us of the least data-parallel traffic of its layout and precision
        (_least_comm_us): exposed >= max(traffic - compute, one layer's tail), both windows at
        their widest (they sum to the compute). Kept with the shape's terms."""
        space = self.space
        terms = self._shape_terms(shape)
        if branch not in terms.timed:
            rows = terms.traffic.rows.get(branch)
            if rows is None or not terms.bound_us.size:
                terms.timed[branch] = None
            else:
                layouts = terms.traffic.branch_layouts(branch)
                if len(layouts) <= SCALAR_ROWS:  # a few layouts: numpy's fixed cost per call is more than theirs
                    g, n, per_instance, network = shape
                    zeros = tuple(sorted({z for z, _ in space.zero_offloads}))
                    names = tuple(space.precisions[p] for p in terms.precisions)
                    comm = np.array([self._least_comm_us(layout, space.counts[n], zeros, names, space.gpus[g], per_instance,
                                                         network) for layout in layouts], dtype=np.int64)
                else:
                    comm = self._least_comm_rows_us(shape, layouts, terms.precisions)
                terms.timed[branch] = terms.bound_us[rows] + exposed_lower_us(comm[:, :, None], terms.compute_us[rows],
                                                                              space.arch.num_layers)
        return terms.timed[branch]

    def parallel_step_us(self, c: int, branch: Branch) -> int | None:
        """Tier 1: the least of compute + model-parallel collectives + the smallest bubble over
        the branch's layouts and the recompute x precision the GPU runs, without the data-parallel
        traffic (whose grids cost most of tier 2; docs/performance.md#units-and-tiers). The
        shape's terms are arrays over all its layouts at once (solver/bound_arrays.py)."""
        return self._shape_terms(self.space.clusters[c].shape).parallel_least(branch)

    def _parallel_terms(self, shape: Shape, branch: Branch) -> list[tuple[int, Layout, int, int]]:
        """(compute + model-parallel collectives + the least bubble, Layout, precision, recompute),
        least first; kept like _time_terms."""
        memo, key = self.space.shared.parallel_terms, (self.space.unit_shape(shape), branch)
        if key not in memo:
            memo[key] = self._shape_terms(shape).sorted_terms(branch)
        return memo[key]

    def _least_comm_rows_us(self, shape: Shape, layouts: tuple[Layout, ...], precisions: tuple[int, ...]) -> np.ndarray:
        """_least_comm_us of every layout of a branch at once, (layouts, precisions) whole microseconds:
        the layouts' grids from Tables.comm_rows_s (the same memo entries and values as comm_s), each
        cell rounded up as to_us does, the least over the ZeRO stages."""
        space = self.space
        g, n, per_instance, network = shape
        count = space.counts[n]
        zeros = tuple(sorted({z for z, _ in space.zero_offloads}))
        names = tuple(space.precisions[p] for p in precisions)
        micros = tuple(space.global_batch * layout.model_parallel // count for layout in layouts)
        forward, backward = space.tables.comm_rows_s(layouts, count, zeros, micros, names, space.gpus[g],  # type: ignore[union-attr]
                                                     per_instance, network)
        return (to_us_array(forward[:, :, 0, :]) + to_us_array(backward[:, :, 0, :])).min(axis=1)  # (layouts, precisions)

    def _least_comm_us(self, layout, n: int, zeros: tuple[int, ...], precisions: tuple[str, ...], gpu,
                       per_instance: int, network: float) -> list[int]:
        """Per precision, the least data-parallel traffic time of any ZeRO stage: traffic grows
        with the accumulation (models.performance.communication_bytes_per_step;
        tests/solver/test_cpsat_bounds.py), so a micro-batch of global batch / dp (accumulation 1) gives
        each stage's least; the two phases' windows sum to the compute, so exposed >= max(traffic
        - compute, one layer's tail)."""
        micro = self.space.global_batch * layout.model_parallel // n
        forward, backward = self.space.tables.comm_s(layout, n, zeros, (micro,), precisions, gpu, per_instance, network)
        # to_us per cell in Python floats (the same product, rounded up): a few cells, where numpy's
        # per-call cost was most of the bound's.
        forward, backward = forward[:, 0, :].tolist(), backward[:, 0, :].tolist()
        return [min(to_us(f[k]) + to_us(b[k]) for f, b in zip(forward, backward)) for k in range(len(precisions))]

    def _leanest(self, n: int, li: int, p: int, r: int | None, host_mib: int) -> int:
        """A lower bound of the most loaded checked rank's memory (MiB) for a count, layout,
        precision (and recompute): the least over the ZeRO x offload choices whose host RAM fits
        host_mib of the largest over ranks j of static[j] + rank j's leanest activations and
        buffers (none when r is None). Any plan's memory is at least this."""
        return _within(self._leanest_by_host(n, li, p, r), host_mib)

    def fitted_step_us(self, c: int, branch: Branch) -> int | None:
        """The last tier, asked only of a unit about to get a CP-SAT model: a lower bound of the unit's
        step time over the (layout, precision, recompute, ZeRO x offload) whose leanest memory fits
        (every checked rank with its leanest activations and buffers, the host RAM within the
        instance's budget), each the least over the micro-batches of the exact step time (compute,
        collectives, bubble, exposed data-parallel traffic and the optimizer step of that ZeRO x
        offload). Tier 3 takes the least traffic of any ZeRO stage and no optimizer step, which is
        up to 190x lower where only ZeRO-3 with offloaded states fits. Fills the memory and step
        tables (which the model reads too) of the layouts its walk reaches. None: nothing fits."""
        space = self.space
        shape = space.clusters[c].shape
        host = space.host_budget_mib_per_gpu[c]
        key = (space.unit_shape(shape), branch, host)
        memo = space.shared.fitted_bounds
        if key not in memo:
            memo[key] = self._fitted_step_us(shape, branch, host)
        return memo[key]

    def _fitted_step_us(self, shape: Shape, branch: Branch, host_mib: int) -> int | None:
        """The (layout, precision, recompute) are visited in the order of their tier-1 terms
        (compute + collectives + the least bubble: at most every step time of theirs), so the first
        term at or above the best bound so far ends the walk; a layout's memory and step tables
        are only filled when one of its terms gets that far and fits."""
        space = self.space
        g, n, _, _ = shape
        limit = space.limit_mib[g]
        best = None
        for rest, layout, p, r in self._parallel_terms(shape, branch):
            if best is not None and rest >= best:
                break
            li = space.layout_index[layout]
            space.on_use.fill_count(n, [li], (p,))
            dynamic = self._leanest_dynamic(n, li, p, r)
            fitting = [zf for zf in range(len(space.zero_offloads))
                       if space.pair_allows(zf, li, n)  # a pair the stack runs together (Megatron-FSDP: no PP)
                       and space.on_use.host_mib_per_gpu[zf, n, p, li] <= host_mib
                       and all(space.on_use.static_mib[zf, n, p, li, j] + dynamic[j] <= limit for j in range(space.num_rank_columns))]
            if not fitting:
                continue
            steps = space.on_use.step_tables(shape, [li])
            bound = min((step_us(space, steps, shape, Inner(zf, r, p, b, li))
                         for zf in fitting for b in self._fitting_batches(n, li, p, r, zf, limit)), default=None)
            if bound is not None and (best is None or bound < best):
                best = bound
        return best

    def _fitting_batches(self, n: int, li: int, p: int, r: int, zf: int, limit: int) -> Iterator[int]:
        """The layout's micro-batches, ascending, while every checked rank's model states, buffers and
        activations fit the GPU: the CP-SAT model's memory constraint without what only adds to it
        (unsharded gradient accumulation, the step's gradient copies). Buffers and activations never
        fall as the micro-batch grows (_leanest_dynamic), so the first that does not fit ends them
        (docs/performance.md#units-and-tiers)."""
        space = self.space
        for k, b in enumerate(space.valid_batches[n, li]):
            dynamic = self._leanest_dynamic(n, li, p, r) if k == 0 else self._batch_dynamic(n, li, p, r, b)
            if any(space.on_use.static_mib[zf, n, p, li, j] + dynamic[j] > limit for j in range(space.num_rank_columns)):
                return
            yield b

    def _batch_dynamic(self, n: int, li: int, p: int, r: int, b: int) -> list[int]:
        """Per checked rank, the buffers and activations of one micro-batch (MiB)."""
        space = self.space
        return [space.buffer_mib[b, p, li] + mib for mib in space.on_use.ranks_activation_mib(r, b, p, li, n)]

    def _leanest_dynamic(self, n: int, li: int, p: int, r: int) -> list[int]:
        """Per checked rank, the least activations + buffers over the layout's micro-batches (MiB):
        those of the smallest, since every rank's activations and buffers never fall as the
        micro-batch grows (each term holds micro-batch x tokens, and a pipeline rank's in-flight
        micro-batches min(depth, accumulation) fall no faster than the micro-batch grows, the
        accumulation being global batch / (micro-batch x dp): tests/solver/test_cpsat_bounds.py checks it
        on every architecture). Kept in the family's UnitMemo by value (it reads neither the GPU nor the
        host budget) and by the number of checked ranks (deeper pipelines check more)."""
        space = self.space
        key = (space.counts[n], space.layouts[li], p, r, space.num_rank_columns)
        memo = space.shared.leanest_dynamic
        if key not in memo:  # micro_batches ascend, so valid_batches do too
            memo[key] = self._batch_dynamic(n, li, p, r, space.valid_batches[n, li][0])
        return memo[key]

    def _leanest_by_host(self, n: int, li: int, p: int, r: int | None) -> tuple[list[int], list[int]]:
        """The ZeRO x offload choices' host RAM per GPU, ascending, and the least memory of those
        needing at most each: what _leanest reads for any host budget. Kept in the family's
        UnitMemo by value; it reads neither the GPU nor the host budget, so the clusters of every
        GPU and offering with this count share it (docs/performance.md#units-and-tiers)."""
        space = self.space
        key = (space.counts[n], space.layouts[li], p, r)
        memo = space.shared.leanest_mib
        if key not in memo:
            space.on_use.fill_count(n, [li], (p,))
            dynamic = [0] * space.num_rank_columns if r is None else self._leanest_dynamic(n, li, p, r)
            options = sorted((space.on_use.host_mib_per_gpu[zf, n, p, li],
                              max(space.on_use.static_mib[zf, n, p, li, j] + dynamic[j] for j in range(space.num_rank_columns)))
                             for zf in range(len(space.zero_offloads)) if space.pair_allows(zf, li, n))
            memo[key] = ([host for host, _ in options], list(accumulate((mib for _, mib in options), min)))
        return memo[key]

    def compute_step_us(self, c: int) -> int | None:
        """A first, cheap lower bound of the cluster's step time: its least compute over the
        recompute x precision its GPU runs (no memory, no traffic; None: no precision runs),
        derived per (GPU, count) with the space (space.derive_lookups)."""
        cluster = self.space.clusters[c]
        return self.space.least_compute_us[cluster.gpu_index, cluster.count_index]

    def step_bound_us(self, c: int, branch: Branch | None, tier: int) -> int | None:
        """The step-time lower bound of a tier: 0 the least compute (the same on every branch:
        None will do), 1 + the model-parallel collectives and bubble (parallel_step_us), 2 + the
        data-parallel traffic (lower_step_us without memory), 3 with the memory relaxation, 4 per
        fitting ZeRO x offload (fitted_step_us). Each tier is at least the one before."""
        if tier == 0:
            return self.compute_step_us(c)
        assert branch is not None, "tiers 1 to 4 are per branch"
        if tier == 1:
            return self.parallel_step_us(c, branch)
        if tier == LAST_TIER:
            return self.fitted_step_us(c, branch)
        return self.lower_step_us(c, branch, memory=tier == 3)

    def primary_bound(self, c: int, branch: Branch | None, order: str, tier: int) -> tuple[int, ...] | None:
        """The objective's lower bound on a cluster's branch at a tier (step_bound_us)."""
        lower = self.step_bound_us(c, branch, tier)
        if lower is None:
            return None
        return objective_bound(self.space.clusters[c].price_units, lower, order)


def objective_bound(price_units: int, step_us: int, order: str) -> tuple[int, ...]:
    """The objective's key of a cluster at this price whose step takes at least step_us: cost (and
    the Pareto front's first point) price x step, hourly (price, step), time the step."""
    if order in ("cost", "pareto"):
        return (price_units * step_us,)
    if order == "hourly":
        return (price_units, step_us)
    return (step_us,)
