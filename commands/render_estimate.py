"""`vramplan estimate` as a table and as one CSV row."""

from __future__ import annotations

from typing import Any

from vramplan.commands.output import Screen, csv_text, flatten
from vramplan.commands.render_text import (
    count,
    duration_text,
    efficiency_note,
    fit_lines,
    gib,
    memory_table,
    network_line,
    params_text,
    percent,
    ranges_line,
    render,
    seconds_text,
    split_line,
    throughput_text,
)
from vramplan.models.core.results import EstimateResult
from vramplan.models.time.cost import usd_text


def plan_line(result: EstimateResult) -> str:
    plan, job = result.plan, result.job
    method = job.method if job.method == "full" else f"{job.method} r={job.lora_rank}"
    return (
        f"{result.model.name} ({params_text(result.model)}), {method}, seq {job.seq_len}, "
        f"micro-batch {plan.micro_batch} x accum {plan.grad_accum} x dp {plan.dp} = global batch {plan.global_batch}\n"
        f"{plan.num_gpus} x {plan.gpu} via {result.cost.offering} ({result.cost.num_instances} instance(s)), "
        f"ZeRO-{plan.zero}, recompute {plan.recompute_label}, {plan.precision}, {job.optimizer}, "
        f"{job.attention} attention, {job.kernels} kernels, offload {plan.offload}\n{network_line(result.cost)}"
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
    return layout + split_line(result.memory)


def performance_lines(result: EstimateResult) -> list[str]:
    perf, cost = result.performance, result.cost
    return [
        f"throughput {throughput_text(perf)}, MFU {percent(perf.mfu_fraction)}, step {seconds_text(perf.step_time_s)} "
        f"(compute {seconds_text(perf.compute_time_s)}, exposed communication {seconds_text(perf.exposed_communication_s)}"
        + (f", model-parallel {perf.model_parallel_time_s:,.2f} s of which pipeline bubble {perf.pipeline_bubble_s:,.2f} s"
           + (f" and stage imbalance {perf.pipeline_imbalance_s:,.2f} s" if perf.pipeline_imbalance_s > 0 else "")
           + (f" and MoE host wait {perf.moe_host_wait_s:,.2f} s" if perf.moe_host_wait_s > 0 else "")
           if perf.model_parallel_time_s > 0 else "")
        + (f", activation offload transfer {perf.offload_exposed_s:,.2f} s" if perf.offload_exposed_s > 0 else "") + ")",
        f"cost {cost.usd_per_hour:,.2f} USD/hour ({cost.pricing}); {count(round(cost.tokens))} tokens take "
        f"{duration_text(cost.hours)} = {usd_text(cost.usd_total)}",
    ]


def estimate_table(result: EstimateResult, screen: Screen) -> str:
    parts: list[Any] = [plan_line(result), "", memory_table(result.memory, screen)]
    parts += fit_lines(result.memory) + change_lines(result) + performance_lines(result)
    parts += [ranges_line(result.memory, result.performance)]
    parts += [f"warning: {w}" for w in result.warnings]
    note = efficiency_note(result.performance, result.plan.gpu)
    parts += [note] if note else []
    return render(parts, screen)


def change_lines(result: EstimateResult) -> list[str]:
    """A plan that does not fit: the single changes that make it fit (models/estimate_changes.py),
    or that none does."""
    if result.memory.fits:
        return []
    if not result.fitting_changes:
        return ["no single change of ZeRO stage, recomputation, offload or micro-batch fits: `vramplan solve` "
                "searches every layout, GPU count and offering"]
    return ["fits with one change:"] + [
        f"  {fix.change}: {gib(fix.total_bytes)} of {gib(fix.limit_bytes)} GiB, {fix.tokens_per_s:,.0f} tokens/s, "
        f"{usd_text(fix.usd_total)}" for fix in result.fitting_changes]


def estimate_csv(result: EstimateResult) -> str:
    return csv_text([flatten(result.model_dump(mode="json"))])
