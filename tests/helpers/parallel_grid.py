"""The solver's numpy mirror of models/time/parallel_time.py parallel_seconds, checked cell by cell
(solver/bound_arrays.py parallel_seconds_grid against Tables.parallel_s), and parallel_seconds
against the sum of its four terms: what every test of a parallel-time change asks."""

from __future__ import annotations

import numpy as np

from vramplan.models.time.ep_time import ep_time_s
from vramplan.models.time.parallel_time import (
    cp_exposed_s,
    parallel_seconds,
    parallel_traffic,
    pp_p2p_s,
    tp_time_s,
)
from vramplan.solver.bound_arrays import CountTraffic, count_traffic, parallel_seconds_grid


def grid_shapes(space) -> list[tuple]:
    """The space's cluster shapes with a precision and a layout, in order."""
    return sorted({c.shape for c in space.clusters if space.gpu_precisions[c.gpu_index]
                   and space.count_layouts.get(c.count_index)})


def checked_grid(space, shapes: list[tuple] | None = None) -> tuple[int, list[tuple[CountTraffic, int]]]:
    """Asserts every (shape, layout, precision, recompute) cell of the space's grids (of `shapes`,
    default grid_shapes) equals the scalar parallel_s; returns the cells checked and each
    (traffic, layout row) visited."""
    shapes = grid_shapes(space) if shapes is None else shapes
    cells, rows = 0, []
    for shape in shapes:
        g, n, per_instance, network = shape
        ps, gpu, count = space.gpu_precisions[g], space.gpus[g], space.counts[n]
        compute = np.array([[[space.chunk_compute_s[g, n, r, p, space.layout_chunk[li]] for r in range(len(space.recomputes))]
                             for p in ps] for li in space.cluster_layouts(shape)])
        traffic = count_traffic(space, shape)
        grid = parallel_seconds_grid(space.tables, traffic, tuple(space.precisions[p] for p in ps), compute, gpu,
                                     count > per_instance, per_instance, network)
        for i, layout in enumerate(traffic.layouts):
            rows.append((traffic, i))
            for k, p in enumerate(ps):
                for r, recompute in enumerate(space.recomputes):
                    scalar = space.tables.parallel_s(layout, count, recompute, space.precisions[p], gpu, per_instance,
                                                     network, float(compute[i, k, r]))
                    assert float(grid[i, k, r]) == scalar, (shape, layout, recompute)
                    cells += 1
    return cells, rows


def assert_the_four_terms(arch, job, plan, gpu, compute_s: float, per_instance: int = 8, network: float = 50.0) -> None:
    """parallel_seconds of the plan's traffic is TP + PP p2p + CP + EP time, each from its own function."""
    spans = plan.num_gpus > per_instance
    expected = (tp_time_s(arch, job, plan, gpu, compute_s)
                + pp_p2p_s(arch, job, plan, gpu, spans, network, compute_s)
                + cp_exposed_s(arch, job, plan, gpu, per_instance, network, compute_s)
                + ep_time_s(arch, job, plan, gpu, per_instance, network, compute_s))
    assert parallel_seconds(parallel_traffic(arch, job, plan), gpu, spans, per_instance, network, compute_s) == expected
