"""`vramplan solve --report report.html`: one self-contained page (inline CSS and SVG charts, no
script, nothing fetched) with the question asked, the plan and its layout, its memory by pillar,
the alternatives with their layouts and the front; it fits a 1,280-pixel window (wide tables
scroll inside the page, never the page itself)."""

from __future__ import annotations

import html
from collections.abc import Iterable

from vramplan.commands import plot
from vramplan.commands.literal import literal
from vramplan.commands.render_solve import layout_text, objective_text, plan_summary
from vramplan.commands.render_text import (
    count,
    duration_text,
    efficiency_note,
    gib,
    limit_label,
    memory_range_text,
    params_text,
    percent,
    ranges_line,
    throughput_text,
    time_cell,
)
from vramplan.models.core.results import PILLARS, MemoryReport
from vramplan.models.time.cost import usd_amount, usd_text
from vramplan.solver.query import SolvedPlan, SolveQuery, SolveResult


def escape(text: str) -> str:
    """Text for the page: HTML-escaped, its control characters shown escaped (HTML has no use for
    them, and a name holding ESC or BEL reached the page raw)."""
    return html.escape(literal(text))


STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1b1b; margin: 2rem auto;
       max-width: 1100px; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
.meta { color: #555; } .note { color: #8a4b00; } .why { background: #fff4e5; padding: .6rem .9rem; }
.wide { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .5rem 0; font-size: 13px; }
th, td { padding: .2rem .45rem; text-align: right; white-space: nowrap; }
th { white-space: normal; vertical-align: bottom; }
dl.question { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; }
dl.question dt { color: #555; } dl.question dd { margin: 0; }
th { border-bottom: 2px solid #333; } td { border-bottom: 1px solid #ddd; }
th:first-child, td:first-child, td.text { text-align: left; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; }
"""


def _table(headers: Iterable[str], rows: Iterable[Iterable[object]], text_columns: set[int] | None = None) -> str:
    text_columns = text_columns or set()
    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=text" if i in text_columns else ""}>{escape(str(c))}</td>'
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _wide(table: str) -> str:
    """A table that may scroll sideways inside the page on a narrow window (the page never does)."""
    return f"<div class=wide>{table}</div>"


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption class=meta>{escape(caption)}</figcaption></figure>"


def _memory_section(memory: MemoryReport, title: str, heading: str) -> str:
    rows = [(p.replace("_", " "), gib(getattr(memory, f"{p}_bytes"))) for p in PILLARS]
    rows += [("total", gib(memory.total_bytes)), ("measured peaks range", memory_range_text(memory)),
             (limit_label(memory), gib(memory.limit_bytes))]
    if memory.host_bytes:
        rows.append(("host RAM per node (offload)", gib(memory.host_bytes)))
    chart = _figure(plot.svg_text(plot.memory_figure(memory, title)), "Memory per GPU by pillar (GiB = 2^30 bytes)")
    return f"<h2>{escape(heading)}</h2>{chart}{_table(('pillar', 'GiB'), rows)}"


def _plans_rows(result: SolveResult, plans: list[SolvedPlan]) -> list[list[object]]:
    best = result.plans[0].objective_value if result.plans else None
    rows = []
    for index, plan in enumerate(plans, start=1):
        p, perf, cost = plan.plan, plan.performance, plan.cost
        worse = "-" if not best else f"{(plan.objective_value - best) / best:+.1%}"
        rows.append([index, f"{p.num_gpus} x {p.gpu}", p.offering, p.zero, p.recompute_label, p.offload,
                     f"{p.micro_batch} x {p.grad_accum}", gib(plan.memory.total_bytes), f"{perf.tokens_per_s:,.0f}",
                     percent(perf.mfu_fraction),
                     time_cell(cost.hours), f"{cost.usd_per_hour:,.2f}", usd_amount(cost.usd_total), worse,
                     layout_text(plan)])
    return rows


PLAN_HEADERS = ("#", "GPUs", "offering", "ZeRO", "recompute", "offload", "mb x acc", "GiB/GPU", "tokens/s", "MFU",
                "time", "USD/h", "USD total", "vs best", "layout")
TEXT_COLUMNS = {1, 2, 4, 5, 14}  # left-aligned


def _question(query: SolveQuery) -> str:
    """The question the page answers: model, method, sequence length, batch, tokens, objective, the
    stack whose plans these are, and every restriction as the user wrote it."""
    from vramplan.solver.restrictions import restrictions_of

    job = query.job
    method = job.method if job.method == "full" else f"{job.method} (rank {job.lora_rank})"
    restrictions = ", ".join(r.label for r in restrictions_of(query)) or "none"
    rows = [("model", query.model), ("method", method), ("sequence length", f"{job.seq_len:,} tokens"),
            ("global batch", f"{query.effective_global_batch:,} sequences"), ("tokens", count(round(query.tokens))),
            ("objective", query.objective), ("stack", job.stack), ("precision", query.pins.precision or "bf16 or fp16"),
            # spot prices and their restarts are part of the question (the page read them as on-demand)
            ("pricing", query.pricing + (f", {query.restart_overhead:g} of the work redone after preemptions"
                                         if query.pricing == "spot" else "")),
            ("restrictions", restrictions)]
    items = "".join(f"<dt>{escape(name)}</dt><dd>{escape(str(value))}</dd>" for name, value in rows)
    return f"<h2>The question</h2><dl class=question>{items}</dl>"


def report_html(result: SolveResult, query: SolveQuery | None = None) -> str:
    model = result.model
    parts = [f"<h1>{escape(model.name)} ({escape(params_text(model))}): "
             f"objective {escape(result.objective.name)}</h1>",
             f"<p class=meta>status {escape(result.status.upper())}; global batch {result.global_batch}, "
             f"{count(round(result.tokens))} tokens; {result.space_size:,} combinations searched by "
             f"{escape(result.engine)} in {result.solve_time_s:.2f} s</p>"]
    if query is not None:
        parts.append(_question(query))
    if result.plans:
        best = result.plans[0]
        parts.append(f"<h2>Best plan</h2><p>{escape(plan_summary(best))}</p>"
                     f"<p>layout: <b>{escape(layout_text(best))}</b> = {best.plan.num_gpus} GPUs"
                     f"{escape(f', stack {query.job.stack}') if query is not None else ''}</p>"
                     f"<p>objective: <b>{escape(objective_text(result, best.objective_value))}</b>; "
                     f"{escape(throughput_text(best.performance))}, MFU {percent(best.performance.mfu_fraction)}, "
                     f"{duration_text(best.cost.hours)}, {best.cost.usd_per_hour:,.2f} USD/hour, "
                     f"{usd_text(best.cost.usd_total)}</p>")
        parts.append(f"<p class=meta>{escape(ranges_line(best.memory, best.performance))}</p>")
        note = efficiency_note(best.performance, best.plan.gpu)
        parts += [f"<p class=note>{escape(note)}</p>"] if note else []
        # what the table prints as warnings (a plan that fits but that nobody would run, spot preemptions)
        parts += [f"<p class=note>warning: {escape(warning)}</p>" for warning in best.warnings]
        title = f"{model.name} on {best.plan.num_gpus} x {best.plan.gpu}, ZeRO-{best.plan.zero}"
        parts.append(_memory_section(best.memory, title, "Memory per GPU"))
        parts.append("<h2>Alternatives (best first)</h2>"
                     + _wide(_table(PLAN_HEADERS, _plans_rows(result, result.plans), TEXT_COLUMNS)))
    if result.pareto:
        chart = _figure(plot.svg_text(plot.pareto_figure(result)), "Each point is a plan no other plan beats on both "
                        "cost and time; the star is the chosen plan")
        parts.append("<h2>Cost-vs-time Pareto front</h2>" + chart
                     + _wide(_table(PLAN_HEADERS, _plans_rows(result, result.pareto), TEXT_COLUMNS)))
    if result.explanation is not None:
        parts.append(f"<h2>Why nothing fits</h2><p class=why>{escape(result.explanation.summary)}</p>")
        miss = result.explanation.closest_miss
        if miss is not None:
            title = f"closest miss: {miss.plan.num_gpus} x {miss.plan.gpu}, ZeRO-{miss.plan.zero}"
            parts.append(_memory_section(miss.memory, title, "Closest miss, memory per GPU"))
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>vramplan: {escape(model.name)}</title>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{STYLE}</style></head>"
            f"<body>\n{body}\n</body></html>\n")
