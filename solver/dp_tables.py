"""The data-parallel side of the solver's Tables (solver/tables.py): the ZeRO / data-parallel
traffic of every (ZeRO stage, micro-batch, precision) of a layout and count, its seconds on a
shape's link (one layout, or a branch's layouts as rows of one array), and the optimizer step's
time. Mixed into Tables, whose memo (and its evaluation count) every value goes through; what it
reads of Tables is declared below."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np

from vramplan.models.core.catalogue_schema import GpuSpec
from vramplan.models.core.layout import Layout
from vramplan.models.core.units import to_us_array
from vramplan.models.time.performance import (
    DpTraffic,
    OptimizerTraffic,
    communication_bandwidth_gb_per_s,
    crosses_nodes,
    dp_group_span,
    dp_phase_times_on_link_s,
    dp_ring_latency_s,
    dp_traffic,
    optimizer_time_from_traffic,
    optimizer_traffic,
)
from vramplan.solver.choice_keys import NO_RECOMPUTE
from vramplan.solver.table_reads import TableReads


def _stack(cells: list[list[list]], kind: type):
    """A grid of dataclass cells (axes: outer, middle, inner) as one `kind` whose fields are float64
    arrays (byte and collective counts below 2^53, so each value is the cell's exactly, and the
    grid's float operations give each cell what the scalar ones give it: tests/solver/test_step_grids.py)."""
    names = [f.name for f in fields(kind)]
    values = [getattr(cell, name) for plane in cells for row in plane for cell in row for name in names]
    grid = np.array(values, dtype=np.float64).reshape(len(cells), len(cells[0]), len(cells[0][0]), len(names))
    return kind(*(grid[..., i] for i in range(len(names))))


def _stack_rows(grids: list[DpTraffic]) -> DpTraffic:
    """Grids of one shape (each field an array) as one DpTraffic whose fields have a leading row axis."""
    columns: list[Any] = [np.stack([getattr(grid, f.name) for grid in grids]) for f in fields(DpTraffic)]
    return DpTraffic(*columns)


class DataParallelTables(TableReads):
    """Tables' data-parallel and optimizer terms (module docstring)."""

    time_memo: dict[tuple, object] | None

    def comm_s(self, layout: Layout, n: int, zeros: tuple[int, ...], micros: tuple[int, ...],
               precisions: tuple[str, ...], gpu: GpuSpec, per_instance: int,
               network_gb_per_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Data-parallel / ZeRO traffic time (forward, backward) of every (ZeRO stage, micro-batch,
        precision) of a layout and count on a shape: arrays (zeros, micros, precisions) of seconds.
        The traffic depends on the rank's shard (tp, pp, ep), the DP x CP group, the ZeRO stage, the
        precision and, from ZeRO-2 on, the accumulation (GPU-independent, kept per layout and
        count); models.performance.dp_phase_times_on_link_s turns the whole grid into seconds at
        once (the same float operations per cell as one plan's). It leaves the instance when the DP
        group spans more; ZeRO-3's per-layer collectives pay the group's ring latency."""
        crossing, latency = self._dp_crossing(layout, n, micros[0], precisions[0], per_instance)
        link = communication_bandwidth_gb_per_s(gpu, crossing, network_gb_per_s)

        def compute() -> tuple[np.ndarray, np.ndarray]:
            return dp_phase_times_on_link_s(self._dp_traffic_grid(layout, n, zeros, micros, precisions), link, latency)
        # Kept by the link's rate and latency: the shapes of GPUs and offerings that move the
        # layout's traffic alike share the grid.
        return self._get(("comm-grid", layout, n, zeros, micros, precisions, link, latency),
                         compute, len(zeros) * len(micros) * len(precisions), memo=self.time_memo)

    def comm_rows_s(self, layouts: tuple[Layout, ...], n: int, zeros: tuple[int, ...], micros: tuple[int, ...],
                    precisions: tuple[str, ...], gpu: GpuSpec, per_instance: int,
                    network_gb_per_s: float) -> tuple[np.ndarray, np.ndarray]:
        """comm_s of several layouts at once, each at one micro-batch (micros[i]): (forward, backward)
        arrays (layouts, zeros, 1, precisions) of seconds, each row the value comm_s gives (the same
        float operations per cell, with the row's link and latency: tests/solver/test_bound_arrays.py).
        The rows' traffic and where their DP groups run are kept per layout list (GPU-independent);
        each row's comm_s memo entry is still made, and counted, where it is missing, so the
        evaluations and what later lookups find are the same as comm_s per layout."""
        traffic = self.kept(("dp-rows", layouts, n, zeros, micros, precisions), lambda: _stack_rows(
            [self._dp_traffic_grid(layout, n, zeros, (micro,), precisions) for layout, micro in zip(layouts, micros)]))
        crossings, latencies = self.kept(("dp-row-links", layouts, n, micros, precisions[0], per_instance), lambda: tuple(zip(
            *(self._dp_crossing(layout, n, micro, precisions[0], per_instance) for layout, micro in zip(layouts, micros)))))
        by_crossing = {crossing: communication_bandwidth_gb_per_s(gpu, crossing, network_gb_per_s) for crossing in (False, True)}
        links = [by_crossing[crossing] for crossing in crossings]
        shape = (len(layouts), 1, 1, 1)  # each row's link and latency (models/ types them as one float: Any here)
        row_links: Any = np.array(links, dtype=np.float64).reshape(shape)
        row_latencies: Any = np.array(latencies, dtype=np.float64).reshape(shape)
        phases: Any = dp_phase_times_on_link_s(traffic, row_links, row_latencies)
        forward, backward = phases
        memo, cost = self.time_memo, len(zeros) * len(precisions)
        assert memo is not None  # __post_init__ sets it
        for i, (layout, micro, link, latency) in enumerate(zip(layouts, micros, links, latencies)):
            key = ("comm-grid", layout, n, zeros, (micro,), precisions, link, latency)
            if key not in memo:
                self.evaluations += cost
                memo[key] = (forward[i], backward[i])
        return forward, backward

    def _dp_crossing(self, layout: Layout, n: int, micro: int, precision: str, per_instance: int) -> tuple[bool, float]:
        """(whether a layout's data-parallel traffic leaves the instance, its ring latency s): it
        does when the DP group (tp x cp x dp) spans more."""
        plan = self._plan(layout, n, 0, "none", NO_RECOMPUTE, precision, micro)
        return crosses_nodes(dp_group_span(plan), per_instance), dp_ring_latency_s(plan, per_instance)

    def _dp_traffic_grid(self, layout: Layout, n: int, zeros: tuple[int, ...], micros: tuple[int, ...],
                         precisions: tuple[str, ...]) -> DpTraffic:
        return self._called(("traffic-grid", layout, n, zeros, micros, precisions),
                            lambda: self._traffic_grid(layout, n, zeros, micros, precisions), memo=self.time_memo)

    def _traffic_grid(self, layout: Layout, n: int, zeros: tuple[int, ...], micros: tuple[int, ...],
                      precisions: tuple[str, ...]) -> DpTraffic:
        return _stack([[[self._traffic(layout, zero, n, micro, precision) for precision in precisions] for micro in micros]
                       for zero in zeros], DpTraffic)

    def _traffic(self, layout: Layout, zero: int, n: int, micro: int, precision: str) -> DpTraffic:
        accum = self.accumulation(layout, n, micro) if zero >= 2 else None
        key = (layout.tp, layout.pp, self._heaviest_rank(layout), layout.ep, self._groups(layout, n)[0], zero, precision, accum)
        return self._get(("traffic", *key), lambda: dp_traffic(
            self.arch, self.job, self._plan(layout, n, zero, "none", NO_RECOMPUTE, precision, micro)), memo=self.time_memo)

    def optimizer_us(self, layout: Layout, n: int, zero_offloads: tuple[tuple[int, str], ...], micros: tuple[int, ...],
                     precisions: tuple[str, ...], gpu: GpuSpec) -> np.ndarray:
        """The optimizer step of every (ZeRO x offload, micro-batch, precision), whole microseconds
        (array): the rank's shard (tp, pp, ep) over the DP x CP group, and with parameter offload
        the accumulation's parameter streaming (models.performance); the traffic is GPU-independent."""
        def traffic() -> OptimizerTraffic:
            return _stack([[[self._optimizer_traffic(layout, zero, offload, n, micro, precision) for precision in precisions]
                            for micro in micros] for zero, offload in zero_offloads], OptimizerTraffic)
        grid = self._called(("optimizer-traffic-grid", layout, n, zero_offloads, micros, precisions), traffic)
        return self._get(("optimizer-grid", layout, n, zero_offloads, micros, precisions, gpu.name),
                         lambda: to_us_array(optimizer_time_from_traffic(grid, gpu)),
                         len(zero_offloads) * len(micros) * len(precisions))

    def _optimizer_traffic(self, layout: Layout, zero: int, offload: str, n: int, micro: int,
                           precision: str) -> OptimizerTraffic:
        accum = self.accumulation(layout, n, micro) if offload == "optimizer+params" else None
        key = (layout.tp, layout.pp, self._heaviest_rank(layout), layout.ep, self._groups(layout, n)[0], zero, offload, accum)
        return self._get(("opt-traffic", *key), lambda: optimizer_traffic(
            self.arch, self.job, self._plan(layout, n, zero, offload, NO_RECOMPUTE, precision, micro)))
