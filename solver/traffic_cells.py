"""The tier-1 bounds' traffic cells (solver/bound_arrays.py), kept numbered in the Tables per
(count, precisions, recomputes): each distinct Tables.parallel_traffic memo entry (its own key and
evaluation count, so the step tables' parallel_s later finds it) is one row of the fields the
arrays read, and a layout's cells are row numbers."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from vramplan.models.catalogue.stack import MoeKernel
from vramplan.models.core.layout import Layout
from vramplan.models.time.moe_dispatch import Dispatch
from vramplan.models.time.parallel_time import ParallelTraffic
from vramplan.solver.choice_keys import RecomputeChoice
from vramplan.solver.tables import Tables

# The fields of models.parallel_time.ParallelTraffic (and its EpTraffic) read per cell.
TRAFFIC_FIELDS = ("tp_exposed_bytes", "tp_overlapped_bytes", "tp_forward_overlapped_bytes", "forward_share", "pp_bytes",
                  "pp_overlapped_bytes", "cp_bytes", "attention_flops", "forward_flops")
EP_FIELDS = ("routed_bytes", "expert_flops", "calls", "permute_bytes")


@dataclass
class CountCells:
    """The traffic cells of one count's layouts in some precisions and recomputes, kept in the
    Tables: the count's layout sets (one per TP reach; they nest) and every family of the job read
    them. Each distinct cell, Tables.parallel_traffic's own memo key (the layout without its split,
    the count, what of the recompute the traffic reads: Tables.traffic_ids, the precision), is one
    row of values (TRAFFIC_FIELDS + EP_FIELDS), made once; a layout's cells are row numbers, so a split
    reads its split-free layout's rows but for its partial recomputes', which are their own."""

    count: int
    names: tuple[str, ...]
    recomputes: tuple[RecomputeChoice, ...]
    values: list[tuple[float, ...]] = field(default_factory=list)
    row_of: dict[tuple[int, int], int] = field(default_factory=dict)  # (traffic id, precision) -> row
    # per layout: its rows in (precision, recompute) order, and its expert shape per precision, MoE
    # kernel and EP dispatcher (its split-free layout's)
    layouts: dict[Layout, tuple[list[int], tuple[list, MoeKernel, Dispatch | None]]] = field(default_factory=dict)
    _array: np.ndarray | None = None

    def array(self) -> np.ndarray:
        """values as one (rows, fields) float64 array (made again when rows were added)."""
        if self._array is None or len(self._array) != len(self.values):
            self._array = np.array(self.values, dtype=np.float64).reshape(len(self.values), len(TRAFFIC_FIELDS) + len(EP_FIELDS))
        return self._array

    def of_layout(self, tables: Tables, layout: Layout) -> tuple[list[int], tuple[list, MoeKernel, Dispatch | None]]:
        """A layout's rows and expert information, its cells made on first use: a split's after its
        split-free layout's (every recompute of it, as the split reads them; the layout's first
        traffic is what the others read theirs from: Tables._recomputed_traffic)."""
        known = self.layouts.get(layout)
        if known is not None:
            return known
        base = tables.split_free(layout)
        expert = self.of_layout(tables, base)[1] if base is not layout else None
        rows: list[int] = []
        ids = tables.traffic_ids(layout, self.recomputes)
        for k, precision in enumerate(self.names):
            # the precision's new cells, made in one Tables.parallel_traffics call
            new: dict[int, RecomputeChoice] = {}  # each new cell's first recompute
            for traffic_id, recompute in zip(ids, self.recomputes):
                if (traffic_id, k) not in self.row_of:
                    new.setdefault(traffic_id, recompute)
            if new:
                for traffic_id, traffic in zip(new, tables.parallel_traffics(layout, self.count, tuple(new.values()), precision)):
                    self.row_of[traffic_id, k] = len(self.values)
                    self.values.append(_cell(traffic))
            rows.extend(self.row_of[traffic_id, k] for traffic_id in ids)
        if expert is None:
            first = [tables.parallel_traffic(layout, self.count, self.recomputes[0], precision) for precision in self.names]
            # the expert shape is recompute-independent; the kernel and dispatcher the job's
            expert = ([t.ep.shape for t in first], first[0].ep.kernel if first else "grouped",
                      first[0].ep.dispatch if first else None)
        known = self.layouts[layout] = (rows, expert)
        return known


def count_cells(tables: Tables, n: int, names: tuple[str, ...], recomputes: tuple[RecomputeChoice, ...]) -> CountCells:
    """The count's CountCells in these precisions and recomputes, kept in the Tables."""
    return tables.kept(("bound-count-cells", n, names, recomputes), lambda: CountCells(n, names, recomputes))


_TRAFFIC_VALUES, _EP_VALUES = attrgetter(*TRAFFIC_FIELDS), attrgetter(*EP_FIELDS)


def _cell(t: ParallelTraffic) -> tuple[float, ...]:
    return _TRAFFIC_VALUES(t) + _EP_VALUES(t.ep)
