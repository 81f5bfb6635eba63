"""The models/ terms of one (model, job, global batch), memoised.

Each entry is one models/ evaluation at one discrete choice (a ZeRO stage and GPU count for the
model states, a recompute and micro-batch for the activations, ...), never at a combination of
all decisions. Queries that share (catalogue, model, job, global batch) can share one Tables:
the second query of a batch sheet's group only evaluates what the first did not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from vramplan.models.activations import activations
from vramplan.models.catalogue_schema import Architecture, GpuSpec
from vramplan.models.model_states import model_states
from vramplan.models.overhead import overhead
from vramplan.models.performance import (
    communication_bytes_per_step,
    communication_time_from_bytes,
    compute_time_s,
    optimizer_time_from_traffic,
    optimizer_traffic,
)
from vramplan.models.setup import Job, Plan
from vramplan.models.units import bytes_to_mib_ceil


@lru_cache(maxsize=65536)
def plan_of(global_batch: int, n: int, zero: int, offload: str, recompute: str, precision: str, micro: int) -> Plan:
    """A Plan without validation: every value comes from a validated domain (speed: ~10^4 calls)."""
    return Plan.model_construct(gpu="", offering=None, num_gpus=n, zero=zero, recompute=recompute,
                                precision=precision, micro_batch=micro, grad_accum=max(1, global_batch // (micro * n)),
                                offload=offload)


@dataclass
class Tables:
    arch: Architecture
    job: Job
    global_batch: int
    evaluations: int = 0  # models/ evaluations made so far
    _memo: dict[tuple, object] = field(default_factory=dict)

    def matches(self, arch: Architecture, job: Job, global_batch: int) -> bool:
        return self.arch == arch and self.job == job and self.global_batch == global_batch

    def _get(self, key: tuple, compute, cost: int = 1):
        try:
            return self._memo[key]
        except KeyError:
            self.evaluations += cost
            value = self._memo[key] = compute()
            return value

    def states_mib(self, zero: int, offload: str, n: int, precision: str) -> tuple[int, int]:
        """(weights + gradients + optimizer states + overhead, host RAM per GPU), each rounded up."""
        def compute() -> tuple[int, int]:
            plan = plan_of(self.global_batch, n, zero, offload, "none", precision, 1)
            states, over = model_states(self.arch, self.job, plan), overhead(self.arch, self.job, plan)
            static = sum(bytes_to_mib_ceil(x) for x in (states.weights_bytes, states.gradients_bytes,
                                                         states.optimizer_states_bytes, over.total_bytes))
            return static, bytes_to_mib_ceil(states.host_bytes_per_gpu)
        return self._get(("states", zero, offload, n, precision), compute, 2)

    def activation_mib(self, recompute: str, micro: int, precision: str) -> int:
        def compute() -> int:
            plan = plan_of(self.global_batch, 1, 0, "none", recompute, precision, micro)
            return bytes_to_mib_ceil(activations(self.arch, self.job, plan).total_bytes)
        return self._get(("acts", recompute, micro, precision), compute)

    def compute_s(self, gpu: GpuSpec, n: int, recompute: str, precision: str) -> float:
        def compute() -> float:
            plan = plan_of(self.global_batch, n, 0, "none", recompute, precision, self.global_batch // n)
            return compute_time_s(self.arch, self.job, plan, gpu)
        return self._get(("compute", gpu.name, n, recompute, precision), compute)

    def comm_s(self, zero: int, n: int, micro: int, precision: str, gpu: GpuSpec, crossing: bool) -> float:
        traffic = self._get(("traffic", zero, n, micro, precision), lambda: communication_bytes_per_step(
            self.arch, self.job, plan_of(self.global_batch, n, zero, "none", "none", precision, micro)))
        return self._get(("comm", zero, n, micro, precision, gpu.name, crossing),
                         lambda: communication_time_from_bytes(traffic, gpu, crossing))

    def optimizer_s(self, zero: int, offload: str, n: int, micro: int, precision: str, gpu: GpuSpec) -> float:
        work = self._get(("opt-traffic", zero, offload, n, micro, precision), lambda: optimizer_traffic(
            self.arch, self.job, plan_of(self.global_batch, n, zero, offload, "none", precision, micro)))
        return self._get(("opt", zero, offload, n, micro, precision, gpu.name),
                         lambda: optimizer_time_from_traffic(work, gpu))
