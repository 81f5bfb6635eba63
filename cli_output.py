"""Rendering results as tables (rich), JSON and CSV. No computation happens here."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from models.results import PILLARS, EstimateResult, MemoryReport
from models.units import BYTES_PER_GIB


def gib(num_bytes: int | float | None) -> str:
    return "-" if num_bytes is None else f"{num_bytes / BYTES_PER_GIB:,.2f}"


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one flat row with dotted keys (lists become JSON text)."""
    row: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            row.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            row[name] = json.dumps(value)
        else:
            row[name] = value
    return row


def _cell(value: Any) -> Any:
    return str(value).lower() if isinstance(value, bool) else value


def csv_text(rows: Iterable[Mapping[str, Any]]) -> str:
    rows = [{key: _cell(value) for key, value in row.items()} for row in rows]
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def json_text(value: BaseModel | list[BaseModel] | list[dict[str, Any]]) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json(indent=2) + "\n"
    items = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    return json.dumps(items, indent=2) + "\n"


def render_table(table: Table | list[Any], width: int = 110) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    for item in table if isinstance(table, list) else [table]:
        console.print(item)
    return console.file.getvalue()  # type: ignore[attr-defined]


def memory_table(memory: MemoryReport, title: str = "Memory per GPU") -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("pillar")
    table.add_column("GiB", justify="right")
    table.add_column("share", justify="right")
    for pillar in PILLARS:
        value = getattr(memory, f"{pillar}_bytes")
        share = f"{value / memory.total_bytes:.0%}" if memory.total_bytes else "-"
        table.add_row(pillar.replace("_", " "), gib(value), share)
    table.add_section()
    table.add_row("total", gib(memory.total_bytes), "")
    table.add_row(f"limit ({memory.capacity_fraction:.0%} of {gib(memory.capacity_bytes)} GiB)", gib(memory.limit_bytes), "")
    return table


def fit_lines(memory: MemoryReport) -> list[str]:
    if memory.gpu_fits:
        verdict = f"FITS with {gib(memory.headroom_bytes)} GiB to spare"
    else:
        verdict = f"DOES NOT FIT: {gib(-memory.headroom_bytes)} GiB over the limit"
    lines = [f"{verdict}; dominant pillar: {memory.dominant_pillar.replace('_', ' ')}"]
    if memory.host_bytes:
        host = f"host RAM per node for offload: {gib(memory.host_bytes)} GiB"
        if memory.host_limit_bytes is not None:
            host += f" of {gib(memory.host_limit_bytes)} GiB allowed ({'fits' if memory.host_fits else 'DOES NOT FIT'})"
        lines.append(host)
    return lines


def plan_line(result: EstimateResult) -> str:
    plan, job = result.plan, result.job
    method = job.method if job.method == "full" else f"{job.method} r={job.lora_rank}"
    return (
        f"{result.model.name} ({result.model.num_params / 1e9:,.2f}B params), {method}, seq {job.seq_len}, "
        f"micro-batch {plan.micro_batch} x accum {plan.grad_accum} x dp {plan.dp} = global batch {plan.global_batch}\n"
        f"{plan.num_gpus} x {plan.gpu} via {result.cost.offering} ({result.cost.num_instances} instance(s)), "
        f"ZeRO-{plan.zero}, recompute {plan.recompute}, {plan.precision}, {job.optimizer}, "
        f"{job.attention} attention, {job.kernels} kernels, offload {plan.offload}"
    )


def performance_lines(result: EstimateResult) -> list[str]:
    perf, cost = result.performance, result.cost
    return [
        f"throughput {perf.tokens_per_s:,.0f} tokens/s, MFU {perf.mfu:.1%}, step {perf.step_time_s:,.2f} s "
        f"(compute {perf.compute_time_s:,.2f} s, exposed communication {perf.exposed_communication_s:,.2f} s)",
        f"cost {cost.usd_per_hour:,.2f} USD/hour ({cost.pricing}); {cost.tokens:,.3g} tokens take "
        f"{cost.hours:,.1f} hours ({cost.days:,.2f} days) = {cost.usd_total:,.0f} USD",
    ]


def estimate_table(result: EstimateResult) -> str:
    parts: list[Any] = [plan_line(result), "", memory_table(result.memory)]
    parts += fit_lines(result.memory) + performance_lines(result)
    return render_table(parts)


def estimate_csv(result: EstimateResult) -> str:
    return csv_text([flatten(result.model_dump(mode="json"))])


def listing_table(rows: list[dict[str, Any]], columns: list[str], title: str) -> str:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, no_wrap=True)
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in columns))
    return render_table(table, width=400)
