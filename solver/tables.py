"""The models/ terms of one (model, job, global batch), memoised.

Each entry is one models/ evaluation at one discrete choice (a ZeRO stage and GPU count for the
model states, a recompute and micro-batch for the activations, ...), never at a combination of
all decisions. Queries that share (catalogue, model, job, global batch) can share one Tables:
the second query of a batch sheet's group only evaluates what the first did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import cast

import numpy as np

from vramplan.models.architecture.parallel import split_of, stage_layer_kinds
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import bytes_to_mib_ceil, to_us_array
from vramplan.models.memory.activations import (
    MicrobatchActivations,
    microbatch_activations,
    microbatch_offload_bytes,
    stage_activations,
)
from vramplan.models.memory.dispatcher_buffers import holds_dispatcher_buffers
from vramplan.models.memory.model_states import ModelStates
from vramplan.models.memory.overhead import overhead
from vramplan.models.memory.parallel_overhead import num_communicators
from vramplan.models.memory.parallel_states import heaviest_rank
from vramplan.models.memory.recompute import stage_recomputed
from vramplan.models.time.dequantize import dequantize_s_per_micro_batch
from vramplan.models.time.ep_time import a2a_overlapped, a2a_unhidden_s, a2a_unhidden_share, traffic_all_to_all_s
from vramplan.models.time.flops import plan_flops_per_token
from vramplan.models.time.moe_host import host_exposed_s, host_sync, host_synced
from vramplan.models.time.parallel_time import ParallelTraffic, parallel_seconds, parallel_traffic_over_recomputes
from vramplan.models.time.performance import (
    compute_time_s,
    offload_exposed_s,
)
from vramplan.models.time.pipeline_schedule import bubble_s, pp_imbalance_s, stage_imbalance, stage_time_s
from vramplan.solver.choice_keys import NO_RECOMPUTE, MicroKey, RankPlace, RecomputeChoice, compute_layout
from vramplan.solver.dp_tables import DataParallelTables
from vramplan.solver.layouts import layout_plan
from vramplan.solver.state_tables import StateTables

_ONE_GPU = Layout()


@lru_cache(maxsize=1 << 17)
def _layout_plan(layout: Layout, n: int, zero: int, offload: str, recompute: RecomputeChoice, precision: str, micro: int,
                 global_batch: int) -> Plan:
    return layout_plan(layout, gpu="", num_gpus=n, zero=zero, recompute=recompute.mode,
                       recompute_layers=recompute.layers, precision=precision,
                       micro_batch=micro, grad_accum=accumulation(global_batch, layout, n, micro), offload=offload)


def accumulation(global_batch: int, layout: Layout, n: int, micro: int) -> int:
    """Gradient-accumulation steps of a micro-batch on n GPUs: global batch = micro x accumulation x dp."""
    return max(1, global_batch // (micro * (n // layout.model_parallel)))


@dataclass
class Tables(StateTables, DataParallelTables):
    arch: Architecture
    job: Job
    global_batch: int
    evaluations: int = 0  # models/ evaluations made so far
    _memo: dict[tuple, object] = field(default_factory=dict)
    _group_memo: dict[tuple, tuple[int, int, int]] = field(default_factory=dict)  # _groups by (layout, n)
    _split_free: dict[Layout, Layout] = field(default_factory=dict)  # split_free of the layouts with a split
    _traffic_numbers: dict[tuple, int] = field(default_factory=dict)  # traffic_ids: (layout, traffic key) -> number
    # rank_states' values, shared (solver/table_memo.py) by the Tables of jobs that differ only in
    # the sequence length and so in the global batch: model states read neither (nor the
    # accumulation; tests/solver/test_table_memo_states.py). None: this Tables' own memo.
    states_memo: dict[tuple, ModelStates] | None = None
    # The time-side terms' values (compute, data-parallel traffic, TP/PP/CP/EP time, bubble, the
    # forward's share), shared by the Tables of jobs that differ only in the optimizer: none of
    # those models/ functions reads it (the explanation's 8-bit mitigation re-solves the same job
    # with another optimizer). None: this Tables' own memo.
    time_memo: dict[tuple, object] | None = None
    # buffer_class reads the EP degree only for a job whose EP dispatcher holds its own buffers
    _dispatcher_buffers: bool = False
    # bubble_us adds the MoE host wait only for a job whose layers wait for the host (models.moe_host.host_synced)
    _host_synced: bool = False

    def matches(self, arch: Architecture, job: Job, global_batch: int) -> bool:
        return self.arch == arch and self.job == job and self.global_batch == global_batch

    def __post_init__(self) -> None:
        # Not shared: both kinds of value live in this Tables' own memo (their keys differ).
        self.states_memo = self._memo if self.states_memo is None else self.states_memo
        self.time_memo = self._memo if self.time_memo is None else self.time_memo
        self._dispatcher_buffers = holds_dispatcher_buffers(self.arch, self.job)
        self._host_synced = host_synced(self.arch, self.job)  # models.moe_host: none of this job's layers wait otherwise

    def _get(self, key: tuple, compute, cost: int = 1, memo: dict | None = None):
        """A models/ value, computed once per key in `memo` (default: this Tables' own)."""
        memo = self._memo if memo is None else memo
        try:
            return memo[key]
        except KeyError:
            self.evaluations += cost
            value = memo[key] = compute()
            return value

    def _called(self, key: tuple, compute, memo: dict | None = None):
        """A method's value by its arguments: the terms' own keys need a Plan (zero_group,
        grad_accum) built first, which costs ten times a dict lookup, and the integer tables ask
        the same arguments again for every shape and space of the job. Not an evaluation."""
        memo = self._memo if memo is None else memo
        try:
            return memo[key]
        except KeyError:
            value = memo[key] = compute()
            return value

    def kept(self, key: tuple, compute):
        """A value the integer tables derive from this job's domains (solver/space_tables.py), or a
        plan's re-evaluation (solver/verify.py), computed once per key; not counted as a models/
        evaluation of the tables."""
        return self._called(key, compute)

    def _heaviest_rank(self, layout: Layout) -> tuple:
        """The pipeline rank holding the most parameters and its layers by kind: what of a split
        the data-parallel and optimizer traffic read (models.performance: that rank's shard)."""
        rank = heaviest_rank(self.arch, layout.tp, layout.pipeline, layout.ep)
        return rank, stage_layer_kinds(self.arch, layout.pipeline, rank)

    def _groups(self, layout: Layout, n: int) -> tuple[int, int, int]:
        """(ZeRO group, expert-data-parallel group, communicators) of a layout on n GPUs, read off
        one Plan per (layout, n) (models.setup.Plan, models.parallel_overhead.num_communicators):
        the memo keys of the states and traffic terms need them for every ZeRO stage, offload,
        precision and micro-batch, and a Plan costs ten times a dict lookup."""
        groups = self._group_memo.get((layout, n))
        if groups is None:
            plan = self._plan(layout, n, 0, "none", NO_RECOMPUTE, "bf16", 1)
            groups = self._group_memo[layout, n] = (plan.zero_group, plan.expert_dp, num_communicators(plan))
        return groups

    def buffer_mib(self, layout: Layout, micro: int, precision: str) -> int:
        """TP/PP/CP communication buffers of one micro-batch and the EP dispatcher's (models.overhead)."""
        def compute() -> int:
            over = overhead(self.arch, self.job, self._plan(layout, layout.model_parallel, 0, "none", NO_RECOMPUTE, precision, micro))
            return bytes_to_mib_ceil(over.tp_buffers_bytes + over.pp_p2p_bytes + over.cp_buffers_bytes
                                     + over.dispatcher_buffers_bytes)
        return self._get(("buffers", *self.buffer_class(layout), micro, precision), compute)

    def buffer_class(self, layout: Layout) -> tuple[int, int, bool, bool, bool, int]:
        """What of a layout its buffers read: SP, p2p and CP buffers hold one micro-batch's hidden
        states or K/V (tp, cp, sp; pp > 1, vpp > 1), a flex dispatcher's its group (tp x ep: 1
        where the job has none, models.dispatcher_buffers.holds_dispatcher_buffers)."""
        return (layout.tp, layout.cp, layout.sp, layout.pp > 1, layout.vpp > 1,
                layout.ep if self._dispatcher_buffers else 1)

    def activation_mib(self, micro: MicroKey, place: RankPlace) -> int:
        """A pipeline rank's activations at its peak (models.activations.stage_activations of one
        micro-batch's terms), rounded up to MiB."""
        def compute() -> int:
            return bytes_to_mib_ceil(stage_activations(self._microbatch(micro), *place).total_bytes)
        return self._get(("activations", *micro, *place), compute)

    def offloaded_mib(self, micro: MicroKey, place: RankPlace) -> int:
        """What activation offloading keeps in host memory for a pipeline rank at its peak
        (models.activations.stage_activations' offloaded_bytes), rounded up to MiB; 0 without it."""
        if not self.job.activation_offload:
            return 0
        return self._get(("offloaded", *micro, *place),
                         lambda: bytes_to_mib_ceil(stage_activations(self._microbatch(micro), *place).offloaded_bytes))

    def offload_exposed_s(self, micro: MicroKey, layout: Layout, accum: int, compute_s: float) -> float:
        """The activation-offload transfer the compute does not hide (models.performance
        offload_exposed_s of models.activations.offload_transfer_bytes: the first rank, each
        micro-batch out and back); 0 without offloading."""
        if not self.job.activation_offload:
            return 0.0
        per_micro = self._get(("offload-transfer", *micro, layout.pp, layout.split, layout.vpp), lambda: microbatch_offload_bytes(
            self._microbatch(micro), layout.vpp, stage_layer_kinds(self.arch, layout.pipeline, 0)))
        return offload_exposed_s(2 * accum * per_micro, compute_s)

    def _microbatch(self, micro: MicroKey) -> MicrobatchActivations:
        def compute() -> MicrobatchActivations:
            layout = Layout(tp=micro.tp, cp=micro.cp, sp=micro.sp)
            plan = self._plan(layout, micro.tp * micro.cp, 0, "none", micro.recompute, micro.precision, micro.micro_batch)
            return microbatch_activations(self.arch, self.job, plan)
        return self._get(("microbatch", *micro), compute)

    def _plan(self, layout: Layout, n: int, zero: int, offload: str, recompute: RecomputeChoice, precision: str, micro: int) -> Plan:
        return _layout_plan(layout, n, zero, offload, recompute, precision, micro, self.global_batch)

    def compute_s(self, gpu: GpuSpec, layout: Layout, n: int, recompute: RecomputeChoice, precision: str) -> float:
        """A replica's tokens over its tp x pp x cp GPUs: the same for every layout of a count, but
        for fp8 and a partial full recompute (compute_layout)."""
        recompute = recompute.resolved(self.arch.num_layers, layout)

        def compute() -> float:
            return compute_time_s(self.arch, self.job, self._replica_plan(layout, n, recompute, precision), gpu)
        shape = compute_layout(layout, recompute, precision, self.arch.num_layers)
        # a partial recompute's compute is that of the layers it re-runs in all, whatever the split
        what = shape if shape is not None and shape[0] == "recomputed" else (recompute, shape)
        return self._get(("compute", gpu.name, n, precision, what), compute, memo=self.time_memo)

    def forward_share(self, recompute: RecomputeChoice, layout: Layout = _ONE_GPU) -> float:
        """The forward pass's share of the executed FLOPs under a recompute (models.flops) on a
        layout's pipeline (a partial full recompute counts its layers per model chunk: compute_layout)."""
        recompute = recompute.resolved(self.arch.num_layers, layout)
        shape = compute_layout(layout, recompute, "bf16", self.arch.num_layers)
        plan = self._plan(Layout() if shape is None else layout, layout.model_parallel if shape else 1, 0, "none", recompute,
                          "bf16", 1)
        return self._get(("forward-share", shape or recompute), lambda: plan_flops_per_token(self.arch, self.job, plan).forward_share,
                         memo=self.time_memo)

    def overlaps_a2a(self, layout: Layout) -> bool:
        """Whether the layout's all-to-alls run under the job's MoE all-to-all overlap (models.ep_time.a2a_overlapped)."""
        return self.arch.is_moe and a2a_overlapped(self.job, layout.ep)

    def all_to_all_s(self, layout: Layout, n: int, recompute: RecomputeChoice, precision: str, gpu: GpuSpec,
                     per_instance: int, network_gb_per_s: float) -> float:
        """The plan's EP all-to-all seconds on a shape (models.ep_time.all_to_all_seconds of its traffic)."""
        return traffic_all_to_all_s(self.parallel_traffic(layout, n, recompute, precision).ep, layout, gpu, per_instance,
                                    network_gb_per_s)

    def parallel_s(self, layout: Layout, n: int, recompute: RecomputeChoice, precision: str, gpu: GpuSpec, per_instance: int,
                   network_gb_per_s: float, compute_s: float) -> float:
        """TP collectives + PP p2p + CP's exposed ring + EP all-to-all (models.parallel_time): each
        moves micro-batch x accumulation = global batch / dp sequences per step, whatever the split.
        The traffic is kept per (layout, count, recompute, precision); its seconds on a shape are
        a few float operations (models.parallel_time.parallel_seconds)."""
        return parallel_seconds(self.parallel_traffic(layout, n, recompute, precision), gpu, n > per_instance, per_instance,
                                network_gb_per_s, compute_s)

    def parallel_traffic(self, layout: Layout, n: int, recompute: RecomputeChoice, precision: str) -> ParallelTraffic:
        """models.parallel_time.parallel_traffic of a replica, kept per layout without its split:
        a split changes only what a partial full recompute re-runs in all (compute_layout), which
        keys it then (the traffic's layout serves its degrees alone)."""
        base, resolved, what = self._called(("traffic-key", layout, recompute), lambda: self._traffic_key(layout, recompute))
        return self._get(("parallel-traffic", base, n, what, precision),
                         lambda: self._recomputed_traffic(layout, n, (resolved,), precision)[0], memo=self.time_memo)

    def parallel_traffics(self, layout: Layout, n: int, recomputes: Sequence[RecomputeChoice],
                          precision: str) -> list[ParallelTraffic]:
        """parallel_traffic of each recompute, kept under the same keys; those not kept yet made in
        one models/ call (models.parallel_time.parallel_traffic_over_recomputes: what the recompute
        does not change computed once), one evaluation each."""
        memo = self.time_memo
        assert memo is not None  # __post_init__ sets it
        keys = [self._called(("traffic-key", layout, r), lambda: self._traffic_key(layout, r))  # noqa: B023
                for r in recomputes]
        entries = [("parallel-traffic", base, n, what, precision) for base, _, what in keys]
        missing: dict[tuple, RecomputeChoice] = {}  # each entry not kept yet: its first recompute, resolved
        for entry, (_, resolved, _) in zip(entries, keys):
            if entry not in memo and entry not in missing:
                missing[entry] = resolved
        if missing:
            self.evaluations += len(missing)
            for entry, traffic in zip(missing, self._recomputed_traffic(layout, n, tuple(missing.values()), precision)):
                memo[entry] = traffic
        return cast("list[ParallelTraffic]", [memo[entry] for entry in entries])

    def traffic_ids(self, layout: Layout, recomputes: tuple[RecomputeChoice, ...]) -> tuple[int, ...]:
        """Per recompute, a number for what parallel_traffic keeps the layout's traffic by but the
        count and precision (the layout without its split, what of the recompute the traffic
        reads: _traffic_key): equal numbers, one memo entry of every count and precision."""
        def compute() -> tuple[int, ...]:
            keys = [self._called(("traffic-key", layout, r), lambda: self._traffic_key(layout, r))  # noqa: B023
                    for r in recomputes]
            return tuple(self._traffic_numbers.setdefault((base, what), len(self._traffic_numbers)) for base, _, what in keys)
        return self._called(("traffic-ids", layout, recomputes), compute)

    def split_free(self, layout: Layout) -> Layout:
        """The layout without its split (itself when it has none): what its traffic and its
        degrees' memo entries are kept by, made once per layout."""
        if layout.split is None:
            return layout
        base = self._split_free.get(layout)
        if base is None:
            base = self._split_free[layout] = layout._replace(split=None)
        return base

    def _recomputed_traffic(self, layout: Layout, n: int, recomputes: tuple[RecomputeChoice, ...],
                            precision: str) -> list[ParallelTraffic]:
        """parallel_traffic of each recompute (in one models/ call: parallel_traffic_over_recomputes),
        reading what neither the recompute nor the split changes from the first traffic of the
        layout's degrees, count and precision (its same_layout)."""
        memo, key = self.time_memo, ("layout-traffic", self.split_free(layout), n, precision)
        assert memo is not None  # __post_init__ sets it
        plans = [self._replica_plan(layout, n, recompute, precision) for recompute in recomputes]
        reference = memo.get(key)
        traffic = parallel_traffic_over_recomputes(self.arch, self.job, plans, reference)  # type: ignore[arg-type]
        if reference is None:
            memo[key] = traffic[0]
        return traffic

    def _traffic_key(self, layout: Layout, recompute: RecomputeChoice) -> tuple[Layout, RecomputeChoice, object]:
        """(the layout without its split, the recompute resolved for the layout, what of the
        recompute the traffic depends on: compute_layout's re-run layers, or the recompute)."""
        resolved = recompute.resolved(self.arch.num_layers, layout)
        shape = compute_layout(layout, resolved, "bf16", self.arch.num_layers)
        return self.split_free(layout), resolved, shape or resolved

    def bubble_us(self, layout: Layout, n: int, micro_keys: tuple[MicroKey, ...], compute_s: float,
                  parallel_s: float, gpu: GpuSpec, all_to_all_s: float = 0.0) -> np.ndarray:
        """The 1F1B bubble (pp - 1) / (vpp x accumulation) of the slowest stage's time at each
        micro-batch (models.pipeline_schedule.bubble_s of stage_time_s: its compute and the exposed
        model-parallel time, parallel_s), what that stage adds to the mean's (pp_imbalance_s, the
        layout's split), the exposed activation-offload transfer, under the MoE all-to-all
        overlap the all-to-alls (all_to_all_s) no other micro-batch hides at that accumulation
        (models.ep_time.a2a_unhidden_s), a quantised frozen base's dequantisation, once per
        micro-batch (models.dequantize), and what the MoE forwards wait for the host
        (models.moe_host.host_exposed_s): all depend on the accumulation and lengthen the step; one
        rounding, whole microseconds (array)."""
        accums = [self.accumulation(layout, n, micro.micro_batch) for micro in micro_keys]
        recompute = micro_keys[0].recompute  # one recompute per call (fill_step_tables), resolved for the layout
        recomputed = self._called(("stage-recomputed", layout, recompute), lambda: stage_recomputed(
            self.arch, self.job, self._plan(layout, layout.model_parallel, 0, "none", recompute, "bf16", 1)))
        imbalance = stage_imbalance(self.arch, self.job.seq_len, split_of(self.arch.num_layers, layout.pipeline), recomputed)
        stalls = (bubble_s(layout.pp, layout.vpp, np.array(accums), stage_time_s(compute_s, imbalance, parallel_s))
                  + pp_imbalance_s(imbalance, compute_s))
        if self.job.activation_offload:
            stalls = stalls + np.array([self.offload_exposed_s(micro, layout, accum, compute_s)
                                        for micro, accum in zip(micro_keys, accums)])
        if all_to_all_s:
            stalls = stalls + np.array([a2a_unhidden_s(all_to_all_s, compute_s, a2a_unhidden_share(layout.pp, layout.vpp, accum))
                                        for accum in accums])
        precision = micro_keys[0].precision  # one precision per call, as one recompute
        dequantize = self._called(("dequantize", layout, recompute, precision, gpu.name), lambda: dequantize_s_per_micro_batch(
            self.arch, self.job, self._plan(layout, layout.model_parallel, 0, "none", recompute, precision, 1), gpu))
        if dequantize:
            stalls = stalls + dequantize * np.array(accums)
        if self._host_synced:  # the MoE forwards that wait for the host, beyond the GPU's compute and parallel time
            host = self._called(("moe-host", layout, recompute), lambda: host_sync(
                self.arch, self.job, self._plan(layout, layout.model_parallel, 0, "none", recompute, "bf16", 1)))
            stalls = stalls + np.array([host_exposed_s(host, accum, compute_s + parallel_s) for accum in accums])
        return to_us_array(stalls)

    def accumulation(self, layout: Layout, n: int, micro: int) -> int:
        """Gradient-accumulation steps of a micro-batch of this job's global batch on n GPUs."""
        return accumulation(self.global_batch, layout, n, micro)

    def _replica_plan(self, layout: Layout, n: int, recompute: RecomputeChoice, precision: str) -> Plan:
        """One micro-batch of global batch / dp sequences: what per-step totals depend on."""
        return self._plan(layout, n, 0, "none", recompute, precision, self.global_batch * layout.model_parallel // n)
