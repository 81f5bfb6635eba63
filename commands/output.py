"""Rendering results as tables (rich), JSON and CSV. No computation happens here."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from vramplan.models.results import PILLARS, EstimateResult, MemoryReport
from vramplan.models.units import BYTES_PER_GIB
from vramplan.solver.query import SolvedPlan, SolveResult


def emit(text: str, output: Path | None) -> None:
    """Write the result to stdout, or to the -o file."""
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        raise click.ClickException(f"output={str(output)!r}: cannot write: {error.strerror or error}") from None


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


def render_table(table: Table | list[Any], width: int = 160) -> str:
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
    ) + layout_line(result)


def layout_line(result: EstimateResult) -> str:
    """The parallel layout and the pipeline rank the memory is reported for ('' when plain DP)."""
    plan = result.plan
    if plan.tp * plan.pp * plan.cp * plan.ep == 1:
        return ""
    layout = f"\nlayout TP {plan.tp}{' + SP' if plan.sequence_parallel and plan.tp > 1 else ''} x PP {plan.pp}"
    layout += f" (vpp {plan.vpp})" if plan.vpp > 1 else ""
    layout += f" x CP {plan.cp} x DP {plan.dp}, EP {plan.ep}; memory of pipeline rank {result.memory.stage}"
    layout += f" of {result.memory.num_stages} (the most loaded)" if plan.pp > 1 else ""
    return layout


def performance_lines(result: EstimateResult) -> list[str]:
    perf, cost = result.performance, result.cost
    return [
        f"throughput {perf.tokens_per_s:,.0f} tokens/s, MFU {perf.mfu:.1%}, step {perf.step_time_s:,.2f} s "
        f"(compute {perf.compute_time_s:,.2f} s, exposed communication {perf.exposed_communication_s:,.2f} s"
        + (f", model-parallel {perf.model_parallel_time_s:,.2f} s of which pipeline bubble {perf.pipeline_bubble_s:,.2f} s"
           if perf.model_parallel_time_s > 0 else "") + ")",
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


def _plan_summary(plan: SolvedPlan) -> str:
    p = plan.plan
    return (f"{p.num_gpus} x {p.gpu} via {p.offering} ({plan.cost.num_instances} instance(s)), ZeRO-{p.zero}, "
            f"recompute {p.recompute}, {p.precision}, micro-batch {p.micro_batch} x accum {p.grad_accum} x dp {p.dp}, "
            f"offload {p.offload}")


def _value(result: SolveResult, value: float | None) -> str:
    if value is None:
        return "-"
    unit = result.objective.unit
    return f"{value:,.2f} {unit}" if unit in ("USD", "USD/hour", "hours") else f"{value:,.0f} {unit}"


def _alternatives_table(result: SolveResult, plans: list[SolvedPlan], title: str) -> Table:
    best = result.plans[0].objective_value if result.plans else None
    table = Table(title=title, title_justify="left")
    for column in ("#", "GPUs", "offering", "ZeRO", "recompute", "offload", "mb x acc", "tokens/s", "MFU", "days",
                   "USD/h", "USD total", "vs best"):
        table.add_column(column, justify="left" if column in ("offering", "recompute", "offload") else "right", no_wrap=True)
    for index, plan in enumerate(plans, start=1):
        p = plan.plan
        worse = "-" if not best else f"{(plan.objective_value - best) / best:+.1%}"
        table.add_row(str(index), f"{p.num_gpus} x {p.gpu}", p.offering, str(p.zero), p.recompute, p.offload,
                      f"{p.micro_batch} x {p.grad_accum}", f"{plan.performance.tokens_per_s:,.0f}",
                      f"{plan.performance.mfu:.1%}", f"{plan.cost.days:,.2f}", f"{plan.cost.usd_per_hour:,.2f}",
                      f"{plan.cost.usd_total:,.0f}", worse)
    return table


def solve_table(result: SolveResult) -> str:
    head = (f"{result.model.name} ({result.model.num_params / 1e9:,.2f}B params): global batch {result.global_batch}, "
            f"{result.tokens:,.3g} tokens, objective {result.objective.name}\n"
            f"status {result.status.upper()} ({result.engine}, {result.space_size:,} combinations, "
            f"{result.solve_time_s:.2f} s)")
    parts: list[Any] = [head]
    if result.objective.gap is not None:
        parts.append(f"time limit reached: best bound {_value(result, result.objective.best_bound)}, gap {result.objective.gap:.1%}")
    if result.plans:
        best = result.plans[0]
        parts += ["", f"Best plan: {_plan_summary(best)}", f"objective: {_value(result, best.objective_value)}", "",
                  memory_table(best.memory)]
        parts += fit_lines(best.memory)
        parts += [
            f"throughput {best.performance.tokens_per_s:,.0f} tokens/s, MFU {best.performance.mfu:.1%}, "
            f"step {best.performance.step_time_s:,.2f} s",
            f"cost {best.cost.usd_per_hour:,.2f} USD/hour; {best.cost.hours:,.1f} hours ({best.cost.days:,.2f} days) "
            f"= {best.cost.usd_total:,.0f} USD",
        ]
        if len(result.plans) > 1:
            parts += ["", _alternatives_table(result, result.plans, "Best plans (runner-ups vs the best)")]
    if result.pareto:
        parts += ["", _alternatives_table(result, result.pareto, "Cost-vs-time Pareto front (cheapest first)")]
    if result.explanation is not None:
        parts += ["", f"Why: {result.explanation.summary}"]
        miss = result.explanation.closest_miss
        if miss is not None:
            parts += ["", f"Closest miss: {_plan_summary(miss)}", memory_table(miss.memory, "Closest miss, memory per GPU")]
        if result.explanation.mitigations:
            table = Table(title="Changes tried, in the seed's mitigation order", title_justify="left")
            table.add_column("change")
            table.add_column("fits")
            table.add_column("plan")
            for m in result.explanation.mitigations:
                plan = "-" if m.plan is None else f"{m.plan.num_gpus} x {m.plan.gpu}, ZeRO-{m.plan.zero}, {m.plan.method}"
                table.add_row(m.change, "yes" if m.fits else "no", plan)
            parts += ["", table]
    return render_table(parts)


def solve_csv(result: SolveResult) -> str:
    rows = []
    for kind, plans in (("plan", result.plans), ("pareto", result.pareto)):
        for rank, plan in enumerate(plans, start=1):
            rows.append({"status": result.status, "objective": result.objective.name, "kind": kind, "rank": rank,
                         **flatten(plan.model_dump(mode="json"))})
    if not rows:
        summary = result.explanation.summary if result.explanation else ""
        rows.append({"status": result.status, "objective": result.objective.name, "explanation": summary})
    return csv_text(rows)
