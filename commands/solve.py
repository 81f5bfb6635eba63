"""`vramplan solve`: parse the question, call solver.api.solve, format the answer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from vramplan.commands.exits import EXIT_INFEASIBLE
from vramplan.commands.options import (
    COUNT,
    OFFLOAD_CHOICE,
    POSITIVE,
    PRECISION_CHOICE,
    REAL,
    RECOMPUTE_CHOICE,
    ZERO_CHOICE,
    OnceCommand,
    OutputPath,
    catalogue_options,
    job_options,
    open_catalogue,
    option_fields,
    output_options,
    refuse_contradictions,
    validation_error,
)
from vramplan.models.core.choices import DAYS_PER_YEAR, MFU_FLOOR
from vramplan.solver.choices import OBJECTIVES

if TYPE_CHECKING:
    from vramplan.solver.query import SolveQuery, SolveResult


def build_query(options: dict[str, Any]) -> SolveQuery:
    """Repeatable --gpu/--provider also accept ';'- or ','-separated lists."""
    from pydantic import ValidationError

    from vramplan.solver.query_fields import query_from_fields

    pictures = bool(options.get("plot_path") or options.get("report_path"))  # they draw the front
    try:
        query = query_from_fields(option_fields(options), top_k=options["top"], pareto=options["pareto"] or pictures,
                                  engine=options["engine"], work_limit=options["work_limit"],
                                  time_limit_s=options["time_limit"])
    except ValidationError as error:
        raise validation_error(error) from None
    refuse_contradictions(options, query.job)
    return query


@click.command("solve", cls=OnceCommand)
@job_options
@click.option("--global-batch", type=COUNT, default=None,
              help="Sequences per optimizer step = micro-batch x accumulation x GPUs [default: ~1M tokens].")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="cost", show_default=True,
              help="cost = total USD for --tokens; time = wall hours; throughput = tokens/s; hourly = USD/hour.")
@click.option("--gpu", multiple=True, help="Allowed GPU (repeatable, or comma-separated) [default: all].")
@click.option("--provider", multiple=True, help="Allowed provider (repeatable, or comma-separated) [default: all].")
@click.option("--region", multiple=True, help="Allowed region, e.g. us-east-1 (repeatable, or comma-separated) [default: all].")
@click.option("--country", multiple=True, help="Allowed country, ISO 3166-1 alpha-2, e.g. DE (repeatable) [default: all].")
@click.option("--jurisdiction", type=click.Choice(["eu"]), default=None,
              help="eu: offerings in EU member states only [default: anywhere].")
@click.option("--max-gpus", type=COUNT, default=512, show_default=True)
@click.option("--max-nodes", type=COUNT, default=None, help="Most instances to rent.")
@click.option("--budget-usd", type=POSITIVE, default=None, help="Most USD for the whole job.")
@click.option("--deadline-hours", type=POSITIVE, default=None, help="Most wall-clock hours for the whole job.")
@click.option("--min-mfu", type=REAL, default=MFU_FLOOR, show_default=True,
              help="Least MFU (of the 16-bit dense peak) a plan may run at; 0 returns plans that mostly wait.")
@click.option("--max-days", type=REAL, default=float(DAYS_PER_YEAR), show_default=True,
              help="Most days a plan may take without --deadline-hours; 0 lifts it.")
@click.option("--zero", type=ZERO_CHOICE, default=None, help="Pin the ZeRO stage.")
@click.option("--recompute", type=RECOMPUTE_CHOICE, default=None, help="Pin activation recomputation.")
@click.option("--precision", type=PRECISION_CHOICE, default=None,
              help="Pin the precision [default: bf16, fp16 on GPUs without bf16].")
@click.option("--micro-batch", type=COUNT, default=None, help="Pin the micro-batch.")
@click.option("--offload", type=OFFLOAD_CHOICE, default=None, help="Pin ZeRO-Offload.")
@click.option("--num-gpus", type=COUNT, default=None, help="Pin the GPU count.")
@click.option("--tp", type=COUNT, default=None, help="Pin the tensor-parallel degree [default: 1-8, inside one instance].")
@click.option("--pp", type=COUNT, default=None, help="Pin the pipeline-parallel degree [default: 1-16].")
@click.option("--cp", type=COUNT, default=None, help="Pin the context-parallel degree [default: 1-8 from 16k tokens].")
@click.option("--ep", type=COUNT, default=None, help="Pin the expert-parallel degree (MoE) [default: 1-8].")
@click.option("--vpp", type=COUNT, default=None, help="Pin the virtual pipeline stages per rank [default: 1].")
@click.option("--sequence-parallel/--no-sequence-parallel", default=None,
              help="Pin Megatron sequence parallelism [default: on with TP].")
@click.option("--verbose", is_flag=True, help="Also print how large the search space was and the work done.")
@click.option("--top", type=COUNT, default=3, show_default=True, help="Best K distinct plans.")
@click.option("--pareto", is_flag=True, help="Also return the cost-vs-time Pareto front.")
@click.option("--engine", type=click.Choice(["cpsat", "brute"]), default="cpsat", show_default=True)
@click.option("--work-limit", type=POSITIVE, default=50_000.0, show_default=True,
              help="Work units for the search and its explanation, counted, not timed: the answer does not "
                   "depend on the machine's load (about 1 ms of CPU each; docs/input-rules.md#time-limits).")
@click.option("--time-limit", type=POSITIVE, default=600.0, show_default=True,
              help="Wall-clock seconds: an outer safety net, reached only on a very slow or loaded machine.")
@click.option("--plot", "plot_path", type=OutputPath(path_type=Path), default=None,
              help="Also draw the cost-vs-time Pareto front to FILE (.png, .svg, .pdf; implies --pareto; "
                   "needs vramplan[plot]).")
@click.option("--launch-config", "launch_path", type=OutputPath(path_type=Path), default=None,
              help="Also write the stack's own launch configuration for the plan to FILE (hf, unsloth: JSON of the "
                   "calls; deepspeed: JSON; megatron, torchtune, litgpt: shell arguments; torchtitan: TOML).")
@click.option("--report", "report_path", type=OutputPath(path_type=Path), default=None,
              help="Also write one self-contained HTML page: plan, memory chart, alternatives, front "
                   "(implies --pareto; needs vramplan[plot]).")
@catalogue_options
@output_options
def solve_command(**options: Any) -> None:
    """Find, prove and explain the best cluster and training configuration.

    Exit code 3 when nothing fits (the answer then explains why and what would).
    """
    from vramplan.commands import output, render_solve
    from vramplan.solver.api import (
        solve,  # ortools: imported when a solve runs, not for --help
    )

    if options["plot_path"] or options["report_path"]:
        from vramplan.commands import plot

        plot.require_matplotlib(options["plot_path"])  # before the solve, not after it
    output.claim(options, [("output", options["output"]), ("plot", options["plot_path"]),
                           ("report", options["report_path"]), ("launch-config", options["launch_path"])])
    catalogue = open_catalogue(options)
    query = build_query(options)
    if options["launch_path"] is not None:
        from vramplan.launch.configs import check_writer

        check_writer(query.job.stack)
    result = solve(catalogue, query)
    screen = output.screen_for(options["output"])
    chosen = output.chosen_format(options)
    render = {"table": lambda r: render_solve.solve_table(r, screen, options["verbose"]), "json": output.json_text,
              "csv": render_solve.solve_csv}
    output.emit(render[chosen](result), options["output"])
    _pictures(result, query, options)
    if options["launch_path"] is not None:
        _launch_config(catalogue, query, result, options["launch_path"])
    if result.status in ("infeasible", "unknown"):
        sys.exit(EXIT_INFEASIBLE)


def _launch_config(catalogue: Any, query: SolveQuery, result: SolveResult, path: Path) -> None:
    """The best plan as its stack's launch configuration (nothing written when nothing fits)."""
    from vramplan.commands import output
    from vramplan.launch.configs import launch_config, launch_model
    from vramplan.models.core.setup import Plan

    if not result.plans:
        why = "no plan fits" if result.status == "infeasible" else "the limit ran out before a plan was found"
        click.echo(f"warning: {why}, so there is no launch configuration; {path} not written", err=True)
        return
    choice = result.plans[0].plan
    plan = Plan(**{name: value for name, value in choice.model_dump().items() if name in Plan.model_fields})
    job = query.job  # the best plan's stack (`--stack any` chose it), its recipe defaults with it
    if choice.stack != job.stack:
        from vramplan.models.catalogue.catalogue import load_stacks
        from vramplan.models.catalogue.stack import restacked

        job = restacked(job, choice.stack, load_stacks())
    config = launch_config(job, plan, launch_model(catalogue, query.model))
    output.emit(config.text, path)


def _pictures(result: SolveResult, query: SolveQuery, options: dict[str, Any]) -> None:
    from vramplan.commands import output, plot, report

    if options["plot_path"] is not None:
        if result.pareto or result.plans:
            plot.save(plot.pareto_figure(result), options["plot_path"])
        else:
            click.echo(f"warning: no plan fits, so there is no front to draw; {options['plot_path']} not written",
                       err=True)
    if options["report_path"] is not None:
        output.emit(report.report_html(result, query), options["report_path"])
