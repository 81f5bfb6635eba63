"""The explanations' memory grids: every explained inner point of a shape by its most loaded
checked rank's memory (memory_peaks), and per shape the points that fit (shape_table, which the
conflicting-restrictions model reads). The same numbers as points.memory_columns_mib and
inner_metrics, tabulated term by term on numpy grids; the engines do not read them."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from vramplan.solver.clusters import Shape
from vramplan.solver.layouts import tp_reach
from vramplan.solver.points import Inner, InnerMetrics, accumulated_mib, host_mib_per_gpu, inner_tie, step_us
from vramplan.solver.space import SearchSpace


def explained_layouts(space: SearchSpace) -> list[int]:
    """Explanations (closest miss, conflicting restrictions) enumerate points, so they keep to the
    least parallel layout of the space (layouts are sorted by preference): data parallelism
    unless a degree is pinned. explain.py checks a reported conflict on the full space."""
    return [0]


def memory_peaks(space: SearchSpace, g: int, n: int, reach: int) -> Iterator[tuple[int, Inner]]:
    """(MiB of the most loaded checked rank, inner point) for every explained inner point a count
    can take on GPU g with TP up to `reach`, least memory first. The same numbers as
    memory_columns_mib, tabulated by term: static per (ZeRO x offload, precision) and activations
    + buffers per (recompute, micro-batch, precision), added on a grid rather than point by point
    (the grid is cached on the space: memory does not depend on the network or the price), and
    points are made only as far as a caller reads."""
    grids, peaks, offsets, order = _peaks(space, g, n, reach)
    for flat in order:
        k = int(np.searchsorted(offsets, flat, side="right")) - 1
        li, precisions, batches, grid = grids[k][:4]
        zf, r, b_i, p_i = np.unravel_index(int(flat - offsets[k]), grid.shape)
        yield int(peaks[flat]), Inner(int(zf), int(r), precisions[p_i], batches[b_i], li)


def _peaks(space: SearchSpace, g: int, n: int, reach: int) -> tuple:
    """(grids, their peaks flattened, each grid's offset, the peaks' ascending order), kept on the
    space by what the grids read: the count, the GPU's precisions and the explained layouts its TP
    reach allows (the GPU's limit, price and network are not in them), so the GPUs of a count that
    run the same precisions share one grid."""
    key = (n, space.gpu_precisions[g], tuple(li for li in explained_layouts(space) if space.layouts[li].tp <= reach))
    if key not in space.on_use.peaks:
        grids = _peak_grids(space, g, n, reach)
        peaks = np.concatenate([grid[3].ravel() for grid in grids]) if grids else np.zeros(0, dtype=np.int64)
        offsets = np.cumsum([0] + [grid[3].size for grid in grids])
        space.on_use.peaks[key] = (grids, peaks, offsets, np.argsort(peaks, kind="stable"))
    return space.on_use.peaks[key]


def _peak_grids(space: SearchSpace, g: int, n: int, reach: int) -> list[tuple]:
    """Per explained layout: (layout, precisions, micro-batches, peak MiB over (zf, r, b, p), and
    its terms per checked rank j: static (zf, p, j), buffers + the larger of the activations and the
    optimizer step's gradient copies (zf or 1, r, b, p, j) and accumulation (zf, b, p, j))."""
    grids = []
    precisions = space.gpu_precisions[g]
    for li in explained_layouts(space):
        if li not in space.count_layouts[n] or space.layouts[li].tp > reach or not precisions:
            continue
        space.on_use.fill_count(n, [li], precisions)
        batches = space.valid_batches[n, li]
        zfs, rs = range(len(space.zero_offloads)), range(len(space.recomputes))
        js = range(space.num_rank_columns)
        static = np.array([[[space.on_use.static_mib[zf, n, p, li, j] for j in js] for p in precisions] for zf in zfs],
                          dtype=np.int64)  # (zf, p, j)
        dynamic = np.array([[[[space.buffer_mib[b, p, li] + mib for mib in space.on_use.ranks_activation_mib(r, b, p, li, n)]
                              for p in precisions] for b in batches] for r in rs], dtype=np.int64)  # (r, b, p, j)
        accumulated = np.array([[[[accumulated_mib(space, zf, n, p, li, j, b) for j in js] for p in precisions]
                                 for b in batches] for zf in zfs], dtype=np.int64)  # (zf, b, p, j)
        held = static[:, None, None, :, :] + accumulated[:, None, :, :, :]  # (zf, 1, b, p, j)
        rest = dynamic[None, :, :, :, :]  # (1, r, b, p, j)
        if any(space.on_use.step_copy_mib(zf, n, p, li, j) for zf in zfs for p in precisions for j in js):
            # the optimizer step's gradient copies with the buffers, where larger than the activations
            # (points.memory_columns_mib's max)
            step = np.array([[[[space.buffer_mib[b, p, li] + space.on_use.step_copy_mib(zf, n, p, li, j) for j in js]
                               for p in precisions] for b in batches] for zf in zfs], dtype=np.int64)  # (zf, b, p, j)
            rest = np.maximum(rest, step[:, None, :, :, :])
        peak = (held + rest).max(axis=-1)
        grids.append((li, precisions, batches, peak, static, rest, accumulated))
    return grids


def least_peak_mib(space: SearchSpace, shape: Shape) -> int | None:
    """The least MiB of the shape's memory grid (None: it has no explained point): at most every
    point of shape_points, which leaves out only what the stack does not run."""
    g, n, per_instance, _ = shape
    _, peaks, _, order = _peaks(space, g, n, tp_reach(per_instance))
    return int(peaks[order[0]]) if peaks.size else None


def shape_points(space: SearchSpace, shape: Shape) -> Iterator[tuple[int, Inner]]:
    """memory_peaks of a shape, without the choices the stack does not run on its GPU count."""
    g, n, per_instance, _ = shape
    return ((peak, inner) for peak, inner in memory_peaks(space, g, n, tp_reach(per_instance))
            if space.count_allows(n, inner.zero_offload, inner.recompute)
            and space.pair_allows(inner.zero_offload, inner.layout, n))


def shape_table(space: SearchSpace, timed: bool = True) -> dict[Shape, list[tuple[Inner, InnerMetrics]]]:
    """Per shape, the inner decisions that fit the GPU, best step time first (the explanation's
    restriction model reads it; the engines do not); timed=False leaves the step times out
    (step_us 0, least inner tie first), for a model that reads only memory and host RAM. Memory
    comes from memory_peaks, so only what fits gets a step time. Kept by value in the space's
    UnitMemo: a shape's table depends on nothing else, and the relaxed spaces of a batch's
    infeasible rows (solver/restrictions.py) share their shapes."""
    table = {}
    for shape in sorted({c.shape for c in space.clusters}):
        # Untimed, a shape's table is its GPU's and count's memory alone (and the TP its instance allows).
        gpu, count, per_instance, _, layout_set = space.unit_shape(shape)
        key = (space.unit_shape(shape), timed) if timed else (gpu, count, tp_reach(per_instance), layout_set, timed)
        if key not in space.shared.fitting:
            space.shared.fitting[key] = (space.layouts, _fitting(space, shape, timed))
        layouts, fitting = space.shared.fitting[key]
        if layouts == space.layouts:  # numbered alike (read only: callers sort copies)
            table[shape] = fitting
        else:
            table[shape] = [(space.renumber(inner, layouts), metrics) for inner, metrics in fitting]
    return table


def _fitting(space: SearchSpace, shape: Shape, timed: bool) -> list[tuple[Inner, InnerMetrics]]:
    """The shape's fitting points (_memory_fitting: memory from the grids at once) with their
    integer step times (points.step_us, as inner_metrics adds it), best step time first. The
    same points and metrics as inner_metrics over shape_points up to the GPU's limit, at a quarter
    of the CPU (docs/performance.md#explanations)."""
    fitting = _memory_fitting(space, shape)
    if timed:
        tables = {li: space.on_use.step_tables(shape, [li]) for li in {inner.layout for inner, _ in fitting}}
        fitting = [(inner, metrics._replace(step_us=step_us(space, tables[inner.layout], shape, inner)))
                   for inner, metrics in fitting]
    fitting.sort(key=lambda item: (item[1].step_us, inner_tie(space, item[0])))
    return fitting


def _memory_fitting(space: SearchSpace, shape: Shape) -> list[tuple[Inner, InnerMetrics]]:
    """_fitting without step times, from the memory grids at once: every point whose most loaded
    checked rank fits, least inner tie first, with inner_metrics' memory split (the static part is
    that of the first most loaded rank, plus the buffers) and host RAM."""
    g, n, per_instance, _ = shape
    fitting = []
    grids = _peaks(space, g, n, tp_reach(per_instance))[0]
    for li, precisions, batches, peak, static, dynamic, accumulated in grids:
        zf, r, b, p = np.nonzero(peak <= space.limit_mib[g])
        order = np.lexsort((p, -b, r, zf))  # points.inner_tie: zf, r, larger micro-batch first, p
        zf, r, b, p = zf[order], r[order], b[order], p[order]
        held = static[zf, p, :] + accumulated[zf, b, p, :]  # (point, j)
        rest = dynamic[0 if dynamic.shape[0] == 1 else zf, r, b, p, :]  # activations (or the step's copies) + buffers
        rank = (held + rest).argmax(axis=1)  # the first most loaded rank
        static_mib = held[np.arange(len(rank)), rank] + np.array([space.buffer_mib[batches[i], precisions[k], li]
                                                     for i, k in zip(b.tolist(), p.tolist())], dtype=np.int64)
        host = np.array([host_mib_per_gpu(space, n, Inner(z, rr, precisions[k], batches[i], li))
                         for z, rr, i, k in zip(zf.tolist(), r.tolist(), b.tolist(), p.tolist())], dtype=np.int64)
        for z, rr, i, k, total, st, h in zip(zf.tolist(), r.tolist(), b.tolist(), p.tolist(), peak[zf, r, b, p].tolist(),
                                             static_mib.tolist(), host.tolist()):
            if not space.count_allows(n, z, rr) or not space.pair_allows(z, li, n):
                continue
            fitting.append((Inner(z, rr, precisions[k], batches[i], li), InnerMetrics(st, total - st, h, 0)))
    return fitting
