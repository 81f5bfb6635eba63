"""`vramplan estimate`: one fixed training configuration, its memory per GPU, throughput and cost."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from vramplan.commands.exits import EXIT_INFEASIBLE
from vramplan.commands.options import (
    COUNT,
    OFFLOAD_CHOICE,
    PRECISION_CHOICE,
    RECOMPUTE_CHOICE,
    ZERO_CHOICE,
    OnceCommand,
    OutputPath,
    build_job,
    catalogue_options,
    estimate_recompute_option,
    estimate_zero_option,
    job_options,
    open_catalogue,
    output_options,
    validation_error,
)


@click.command("estimate", cls=OnceCommand)
@job_options
@click.option("--gpu", default="h100-sxm-80gb", show_default=True, help="GPU name (vramplan gpus).")
@click.option("--num-gpus", type=COUNT, default=1, show_default=True, help="GPUs = tp x pp x cp x data-parallel ranks.")
@click.option("--offering", default=None, help="provider/instance_type to price [default: where the plan trains cheapest in all].")
@click.option("--zero", type=ZERO_CHOICE, default=None,
              help="ZeRO stage [default: 0; on several GPUs of a stack that shards every multi-GPU run (torchtune, "
                   "litgpt) its fullest stage, 3].")
@click.option("--recompute", type=RECOMPUTE_CHOICE, default=None,
              help="Activation recomputation; op = torchtitan per-op SAC [default: the stack's].")
@click.option("--precision", type=PRECISION_CHOICE, default="bf16", show_default=True)
@click.option("--micro-batch", type=COUNT, default=1, show_default=True, help="Sequences per GPU per micro-step.")
@click.option("--grad-accum", type=COUNT, default=1, show_default=True, help="Gradient-accumulation steps.")
@click.option("--offload", type=OFFLOAD_CHOICE, default="none", show_default=True)
@click.option("--tp", type=COUNT, default=1, show_default=True, help="Tensor-parallel degree (inside one instance).")
@click.option("--pp", type=COUNT, default=1, show_default=True, help="Pipeline-parallel stages (1F1B).")
@click.option("--cp", type=COUNT, default=1, show_default=True, help="Context-parallel degree (splits the sequence).")
@click.option("--ep", type=COUNT, default=1, show_default=True, help="Expert-parallel degree (from the DP x CP ranks).")
@click.option("--vpp", type=COUNT, default=1, show_default=True, help="Virtual stages per pipeline rank (interleaved 1F1B).")
@click.option("--sequence-parallel/--no-sequence-parallel", default=False, show_default=True,
              help="Megatron sequence parallelism with TP.")
@click.option("--stage-layers", default=None, metavar="SPLIT",
              help="Decoder layers of each pipeline rank, first to last, e.g. 7,8*14,7 (Megatron "
                   "--decoder-first/last-pipeline-num-layers or a layout) [default: even, the remainder on the "
                   "ranks before the last].")
@click.option("--launch-config", "launch_path", type=OutputPath(path_type=Path), default=None,
              help="Also write the stack's own launch configuration for the plan to FILE (hf, unsloth: JSON of the "
                   "calls; deepspeed: JSON; megatron, torchtune, litgpt: shell arguments; torchtitan: TOML).")
@click.option("--plot", "plot_path", type=OutputPath(path_type=Path), default=None,
              help="Also draw memory per GPU by pillar against limit and capacity to FILE (.png, .svg, .pdf; "
                   "needs vramplan[plot]).")
@catalogue_options
@output_options
def estimate_command(**options: Any) -> None:
    """Memory per GPU, throughput and cost of one fixed training configuration.

    Exit code 3 when the plan does not fit.
    """
    from pydantic import ValidationError

    from vramplan.commands import output, render_estimate  # loaded when the command runs, not on --help
    from vramplan.models.architecture.parallel import parse_split
    from vramplan.models.core.setup import Plan
    from vramplan.models.estimate import estimate

    if options["plot_path"] is not None:
        from vramplan.commands import plot

        plot.require_matplotlib(options["plot_path"])
    output.claim(options, [("output", options["output"]), ("plot", options["plot_path"]),
                           ("launch-config", options["launch_path"])])
    catalogue = open_catalogue(options)
    job = build_job(options)
    if options["launch_path"] is not None:
        from vramplan.launch.configs import check_writer

        check_writer(job.stack)
    try:
        plan = Plan(
            gpu=options["gpu"],
            offering=options["offering"],
            num_gpus=options["num_gpus"],
            zero=estimate_zero_option(options),
            recompute=estimate_recompute_option(options),
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
            stage_layers=None if options["stage_layers"] is None else parse_split(options["stage_layers"]),
        )
    except ValidationError as error:
        raise validation_error(error) from None
    result = estimate(catalogue, options["model"], job, plan, options["tokens"], options["pricing"],
                      options["restart_overhead"])
    screen = output.screen_for(options["output"])
    render = {"table": lambda r: render_estimate.estimate_table(r, screen), "json": output.json_text,
              "csv": render_estimate.estimate_csv}
    output.emit(render[output.chosen_format(options)](result), options["output"])
    if options["plot_path"] is not None:
        title = f"{result.model.name} on {result.plan.num_gpus} x {result.plan.gpu}, ZeRO-{result.plan.zero}"
        plot.save(plot.memory_figure(result.memory, title), options["plot_path"])
    if options["launch_path"] is not None and not result.memory.fits:  # as solve: no configuration that runs out of memory
        click.echo(f"warning: the plan does not fit, so there is no launch configuration; {options['launch_path']} "
                   "not written", err=True)
    elif options["launch_path"] is not None:
        from vramplan.launch.configs import launch_config, launch_model

        output.emit(launch_config(job, result.plan, launch_model(catalogue, options["model"])).text,
                    options["launch_path"])
    if not result.memory.fits:
        sys.exit(EXIT_INFEASIBLE)
