"""Points of the search space and their integer metrics: the one definition both engines use.

A point is a Choice of domain indices (cluster, ZeRO x offload, recompute, precision,
micro-batch). Its memory and step time depend only on the cluster's shape (GPU, count, whether
traffic leaves the instance), never on the price: inner_metrics() computes them per shape, and
evaluate() adds what depends on the cluster (host RAM per instance, price, budget, deadline).
"""

from __future__ import annotations

from typing import NamedTuple

from vramplan.models.performance import exposed_communication_s
from vramplan.solver.space import SearchSpace, to_us


class Inner(NamedTuple):
    """The decisions inside one cluster (tuples: hashable, ordered, cheap to create)."""

    zero_offload: int
    recompute: int
    precision: int
    micro_batch: int


class Choice(NamedTuple):
    cluster: int
    zero_offload: int
    recompute: int
    precision: int
    micro_batch: int

    @property
    def inner(self) -> Inner:
        return Inner(self.zero_offload, self.recompute, self.precision, self.micro_batch)


class InnerMetrics(NamedTuple):
    static_mib: int  # weights + gradients + optimizer states + overhead, each rounded up
    activation_mib: int
    host_mib_per_gpu: int
    step_us: int


class Metrics(NamedTuple):
    static_mib: int
    activation_mib: int
    limit_mib: int
    step_us: int
    price_units: int
    cost_units: int
    tie_key: int

    @property
    def memory_mib(self) -> int:
        return self.static_mib + self.activation_mib


def tie_key(space: SearchSpace, choice: Choice) -> int:
    """Deterministic order among equal objectives: fewer GPUs, fewer instances, lower ZeRO stage,
    no offload, less recompute, larger micro-batch, bf16 before fp16, then the offering (real
    providers before generic list prices, then by name)."""
    cluster = space.clusters[choice.cluster]
    nb = len(space.micro_batches)
    digits = [cluster.count_index, cluster.num_instances, choice.zero_offload, choice.recompute,
              nb - 1 - choice.micro_batch, choice.precision, space.offering_rank[choice.cluster]]
    key = 0
    for digit, r in zip(digits, space.tie_radix, strict=True):
        key = key * r + digit
    return key


def inner_metrics(space: SearchSpace, shape: tuple[int, int, int], inner: Inner, memory: bool = True) -> InnerMetrics | None:
    """Memory and integer step time of inner decisions on a shape; None if invalid or (with
    memory=True) over the GPU's limit.

    step = compute + exposed communication + optimizer step, each in whole microseconds rounded
    up; the exposed part is models.performance.exposed_communication_s of the tables' seconds.
    """
    g, n, crossing = shape
    zf, r, p, b = inner.zero_offload, inner.recompute, inner.precision, inner.micro_batch
    if (g, p) not in space.valid_gpu_precision or (n, b) not in space.valid_count_batch:
        return None
    static = space.static_mib[zf, n, p]
    acts = space.activation_mib[r, b, p]
    if memory and static + acts > space.limit_mib[g]:
        return None
    zero = space.zero_offloads[zf][0]
    compute = space.compute_s[g, n, r, p]
    exposed = exposed_communication_s(space.comm_s[zero, n, b, p, g, crossing], compute, zero, space.arch.num_layers)
    step = to_us(compute) + to_us(exposed) + space.optimizer_us[zf, n, b, p, g]
    return InnerMetrics(static, acts, space.host_mib_per_gpu[zf, n, p], step)


def cluster_accepts(space: SearchSpace, cluster_index: int, inner: InnerMetrics, memory: bool = True, limits: bool = True) -> bool:
    """What depends on the cluster itself: host RAM per instance, the budget and the deadline."""
    cluster = space.clusters[cluster_index]
    if memory and inner.host_mib_per_gpu > space.host_budget_mib_per_gpu[cluster_index]:
        return False
    if limits:
        deadline = space.deadline_bound_us
        if deadline is not None and inner.step_us > deadline:
            return False
        budget = space.budget_bound_cost_units
        if budget is not None and inner.step_us > budget // max(1, cluster.price_units):
            return False
    return True


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


def objective_key(space: SearchSpace, metrics: Metrics) -> tuple[int, ...]:
    """The lexicographic order both engines minimise."""
    objective = space.query.objective
    if objective == "cost":
        return (metrics.cost_units, metrics.tie_key)
    if objective == "hourly":
        return (metrics.price_units, metrics.step_us, metrics.tie_key)
    return (metrics.step_us, metrics.tie_key)  # time, throughput
