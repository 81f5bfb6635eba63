"""vramplan command line: parse options, call the library, format the answer.

Exit codes: 0 ok, 1 error (I/O, internal), 2 bad input (usage, invalid value), 3 infeasible or
unsolved (a plan that does not fit, a solve with no answer). Results go to stdout, errors to stderr
as one line; never a traceback (set VRAMPLAN_DEBUG=1 to see one).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click
from pydantic import ValidationError

import cli_output
from cli_options import (
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
from models.catalogue import Catalogue
from models.errors import VramplanError
from models.estimate import estimate
from models.params import count_params
from models.setup import Plan

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INFEASIBLE = 0, 1, 2, 3


def _exit_code(invoke) -> int:
    """Run invoke(); turn every failure into one line on stderr and an exit code."""
    try:
        invoke()
    except click.exceptions.Exit as stop:
        return stop.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.UsageError as error:
        click.echo(f"error: {error.format_message()}", err=True)
        return EXIT_USAGE
    except VramplanError as error:
        click.echo(f"error: {error}", err=True)
        return EXIT_USAGE
    except click.ClickException as error:
        click.echo(f"error: {error.format_message()}", err=True)
        return EXIT_ERROR
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else EXIT_ERROR
    except Exception as error:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        if os.environ.get("VRAMPLAN_DEBUG"):
            raise
        click.echo(f"internal error: {type(error).__name__}: {error}", err=True)
        return EXIT_ERROR
    return EXIT_OK


class VramplanGroup(click.Group):
    """A click group whose errors are one line and whose exit codes are documented."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        code = _exit_code(
            lambda: super(VramplanGroup, self).main(
                args=args, prog_name=prog_name or "vramplan", complete_var=complete_var, standalone_mode=False, **extra
            )
        )
        if standalone_mode:
            sys.exit(code)
        return code


@click.group(cls=VramplanGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="vramplan")
def main() -> None:
    """Plan GPU clusters and training configurations that fit in memory, cheapest or fastest."""


@main.command()
@job_options
@click.option("--gpu", default="h100-sxm-80gb", show_default=True, help="GPU name (vramplan gpus).")
@click.option("--num-gpus", type=int, default=1, show_default=True, help="GPUs; all are data-parallel ranks.")
@click.option("--offering", default=None, help="provider/instance_type to price [default: cheapest for the GPU].")
@click.option("--zero", type=ZERO_CHOICE, default="0", show_default=True, help="ZeRO stage.")
@click.option("--recompute", type=RECOMPUTE_CHOICE, default="none", show_default=True)
@click.option("--precision", type=PRECISION_CHOICE, default="bf16", show_default=True)
@click.option("--micro-batch", type=int, default=1, show_default=True, help="Sequences per GPU per micro-step.")
@click.option("--grad-accum", type=int, default=1, show_default=True, help="Gradient-accumulation steps.")
@click.option("--offload", type=OFFLOAD_CHOICE, default="none", show_default=True)
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
        )
    except ValidationError as error:
        raise validation_error(error) from None
    result = estimate(catalogue, options["model"], job, plan, options["tokens"], options["pricing"])
    render = {"table": cli_output.estimate_table, "json": cli_output.json_text, "csv": cli_output.estimate_csv}
    cli_output.emit(render[options["output_format"]](result), options["output"])
    if not result.memory.fits:
        sys.exit(EXIT_INFEASIBLE)


estimate_command.name = "estimate"


def _listing(rows: list[dict[str, Any]], columns: list[str], title: str, options: dict[str, Any]) -> None:
    fmt = options["output_format"]
    if fmt == "json":
        text = cli_output.json_text(rows)
    elif fmt == "csv":
        text = cli_output.csv_text(rows)
    else:
        text = cli_output.listing_table(rows, columns, title)
    cli_output.emit(text, options["output"])


@main.command()
@catalogue_options
@output_options
def gpus(**options: Any) -> None:
    """List the GPU catalogue."""
    catalogue: Catalogue = open_catalogue(options)
    rows = [g.model_dump() for g in catalogue.gpus.values()]
    columns = ["name", "memory_usable_mib", "bf16_dense_tflops", "fp8_dense_tflops", "hbm_bandwidth_gb_per_s",
               "intra_node_bandwidth_gb_per_s", "network_bandwidth_gb_per_s", "gpus_per_node"]
    _listing(rows, columns, "GPUs (dense TFLOPS; usable MiB as the driver reports)", options)


@main.command()
@catalogue_options
@output_options
def models(**options: Any) -> None:
    """List the architecture catalogue with exact parameter counts."""
    catalogue = open_catalogue(options)
    rows = []
    for arch in catalogue.architectures.values():
        counts = count_params(arch)
        rows.append({"name": arch.name, "num_params": counts.total, "num_active_params": counts.active,
                     **arch.model_dump(exclude={"name"})})
    columns = ["name", "num_params", "model_type", "num_layers", "hidden_size", "num_attention_heads",
               "num_kv_heads", "intermediate_size", "vocab_size", "num_experts"]
    _listing(rows, columns, "Architectures (exact parameter counts)", options)


@main.command()
@catalogue_options
@output_options
def offerings(**options: Any) -> None:
    """List the offerings (how GPUs are rented) with their dated prices."""
    catalogue = open_catalogue(options)
    rows = [{"name": o.name, **o.model_dump(), "price_usd_per_gpu_hour": round(o.price_usd_per_gpu_hour, 4)}
            for o in catalogue.offerings.values()]
    columns = ["name", "gpu", "num_gpus", "price_usd_per_hour", "spot_price_usd_per_hour",
               "price_usd_per_gpu_hour", "host_memory_gib", "price_date"]
    _listing(rows, columns, "Offerings (USD per instance-hour; dated, prices go stale)", options)




from cli_solve import solve_command  # noqa: E402

main.add_command(solve_command)

from cli_batch import batch  # noqa: E402

main.add_command(batch)
