"""Pictures (the optional `vramplan[plot]` extra): per-GPU memory as a stacked bar by pillar
against the limit and the capacity (host RAM beside it when offloading), and the cost-vs-time
Pareto front with the chosen plan marked. matplotlib is imported here only, with the Agg backend
(no display needed); a missing matplotlib is one line naming the extra."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from vramplan.commands.literal import literal
from vramplan.commands.render_text import count
from vramplan.models.core.results import PILLARS, MemoryReport
from vramplan.models.core.units import BYTES_PER_GIB

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from vramplan.solver.query import SolvedPlan, SolveResult

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
PILLAR_COLOURS = dict(zip(PILLARS, ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#999999")))
LIMIT_COLOUR, CAPACITY_COLOUR, CHOSEN_COLOUR, FRONT_COLOUR = "#D55E00", "#000000", "#D55E00", "#0072B2"


IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def require_matplotlib(image: Path | None = None) -> None:
    """Fail before any work: an image name without a known extension is bad input (exit 2), a
    missing extra one line naming it (exit 1)."""
    if image is not None and image.suffix.lower() not in IMAGE_SUFFIXES:
        from vramplan.models.core.errors import VramplanError

        raise VramplanError("plot", str(image), f"must end in {', '.join(IMAGE_SUFFIXES)}")
    _pyplot()


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise click.ClickException("pictures need matplotlib: pip install 'vramplan[plot]'") from None
    matplotlib.use("Agg")  # no display: write files only
    matplotlib.rcParams["text.parse_math"] = False  # names are text: '$\\foo$' in a name is drawn, not parsed
    import matplotlib.pyplot as plt

    return plt


def _gib(num_bytes: int | float) -> float:
    return num_bytes / BYTES_PER_GIB


def _bound_lines(axis: Any, limit_bytes: int, capacity_bytes: int, fraction: float, label_x: float) -> None:
    for value, colour, style, text in (
        (capacity_bytes, CAPACITY_COLOUR, "-", f"capacity {_gib(capacity_bytes):,.1f} GiB"),
        (limit_bytes, LIMIT_COLOUR, "--", f"limit {_gib(limit_bytes):,.1f} GiB ({fraction:.0%})"),
    ):
        axis.axhline(_gib(value), color=colour, linestyle=style, linewidth=1.4)
        axis.annotate(text, (label_x, _gib(value)), xytext=(0, 3), textcoords="offset points", color=colour,
                      fontsize=9, ha="left", va="bottom")


def memory_figure(memory: MemoryReport, title: str) -> Figure:
    """One stacked bar of the per-GPU pillars against limit and capacity; host RAM per node
    (offloaded states against the instance's RAM) on a second axis when there is any."""
    plt = _pyplot()
    host = memory.host_bytes > 0 and memory.host_capacity_bytes is not None
    figure, axes = plt.subplots(1, 2 if host else 1, figsize=(11 if host else 7, 5.2), squeeze=False,
                                gridspec_kw={"width_ratios": [3, 2] if host else [1]})
    gpu_axis = axes[0][0]
    bottom = 0.0
    for pillar in PILLARS:
        value = _gib(getattr(memory, f"{pillar}_bytes"))
        gpu_axis.bar(0, value, bottom=bottom, width=0.5, color=PILLAR_COLOURS[pillar],
                     label=f"{pillar.replace('_', ' ')} {value:,.1f} GiB", edgecolor="white", linewidth=0.8)
        if value >= 0.04 * _gib(max(memory.total_bytes, memory.capacity_bytes)):
            gpu_axis.text(0, bottom + value / 2, f"{value:,.1f}", ha="center", va="center", fontsize=9, color="white")
        bottom += value
    _bound_lines(gpu_axis, memory.limit_bytes, memory.capacity_bytes, memory.capacity_fraction, label_x=0.3)
    gpu_axis.set_xlim(-0.5, 1.6)
    gpu_axis.set_xticks([0], [f"per GPU: {_gib(memory.total_bytes):,.1f} GiB"])
    gpu_axis.set_ylim(0, 1.12 * max(_gib(memory.total_bytes), _gib(memory.capacity_bytes)))
    gpu_axis.set_ylabel("GiB")
    gpu_axis.legend(loc="center right", fontsize=9, frameon=False, reverse=True)
    gpu_axis.set_title("GPU memory" + ("" if memory.gpu_fits else " (DOES NOT FIT)"), fontsize=11)
    if host:
        host_axis = axes[0][1]
        host_axis.bar(0, _gib(memory.host_bytes), width=0.5, color=PILLAR_COLOURS["optimizer_states"],
                      edgecolor="white", hatch="//")
        assert memory.host_limit_bytes is not None and memory.host_capacity_bytes is not None
        _bound_lines(host_axis, memory.host_limit_bytes, memory.host_capacity_bytes, memory.capacity_fraction,
                     label_x=0.3)
        host_axis.set_xlim(-0.4, 1.6)
        host_axis.set_xticks([0], [f"offloaded: {_gib(memory.host_bytes):,.1f} GiB"])
        host_axis.set_ylim(0, 1.12 * max(_gib(memory.host_bytes), _gib(memory.host_capacity_bytes)))
        host_axis.set_title("host RAM per node" + ("" if memory.host_fits else " (DOES NOT FIT)"), fontsize=11)
    for axis in axes[0]:
        axis.spines[["top", "right"]].set_visible(False)
    figure.suptitle(literal(title), fontsize=12)
    figure.tight_layout()
    return figure


def cluster_label(plan: SolvedPlan) -> str:
    return f"{plan.plan.num_gpus} x {plan.plan.gpu}"


def pareto_figure(result: SolveResult) -> Figure:
    """Total USD against wall-clock hours: the front as a staircase, each point labelled with
    its cluster, the chosen (best by the objective) plan starred."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(8, 5.2))
    front = sorted(result.pareto, key=lambda p: p.cost.hours)
    hours = [p.cost.hours for p in front]
    usd = [p.cost.usd_total for p in front]
    if front:
        axis.step(hours, usd, where="post", color=FRONT_COLOUR, alpha=0.35, linewidth=1.2)
        axis.scatter(hours, usd, color=FRONT_COLOUR, s=36, zorder=3,
                     label="Pareto front (no plan is both cheaper and faster)")
    for index, plan in enumerate(front):
        axis.annotate(literal(cluster_label(plan)), (plan.cost.hours, plan.cost.usd_total), fontsize=8.5,
                      xytext=(6, 8 if index % 2 == 0 else -13), textcoords="offset points")
    if result.plans:
        chosen = result.plans[0]
        axis.scatter([chosen.cost.hours], [chosen.cost.usd_total], marker="*", s=260, color=CHOSEN_COLOUR, zorder=4,
                     edgecolor="black", linewidth=0.6,
                     label=literal(f"chosen ({result.objective.name}): {cluster_label(chosen)}, {chosen.plan.offering}"))
    if hours and max(hours) / max(min(hours), 1e-9) > 30:
        axis.set_xscale("log")
    axis.set_xlabel("training time (hours)")
    axis.set_ylabel("total cost (USD)")
    axis.yaxis.set_major_formatter(plt.FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axis.grid(alpha=0.25)
    axis.spines[["top", "right"]].set_visible(False)
    axis.legend(fontsize=9, frameon=False, loc="upper right")
    axis.set_title(literal(f"{result.model.name}: cost vs time for {count(round(result.tokens))} tokens"), fontsize=12)
    axis.margins(x=0.12, y=0.15)
    figure.tight_layout()
    return figure


def image_bytes(figure: Figure, path: Path, dpi: int) -> bytes:
    """The figure in the format of the file's extension (png, svg, pdf), closed afterwards."""
    plt = _pyplot()
    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format=path.suffix.lower().lstrip("."), dpi=dpi)
    except ValueError as error:
        raise click.ClickException(f"plot={str(path)!r}: cannot draw: {error}") from None
    finally:
        plt.close(figure)
    return buffer.getvalue()


def save(figure: Figure, path: Path, dpi: int = 150) -> None:
    """Write the figure through the one output writer (atomically over a regular file)."""
    from vramplan.sheets.output_file import output_target, write_output

    write_output(output_target(path), image_bytes(figure, path, dpi))


def svg_text(figure: Figure) -> str:
    """The figure as an inline <svg> element (no XML prolog, fonts as paths: nothing to fetch)."""
    plt = _pyplot()
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    return re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.DOTALL)
