"""`vramplan estimate`: one fixed training configuration, its memory per GPU, throughput and cost."""

from __future__ import annotations

import sys
from typing import Any

import click
from pydantic import ValidationError

from vramplan.commands import output
from vramplan.commands.exits import EXIT_INFEASIBLE
from vramplan.commands.options import (
    OFFLOAD_CHOICE,
    PRECISION_CHOICE,
    RECOMPUTE_CHOICE,
    ZERO_CHOICE,
    build_job,
    catalogue_options,
    job_options,
    open_catalogue,
    output_options,
    validation_error,
)
from vramplan.models.estimate import estimate
from vramplan.models.setup import Plan


@click.command("estimate")
@job_options
@click.option("--gpu", default="h100-sxm-80gb", show_default=True, help="GPU name (vramplan gpus).")
@click.option("--num-gpus", type=int, default=1, show_default=True, help="GPUs = tp x pp x cp x data-parallel ranks.")
@click.option("--offering", default=None, help="provider/instance_type to price [default: cheapest for the GPU].")
@click.option("--zero", type=ZERO_CHOICE, default="0", show_default=True, help="ZeRO stage.")
@click.option("--recompute", type=RECOMPUTE_CHOICE, default="none", show_default=True)
@click.option("--precision", type=PRECISION_CHOICE, default="bf16", show_default=True)
@click.option("--micro-batch", type=int, default=1, show_default=True, help="Sequences per GPU per micro-step.")
@click.option("--grad-accum", type=int, default=1, show_default=True, help="Gradient-accumulation steps.")
@click.option("--offload", type=OFFLOAD_CHOICE, default="none", show_default=True)
@click.option("--tp", type=int, default=1, show_default=True, help="Tensor-parallel degree (inside one instance).")
@click.option("--pp", type=int, default=1, show_default=True, help="Pipeline-parallel stages (1F1B).")
@click.option("--cp", type=int, default=1, show_default=True, help="Context-parallel degree (splits the sequence).")
@click.option("--ep", type=int, default=1, show_default=True, help="Expert-parallel degree (from the DP x CP ranks).")
@click.option("--vpp", type=int, default=1, show_default=True, help="Virtual stages per pipeline rank (interleaved 1F1B).")
@click.option("--sequence-parallel/--no-sequence-parallel", default=False, show_default=True,
              help="Megatron sequence parallelism with TP.")
@catalogue_options
@output_options
def estimate_command(**options: Any) -> None:
    """Memory per GPU, throughput and cost of one fixed training configuration.

    Exit code 3 when the plan does not fit.
    """
    catalogue = open_catalogue(options)
    job = build_job(options)
    try:
        plan = Plan(
            gpu=options["gpu"],
            offering=options["offering"],
            num_gpus=options["num_gpus"],
            zero=int(options["zero"]),
            recompute=options["recompute"],
            precision=options["precision"],
            micro_batch=options["micro_batch"],
            grad_accum=options["grad_accum"],
            offload=options["offload"],
            tp=options["tp"],
            pp=options["pp"],
            cp=options["cp"],
            ep=options["ep"],
            vpp=options["vpp"],
            sequence_parallel=options["sequence_parallel"],
        )
    except ValidationError as error:
        raise validation_error(error) from None
    result = estimate(catalogue, options["model"], job, plan, options["tokens"], options["pricing"])
    render = {"table": output.estimate_table, "json": output.json_text, "csv": output.estimate_csv}
    output.emit(render[options["output_format"]](result), options["output"])
    if not result.memory.fits:
        sys.exit(EXIT_INFEASIBLE)
