"""Click options shared by the vramplan commands, and their conversion into library inputs."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from vramplan.models.catalogue import Catalogue, load_catalogue
from vramplan.models.errors import VramplanError, from_validation_error
from vramplan.models.setup import (
    METHODS,
    OFFLOADS,
    OPTIMIZERS,
    PRECISIONS,
    RECOMPUTES,
    Job,
    RuntimeReserve,
)
from vramplan.solver.query_fields import job_from_fields

FORMATS = ("table", "json", "csv")


class PositiveNumber(click.ParamType):
    """A finite number > 0 that may be written 2e9 (token counts, budgets, hours)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number) or number <= 0:
            self.fail(f"{value!r} must be a finite number > 0", param, ctx)
        return number


POSITIVE = PositiveNumber()


def _stack(*decorators: Callable) -> Callable:
    def apply(function: Callable) -> Callable:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


catalogue_options = _stack(
    click.option("--gpus-csv", type=click.Path(path_type=Path), help="Your own GPU catalogue (same schema)."),
    click.option("--offerings-csv", type=click.Path(path_type=Path), help="Your own offerings/prices (same schema)."),
    click.option("--models-csv", type=click.Path(path_type=Path), help="Your own architectures (same schema)."),
)

output_options = _stack(
    click.option("--format", "output_format", type=click.Choice(FORMATS), default="table", show_default=True),
    click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the result to FILE instead of stdout."),
)

job_options = _stack(
    click.option("--model", required=True, help="Catalogue name (vramplan models), path to a HF config.json, or a hub id (Org/Name)."),
    click.option("--method", type=click.Choice(METHODS), default="full", show_default=True),
    click.option("--lora-rank", type=int, default=16, show_default=True, help="LoRA rank r."),
    click.option("--lora-targets", default=None, help="Comma-separated PEFT target_modules [default: all linear]."),
    click.option("--qlora-bits", type=click.Choice(["4", "8"]), default="4", show_default=True,
                 help="QLoRA base: 4 = NF4 with double quantisation, 8 = LLM.int8."),
    click.option("--seq-len", type=int, default=2048, show_default=True, help="Tokens per sequence."),
    click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="adamw", show_default=True),
    click.option("--accounting", type=click.Choice(["zero", "hf"]), default="zero", show_default=True,
                 help="Gradient dtype convention: zero = 16-bit grads (16 B/param), hf = fp32 grads (18 B/param)."),
    click.option("--attention", type=click.Choice(["flash", "eager"]), default="flash", show_default=True,
                 help="flash = FlashAttention/SDPA (no s x s matrix), eager = materialised scores."),
    click.option("--kernels", type=click.Choice(["eager", "fused"]), default="eager", show_default=True,
                 help="eager = Hugging Face module code; fused = Megatron/TransformerEngine kernels."),
    click.option("--capacity-fraction", type=float, default=0.9, show_default=True,
                 help="Plan to at most this fraction of GPU (and host) memory."),
    click.option("--cuda-context-mib", type=int, default=RuntimeReserve().cuda_context_mib, show_default=True),
    click.option("--cublas-workspace-mib", type=int, default=RuntimeReserve().cublas_workspace_mib, show_default=True),
    click.option("--nccl-mib", type=int, default=RuntimeReserve().nccl_mib, show_default=True,
                 help="NCCL buffers, counted when more than one GPU."),
    click.option("--tokens", type=POSITIVE, default=1e9, show_default=True, help="Tokens to train on (2e9 works)."),
    click.option("--pricing", type=click.Choice(["on-demand", "spot"]), default="on-demand", show_default=True),
)

PRECISION_CHOICE = click.Choice(PRECISIONS)
RECOMPUTE_CHOICE = click.Choice(RECOMPUTES)
OFFLOAD_CHOICE = click.Choice(OFFLOADS)
ZERO_CHOICE = click.Choice(["0", "1", "2", "3"])


def validation_error(error: ValidationError) -> VramplanError:
    """The first pydantic error as a one-line VramplanError naming the field and value."""
    return from_validation_error(error)


def option_fields(options: dict[str, Any]) -> dict[str, Any]:
    """Click's parsed options as the flat fields of solver.query_fields (choices given as text
    become numbers; repeatable --gpu/--provider become the gpus/providers lists)."""
    fields = dict(options)
    for name in ("qlora_bits", "zero"):
        if fields.get(name) is not None:
            fields[name] = int(fields[name])
    fields["gpus"] = options.get("gpu") if isinstance(options.get("gpu"), tuple) else None
    fields["providers"] = options.get("provider")
    return fields


def build_job(options: dict[str, Any]) -> Job:
    try:
        return job_from_fields(option_fields(options))
    except ValidationError as error:
        raise validation_error(error) from None


def open_catalogue(options: dict[str, Any]) -> Catalogue:
    return load_catalogue(options.get("gpus_csv"), options.get("offerings_csv"), options.get("models_csv"))
