"""`--plot`: a Gantt chart per pool (matplotlib, the optional `plot` extra, imported lazily).

Each pool is one panel; x = hours from the start, y = GPUs. A job is a bar of its GPUs' height
from its start to its end, stacked first-fit over the jobs it overlaps; the pool's GPUs over time
are the step line (a cumulative limit does not pin jobs to GPU indices, so a stack may be drawn
above a job's neighbours while the total at every moment stays under the line).
"""

from __future__ import annotations

from pathlib import Path

from vramplan.models.errors import CommandFailure
from vramplan.solver.fleet_inputs import FleetQuery, FleetResult


def _stacked(bars: list[tuple[float, float, int, str]]) -> list[tuple[float, float, int, int, str]]:
    placed: list[tuple[float, float, int, int, str]] = []
    for start, end, gpus, label in sorted(bars):
        overlapping = sorted((y, y + h) for s, e, y, h, _ in placed if s < end and start < e)
        offset = 0
        for low, high in overlapping:
            if offset + gpus <= low:
                break
            offset = max(offset, high)
        placed.append((start, end, offset, gpus, label))
    return placed


def plot_gantt(path: Path, query: FleetQuery, result: FleetResult, labels: list[str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CommandFailure("--plot needs matplotlib: pip install 'vramplan[plot]'") from None
    used = {a.pool for a in result.assignments if a.pool is not None}
    pools = [p for p in query.pools if p.windows is not None and p.offering is not None or p.name in used]
    if not pools:
        raise CommandFailure("--plot: no pool to draw (no inventory and no job scheduled)")
    figure, axes = plt.subplots(len(pools), 1, figsize=(11, 1.2 + 2.2 * len(pools)), squeeze=False, sharex=True)
    end_hours = max([a.end_hours or 0.0 for a in result.assignments] + [1.0])
    colours = plt.get_cmap("tab20")
    for axis, pool in zip(axes[:, 0], pools):
        bars = [(a.start_hours or 0.0, a.end_hours or 0.0, a.pool_gpus or 0, labels[i])
                for i, a in enumerate(result.assignments) if a.pool == pool.name]
        for k, (start, end, offset, gpus, label) in enumerate(_stacked(bars)):
            axis.broken_barh([(start, end - start)], (offset, gpus), facecolors=colours(k % 20), edgecolor="black",
                             linewidth=0.5)
            axis.text(start + (end - start) / 2, offset + gpus / 2, label, ha="center", va="center", fontsize=7)
        if pool.windows is not None:
            for window in pool.windows:
                stop = window.to_hours if window.to_hours is not None else query.horizon_hours
                axis.hlines(window.num_gpus, window.from_hours, min(stop, end_hours * 1.05), colors="red",
                            linestyles="--", linewidth=1)
        kind = "committed" if pool.committed else "market" if pool.market_provider else "priced"
        axis.set_title(f"{pool.name} ({pool.offering or pool.market_provider}, {kind})", fontsize=9, loc="left")
        axis.set_ylabel("GPUs")
    axes[-1, 0].set_xlim(0, end_hours * 1.05)
    axes[-1, 0].set_xlabel("hours from the start")
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=110)
    except OSError as error:
        raise CommandFailure(f"plot={str(path)!r}: cannot write: {error.strerror or error}") from None
    finally:
        plt.close(figure)
