"""`vramplan solve` as a table (best plan, runner-ups, Pareto front, explanation) and as CSV."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vramplan.commands.output import Screen, csv_text, flatten
from vramplan.commands.render_text import (
    count,
    duration_text,
    efficiency_note,
    fit_lines,
    gib,
    memory_table,
    network_line,
    new_table,
    params_text,
    percent,
    ranges_line,
    render,
    seconds_text,
    split_line,
    table_width,
    throughput_text,
    time_cell,
)
from vramplan.models.time.cost import usd_amount, usd_text
from vramplan.solver.query import SolvedPlan, SolveResult

if TYPE_CHECKING:
    from rich.table import Table

# (header, right-aligned) of the wide layout; a narrow screen shows _NARROW_COLUMNS instead.
# GiB/GPU: the most loaded GPU's memory (runner-ups at the same cost often differ only there: ZeRO-2
# offloads the gradients ZeRO-1 keeps), dropped last.
_PLAN_COLUMNS = (("#", True), ("GPUs", True), ("offering", False), ("ZeRO", True), ("recompute", False),
                 ("offload", False), ("mb x acc", True), ("GiB/GPU", True), ("tokens/s", True), ("MFU", True),
                 ("time", True), ("USD/h", True), ("USD total", True), ("vs best", True), ("layout", False))
_DROP_ORDER = ("mb x acc", "offload", "USD/h", "recompute", "tokens/s", "layout", "MFU", "GiB/GPU")
_NARROW_COLUMNS = (("#", True), ("plan", False), ("time", True), ("USD total", True), ("vs best", True))


def plan_summary(plan: SolvedPlan) -> str:
    p = plan.plan
    return (f"{p.num_gpus} x {p.gpu} via {p.offering} ({plan.cost.num_instances} instance(s)), ZeRO-{p.zero}, "
            f"recompute {p.recompute_label}, {p.precision}, micro-batch {p.micro_batch} x accum {p.grad_accum} x dp {p.dp}, "
            f"offload {p.offload}, stack {p.stack}")


def objective_text(result: SolveResult, value: float | None) -> str:
    if value is None:
        return "-"
    unit = result.objective.unit
    if unit == "USD":
        return usd_text(value)
    if unit == "hours":
        return duration_text(value)
    return f"{value:,.2f} {unit}" if unit == "USD/hour" else f"{value:,.0f} {unit}"


def _plan_cells(plan: SolvedPlan, index: int, best: float | None, with_stack: bool = False) -> list[str]:
    p = plan.plan
    worse = "-" if not best else f"{(plan.objective_value - best) / best:+.1%}"
    return [str(index), f"{p.num_gpus} x {p.gpu}", p.offering, str(p.zero), p.recompute_label, p.offload,
            f"{p.micro_batch} x {p.grad_accum}", gib(plan.memory.total_bytes), f"{plan.performance.tokens_per_s:,.0f}",
            percent(plan.performance.mfu_fraction) + ("" if plan.performance.efficiency_calibrated else "*"),
            time_cell(plan.cost.hours), f"{plan.cost.usd_per_hour:,.2f}", usd_amount(plan.cost.usd_total), worse,
            layout_text(plan) + (f" ({p.stack})" if with_stack else "")]


def layout_text(plan: SolvedPlan) -> str:
    """The parallel layout in Megatron's terms: 'TP8+SP x PP16 x DP8' (degrees of 1 left out), 'DP64'."""
    p = plan.plan
    return p.layout._replace(sp=p.sequence_parallel and p.tp > 1).label(p.dp)


def search_line(result: SolveResult) -> str:
    """How large the space was and the work done (--verbose)."""
    s = result.search
    return (f"search: {s.combinations:,} combinations of the decisions, {s.evaluations:,} models/ evaluations, "
            f"{s.cpsat_models:,} CP-SAT models, {s.cpsat_solves:,} solves")


def plans_table(result: SolveResult, plans: list[SolvedPlan], title: str, screen: Screen) -> Table:
    """One row per plan. A screen too narrow for every column drops the least telling ones first
    (_DROP_ORDER); below 100 columns cluster, offering and configuration stack in one cell."""
    best = result.plans[0].objective_value if result.plans else None
    several = len({plan.plan.stack for plan in plans}) > 1  # `--stack any`: the layout cell names each plan's stack
    rows = [_plan_cells(plan, index, best, several) for index, plan in enumerate(plans, start=1)]
    if screen.compact:
        return _stacked_plans_table(plans, rows, title, screen)
    shown = [header for header, _ in _PLAN_COLUMNS]
    for dropped in (None, *_DROP_ORDER):
        if dropped is not None:
            shown.remove(dropped)
        table = new_table(screen, title)
        for header, right in _PLAN_COLUMNS:
            if header in shown:
                table.add_column(header, justify="right" if right else "left", no_wrap=True)
        for cells in rows:
            table.add_row(*(cell for (header, _), cell in zip(_PLAN_COLUMNS, cells) if header in shown))
        if screen.width is None or table_width(table) <= screen.width:
            break
    return table


def _stacked_plans_table(plans: list[SolvedPlan], rows: list[list[str]], title: str, screen: Screen) -> Table:
    table = new_table(screen, title)
    table.show_lines = True
    for header, right in _NARROW_COLUMNS:
        table.add_column(header, justify="right" if right else "left")
    for plan, cells in zip(plans, rows):
        p, cell = plan.plan, {header: text for (header, _), text in zip(_PLAN_COLUMNS, cells)}
        stacked = (f"{cell['GPUs']}\n{p.offering}\nZeRO-{p.zero}, recompute {p.recompute_label}, offload {p.offload}\n"
                   f"{cell['GiB/GPU']} GiB per GPU\n{cell['layout']}")
        table.add_row(cell["#"], stacked, cell["time"], cell["USD total"], cell["vs best"])
    return table


def _best_plan_parts(result: SolveResult, screen: Screen) -> list[Any]:
    best = result.plans[0]
    perf, cost = best.performance, best.cost
    return ["", f"Best plan: {plan_summary(best)}", f"layout: {layout_text(best)} = {best.plan.num_gpus} GPUs{split_line(best.memory)}",
            network_line(best.cost),
            f"objective: {objective_text(result, best.objective_value)}", "",
            memory_table(best.memory, screen), *fit_lines(best.memory),
            f"throughput {throughput_text(perf)}, MFU {percent(perf.mfu_fraction)}, step {seconds_text(perf.step_time_s)}",
            f"cost {cost.usd_per_hour:,.2f} USD/hour; {duration_text(cost.hours)} "
            f"= {usd_text(cost.usd_total)}", ranges_line(best.memory, perf), *[f"warning: {w}" for w in best.warnings],
            *_notes([efficiency_note(perf, best.plan.gpu)])]


def _notes(notes: list[str | None]) -> list[str]:
    return [note for note in notes if note]


def _starred_note(plans: list[SolvedPlan]) -> list[str]:
    borrowed = sorted({p.plan.gpu for p in plans if not p.performance.efficiency_calibrated})
    if not borrowed:
        return []
    return [f"* uncalibrated compute efficiency (borrowed from another GPU generation): {', '.join(borrowed)}"]


def _explanation_parts(result: SolveResult, screen: Screen) -> list[Any]:
    explanation = result.explanation
    assert explanation is not None
    parts: list[Any] = ["", f"Why: {explanation.summary}"]
    miss = explanation.closest_miss
    if miss is not None:
        parts += ["", f"Closest miss: {plan_summary(miss)}", memory_table(miss.memory, screen, "Closest miss, memory per GPU")]
    if explanation.mitigations:
        table = new_table(screen, "Changes tried, each alone, least disruptive first")
        table.add_column("change")
        table.add_column("fits")
        table.add_column("plan")
        for m in explanation.mitigations:
            plan = "-" if m.plan is None else f"{m.plan.num_gpus} x {m.plan.gpu}, ZeRO-{m.plan.zero}, {m.plan.method}"
            table.add_row(m.change, "yes" if m.fits else ("no" if m.tried else f"not tried: {_limit_name(result)}"), plan)
        parts += ["", table]
    return parts


def _limit_name(result: SolveResult) -> str:
    """The limit that cut the search short, as the options name it."""
    return "work limit" if result.limit_reached == "work" else "time limit"


def solve_table(result: SolveResult, screen: Screen, verbose: bool = False) -> str:
    head = (f"{result.model.name} ({params_text(result.model)}): global batch {result.global_batch}, "
            f"{count(round(result.tokens))} tokens, objective {result.objective.name}\n"
            f"status {result.status.upper()} ({result.engine}, {result.space_size:,} combinations, "
            f"{result.solve_time_s:.2f} s)")
    parts: list[Any] = [head]
    if result.objective.gap is not None:
        parts.append(f"{_limit_name(result)} reached: best bound {objective_text(result, result.objective.best_bound)}, "
                     f"gap {result.objective.gap:.1%}")
    elif result.status == "feasible":
        parts.append(f"{_limit_name(result)} reached: the best plan found so far, not proven optimal (no bound)")
    elif result.status == "unknown":  # neither a plan nor a proof that none fits
        parts.append(f"{_limit_name(result)} reached before a plan was found or it was proven that none fits: raise "
                     f"--{_limit_name(result).replace(' ', '-')}")
    if result.plans:
        parts += _best_plan_parts(result, screen)
        if len(result.plans) > 1:
            parts += ["", plans_table(result, result.plans, "Best plans (runner-ups vs the best)", screen)]
            parts += _starred_note(result.plans) if not screen.compact else []
    if result.pareto:
        parts += ["", plans_table(result, result.pareto, "Cost-vs-time Pareto front (cheapest first)", screen)]
        parts += _starred_note(result.pareto) if not screen.compact else []
    if result.explanation is not None:
        parts += _explanation_parts(result, screen)
    if verbose:
        parts += ["", search_line(result)]
    return render(parts, screen)


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
