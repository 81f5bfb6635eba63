"""The search space of one query, as domains and integer tables computed by models/.

Both engines (CP-SAT and brute force) read only this object, so they search exactly the same
space with exactly the same numbers, and no formula lives in solver/: every table entry is a
models/ function evaluated at one discrete choice, then scaled to an integer once, here.

Units: memory in MiB (demands rounded up, capacities down, so an accepted plan always passes the
exact byte check), time in microseconds (compute and traffic are kept in seconds and combined by
models.performance.exposed_communication_s before rounding), prices in 1e-4 USD per hour.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product

from vramplan.models.activations import activations
from vramplan.models.catalogue import Catalogue
from vramplan.models.catalogue_schema import Architecture, GpuSpec, Offering
from vramplan.models.cost import SECONDS_PER_HOUR, instance_price_usd_per_hour, num_instances
from vramplan.models.errors import VramplanError
from vramplan.models.memory import check_gpu_precision, check_job
from vramplan.models.model_states import model_states
from vramplan.models.overhead import overhead
from vramplan.models.performance import (
    communication_bytes_per_step,
    communication_time_from_bytes,
    compute_time_s,
    crosses_nodes,
    optimizer_time_from_traffic,
    optimizer_traffic,
)
from vramplan.models.setup import OFFLOADS, RECOMPUTES, ZERO_STAGES, Job, Plan
from vramplan.models.units import bytes_to_mib_ceil
from vramplan.solver.query import SolveQuery
from vramplan.solver.table_memo import job_values, keep_space, remembered, shared_space

log = logging.getLogger(__name__)

US_PER_S = 1_000_000
PRICE_UNITS_PER_USD = 10_000
HALF_PRECISIONS = ("bf16", "fp16")  # searched by default; fp8 and fp32 only when pinned


_NETWORKS: list[float] = []  # distinct offering network bandwidths seen, GB/s per GPU


def crossing_key(network_gb_per_s: float | None) -> int:
    """1: crosses instances over the GPU's usual fabric; 2 + i: over _NETWORKS[i] (the offering's)."""
    if network_gb_per_s is None:
        return 1
    if network_gb_per_s not in _NETWORKS:
        _NETWORKS.append(network_gb_per_s)
    return 2 + _NETWORKS.index(network_gb_per_s)


def crossing_network(key: int) -> float | None:
    """The offering bandwidth a crossing key stands for (None: the GPU's own)."""
    return _NETWORKS[key - 2] if key >= 2 else None


@dataclass(frozen=True)
class Cluster:
    """num_gpus GPUs of one offering (whole instances beyond one instance)."""

    offering: Offering
    gpu_index: int
    count_index: int
    num_gpus: int
    num_instances: int
    price_units: int  # 1e-4 USD per hour for the whole cluster

    @property
    def crossing(self) -> int:
        """0 when data-parallel traffic stays inside the instance (NVLink/PCIe); else a key of the
        network it crosses (crossing_network: the offering's per-GPU bandwidth, or the GPU's)."""
        if not crosses_nodes(self.num_gpus, self.offering.num_gpus):
            return 0
        return crossing_key(self.offering.network_bandwidth_gb_per_s)

    @property
    def shape(self) -> tuple[int, int, int]:
        """What memory and step time depend on: (GPU, count, crossing). Price does not."""
        return (self.gpu_index, self.count_index, self.crossing)


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
    recomputes: list[str]
    precisions: list[str]
    micro_batches: list[int]
    # Integer tables, keyed by domain indices; a missing key is an invalid combination.
    static_mib: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (zf, n, p)
    host_mib_per_gpu: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (zf, n, p)
    activation_mib: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (r, b, p)
    limit_mib: list[int] = field(default_factory=list)  # per GPU
    host_budget_mib_per_gpu: list[int] = field(default_factory=list)  # per cluster
    compute_s: dict[tuple[int, int, int, int], float] = field(default_factory=dict)  # (g, n, r, p)
    comm_s: dict[tuple[int, int, int, int, int, int], float] = field(default_factory=dict)  # (z, n, b, p, g, crossing)
    optimizer_us: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict)  # (zf, n, b, p, g)
    valid_gpu_precision: set[tuple[int, int]] = field(default_factory=set)
    valid_count_batch: set[tuple[int, int]] = field(default_factory=set)
    offering_rank: list[int] = field(default_factory=list)  # per cluster: rank of the offering's name
    tie_radix: list[int] = field(default_factory=list)  # mixed radix of candidates.tie_key

    @property
    def steps(self) -> float:
        """Optimizer steps to train on the query's tokens."""
        return self.query.tokens / (self.global_batch * self.job.seq_len)

    @property
    def size(self) -> int:
        """Combinations of the decision variables before any constraint."""
        return len(self.clusters) * len(self.zero_offloads) * len(self.recomputes) * len(self.precisions) * len(
            self.micro_batches
        )

    def plan(self, cluster: int, zf: int, r: int, p: int, b: int) -> Plan:
        c = self.clusters[cluster]
        zero, offload = self.zero_offloads[zf]
        micro = self.micro_batches[b]
        return Plan(
            gpu=self.gpus[c.gpu_index].name,
            offering=c.offering.name,
            num_gpus=c.num_gpus,
            zero=zero,
            recompute=self.recomputes[r],
            precision=self.precisions[p],
            micro_batch=micro,
            grad_accum=self.global_batch // (micro * c.num_gpus),
            offload=offload,
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
    def budget_bound_cost_units(self) -> int | None:
        """The largest price_units x step_us that meets --budget-usd (the inverse of usd())."""
        if self.query.budget_usd is None:
            return None
        return int(self.query.budget_usd * PRICE_UNITS_PER_USD * US_PER_S * SECONDS_PER_HOUR / self.steps)


def to_us(seconds: float) -> int:
    """Seconds as whole microseconds, rounded up."""
    return math.ceil(seconds * US_PER_S)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _allowed_counts(offering: Offering, query: SolveQuery, divisors: list[int]) -> list[int]:
    """GPU counts an offering can rent: any count up to one instance, whole instances beyond."""
    per = offering.num_gpus
    counts = [n for n in divisors if n <= query.max_gpus and (n <= per or n % per == 0)]
    if query.max_nodes is not None:
        counts = [n for n in counts if num_instances(n, offering) <= query.max_nodes]
    if query.pins.num_gpus is not None:
        counts = [n for n in counts if n == query.pins.num_gpus]
    return counts


def plannable(offering: Offering, query: SolveQuery) -> bool:
    """list/ rows are reference prices nobody rents: plans use them only when --provider names them."""
    return offering.rentable or offering.provider in query.providers


def _offerings(catalogue: Catalogue, query: SolveQuery) -> list[Offering]:
    for name in query.gpus:
        catalogue.gpu(name)  # unknown names are errors with suggestions
    known_providers = {o.provider for o in catalogue.offerings.values()}
    for provider in query.providers:
        if provider not in known_providers:
            raise VramplanError("provider", provider, f"no offering; known: {', '.join(sorted(known_providers))}")
    chosen = [
        o
        for o in catalogue.offerings.values()
        if (not query.gpus or o.gpu in query.gpus)
        and (not query.providers or o.provider in query.providers)
        and (query.pricing == "on-demand" or o.spot_price_usd_per_hour is not None)
        and plannable(o, query)
    ]
    return sorted(chosen, key=lambda o: o.name)  # independent of catalogue row order


def _runs(gpu: GpuSpec, precision: str) -> bool:
    try:
        check_gpu_precision(gpu, precision)
    except VramplanError:
        return False
    return True


def _domains(query: SolveQuery) -> tuple[list[tuple[int, str]], list[str], list[str]]:
    pins = query.pins
    zero_offloads = [
        (z, f)
        for z, f in product(ZERO_STAGES, OFFLOADS)
        if (f == "none" or (f == "optimizer" and z >= 1) or (f == "optimizer+params" and z == 3))
        and (pins.zero is None or z == pins.zero)
        and (pins.offload is None or f == pins.offload)
    ]
    recomputes = [r for r in RECOMPUTES if pins.recompute is None or r == pins.recompute]
    precisions = [pins.precision] if pins.precision is not None else list(HALF_PRECISIONS)
    return zero_offloads, recomputes, precisions


def build_space(catalogue: Catalogue, query: SolveQuery) -> SearchSpace:
    shared = shared_space(catalogue, query)  # solver/table_memo.py: only while a memo is active
    if shared is not None:
        return shared
    arch = catalogue.architecture(query.model)
    job = query.job
    global_batch = query.effective_global_batch
    batch_divisors = divisors(global_batch)
    offerings = _offerings(catalogue, query)
    gpus = sorted({catalogue.gpu(o.gpu).name: catalogue.gpu(o.gpu) for o in offerings}.values(), key=lambda g: g.name)
    gpu_index = {g.name: i for i, g in enumerate(gpus)}
    counts = sorted({n for o in offerings for n in _allowed_counts(o, query, batch_divisors)})
    count_index = {n: i for i, n in enumerate(counts)}
    micro_batches = [b for b in batch_divisors if query.pins.micro_batch is None or b == query.pins.micro_batch]
    zero_offloads, recomputes, precisions = _domains(query)
    for precision in precisions:
        check_job(arch, job, precision)  # a job no GPU can run is bad input, not "nothing fits"
    if query.pins.precision is not None and gpus and not any(_runs(g, query.pins.precision) for g in gpus):
        raise VramplanError("precision", query.pins.precision,
                            f"not supported by any allowed GPU ({', '.join(g.name for g in gpus)})")

    clusters = []
    for offering in offerings:
        for n in _allowed_counts(offering, query, batch_divisors):
            instances = num_instances(n, offering)
            price = instances * instance_price_usd_per_hour(offering, query.pricing)
            clusters.append(
                Cluster(offering, gpu_index[offering.gpu], count_index[n], n, instances, round(price * PRICE_UNITS_PER_USD))
            )
    space = SearchSpace(
        arch, job, query, global_batch, gpus, counts, clusters, zero_offloads, recomputes, precisions, micro_batches
    )
    # Tie-break on the offering: real providers before the generic list-price rows, then by name.
    names = sorted({c.offering.name for c in clusters}, key=lambda name: (name.startswith("list/"), name))
    space.offering_rank = [names.index(c.offering.name) for c in clusters]
    space.tie_radix = [len(counts), max((c.num_instances for c in clusters), default=0) + 1, len(zero_offloads),
                       len(recomputes), len(micro_batches), len(precisions), len(names)]
    values = job_values(catalogue, query.model, job.model_dump_json, global_batch)  # solver/table_memo.py
    _fill_memory_tables(space, values)
    _fill_time_tables(space, values)
    log.debug("search space: %d clusters, %d combinations", len(clusters), space.size)
    keep_space(catalogue, query, space)
    return space


def unvalidated_plan(space: SearchSpace, gpu: str, n: int, zero: int, offload: str, recompute: str, precision: str, micro: int) -> Plan:
    """A Plan without validation: every value comes from a validated domain (speed: ~10^3 calls)."""
    return _plan_of(gpu, n, zero, offload, recompute, precision, micro, max(1, space.global_batch // (micro * n)))


@lru_cache(maxsize=65536)
def _plan_of(gpu: str, n: int, zero: int, offload: str, recompute: str, precision: str, micro: int, accum: int) -> Plan:
    return Plan.model_construct(gpu=gpu, offering=None, num_gpus=n, zero=zero, recompute=recompute,
                                precision=precision, micro_batch=micro, grad_accum=accum, offload=offload)


def _static_and_host_mib(space: SearchSpace, n: int, zero: int, offload: str, precision: str) -> tuple[int, int]:
    plan = unvalidated_plan(space, "", n, zero, offload, "none", precision, 1)
    states = model_states(space.arch, space.job, plan)
    over = overhead(space.arch, space.job, plan)
    static = sum(bytes_to_mib_ceil(x) for x in (states.weights_bytes, states.gradients_bytes,
                                                 states.optimizer_states_bytes, over.total_bytes))
    return static, bytes_to_mib_ceil(states.host_bytes_per_gpu)


def _fill_memory_tables(space: SearchSpace, values: dict) -> None:
    arch, job = space.arch, space.job
    for (zf, (zero, offload)), (n_i, n), (p, precision) in product(
        enumerate(space.zero_offloads), enumerate(space.counts), enumerate(space.precisions)
    ):
        space.static_mib[zf, n_i, p], space.host_mib_per_gpu[zf, n_i, p] = remembered(
            values, ("static", n, zero, offload, precision),
            lambda: _static_and_host_mib(space, n, zero, offload, precision))
    for (r, recompute), (b, micro), (p, precision) in product(
        enumerate(space.recomputes), enumerate(space.micro_batches), enumerate(space.precisions)
    ):
        plan = unvalidated_plan(space, "", 1, 0, "none", recompute, precision, micro)
        space.activation_mib[r, b, p] = remembered(
            values, ("activations", recompute, micro, precision),
            lambda: bytes_to_mib_ceil(activations(arch, job, plan).total_bytes))
    permille = job.capacity_per_mille
    space.limit_mib = [g.memory_usable_mib * permille // 1000 for g in space.gpus]
    for cluster in space.clusters:
        host_mib = int(cluster.offering.host_memory_gib * 1024)
        on_node = min(cluster.num_gpus, cluster.offering.num_gpus)
        space.host_budget_mib_per_gpu.append(host_mib * permille // 1000 // on_node)
    pinned = space.query.pins.precision is not None
    for (g, gpu), (p, precision) in product(enumerate(space.gpus), enumerate(space.precisions)):
        try:
            check_gpu_precision(gpu, precision)
        except VramplanError:
            continue
        if not pinned and precision == "fp16" and gpu.bf16_dense_tflops > 0:
            continue  # unpinned half precision means bf16 where the GPU has it, fp16 where not (V100)
        space.valid_gpu_precision.add((g, p))
    for (n_i, n), (b, micro) in product(enumerate(space.counts), enumerate(space.micro_batches)):
        if space.global_batch % (n * micro) == 0:
            space.valid_count_batch.add((n_i, b))


def _fill_time_tables(space: SearchSpace, values: dict) -> None:
    """Step-time components. Traffic (bytes) depends on the plan, its time on the GPU and on
    whether it leaves the instance: each is computed once per distinct argument, then combined by
    the models/ conversion functions."""
    arch, job = space.arch, space.job
    shapes_by_count: dict[int, set[tuple[int, int]]] = {}
    for c in space.clusters:
        shapes_by_count.setdefault(c.count_index, set()).add((c.gpu_index, c.crossing))
    zeros = sorted({z for z, _ in space.zero_offloads})
    for n_i, fabrics in sorted(shapes_by_count.items()):
        n = space.counts[n_i]
        for p, precision in enumerate(space.precisions):
            valid = sorted((g, x) for g, x in fabrics if (g, p) in space.valid_gpu_precision)
            if not valid:
                continue
            gpu_indices = sorted({g for g, _ in valid})
            for r, recompute in enumerate(space.recomputes):
                plan = unvalidated_plan(space, "", n, 0, "none", recompute, precision, space.global_batch // n)
                for g in gpu_indices:
                    gpu = space.gpus[g]
                    space.compute_s[g, n_i, r, p] = remembered(
                        values, ("compute", gpu.name, n, recompute, precision),
                        lambda: compute_time_s(arch, job, plan, gpu))
            for b, micro in enumerate(space.micro_batches):
                if (n_i, b) not in space.valid_count_batch:
                    continue
                for zero in zeros:
                    traffic = remembered(values, ("traffic", n, zero, precision, micro), lambda: (
                        communication_bytes_per_step(arch, job, unvalidated_plan(space, "", n, zero, "none", "none",
                                                                                 precision, micro))))
                    for g, crossing in valid:
                        gpu = space.gpus[g]
                        space.comm_s[zero, n_i, b, p, g, crossing] = remembered(
                            values, ("comm", gpu.name, bool(crossing), crossing_network(crossing), n, zero, precision, micro),
                            lambda: communication_time_from_bytes(traffic, gpu, bool(crossing), crossing_network(crossing)))
                for zf, (zero, offload) in enumerate(space.zero_offloads):
                    work = remembered(values, ("work", n, zero, offload, precision, micro), lambda: optimizer_traffic(
                        arch, job, unvalidated_plan(space, "", n, zero, offload, "none", precision, micro)))
                    for g in gpu_indices:
                        gpu = space.gpus[g]
                        space.optimizer_us[zf, n_i, b, p, g] = remembered(
                            values, ("optimizer", gpu.name, n, zero, offload, precision, micro),
                            lambda: to_us(optimizer_time_from_traffic(work, gpu)))
