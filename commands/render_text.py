"""The pieces every table output shares: number formats (one unit system: GiB for memory,
8.03B for parameter counts, percent for MFU), tables that fit the screen, the memory table."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from vramplan.commands.literal import literal
from vramplan.commands.output import Screen, console_environ
from vramplan.models.architecture.parallel import split_label
from vramplan.models.core.results import PILLARS, CostReport, MemoryReport, ModelInfo, PerformanceReport
from vramplan.models.core.units import BYTES_PER_GIB

if TYPE_CHECKING:  # rich is imported where a table is drawn, not when a command's --help is shown
    from rich.table import Table

# Plain text for pipes and files: a dashed line under the header and between sections, no box.
_PLAIN_BOX_LINES = "    \n    \n -  \n    \n -  \n -  \n    \n    \n"
_NATURAL_WIDTH = 10_000  # "as wide as the table needs": rich never wraps below this


def gib(num_bytes: int | float | None) -> str:
    return "-" if num_bytes is None else f"{num_bytes / BYTES_PER_GIB:,.2f}"


def count(number: int) -> str:
    """A parameter count as people write it: 8.03B, 124.4M (exact integers stay in JSON/CSV)."""
    if number >= 10**9:
        return f"{number / 1e9:,.2f}B"
    if number >= 10**6:
        return f"{number / 1e6:,.1f}M"
    return f"{number:,}"


def params_text(model: ModelInfo) -> str:
    """'27.43B params', and how much of it a multimodal checkpoint's vision tower is."""
    vision = f", {count(model.num_vision_params)} of them a vision tower" if model.num_vision_params else ""
    return f"{count(model.num_params)} params{vision}"


def percent(fraction: float) -> str:
    return f"{fraction:.1%}"


def seconds_text(seconds: float) -> str:
    """A step's seconds, '0.53 s'; under 5 ms in milliseconds ('3.93 ms'), which two decimals showed as 0.00 s."""
    return f"{seconds * 1e3:.3g} ms" if 0 < seconds < 0.005 else f"{seconds:,.2f} s"


def duration_text(hours: float) -> str:
    """Training time in a sentence: '1,234.5 hours (51.44 days)'; under an hour in minutes or seconds
    ('0.0 hours (0.00 days)' was all a run of a few minutes read). JSON and CSV keep the hours."""
    if hours >= 1:
        return f"{hours:,.1f} hours ({hours / 24:,.2f} days)"
    return _under_an_hour(hours, "minutes", "seconds", "under")


def time_cell(hours: float) -> str:
    """A plan's training time in a table cell, in the largest unit it fills: '51.44 d', '3.5 h',
    '12.5 min', '42.00 s' (a days column read 0.00 for every run under 7 minutes)."""
    if hours >= 24:
        return f"{hours / 24:,.2f} d"
    if hours >= 1:
        return f"{hours:.1f} h"
    return _under_an_hour(hours, "min", "s", "<")


def _under_an_hour(hours: float, minutes: str, seconds: str, below: str) -> str:
    """A time under an hour in minutes, under a minute in seconds, to 0.01 s, in the given words."""
    if hours * 60 >= 1:
        return f"{hours * 60:.1f} {minutes}"
    in_seconds = hours * 3600
    return f"{in_seconds:.2f} {seconds}" if in_seconds >= 0.01 else f"{below} 0.01 {seconds}"


def network_line(cost: CostReport) -> str:
    """The interconnect a plan runs on: 'network: 8 instances of 8 GPUs; per GPU 450 GB/s inside an
    instance (NVLink), 50 GB/s between instances' (GB/s one way)."""
    inside = f"{cost.intra_node_gb_per_s:,.4g} GB/s inside an instance"
    if cost.num_instances == 1:
        gpus = f"{cost.gpus_per_instance} GPU{'s' if cost.gpus_per_instance != 1 else ''}"
        return f"network: one instance of {gpus}; per GPU {inside}"
    return (f"network: {cost.num_instances} instances of {cost.gpus_per_instance} GPUs; per GPU {inside}, "
            f"{cost.network_gb_per_s:,.4g} GB/s between instances")


def efficiency_note(performance: PerformanceReport, gpu: str) -> str | None:
    """Say so when throughput rests on another GPU generation's calibration (None when not)."""
    if performance.efficiency_calibrated:
        return None
    source = performance.efficiency_borrowed_from
    borrowed = f"borrowed from the {source} generation" if source else "assumed"
    return (f"uncalibrated: no published training run calibrates {gpu}; its compute efficiency "
            f"({percent(performance.compute_efficiency)}) is {borrowed}, and tokens/s, MFU, time and cost rest on it")


def new_table(screen: Screen, title: str) -> Table:
    from rich import box
    from rich.table import Table

    if screen.plain:
        plain = box.Box(_PLAIN_BOX_LINES, ascii=True)
        return Table(title=title, title_justify="left", box=plain, show_edge=False, pad_edge=False,
                     title_style="", header_style="")
    return Table(title=title, title_justify="left")


def table_width(table: Table) -> int:
    """The columns a table needs to be drawn without wrapping."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=_NATURAL_WIDTH, _environ=console_environ())
    return console.measure(table).maximum


def render(parts: list[Any], screen: Screen) -> str:
    """Tables and lines of text, drawn for the screen; trailing spaces dropped."""
    from rich.console import Console

    # markup and emoji off: names come from the user's files ('[red]x' is a directory name, not a colour)
    console = Console(file=io.StringIO(), width=screen.width or _NATURAL_WIDTH, highlight=False, markup=False,
                      emoji=False, color_system=None if screen.plain else "standard", force_terminal=not screen.plain,
                      soft_wrap=False, _environ=console_environ())
    for part in parts:
        console.print(literal(part) if isinstance(part, str) else part)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


def memory_table(memory: MemoryReport, screen: Screen, title: str = "Memory per GPU") -> Table:
    table = new_table(screen, title)
    table.add_column("pillar")
    table.add_column("GiB", justify="right")
    table.add_column("share", justify="right")
    for pillar in PILLARS:
        value = getattr(memory, f"{pillar}_bytes")
        share = f"{value / memory.total_bytes:.0%}" if memory.total_bytes else "-"
        table.add_row(pillar.replace("_", " "), gib(value), share)
    if memory.step_grad_copy_bytes:  # the optimizer step's copies, in place of the freed activations
        table.add_row("step's fp32 grad copies", gib(memory.step_grad_copy_bytes),
                      f"{memory.step_grad_copy_bytes / memory.total_bytes:.0%}")
    table.add_section()
    table.add_row("total", gib(memory.total_bytes), "")
    table.add_row("measured peaks range", memory_range_text(memory), "")
    table.add_row(limit_label(memory), gib(memory.limit_bytes), "")
    return table


def memory_range_text(memory: MemoryReport) -> str:
    """Where a run's measured peak may land around the estimate (GiB, low-high)."""
    return f"{gib(memory.total_low_bytes)}-{gib(memory.total_high_bytes)}"


def limit_label(memory: MemoryReport) -> str:
    """The limit as the table names it; planned against the range's top, the factor it divides by."""
    label = f"limit ({memory.capacity_fraction:.0%} of {gib(memory.capacity_bytes)} GiB"
    if memory.memory_bound == "upper" and memory.total_bytes:
        label += f" / {memory.total_high_bytes / memory.total_bytes:.2f}, the range's top"
    return label + ")"


def throughput_text(performance: PerformanceReport) -> str:
    """Tokens/s with the range measured runs landed in around the prediction."""
    return (f"{performance.tokens_per_s:,.0f} tokens/s (range {performance.tokens_per_s_low:,.0f}-"
            f"{performance.tokens_per_s_high:,.0f})")


def ranges_line(memory: MemoryReport, performance: PerformanceReport) -> str:
    """What the ranges rest on (docs/fidelity.md#ranges)."""
    return f"ranges: memory from {memory.range_basis}; throughput from {performance.range_basis}"


def fit_lines(memory: MemoryReport) -> list[str]:
    if memory.gpu_fits and not memory.host_fits:
        verdict = f"DOES NOT FIT in host RAM (GPU memory fits with {gib(memory.headroom_bytes)} GiB to spare)"
    elif memory.gpu_fits:
        verdict = f"FITS with {gib(memory.headroom_bytes)} GiB to spare"
    else:
        verdict = f"DOES NOT FIT: {gib(-memory.headroom_bytes)} GiB over the limit"
    lines = [f"{verdict}; dominant pillar: {memory.dominant_pillar.replace('_', ' ')}"]
    if memory.host_bytes:
        host = f"host RAM per node for offload: {gib(memory.host_bytes)} GiB"
        if memory.host_limit_bytes is not None:
            host += f" of {gib(memory.host_limit_bytes)} GiB allowed ({'fits' if memory.host_fits else 'DOES NOT FIT'})"
        lines.append(host)
    if memory.paged_bytes:
        lines.append(f"outside the torch allocator: {gib(memory.paged_bytes)} GiB of paged optimizer states "
                     "(unified memory; on the GPU while it has room, paged to host RAM otherwise)")
    if memory.activations.offloaded_bytes:
        lines.append(f"activations offloaded to host RAM: {gib(memory.activations.offloaded_bytes)} GiB per GPU")
    if memory.activations.fragmentation_reserve_bytes:
        lines.append(f"includes an allocator fragmentation reserve of "
                     f"{gib(memory.activations.fragmentation_reserve_bytes)} GiB (activations)")
    if memory.overhead.dispatcher_buffers_bytes:
        lines.append(f"includes the MoE dispatcher's own buffers, {gib(memory.overhead.dispatcher_buffers_bytes)} GiB "
                     "(overhead; outside torch's allocator, so torch.cuda.max_memory_allocated does not show them)")
    return lines


def _numeric(value: Any) -> bool:
    if value is None or isinstance(value, (int, float)):
        return True
    try:
        float(str(value).replace(",", "").rstrip("BM"))
    except ValueError:
        return False
    return True


def listing_table(rows: list[dict[str, Any]], columns: list[tuple[str, str]], title: str, screen: Screen) -> str:
    """A catalogue as a table of (key, header) columns; a screen too narrow for all of them
    keeps as many leading columns as fit (the name always). Names never break."""
    for kept in range(len(columns), 0, -1):
        table = new_table(screen, title)
        for index, (key, header) in enumerate(columns[:kept]):
            numeric = all(_numeric(row.get(key)) for row in rows)
            table.add_column(header, no_wrap=index == 0, justify="right" if numeric else "left")
        for row in rows:
            table.add_row(*("" if row.get(key) is None else str(row[key]) for key, _ in columns[:kept]))
        if screen.width is None or table_width(table) <= screen.width:
            break
    return render([table], screen)


def split_line(memory: MemoryReport) -> str:
    """The pipeline's split and each checked rank's memory ('' without a pipeline)."""
    if memory.num_stages <= 1:
        return ""
    ranks = ", ".join(f"{r.rank} ({r.layers} layers{' + embedding' if r.rank == 0 else ''}"
                      f"{' + output layer' if r.rank == memory.num_stages - 1 else ''}) {gib(r.total_bytes)} GiB"
                      for r in memory.rank_totals)
    return f"\npipeline split {split_label(tuple(memory.stage_layers))} layers per rank; checked ranks: {ranks}"
