"""`--plot`: a Gantt chart per pool (matplotlib, the optional `plot` extra, imported lazily).

Each pool is one panel; x = hours from the start, y = GPUs. A job is a bar of its GPUs' height
from its start to its end; the pool's GPUs over time are the dashed line. Jobs get GPU rows
first-fit in start order (gpu_rows), so a job whose GPUs are not contiguous is drawn as several bars of one colour.
"""

from __future__ import annotations

from pathlib import Path

from vramplan.commands.plot import save
from vramplan.fleet.inputs import FleetQuery, FleetResult
from vramplan.models.core.errors import CommandFailure


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted GPU indices as (first, count) runs of consecutive indices."""
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    return runs


def gpu_rows(bars: list[tuple[float, float, int, str]]) -> list[tuple[float, float, list[tuple[int, int]], str]]:
    """Give each job, in start order, the lowest GPU indices no running job holds: the pool never has
    more jobs' GPUs than GPUs, so these exist; a job's GPUs may then be several runs of rows."""
    placed: list[tuple[float, float, set[int]]] = []
    drawn = []
    for start, end, gpus, label in sorted(bars):
        taken = set().union(*(held for s, e, held in placed if s < end and start < e))
        free = [i for i in range(gpus + len(taken)) if i not in taken][:gpus]
        placed.append((start, end, set(free)))
        drawn.append((start, end, _runs(free), label))
    return drawn


def plot_gantt(path: Path, query: FleetQuery, result: FleetResult, labels: list[str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        matplotlib.rcParams["text.parse_math"] = False  # job ids and pool names are text, not mathtext
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
        for k, (start, end, runs, label) in enumerate(gpu_rows(bars)):
            for first, count in runs:
                axis.broken_barh([(start, end - start)], (first, count), facecolors=colours(k % 20),
                                 edgecolor="black", linewidth=0.5)
            first, count = max(runs, key=lambda run: run[1])
            axis.text(start + (end - start) / 2, first + count / 2, label, ha="center", va="center", fontsize=7)
        top = max([w.num_gpus for w in pool.windows or ()] + [sum(b[2] for b in bars) if pool.windows is None else 0, 1])
        axis.set_ylim(0, top * 1.08)
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
    save(figure, path, dpi=110)  # closes the figure
