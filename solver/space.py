"""The search space of one query, as domains and integer tables computed by models/.

Both engines (CP-SAT and brute force) read only this object, so they search exactly the same
space with exactly the same numbers, and no formula lives in solver/: every table entry is a
models/ function evaluated at one discrete choice, then scaled to an integer once, here.

Units: memory in MiB (demands rounded up, capacities down, so an accepted plan always passes the
exact byte check), time in microseconds (compute and traffic are kept in seconds and combined by
models.performance.exposed_communication_s before rounding), prices in 1e-4 USD per hour.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vramplan.models.catalogue.catalogue import load_stack_capabilities
from vramplan.models.catalogue.stack_contract import runs_on_count
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import US_PER_S
from vramplan.models.time.cost import (
    SECONDS_PER_HOUR,
    worked_tokens,
)
from vramplan.models.time.flops import training_flops_per_token
from vramplan.solver.choice_keys import (
    MIN_RANK_COLUMNS,
    MicroKey,
    RankPlace,
    RecomputeChoice,
    layout_chunk_layers,
    rank_columns,
)
from vramplan.solver.clusters import PRICE_UNITS_PER_USD, Cluster, Shape
from vramplan.solver.layouts import MAX_TP, tp_reach
from vramplan.solver.query import SolveQuery
from vramplan.solver.space_tables import (
    StepTables,
    fill_rank_places,
    fill_states,
    fill_step_tables,
)
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

    lower_bounds: dict[tuple, int | None] = field(default_factory=dict)
    fitted_bounds: dict[tuple, int | None] = field(default_factory=dict)  # last tier per (shape, branch, host budget)
    parallel_terms: dict[tuple, list] = field(default_factory=dict)  # (shape, branch) -> [(bound, Layout, p, r)] least first
    count_fits: dict[tuple, bool] = field(default_factory=dict)  # (count, host budget, limit, precisions)
    count_shares: dict[tuple, list[tuple[int, int]]] = field(default_factory=dict)  # (count, precisions) -> least shares
    leanest_mib: dict[tuple, tuple[list[int], list[int]]] = field(default_factory=dict)  # (count, Layout, p, r) -> by host
    leanest_dynamic: dict[tuple, list[int]] = field(default_factory=dict)  # (count, Layout, p, r, checked ranks) -> per rank
    time_terms: dict[tuple, list] = field(default_factory=dict)  # (shape, branch) -> [(bound, Layout, p, r)] least first
    shape_terms: dict[tuple, Any] = field(default_factory=dict)  # unit_shape -> ShapeTerms: tiers 1-2, all branches
    count_traffic: dict[tuple, Any] = field(default_factory=dict)  # (count, TP reach, degree limit, precisions) -> CountTraffic
    layout_sets: dict[tuple, int] = field(default_factory=dict)  # a shape's layouts (values) -> its number in unit_shape
    cluster_models: dict[tuple, Any] = field(default_factory=dict)  # -> ClusterModel
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
    count_choice_sets: dict[bool, tuple[frozenset[int], frozenset[int]]] = field(default_factory=dict)
    # Integer tables, keyed by domain indices; a missing key is an invalid combination.
    # Memory per checked-rank column j (0: the first stage, 1: the last, 2: another candidate).
    static_mib: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict)  # (zf, n, p, l, j)
    host_mib_per_gpu: dict[tuple[int, int, int, int], int] = field(default_factory=dict)  # (zf, n, p, l)
    # What more than one micro-batch a step adds to static_mib (unsharded gradient accumulation: litgpt)
    accumulation_mib: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict)  # (zf, n, p, l, j)
    buffer_mib: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (b, p, l): TP/PP/CP buffers
    micro_keys: dict[tuple[int, int, int, int, int], MicroKey] = field(default_factory=dict)  # (r, b, p, t, a share's chunk)
    rank_places: dict[tuple[int, int, int, int], RankPlace] = field(default_factory=dict)  # (n, l, b, j)
    activations_mib: dict[tuple[int, int, int, int, int, int], int] = field(default_factory=dict)  # filled on use
    filled_counts: set[tuple[int, int]] = field(default_factory=set)  # (n, l) in rank_places
    filled_states: set[tuple[int, int, int]] = field(default_factory=set)  # (n, l, p) in static_mib, host_mib_per_gpu
    shared: UnitMemo = field(default_factory=UnitMemo)  # the branch-and-bound's per-unit work
    peaks: dict[tuple[int, int, int], tuple] = field(default_factory=dict)  # fitting.memory_peaks grids, filled on use
    representatives: dict[tuple, list] = field(default_factory=dict)  # restrictions._representatives per (shape, timed, pinned fields)
    cluster_fits: dict[int, bool] = field(default_factory=dict)  # cpsat_bounds.UnitBounds.may_fit per cluster
    least_compute_us: dict[tuple[int, int], int | None] = field(default_factory=dict)  # compute_step_us per (GPU, count)
    aliases_of_pipeline: dict[int | tuple[int, ...], tuple[int, ...]] = field(default_factory=dict)  # column_aliases per pipeline
    limit_mib: list[int] = field(default_factory=list)  # per GPU
    host_budget_mib_per_gpu: list[int] = field(default_factory=list)  # per cluster
    # Compute per (g, n, r, p): the least over the count's layouts (the bounds' value); per layout
    # class too (g, n, r, p, k), k = layout_chunk[l]: fp8's casts and a partial full recompute's
    # layers depend on the layout (tables.compute_layout, compute_class).
    compute_s: dict[tuple[int, int, int, int], float] = field(default_factory=dict)
    chunk_compute_s: dict[tuple[int, int, int, int, int], float] = field(default_factory=dict)
    layout_chunk: list[int] = field(default_factory=list)  # per layout: its compute class's index
    timing: dict[tuple, StepTables] = field(default_factory=dict)  # per shape, layouts filled on first use
    valid_gpu_precision: set[tuple[int, int]] = field(default_factory=set)
    gpu_precisions: list[tuple[int, ...]] = field(default_factory=list)  # per GPU: the p of valid_gpu_precision, ascending
    count_layouts: dict[int, list[int]] = field(default_factory=dict)  # n -> layouts whose degrees divide it
    valid_batches: dict[tuple[int, int], list[int]] = field(default_factory=dict)  # (n, l) -> micro-batches
    tcs: list[tuple[int, int, bool]] = field(default_factory=list)  # distinct (tp, cp, sp) of the layouts
    tcs_index: list[int] = field(default_factory=list)  # per layout
    offering_rank: list[int] = field(default_factory=list)  # per cluster: rank of the offering's name
    tables: Tables | None = None  # the models/ terms behind the integer tables
    # The memo service the space was built with (solver/table_memo.py): what its explanation's
    # re-solves and questions share; a handle, passed on, never a context variable.
    memo: Any = None
    layouts_of_shape: dict[tuple[int, int], list[int]] = field(default_factory=dict)  # (n, TP reach): cluster_layouts
    layout_groups: dict[tuple, dict] = field(default_factory=dict)  # (group, n, TP reach): cluster_layout_groups
    shape_members: dict[tuple, list[int]] = field(default_factory=dict)  # clusters_of_shape, filled on use
    layout_set_ids: dict[tuple[int, int], int] = field(default_factory=dict)  # (n, TP reach) -> UnitMemo.layout_sets number
    evaluations_before: int = 0

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

    def unit_shape(self, shape: Shape) -> tuple[str, int, int, float, int]:
        """A shape by value (GPU name, GPU count, GPUs per instance, network) and which layouts it
        runs (a number the family gives each distinct set): UnitMemo's key. A family's queries can
        run different layouts on one shape: one that allows GB200 NVL72 trays searches EP up to 64
        on every shape (layouts.degree_limit), a lower GPU limit caps tp x pp x cp. They share a
        shape's work (bounds, unit models, tables) where its layouts are the same (a dense model's
        H100 shapes), never across sets (a unit model made with EP 16 layouts was read by a query
        without them: KeyError, 19 of the batch benchmark's 1,468 sample rows)."""
        g, n, per_instance, network = shape
        key = _reach(shape)
        layout_set = self.layout_set_ids.get(key)
        if layout_set is None:
            values = tuple(self.layouts[li] for li in self.cluster_layouts(shape))
            layout_set = self.layout_set_ids[key] = self.shared.layout_sets.setdefault(values, len(self.shared.layout_sets))
        return self.gpus[g].name, self.counts[n], per_instance, network, layout_set

    @property
    def evaluations(self) -> int:
        """models/ function evaluations this query made (terms shared with an earlier query are free)."""
        return self.tables.evaluations - self.evaluations_before if self.tables is not None else 0

    def step_tables(self, shape: Shape, layouts: list[int]) -> StepTables:
        """A shape's step-time terms for these layouts, tabulated on first use: the search visits
        few (shape, layout) pairs, and only those pay for their traffic terms."""
        tables = self.timing.get(shape)
        if tables is None:
            tables = self.timing[shape] = StepTables()
        for li in layouts:
            if li not in tables.layouts:
                fill_step_tables(self, shape, li, tables)
                tables.layouts.add(li)
        return tables

    def fill_count(self, n: int, layouts: list[int], precisions: tuple[int, ...] | list[int]) -> None:
        """Tabulate count index n's checked-rank places, and its model states and host RAM in these
        precisions, for these layouts on first use: the branch-and-bound's bounds prune most
        (count, layout) pairs before anything needs them, and a bound or model reads only its
        GPU's precisions (a space with V100s runs fp16 too; docs/performance.md#tabulated-precisions)."""
        for li in layouts:
            if (n, li) not in self.filled_counts:
                fill_rank_places(self, n, li)
                self.filled_counts.add((n, li))
            for p in precisions:
                if (n, li, p) not in self.filled_states:
                    fill_states(self, n, li, p)
                    self.filled_states.add((n, li, p))

    def activation_mib(self, r: int, b: int, p: int, li: int, n: int, j: int) -> int:
        """Activations of checked pipeline rank j (rank_columns) in MiB, tabulated on first use:
        one micro-batch's terms (r, b, p and the layout's tp, cp, sp) on the rank's layers and
        in-flight micro-batches (the count n, the layout, b)."""
        key = (r, b, p, li, n, j)
        value = self.activations_mib.get(key)
        if value is None:
            value = self.activations_mib[key] = self.tables.activation_mib(  # type: ignore[union-attr]
                self.micro_key(r, b, p, li), self.rank_places[n, li, b, j])
        return value

    def micro_key(self, r: int, b: int, p: int, li: int) -> MicroKey:
        """What one micro-batch's activations depend on, for recompute r, micro-batch b, precision p
        on layout l: its (tp, cp, sp) and the recompute as its model chunks run it (a share of a
        chunk's layers resolved: RecomputeChoice.resolved); made on first use and kept with the
        domains' Tables."""
        recompute = self.recomputes[r]
        chunk = layout_chunk_layers(self.arch.num_layers, self.layouts[li]) if recompute.share is not None else 0
        key = (r, b, p, self.tcs_index[li], chunk)
        micro = self.micro_keys.get(key)
        if micro is None:
            tp, cp, sp = self.tcs[self.tcs_index[li]]
            micro = self.micro_keys[key] = MicroKey(tp, cp, sp, recompute.resolved(self.arch.num_layers, self.layouts[li]),
                                                    self.micro_batches[b], self.precisions[p])
        return micro

    def ranks_activation_mib(self, r: int, b: int, p: int, li: int, n: int) -> list[int]:
        """activation_mib of every checked rank j, each distinct rank once (columns repeat the first
        rank: with pp = 1 every column is rank 0)."""
        aliases = self.column_aliases(self.layouts[li].pipeline)
        values = [0] * len(aliases)
        for j, alias in enumerate(aliases):
            values[j] = self.activation_mib(r, b, p, li, n, j) if alias == j else values[alias]
        return values

    def count_allows(self, n: int, zf: int, r: int) -> bool:
        """Whether the stack runs ZeRO x offload zf and recompute r on count index n's GPUs (its
        contract's single_gpu_only / multi_gpu_only: torchtune offloads the optimizer alone only
        on one GPU, litgpt checkpoints every block on several)."""
        zfs, rs = self.count_choices(n)
        return zf in zfs and r in rs

    def count_choices(self, n: int) -> tuple[frozenset[int], frozenset[int]]:
        """(ZeRO x offload, recompute) indices the stack runs on count index n's GPUs."""
        several = self.counts[n] > 1
        choices = self.count_choice_sets.get(several)
        if choices is None:
            caps, count = load_stack_capabilities()[self.job.stack], self.counts[n]
            choices = self.count_choice_sets[several] = (
                frozenset(i for i, (_, f) in enumerate(self.zero_offloads) if runs_on_count(caps, count, "offload", f)),
                frozenset(i for i, r in enumerate(self.recomputes) if runs_on_count(caps, count, "recompute", r.mode)))
        return choices

    def offloaded_mib(self, r: int, b: int, p: int, li: int, n: int) -> int:
        """Activations offloaded to host memory per GPU (MiB): the most any checked rank offloads
        (models.memory.memory_per_gpu takes the same maximum); 0 without activation offloading."""
        if not self.job.activation_offload:
            return 0
        aliases = self.column_aliases(self.layouts[li].pipeline)
        micro = self.micro_key(r, b, p, li)
        return max(self.tables.offloaded_mib(micro, self.rank_places[n, li, b, j])  # type: ignore[union-attr]
                   for j, alias in enumerate(aliases) if alias == j)

    def column_aliases(self, pipeline: int | tuple[int, ...]) -> tuple[int, ...]:
        """For each checked-rank column of a pipeline (a depth, or a split: Layout.pipeline), the
        first column that checks the same rank."""
        aliases = self.aliases_of_pipeline.get(pipeline)
        if aliases is None:
            stages = rank_columns(self.arch, pipeline, self.num_rank_columns)
            aliases = self.aliases_of_pipeline[pipeline] = tuple(stages.index(stage) for stage in stages)
        return aliases

    def cluster_layouts(self, shape: Shape) -> list[int]:
        """Layouts a cluster of this shape can run: degrees dividing its count, TP inside one
        instance; kept per shape (the branch-and-bound asks it for every cluster of every query)."""
        key = _reach(shape)  # shapes of one count and TP reach share the list
        layouts = self.layouts_of_shape.get(key)
        if layouts is None:
            layouts = self.layouts_of_shape[key] = [li for li in self.count_layouts[key[0]] if self.layouts[li].tp <= key[1]]
        return layouts

    def cluster_layout_groups(self, shape: Shape, group: Callable[[Layout], tuple]) -> dict[tuple, list[int]]:
        """cluster_layouts(shape) by group(layout), in that order, made once per group, count and TP
        reach (branch_layouts asks it very often; docs/performance.md#layout-plans)."""
        key = (group, *_reach(shape))
        groups = self.layout_groups.get(key)
        if groups is None:
            groups = self.layout_groups[key] = {}
            for li in self.cluster_layouts(shape):
                groups.setdefault(group(self.layouts[li]), []).append(li)
        return groups

    def clusters_of_shape(self, shape: Shape) -> list[int]:
        """The clusters of one shape (the same hardware at other prices), in cluster order."""
        if not self.shape_members:
            for c, cluster in enumerate(self.clusters):
                self.shape_members.setdefault(cluster.shape, []).append(c)
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
        if not floor or cluster.num_gpus == 1:  # one GPU waits on nothing but its own small job (GPT-2 at batch 1)
            return None
        gpu = self.gpus[cluster.gpu_index]
        peak_flops = (gpu.bf16_dense_tflops or gpu.fp16_dense_tflops) * 10**12
        model_flops = self.tables.kept(("model-flops-per-step", self.global_batch), lambda: training_flops_per_token(  # type: ignore[union-attr]
            self.arch, self.job.seq_len, "none", self.job.method, 0.0).model * self.global_batch * self.job.seq_len)
        return int(model_flops * US_PER_S / (cluster.num_gpus * peak_flops * floor))

    @property
    def budget_bound_cost_units(self) -> int | None:
        """The largest price_units x step_us that meets --budget-usd (the inverse of usd())."""
        if self.query.budget_usd is None:
            return None
        return int(self.query.budget_usd * PRICE_UNITS_PER_USD * US_PER_S * SECONDS_PER_HOUR / self.steps)


def _reach(shape: Shape) -> tuple[int, int]:
    """(count index, TP reach): what a cluster shape's layouts depend on (TP inside one instance)."""
    return shape[1], tp_reach(shape[2])
