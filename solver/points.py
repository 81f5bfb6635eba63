"""Points of the search space and their integer metrics: the one definition both engines use.

A point is a Choice of domain indices (cluster, ZeRO x offload, recompute, precision,
micro-batch). Its memory and step time depend only on the cluster's shape (GPU, count, whether
traffic leaves the instance), never on the price: inner_metrics() computes them per shape, and
evaluate() adds what depends on the cluster (host RAM per instance, price, budget, deadline).

The integer step time is defined once, in solver/step_time.py (the CP-SAT model states the same
sum there); step_us below reads a point's terms from its shape's step tables.
"""

from __future__ import annotations

from typing import NamedTuple

from vramplan.solver.clusters import Shape
from vramplan.solver.layouts import tp_reach
from vramplan.solver.space import SearchSpace
from vramplan.solver.space_tables import StepTables
from vramplan.solver.step_time import point_step_us
from vramplan.solver.tables import accumulation


class Inner(NamedTuple):
    """The decisions inside one cluster (tuples: hashable, ordered, cheap to create)."""

    zero_offload: int
    recompute: int
    precision: int
    micro_batch: int
    layout: int = 0


class Choice(NamedTuple):
    cluster: int
    zero_offload: int
    recompute: int
    precision: int
    micro_batch: int
    layout: int = 0

    @property
    def inner(self) -> Inner:
        return Inner(self.zero_offload, self.recompute, self.precision, self.micro_batch, self.layout)


class InnerMetrics(NamedTuple):
    static_mib: int  # weights + gradients + optimizer states + overhead, each rounded up
    activation_mib: int  # the peak's rest: activations, or the optimizer step's gradient copies where larger
    host_mib_per_gpu: int
    step_us: int


class Metrics(NamedTuple):
    static_mib: int
    activation_mib: int
    limit_mib: int
    step_us: int
    price_units: int
    cost_units: int
    tie_key: tuple[int, ...]

    @property
    def memory_mib(self) -> int:
        return self.static_mib + self.activation_mib


def inner_tie_radix(space: SearchSpace) -> int:
    return (len(space.zero_offloads) * len(space.recomputes) * len(space.micro_batches) * len(space.precisions)
            * len(space.layouts))


def inner_tie(space: SearchSpace, inner: Inner) -> int:
    """Order among equal step times inside one cluster: the least model parallelism (layouts are
    sorted by Layout.preference), lower ZeRO stage, no offload, less recompute, larger
    micro-batch, bf16 before fp16 (a mixed-radix integer, the form CP-SAT uses)."""
    nz, nr, nb, np_ = len(space.zero_offloads), len(space.recomputes), len(space.micro_batches), len(space.precisions)
    return (((inner.layout * nz + inner.zero_offload) * nr + inner.recompute) * nb + nb - 1 - inner.micro_batch) * np_ \
        + inner.precision


def tie_key(space: SearchSpace, choice: Choice) -> tuple[int, ...]:
    """Deterministic order among equal objectives: fewer GPUs, fewer (larger) instances, the inner
    tie, the lower price, then the offering (real providers before list prices, then by name)."""
    cluster = space.clusters[choice.cluster]
    return (cluster.count_index, cluster.num_instances, inner_tie(space, choice.inner), cluster.price_units,
            space.offering_rank[choice.cluster])


def memory_columns_mib(space: SearchSpace, n: int, inner: Inner) -> list[int] | None:
    """GPU memory of the checked pipeline ranks (tables.rank_columns), MiB; None if invalid. Each
    rank's peak is its states, accumulation and buffers plus the larger of its activations and the
    gradient copies its optimizer step holds (SpaceFills.step_copy_mib: models.memory.memory
    MemoryBreakdown.total_bytes' max; the CP-SAT model states both sums)."""
    zf, r, p, b, li = inner
    if li not in space.count_layouts[n] or b not in space.valid_batches[n, li]:
        return None
    space.on_use.fill_count(n, [li], (p,))
    buffers = space.buffer_mib[b, p, li]
    return [space.on_use.static_mib[zf, n, p, li, j] + accumulated_mib(space, zf, n, p, li, j, b) + buffers
            + max(mib, space.on_use.step_copy_mib(zf, n, p, li, j))
            for j, mib in enumerate(space.on_use.ranks_activation_mib(r, b, p, li, n))]


def accumulated_mib(space: SearchSpace, zf: int, n: int, p: int, li: int, j: int, b: int) -> int:
    """What gradient accumulation adds to checked rank j's model states: space.on_use.accumulation_mib
    when the micro-batch b leaves more than one micro-batch a step."""
    extra = space.on_use.accumulation_mib[zf, n, p, li, j]
    if not extra:
        return 0
    accum = accumulation(space.global_batch, space.layouts[li], space.counts[n], space.micro_batches[b])
    return extra if accum > 1 else 0


def inner_metrics(space: SearchSpace, shape: Shape, inner: Inner, memory: bool = True,
                  timed: bool = True) -> InnerMetrics | None:
    """Memory (the most loaded checked rank) and integer step time of inner decisions on a shape;
    None if invalid or (with memory=True) over the GPU's limit. timed=False leaves the step time
    out (step_us 0) for whoever reads only memory and host RAM (no budget or deadline caps the
    step): the shape's step-time tables are then not filled."""
    metrics = _memory_metrics(space, shape, inner, memory)
    if metrics is None or not timed:
        return metrics
    step = step_us(space, space.on_use.step_tables(shape, [inner.layout]), shape, inner)
    return InnerMetrics(metrics.static_mib, metrics.activation_mib, metrics.host_mib_per_gpu, step)


def step_us(space: SearchSpace, t: StepTables, shape: Shape, inner: Inner) -> int:
    """The integer step time of inner decisions on a shape, from its step tables t (the layout
    tabulated): solver/step_time.py's sum."""
    zf, r, p, b, li = inner
    return point_step_us(t, space.zero_offloads[zf][0], zf, r, p, b, li, space.arch.num_layers)


def _memory_metrics(space: SearchSpace, shape: Shape, inner: Inner, memory: bool) -> InnerMetrics | None:
    g, n, per_instance, _ = shape
    zf, r, p, b, li = inner
    if (g, p) not in space.valid_gpu_precision or space.layouts[li].tp > tp_reach(per_instance):
        return None
    if not space.count_allows(n, zf, r) or not space.pair_allows(zf, li, n):
        return None
    columns = memory_columns_mib(space, n, inner)
    if columns is None:
        return None
    j = max(range(space.num_rank_columns), key=lambda k: (columns[k], -k))
    total = columns[j]
    if memory and total > space.limit_mib[g]:
        return None
    static = space.on_use.static_mib[zf, n, p, li, j] + accumulated_mib(space, zf, n, p, li, j, b) + space.buffer_mib[b, p, li]
    return InnerMetrics(static, total - static, host_mib_per_gpu(space, n, inner), 0)


def host_mib_per_gpu(space: SearchSpace, n: int, inner: Inner) -> int:
    """Host RAM per GPU: the offloaded model states (zf, p, l) and the offloaded activations
    (r, b, p, l), each the most any checked rank holds (models.memory.memory_per_gpu's sum)."""
    zf, r, p, b, li = inner
    return space.on_use.host_mib_per_gpu[zf, n, p, li] + space.on_use.offloaded_mib(r, b, p, li, n)


def step_cap_us(space: SearchSpace, cluster_index: int) -> int | None:
    """The longest step the deadline (or --max-days), the budget and the MFU floor allow on this
    cluster (None: no bound), at most MAX_STEP_CAP_US (SearchSpace.step_caps_us)."""
    return space.step_caps_us[cluster_index]


def cluster_accepts(space: SearchSpace, cluster_index: int, inner: InnerMetrics, memory: bool = True, limits: bool = True) -> bool:
    """What depends on the cluster itself: host RAM per instance, the budget and the deadline."""
    if memory and inner.host_mib_per_gpu > space.host_budget_mib_per_gpu[cluster_index]:
        return False
    cap = step_cap_us(space, cluster_index) if limits else None
    return cap is None or inner.step_us <= cap


def metrics_of(space: SearchSpace, choice: Choice, inner: InnerMetrics) -> Metrics:
    cluster = space.clusters[choice.cluster]
    return Metrics(inner.static_mib, inner.activation_mib, space.limit_mib[cluster.gpu_index], inner.step_us,
                   cluster.price_units, cluster.price_units * inner.step_us, tie_key(space, choice))


def evaluate(space: SearchSpace, choice: Choice, memory: bool = True, limits: bool = True) -> Metrics | None:
    """Integer metrics of a point, or None when it is invalid or breaks a constraint.

    memory=False ignores the GPU and host memory bounds (closest-miss search); limits=False
    ignores the budget and the deadline.
    """
    inner = inner_metrics(space, space.clusters[choice.cluster].shape, choice.inner, memory)
    if inner is None or not cluster_accepts(space, choice.cluster, inner, memory, limits):
        return None
    return metrics_of(space, choice, inner)


def objective_key(space: SearchSpace, metrics: Metrics, order: str | None = None) -> tuple[int, ...]:
    """The lexicographic order both engines minimise (Python integers: no overflow).
    order "pareto" is the sweep's order: cost, then step time."""
    objective = order or space.query.objective
    if objective == "cost":
        return (metrics.cost_units, *metrics.tie_key)
    if objective == "pareto":
        return (metrics.cost_units, metrics.step_us, *metrics.tie_key)
    if objective == "hourly":
        return (metrics.price_units, metrics.step_us, *metrics.tie_key)
    return (metrics.step_us, *metrics.tie_key)  # time, throughput


def hardware_key(space: SearchSpace, choice: Choice) -> tuple:
    """The same cluster (GPU, count, instance size, network) and decisions under another price
    (a list/ row, another provider): top-k and Pareto show each once, at its best price."""
    return (space.clusters[choice.cluster].shape, choice.inner)


def stage_twin_key(space: SearchSpace, choice: Choice, metrics: Metrics) -> tuple:
    """A point as a top-k list shows it, but its ZeRO stage: two points with the same key differ
    only in the stage and hold, offload and take exactly alike (ZeRO-0 to 3 with one rank in the
    DP x CP group shard nothing), so the list shows one plan, at its least stage (the inner tie
    orders it first), not the same plan under several stage numbers."""
    zf, r, p, b, li = choice.inner
    n = space.clusters[choice.cluster].count_index
    return (space.clusters[choice.cluster].shape, r, p, b, li, space.zero_offloads[zf][1], metrics.static_mib,
            metrics.activation_mib, host_mib_per_gpu(space, n, choice.inner), metrics.step_us)
