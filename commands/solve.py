"""`vramplan solve`: parse the question, call solver.api.solve, format the answer."""

from __future__ import annotations

import sys
from typing import Any

import click
from pydantic import ValidationError

from vramplan.commands import output
from vramplan.commands.exits import EXIT_INFEASIBLE
from vramplan.commands.options import (
    OFFLOAD_CHOICE,
    POSITIVE,
    PRECISION_CHOICE,
    RECOMPUTE_CHOICE,
    ZERO_CHOICE,
    catalogue_options,
    job_options,
    open_catalogue,
    option_fields,
    output_options,
    validation_error,
)
from vramplan.solver.api import solve
from vramplan.solver.query import OBJECTIVES, SolveQuery
from vramplan.solver.query_fields import query_from_fields


def build_query(options: dict[str, Any]) -> SolveQuery:
    """Repeatable --gpu/--provider also accept ';'- or ','-separated lists."""
    try:
        return query_from_fields(option_fields(options), top_k=options["top"], pareto=options["pareto"],
                                 engine=options["engine"], time_limit_s=options["time_limit"])
    except ValidationError as error:
        raise validation_error(error) from None


@click.command("solve")
@job_options
@click.option("--global-batch", type=int, default=None,
              help="Sequences per optimizer step = micro-batch x accumulation x GPUs [default: ~1M tokens].")
@click.option("--objective", type=click.Choice(OBJECTIVES), default="cost", show_default=True,
              help="cost = total USD for --tokens; time = wall hours; throughput = tokens/s; hourly = USD/hour.")
@click.option("--gpu", multiple=True, help="Allowed GPU (repeatable, or comma-separated) [default: all].")
@click.option("--provider", multiple=True, help="Allowed provider (repeatable, or comma-separated) [default: all].")
@click.option("--max-gpus", type=int, default=512, show_default=True)
@click.option("--max-nodes", type=int, default=None, help="Most instances to rent.")
@click.option("--budget-usd", type=POSITIVE, default=None, help="Most USD for the whole job.")
@click.option("--deadline-hours", type=POSITIVE, default=None, help="Most wall-clock hours for the whole job.")
@click.option("--zero", type=ZERO_CHOICE, default=None, help="Pin the ZeRO stage.")
@click.option("--recompute", type=RECOMPUTE_CHOICE, default=None, help="Pin activation recomputation.")
@click.option("--precision", type=PRECISION_CHOICE, default=None,
              help="Pin the precision [default: bf16, fp16 on GPUs without bf16].")
@click.option("--micro-batch", type=int, default=None, help="Pin the micro-batch.")
@click.option("--offload", type=OFFLOAD_CHOICE, default=None, help="Pin ZeRO-Offload.")
@click.option("--num-gpus", type=int, default=None, help="Pin the GPU count.")
@click.option("--top", type=click.IntRange(1, 100), default=3, show_default=True, help="Best K distinct plans.")
@click.option("--pareto", is_flag=True, help="Also return the cost-vs-time Pareto front.")
@click.option("--engine", type=click.Choice(["cpsat", "brute"]), default="cpsat", show_default=True)
@click.option("--time-limit", type=POSITIVE, default=10.0, show_default=True, help="Seconds for the solver.")
@catalogue_options
@output_options
def solve_command(**options: Any) -> None:
    """Find, prove and explain the best cluster and training configuration.

    Exit code 3 when nothing fits (the answer then explains why and what would).
    """
    catalogue = open_catalogue(options)
    result = solve(catalogue, build_query(options))
    render = {"table": output.solve_table, "json": output.json_text, "csv": output.solve_csv}
    output.emit(render[options["output_format"]](result), options["output"])
    if result.status in ("infeasible", "unknown"):
        sys.exit(EXIT_INFEASIBLE)
