"""The search space of one query, as domains and integer tables computed by models/.

Both engines (CP-SAT and brute force) read only this object, so they search exactly the same
space with exactly the same numbers, and no formula lives in solver/: every table entry is a
models/ function evaluated at one discrete choice, then scaled to an integer once, here.

Units: memory in MiB (demands rounded up, capacities down, so an accepted plan always passes the
exact byte check), time in microseconds (compute and traffic are kept in seconds and combined by
models.performance.exposed_communication_s before rounding), prices in 1e-4 USD per hour.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any

from vramplan.models.catalogue.catalogue import load_stack_capabilities
from vramplan.models.catalogue.stack_contract import runs_on_count, zero_layout_refusal, zero_layout_rules_apply
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import US_PER_S, to_us
from vramplan.models.memory.pipeline_buffers import keeps_receive_buffers
from vramplan.models.time.cost import (
    SECONDS_PER_HOUR,
    worked_tokens,
)
from vramplan.models.time.flops import training_flops_per_token
from vramplan.solver.choice_keys import MIN_RANK_COLUMNS, RecomputeChoice, rank_columns
from vramplan.solver.clusters import PRICE_UNITS_PER_USD, Branch, Cluster, Shape, UnitShape
from vramplan.solver.layouts import MAX_TP, tp_reach
from vramplan.solver.placement import Placement
from vramplan.solver.query import SolveQuery
from vramplan.solver.space_fills import SpaceFills
from vramplan.solver.tables import Tables

log = logging.getLogger(__name__)

@dataclass
class UnitMemo:
    """What the branch-and-bound (solver/cpsat_engine.py) works out per unit (cluster shape x
    (pp, tp) branch): step-time lower bounds per (shape, branch, host budget) and their sorted
    terms per (shape, branch) for every tier (solver/cpsat_bounds.py), least memory per (count,
    layout, precision, recompute) by host budget, the CP-SAT models with the points they found per
    (shape, branch, host budget, exclusions), whether a GPU count can hold the model states at all
    per (count, host budget, limit), and the explanations' fitting points per shape and leanest
    model states per (counts, layouts).

    Keyed by values (GPU name, GPU count, Layout; SearchSpace.unit_shape), never by one query's
    domain indices, because none of it depends on which GPUs, providers, prices or GPU limit a
    query allows: queries with the same model, job, global batch and pins (the GPU count aside)
    share one (solver/table_memo.py), so a batch sheet's rows that differ only in those search
    each unit once. Precision, recompute, ZeRO x offload and micro-batch indices are the same in
    all of them (their domains follow from the job, the global batch and the pins)."""

    lower_bounds: dict[tuple[UnitShape, Branch, int | None], int | None] = field(default_factory=dict)  # + host budget
    fitted_bounds: dict[tuple[UnitShape, Branch, int], int | None] = field(default_factory=dict)  # last tier, + host budget
    parallel_terms: dict[tuple[UnitShape, Branch], list] = field(default_factory=dict)  # -> [(bound, Layout, p, r)] least first
    count_fits: dict[tuple, int | None] = field(default_factory=dict)  # (count, limit, precisions) -> least host bytes
    count_shares: dict[tuple, list[tuple[int, int]]] = field(default_factory=dict)  # (count, precisions) -> least shares
    leanest_mib: dict[tuple, tuple[list[int], list[int]]] = field(default_factory=dict)  # (count, Layout, p, r) -> by host
    leanest_dynamic: dict[tuple, list[int]] = field(default_factory=dict)  # (count, Layout, p, r, checked ranks) -> per rank
    time_terms: dict[tuple[UnitShape, Branch], list] = field(default_factory=dict)  # -> [(bound, cell)] least first
    # (count, layout set, precisions, checked ranks) -> per (layout, precision) and per cell, leanest_mib's
    # value (cpsat_bounds._cell_memory)
    cell_memory: dict[tuple, tuple[dict, dict]] = field(default_factory=dict)
    shape_terms: dict[UnitShape, Any] = field(default_factory=dict)  # -> ShapeTerms: tiers 1-2, all branches
    count_traffic: dict[tuple[int, int, tuple[str, ...]], Any] = field(default_factory=dict)  # (count, layout set, precisions)
    layout_sets: dict[tuple, int] = field(default_factory=dict)  # a shape's layouts (values) -> its number in unit_shape
    # (UnitShape, Branch, host budget, exclusions, step cap) -> ClusterModel (cpsat_engine)
    cluster_models: dict[tuple, Any] = field(default_factory=dict)
    fitting: dict[tuple, tuple] = field(default_factory=dict)  # (shape, timed) -> (layouts its points index, shape_table's points)
    leanest_states: dict[tuple, tuple[int, str]] = field(default_factory=dict)  # (counts, layouts) -> explain.leanest_model_states


@dataclass
class SearchSpace:
    arch: Architecture
    job: Job
    query: SolveQuery
    global_batch: int
    gpus: list[GpuSpec]
    counts: list[int]
    clusters: list[Cluster]
    zero_offloads: list[tuple[int, str]]
    recomputes: list[RecomputeChoice]
    precisions: list[str]
    micro_batches: list[int]
    layouts: list[Layout]
    num_rank_columns: int = MIN_RANK_COLUMNS  # pipeline ranks checked per layout (tables.rank_columns)
    max_tp: int = MAX_TP  # the largest TP and EP degree searched (layouts.degree_limit of the NVLink domains)
    # What the search looks up by shape, count or pipeline, derived from the domains when the space
    # is built (derive_lookups), never filled later:
    count_choice_sets: dict[bool, tuple[frozenset[int], frozenset[int]]] = field(default_factory=dict)  # several GPUs?
    # Whether the contract can refuse a ZeRO x layout pair of this space (stack_contract
    # zero_layout_rules_apply; asked per combination by pair_allows); False: every pair runs
    pairs_restricted: bool = False
    # Integer tables, keyed by domain indices; a missing key is an invalid combination. Those every
    # count shares are made here at build; each count's, layout's and shape's own are filled on
    # first read, in on_use (solver/space_fills.py), the one part of the space that grows.
    buffer_mib: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (b, p, l): TP/PP/CP buffers
    shared: UnitMemo = field(default_factory=UnitMemo)  # the branch-and-bound's per-unit work
    least_compute_us: dict[tuple[int, int], int | None] = field(default_factory=dict)  # per (GPU, count): compute_step_us
    aliases_of_pipeline: dict[int | tuple[int, ...], tuple[int, ...]] = field(default_factory=dict)  # column_aliases per pipeline
    stages_of_pipeline: dict[int | tuple[int, ...], tuple[int, ...]] = field(default_factory=dict)  # checked_stages per pipeline
    limit_mib: list[int] = field(default_factory=list)  # per GPU
    host_budget_mib_per_gpu: list[int] = field(default_factory=list)  # per cluster
    # Compute per (g, n, r, p): the least over the count's layouts (the bounds' value); per layout
    # class too (g, n, r, p, k), k = layout_chunk[l]: fp8's casts and a partial full recompute's
    # layers depend on the layout (tables.compute_layout, compute_class).
    compute_s: dict[tuple[int, int, int, int], float] = field(default_factory=dict)
    chunk_compute_s: dict[tuple[int, int, int, int, int], float] = field(default_factory=dict)
    layout_chunk: list[int] = field(default_factory=list)  # per layout: its compute class's index
    valid_gpu_precision: set[tuple[int, int]] = field(default_factory=set)
    gpu_precisions: list[tuple[int, ...]] = field(default_factory=list)  # per GPU: the p of valid_gpu_precision, ascending
    count_layouts: dict[int, list[int]] = field(default_factory=dict)  # n -> layouts whose degrees divide it
    valid_batches: dict[tuple[int, int], list[int]] = field(default_factory=dict)  # (n, l) -> micro-batches
    tcs: list[tuple[int, int, bool]] = field(default_factory=list)  # distinct (tp, cp, sp) of the layouts
    tcs_index: list[int] = field(default_factory=list)  # per layout
    # The GPUs, counts and clusters above, and what is looked up by cluster, shared by every space
    # over the same offerings, pricing and counts (solver/placement.py), never changed
    placement: Placement = field(default=None, repr=False)  # type: ignore[assignment]
    offering_rank: list[int] = field(default_factory=list)  # per cluster: rank of the offering's name (the placement's)
    tables: Tables | None = None  # the models/ terms behind the integer tables
    # The memo service the space was built with (solver/table_memo.py): what its explanation's
    # re-solves and questions share; a handle, passed on, never a context variable.
    memo: Any = None
    layouts_of_shape: dict[tuple[int, int], list[int]] = field(default_factory=dict)  # (n, TP reach): cluster_layouts
    # (n, TP reach) -> (pp, tp) -> layouts: branch_layout_lists
    branches_of_shape: dict[tuple[int, int], dict[tuple[int, int], list[int]]] = field(default_factory=dict)
    shape_members: dict[Shape, list[int]] = field(default_factory=dict)  # its clusters (clusters_of_shape; the placement's)
    layout_set_ids: dict[tuple[int, int], int] = field(default_factory=dict)  # (n, TP reach) -> UnitMemo.layout_sets number
    evaluations_before: int = 0
    on_use: SpaceFills = field(init=False, repr=False)  # the tables filled on first read

    def __post_init__(self) -> None:
        # A weak reference back: no cycle between the space and its fills, so a space no memo
        # keeps is freed by reference counting when its solve returns, not by a collection of
        # the whole generation (solver/collector.py)
        self.on_use = SpaceFills(weakref.proxy(self))

    def for_query(self, query: SolveQuery) -> SearchSpace:
        """This space bound to an equivalent query (solver/table_memo.py: one that differs only in
        what the space does not read): a copy that shares every table, those filled on first read
        included; its models/ evaluations count from now."""
        copy = dataclasses.replace(self, query=query, evaluations_before=self.tables.evaluations if self.tables else 0)
        copy.on_use = dataclasses.replace(self.on_use, space=weakref.proxy(copy))
        return copy

    @functools.cached_property
    def layout_index(self) -> dict[Layout, int]:
        return {layout: li for li, layout in enumerate(self.layouts)}

    def renumber(self, inner: Any, layouts: list[Layout]) -> Any:
        """An inner point of a space whose layout domain is `layouts` (a UnitMemo entry made by
        another query of the family, whose GPU limit may have numbered its layouts otherwise) in
        this space's layout index; every other domain is the family's."""
        if layouts is self.layouts:
            return inner
        return inner._replace(layout=self.layout_index[layouts[inner.layout]])

    def unit_shape(self, shape: Shape) -> UnitShape:
        """A shape by value (GPU name, GPU count, GPUs per instance, network) and which layouts it
        runs (a number the family gives each distinct set): UnitMemo's key. A family's queries can
        run different layouts on one shape: one that allows GB200 NVL72 trays searches EP up to 64
        on every shape (layouts.degree_limit), a lower GPU limit caps tp x pp x cp. They share a
        shape's work (bounds, unit models, tables) where its layouts are the same (a dense model's
        H100 shapes), never across sets (a unit model made with EP 16 layouts was read by a query
        without them: KeyError, 19 of the batch benchmark's 1,468 sample rows)."""
        g, n, per_instance, network = shape
        return UnitShape(self.gpus[g].name, self.counts[n], per_instance, network, self.layout_set_ids[_reach(shape)])

    @property
    def evaluations(self) -> int:
        """models/ function evaluations this query made (terms shared with an earlier query are free)."""
        return self.tables.evaluations - self.evaluations_before if self.tables is not None else 0

    def count_allows(self, n: int, zf: int, r: int) -> bool:
        """Whether the stack runs ZeRO x offload zf and recompute r on count index n's GPUs (its
        contract's single_gpu_only / multi_gpu_only: torchtune offloads the optimizer alone only
        on one GPU, litgpt checkpoints every block on several)."""
        zfs, rs = self.count_choices(n)
        return zf in zfs and r in rs

    def pair_allows(self, zf: int, li: int, n: int) -> bool:
        """Whether the stack runs ZeRO x offload zf beside layout li on count index n's GPUs (a
        model-parallel layout needs FSDP over more than one rank there: stack_contract.zero_layout_refusal)."""
        return not self.pairs_restricted or zero_layout_refusal(
            self.job.stack, self.zero_offloads[zf][0], self.layouts[li], self.counts[n], self.zero_offloads[zf][1]) is None

    def count_choices(self, n: int) -> tuple[frozenset[int], frozenset[int]]:
        """(ZeRO x offload, recompute) indices the stack runs on count index n's GPUs."""
        return self.count_choice_sets[self.counts[n] > 1]

    def checked_stages(self, pipeline: int | tuple[int, ...]) -> tuple[int, ...]:
        """The pipeline rank each checked-rank column of a pipeline evaluates (choice_keys.rank_columns,
        with a middle rank where the job's pipeline keeps receive buffers per micro-batch:
        models/memory/pipeline_buffers.py), made once per pipeline."""
        stages = self.stages_of_pipeline.get(pipeline)
        if stages is None:
            stages = self.stages_of_pipeline[pipeline] = rank_columns(self.arch, pipeline, self.num_rank_columns,
                                                                      keeps_receive_buffers(self.job))
        return stages

    def column_aliases(self, pipeline: int | tuple[int, ...]) -> tuple[int, ...]:
        """For each checked-rank column of a pipeline (a depth, or a split: Layout.pipeline), the
        first column that checks the same rank."""
        return self.aliases_of_pipeline[pipeline]

    def cluster_layouts(self, shape: Shape) -> list[int]:
        """Layouts a cluster of this shape can run: degrees dividing its count, TP inside one
        instance (shapes of one count and TP reach share the list)."""
        return self.layouts_of_shape[_reach(shape)]

    def branch_layout_lists(self, shape: Shape) -> dict[tuple[int, int], list[int]]:
        """cluster_layouts(shape) by (pp, tp) (cpsat_bounds.Branch), in that order."""
        return self.branches_of_shape[_reach(shape)]

    def clusters_of_shape(self, shape: Shape) -> list[int]:
        """The clusters of one shape (the same hardware at other prices), in cluster order."""
        return self.shape_members.get(shape, [])

    @property
    def steps(self) -> float:
        """Optimizer steps to train on the query's tokens (those done again after spot preemptions included)."""
        tokens = worked_tokens(self.query.tokens, self.query.pricing, self.query.restart_overhead)
        return tokens / (self.global_batch * self.job.seq_len)

    @property
    def size(self) -> int:
        """Combinations of the decision variables before any constraint."""
        return (len(self.clusters) * len(self.zero_offloads) * len(self.recomputes) * len(self.precisions)
                * len(self.micro_batches) * len(self.layouts))

    def plan(self, cluster: int, zf: int, r: int, p: int, b: int, li: int = 0) -> Plan:
        c = self.clusters[cluster]
        zero, offload = self.zero_offloads[zf]
        micro, layout = self.micro_batches[b], self.layouts[li]
        return Plan(
            gpu=self.gpus[c.gpu_index].name,
            offering=c.offering.name,
            num_gpus=c.num_gpus,
            zero=zero,
            recompute=self.recomputes[r].mode,
            recompute_layers=self.recomputes[r].resolved(self.arch.num_layers, layout).layers,
            precision=self.precisions[p],
            micro_batch=micro,
            grad_accum=self.global_batch * layout.model_parallel // (micro * c.num_gpus),
            offload=offload,
            **layout.plan_fields(),
        )

    def hours(self, step_us: int) -> float:
        """Wall hours of the whole job at this step time."""
        return step_us / US_PER_S * self.steps / SECONDS_PER_HOUR

    def usd(self, cost_units: int) -> float:
        """Convert price_units x step_us into US dollars for the whole job."""
        return cost_units / PRICE_UNITS_PER_USD / US_PER_S / SECONDS_PER_HOUR * self.steps

    @property
    def deadline_bound_us(self) -> int | None:
        """The longest step time that meets --deadline-hours (the inverse of hours())."""
        if self.query.deadline_hours is None:
            return None
        return int(self.query.deadline_hours * SECONDS_PER_HOUR * US_PER_S / self.steps)

    @property
    def duration_bound_us(self) -> int | None:
        """The longest step time that keeps the job within --max-days; a deadline replaces it."""
        if self.query.deadline_hours is not None or not self.query.max_days:
            return None
        return int(self.query.max_days * 24 * SECONDS_PER_HOUR * US_PER_S / self.steps)

    def mfu_bound_us(self, cluster_index: int, min_mfu: float | None = None) -> int | None:
        """The longest step time at which the cluster's MFU stays at --min-mfu: model FLOPs of a
        step over (GPUs x the GPU's 16-bit dense peak x the floor), the MFU of models/time/performance.py
        against bf16 (fp16 where the GPU has no bf16); None without a floor and on one GPU. `min_mfu`: another
        floor than the query's (the explanation's relaxed space asks the user's)."""
        floor = self.query.min_mfu if min_mfu is None else min_mfu
        cluster = self.clusters[cluster_index]
        return self._mfu_cap_us(cluster.gpu_index, cluster.num_gpus, floor)

    def _mfu_cap_us(self, gpu_index: int, num_gpus: int, floor: float | None) -> int | None:
        """mfu_bound_us of a cluster of num_gpus GPUs of gpu_index: the same for every offering of them."""
        if not floor or num_gpus == 1:  # one GPU waits on nothing but its own small job (GPT-2 at batch 1)
            return None
        gpu = self.gpus[gpu_index]
        peak_flops = (gpu.bf16_dense_tflops or gpu.fp16_dense_tflops) * 10**12
        bound = self._model_flops_per_step * US_PER_S / (num_gpus * peak_flops * floor)
        # a subnormal floor (1e-310 is in its domain) makes the quotient infinite: no cap in effect
        return int(bound) if bound < MAX_STEP_CAP_US else MAX_STEP_CAP_US

    @functools.cached_property
    def _model_flops_per_step(self) -> float:
        """Model FLOPs of one optimizer step (the MFU floor's numerator), read once per space copy."""
        return self.tables.kept(("model-flops-per-step", self.global_batch), lambda: training_flops_per_token(  # type: ignore[union-attr]
            self.arch, self.job.seq_len, "none", self.job.method, 0.0).model * self.global_batch * self.job.seq_len)

    @property
    def budget_bound_cost_units(self) -> int | None:
        """The largest price_units x step_us that meets --budget-usd (the inverse of usd())."""
        if self.query.budget_usd is None:
            return None
        return int(self.query.budget_usd * PRICE_UNITS_PER_USD * US_PER_S * SECONDS_PER_HOUR / self.steps)

    @functools.cached_property
    def step_caps_us(self) -> tuple[int | None, ...]:
        """Per cluster, the longest step the deadline (or --max-days), the budget and the MFU floor
        allow (None: no bound), at most MAX_STEP_CAP_US: derived from the query once (the search,
        its bounds, the explanations and the same-hardware screen ask ~4,000 times a headline solve)."""
        fixed = [cap for cap in (self.deadline_bound_us, self.duration_bound_us) if cap is not None]
        pair_caps: dict[tuple[int, int], int | None] = {}  # the deadline, --max-days and MFU caps: per (GPU, count)
        for n, gpu_indices in self.placement.gpus_of_count.items():
            for g in gpu_indices:
                mfu = self._mfu_cap_us(g, self.counts[n], self.query.min_mfu)
                shared = fixed + ([mfu] if mfu is not None else [])
                pair_caps[g, n] = min(*shared, MAX_STEP_CAP_US) if shared else None
        budget = self.budget_bound_cost_units
        if budget is None:
            return tuple(pair_caps[g, n] for g, n, _, _ in self.placement.tier0_fields)
        # the budget's: per cluster, by its price
        return tuple(min(budget // max(1, price), MAX_STEP_CAP_US if cap is None else cap)
                     for g, n, price, _ in self.placement.tier0_fields for cap in (pair_caps[g, n],))


# A cap this long (146,000 years per step) bounds nothing, and stays a valid CP-SAT constant: a
# large budget or deadline over a few tokens (--tokens 1 --budget-usd 1e12) gives caps beyond
# int64, which CP-SAT refused (TypeError, exit 1) in the exclusions of cpsat_model.py.
MAX_STEP_CAP_US = 2**62


def _reach(shape: Shape) -> tuple[int, int]:
    """(count index, TP reach): what a cluster shape's layouts depend on (TP inside one instance)."""
    return shape[1], tp_reach(shape[2])


def derive_lookups(space: SearchSpace) -> None:
    """What the search looks up by shape, count or pipeline, from the domains at once (the space
    is built, then only read): each cluster shape's layouts and their (pp, tp) branches, the
    clusters of each shape, each TP reach's layout set number in the family's UnitMemo (unit_shape),
    the checked-rank aliases of each pipeline, the ZeRO x offload and recompute choices the stack
    runs on one GPU and on several, what decides the (ZeRO x offload, layout, count) combinations it
    does not run (pair_allows), and each (GPU, count)'s least compute (the tier-0 bound)."""
    for shape in space.shape_members:
        key = _reach(shape)
        if key in space.layouts_of_shape:
            continue
        n, reach = key
        layouts = space.layouts_of_shape[key] = [li for li in space.count_layouts[n] if space.layouts[li].tp <= reach]
        branches = space.branches_of_shape[key] = {}
        for li in layouts:
            branches.setdefault((space.layouts[li].pp, space.layouts[li].tp), []).append(li)
        values = tuple(space.layouts[li] for li in layouts)
        space.layout_set_ids[key] = space.shared.layout_sets.setdefault(values, len(space.shared.layout_sets))
    for pipeline in dict.fromkeys(layout.pipeline for layout in space.layouts):
        stages = space.checked_stages(pipeline)
        space.aliases_of_pipeline[pipeline] = tuple(stages.index(stage) for stage in stages)
    caps = load_stack_capabilities()[space.job.stack]
    space.pairs_restricted = zero_layout_rules_apply(space.job.stack, space.layouts)
    for count in {min(space.counts, default=1), max(space.counts, default=1)}:
        space.count_choice_sets.setdefault(count > 1, (
            frozenset(i for i, (z, f) in enumerate(space.zero_offloads)
                      if runs_on_count(caps, count, "offload", f) and runs_on_count(caps, count, "zero", z)),
            frozenset(i for i, r in enumerate(space.recomputes) if runs_on_count(caps, count, "recompute", r.mode))))
    for n, g in ((n, g) for n, gpu_indices in space.placement.gpus_of_count.items() for g in gpu_indices):
        times = [space.compute_s[g, n, r, p] for p in space.gpu_precisions[g]
                 for r in range(len(space.recomputes)) if (g, n, r, p) in space.compute_s]
        space.least_compute_us[g, n] = to_us(min(times)) if times else None
