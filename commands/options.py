"""Click options shared by the vramplan commands, and their conversion into library inputs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

# Only plain constants at import time: a command's --help builds these options, and pydantic,
# the models and the solver are imported when the command runs (bench/help_bench.py).
from vramplan.models.core.choices import (
    BASE_DTYPES,
    COMPILES,
    CUBLAS_WORKSPACE_MIB,
    CUDA_CONTEXT_MIB,
    CUDA_GRAPHS,
    LOSSES,
    MASTER_WEIGHTS,
    MEMORY_BOUNDS,
    METHODS,
    MOE_DISPATCHERS,
    NCCL_MIB,
    OFFLOADS,
    OPTIMIZERS,
    PRECISIONS,
    QLORA_PREPS,
    RECOMPUTES,
    SELECTIVES,
    STACKS,
)
from vramplan.models.core.errors import VramplanError, from_validation_error

if TYPE_CHECKING:
    from pydantic import ValidationError

    from vramplan.models.catalogue.catalogue import Catalogue
    from vramplan.models.core.setup import Job

FORMATS = ("table", "json", "csv")


class FilePath(click.Path):
    """click.Path that refuses an empty or blank name: Path('') is '.', so `-o ''` (an unset shell
    variable) was reported as `output='.': cannot write: it is a folder` and `--gpus-csv ''` as
    `gpus_csv='.'`, a path the user never typed. Every path option and argument takes this type."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(f"{value!r} is {'blank' if value else 'empty'}: name a {'file' if self.file_okay else 'folder'}", param, ctx)
        return super().convert(value, param, ctx)


class OutputPath(FilePath):
    """A file a command writes: a name ending in a path separator names a folder, and is refused.
    pathlib drops the trailing '/', so `-o newdir/` wrote a file named newdir and `-o plans.csv/`
    replaced plans.csv, where the shell and open() say 'Not a directory'. Every output option (-o,
    --plot, --report, --launch-config, --pools-out) takes this type."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip() and value.endswith(("/", os.sep)):
            self.fail(f"{value!r} ends in '/', which names a folder: name a file", param, ctx)
        return super().convert(value, param, ctx)


class OnceCommand(click.Command):
    """A command whose options are each given once: click let the last of a repeated option win
    silently (`estimate --gpu h100-sxm-80gb --gpu a100-sxm-80gb` estimated the A100 alone,
    `--sequence-parallel --no-sequence-parallel` was off). Repeatable options (`solve --gpu`,
    `--quota`, `--cloud`) and a plain flag given twice (`--pareto --pareto`) mean nothing else and pass."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            _refuse_repeated_options(self, ctx, args)
        return super().parse_args(ctx, args)


def _refuse_repeated_options(command: click.Command, ctx: click.Context, args: list[str]) -> None:
    try:
        _, _, order = command.make_parser(ctx).parse_args(args=list(args))
    except click.UsageError:
        return  # click's own parse, next, says what is wrong
    seen: set[str] = set()
    for param in order:
        if not isinstance(param, click.Option) or param.multiple or param.count:
            continue
        if param.is_flag and not param.secondary_opts:
            continue
        if param.name in seen:
            names = " / ".join(repr(name) for name in param.opts + param.secondary_opts)
            raise click.UsageError(f"{names} is given more than once: give it once", ctx)
        seen.add(param.name or "")


class GrammarNumber(click.ParamType):
    """A number in the one grammar of models/core/numbers.py (the batch sheet's too); its range is checked
    by the pydantic field it fills."""

    def __init__(self, name: str, parser: str) -> None:
        self.name, self._parser = name, parser  # a models.numbers function, imported when a value comes

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # a default already parsed
        from vramplan.models.core import numbers
        parse: Callable[[str, Any], Any] = getattr(numbers, self._parser)
        try:
            return parse(param.name if param is not None and param.name else "value", value)
        except VramplanError as error:  # one line naming the option as typed, exit 2
            self.fail(f"{error.value!r} {error.reason}", param, ctx)


class StackChoice(click.ParamType):
    """A stack name; for `solve` also `any` (every stack but custom) or several, comma-separated,
    which the search chooses between (solver/query_fields.py stack_list)."""

    name = "stack"

    def __init__(self, several: bool) -> None:
        self.several = several

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(STACKS) + ("|any|A,B" if self.several else "") + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        names = [v.strip() for v in str(value).split(",") if v.strip()]
        several = len(names) > 1 or names == ["any"]
        unknown = [n for n in names if n not in STACKS and n != "any"]
        if unknown or not names:
            self.fail(f"{value!r} is not one of {', '.join(STACKS)}" + (", any" if self.several else ""), param, ctx)
        if several and not self.several:
            self.fail(f"{value!r}: estimate takes one stack", param, ctx)
        return value


class CountRange(GrammarNumber):
    """A whole number in the grammar (ASCII digits: click's IntRange took `--workers ٢` and `--seed ５`
    through Python's int()) within [low, high]."""

    def __init__(self, low: int, high: int) -> None:
        super().__init__("integer range", "parse_count")
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not self.low <= number <= self.high:
            self.fail(f"{value!r} is not in the range {self.low}<=x<={self.high}", param, ctx)
        return number


COUNT = GrammarNumber("integer", "parse_count")
REAL = GrammarNumber("number", "parse_real")
POSITIVE = GrammarNumber("number", "parse_positive")


def _stack(*decorators: Callable) -> Callable:
    def apply(function: Callable) -> Callable:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


catalogue_options = _stack(
    click.option("--gpus-csv", type=FilePath(path_type=Path), help="Your own GPU catalogue (same schema)."),
    click.option("--offerings-csv", type=FilePath(path_type=Path), help="Your own offerings/prices (same schema)."),
    click.option("--models-csv", type=FilePath(path_type=Path), help="Your own architectures (same schema)."),
)

output_options = _stack(
    click.option("--format", "output_format", type=click.Choice(FORMATS), default=None,
                 help="Output format [default: from the -o file's extension (.json, .csv), else table]."),
    click.option("-o", "--output", type=OutputPath(path_type=Path), help="Write the result to FILE instead of stdout."),
)

job_options = _stack(
    click.option("--model", required=True, help="Catalogue name (vramplan models), path to a HF config.json, or a hub id (Org/Name)."),
    click.option("--method", type=click.Choice(METHODS), default="full", show_default=True),
    click.option("--lora-rank", type=COUNT, default=16, show_default=True, help="LoRA rank r."),
    click.option("--lora-dropout", type=REAL, default=0.0, show_default=True,
                 help="PEFT lora_dropout; above 0 each adapter keeps its own dropped-out input."),
    click.option("--lora-targets", default=None, help="Comma-separated PEFT target_modules [default: all linear]."),
    click.option("--qlora-bits", type=click.Choice(["4", "8"]), default="4", show_default=True,
                 help="QLoRA base: 4 = NF4 with double quantisation, 8 = LLM.int8."),
    click.option("--seq-len", type=COUNT, default=2048, show_default=True, help="Tokens per sequence."),
    click.option("--stack", type=StackChoice(several=True), default=None,
                 help="Training stack whose defaults fill every recipe option not given, and whose "
                      "capabilities bound the plans [default: hf; custom: no limits]; `solve` also takes "
                      "`any` or several, comma-separated, and chooses the stack too; see `vramplan stacks`."),
    click.option("--optimizer", type=click.Choice(OPTIMIZERS), default=None,
                 help="adamw-8bit-paged = bitsandbytes PagedAdamW8bit (states outside the torch allocator) "
                      "[default: the stack's]."),
    click.option("--accounting", type=click.Choice(["zero", "hf"]), default=None,
                 help="Gradient dtype convention: zero = 16-bit grads (16 B/param), hf = fp32 grads (18 B/param) "
                      "[default: the stack's]."),
    click.option("--attention", type=click.Choice(["flash", "eager"]), default=None,
                 help="flash = FlashAttention/SDPA (no s x s matrix), eager = materialised scores [default: the stack's]."),
    click.option("--kernels", type=click.Choice(["eager", "fused"]), default=None,
                 help="eager = Hugging Face module code; fused = Megatron/TransformerEngine kernels [default: the stack's]."),
    click.option("--master-weights", type=click.Choice(MASTER_WEIGHTS), default=None,
                 help="fp32 = mixed precision with an fp32 master copy; none = pure 16-bit (bf16-true) "
                      "[default: the stack's]."),
    click.option("--loss", type=click.Choice(LOSSES), default=None,
                 help="eager = the kernels' own loss; chunked = torchtune CEWithChunkedOutputLoss; "
                      "fused = Liger / Cut Cross-Entropy fused linear cross-entropy [default: the stack's]."),
    click.option("--loss-chunks", type=COUNT, default=None, help="Chunks of --loss chunked [default: the stack's, 8]."),
    click.option("--selective", type=click.Choice(SELECTIVES), default=None,
                 help="What --recompute selective means: attention = Korthikanti/Megatron attention core, "
                      "op = torchtitan per-op SAC [default: the stack's]."),
    click.option("--recompute-layers", type=COUNT, default=None,
                 help="Layers --recompute full checkpoints in each pipeline stage (each model chunk: Megatron "
                      "--recompute-num-layers, block method) [default: all]."),
    click.option("--optimizer-in-backward/--no-optimizer-in-backward", default=None,
                 help="Step each parameter in its gradient hook (torchtune optimizer_in_bwd): no full gradient buffer."),
    click.option("--activation-offload/--no-activation-offload", default=None,
                 help="Offload saved activations to host memory (torchtune OffloadActivations, Unsloth checkpointing)."),
    click.option("--compile", "compile", type=click.Choice(COMPILES), is_flag=False, flag_value="model+loss",
                 default=None,
                 help="torch.compile: alone, the decoder blocks and the loss (model+loss: torchtitan --compile.enable, "
                      "torchtune compile: True); `--compile model` the blocks only; `--compile none` = --no-compile "
                      "(the batch column's values) [default: the stack's]."),
    click.option("--no-compile", "no_compile", is_flag=True, default=False,
                 help="No torch.compile: eager element-wise ops, fp32 loss copies [default: the stack's]."),
    click.option("--tp-overlap/--no-tp-overlap", "tp_overlap", default=None,
                 help="TP communication overlapped with the GEMMs, forward and backward (Megatron --tp-comm-overlap, "
                      "torchtitan async TP, which needs --compile); with sequence parallelism only "
                      "[default: the stack's]."),
    click.option("--moe-dispatcher", type=click.Choice(MOE_DISPATCHERS), default=None,
                 help="The MoE token dispatcher of expert parallelism: alltoall (one copy per chosen expert), or "
                      "Megatron's flex dispatcher on DeepEP / HybridEP (one copy per remote node, forwarded over "
                      "NVLink; torchtitan runs deepep) [default: the stack's]."),
    click.option("--moe-a2a-overlap/--no-moe-a2a-overlap", "moe_a2a_overlap", default=None,
                 help="EP all-to-alls overlapped with another micro-batch's compute (Megatron "
                      "--overlap-moe-expert-parallel-comm): needs EP > 1, interleaved stages under a pipeline, no "
                      "full recompute, no --recompute-layers and no activation offload [default: the stack's]."),
    click.option("--cuda-graphs", type=click.Choice(CUDA_GRAPHS), default=None,
                 help="CUDA graphs of the step (Megatron --cuda-graph-impl): attn = Transformer Engine's per-layer "
                      "graphs of the attention, MoE router and preprocess; full-iteration = the forward-backward as "
                      "one graph. They shorten what a MoE layer waits for the host; their memory pools and a MoE's "
                      "capacity padding are not in the memory estimate [default: the stack's, none]."),
    click.option("--qlora-prep", type=click.Choice(QLORA_PREPS), default=None,
                 help="peft = prepare_model_for_kbit_training casts non-quantised parameters to fp32; "
                      "16bit = torchtune / torchao / Unsloth [default: the stack's]."),
    click.option("--fragmentation-fraction", type=REAL, default=None,
                 help="Allocator fragmentation reserve as a fraction of the largest transient block "
                      "[default: the stack's]."),
    click.option("--capacity-fraction", type=REAL, default=0.9, show_default=True,
                 help="Plan to at most this fraction of GPU (and host) memory."),
    click.option("--base-dtype", type=click.Choice(BASE_DTYPES), default="16bit", show_default=True,
                 help="LoRA's unquantised frozen base as loaded: 16bit, or fp32 (a model loaded in fp32 that FSDP "
                      "keeps so, as PEFT's examples/sft does)."),
    click.option("--memory-bound", type=click.Choice(MEMORY_BOUNDS), default="estimate", show_default=True,
                 help="What must fit under the limit: the estimate, or the top of its range (the stack's "
                      "published runs: docs/fidelity.md#ranges)."),
    click.option("--cuda-context-mib", type=COUNT, default=CUDA_CONTEXT_MIB, show_default=True),
    click.option("--cublas-workspace-mib", type=COUNT, default=CUBLAS_WORKSPACE_MIB, show_default=True),
    click.option("--nccl-mib", type=COUNT, default=NCCL_MIB, show_default=True,
                 help="NCCL buffers, counted when more than one GPU."),
    click.option("--tokens", type=POSITIVE, default=1e9, show_default=True, help="Tokens to train on (2e9 works)."),
    click.option("--pricing", type=click.Choice(["on-demand", "spot", "1yr", "3yr"]), default="on-demand", show_default=True,
                 help="on-demand, spot, or the effective hourly price of a 1-year / 3-year commitment."),
    click.option("--restart-overhead", type=REAL, default=0.0, show_default=True,
                 help="On spot: the share of the work preemptions make the run do again (0.1 = 10% more hours)."),
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
    if fields.pop("no_compile", False):
        if fields.get("compile") not in (None, "none"):
            raise VramplanError("no-compile", True, f"contradicts --compile {fields['compile']}")
        fields["compile"] = "none"
    for name in ("qlora_bits", "zero"):
        if fields.get(name) is not None:
            fields[name] = int(fields[name])
    fields["gpus"] = options.get("gpu") if isinstance(options.get("gpu"), tuple) else None
    fields["providers"] = options.get("provider")
    fields["regions"] = options.get("region")
    fields["countries"] = options.get("country")
    return fields


def _given(name: str) -> bool:
    """Whether the user typed the option (not its default), for the command being run."""
    from click.core import ParameterSource

    context = click.get_current_context(silent=True)
    return context is not None and context.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                                                          ParameterSource.ENVIRONMENT)


def refuse_contradictions(options: dict[str, Any], job: Job) -> None:
    """Options that cannot mean anything together are bad input (exit 2), not silently ignored
    (solver/query_fields.py refuse_contradictions, the rules a batch row's cells are held to too)."""
    from vramplan.solver.query_fields import refuse_contradictions as refuse

    refuse(_given, options, job, lambda name: name.replace("_", "-"), "--")
    if options.get("sequence_parallel") is True and options.get("tp") == 1:
        raise VramplanError("sequence-parallel", True, "shards what tensor parallelism replicates: it needs --tp > 1")
    if job.tp_overlap and _given("tp_overlap") and options.get("sequence_parallel") is False and (options.get("tp") or 1) > 1:
        raise VramplanError("tp-overlap", True, "overlaps sequence parallelism's all-gathers / reduce-scatters with the "
                                                "GEMMs (Megatron-LM asserts --sequence-parallel with it): add --sequence-parallel")


def build_job(options: dict[str, Any]) -> Job:
    from pydantic import ValidationError

    from vramplan.solver.query_fields import job_from_fields

    try:
        job = job_from_fields(option_fields(options), refused_later=True)
    except ValidationError as error:
        raise validation_error(error) from None
    refuse_contradictions(options, job)
    return job


def estimate_recompute_option(options: dict[str, Any]) -> str:
    """`--recompute` as given, else the --stack preset's default (one the stack runs on --num-gpus)."""
    from vramplan.solver.query_fields import estimate_recompute

    return estimate_recompute(option_fields(options))


def estimate_zero_option(options: dict[str, Any]) -> int:
    """`--zero` as given, else 0, or the stack's sharded stage where it shards every multi-GPU run."""
    from vramplan.solver.query_fields import estimate_zero

    return estimate_zero(option_fields(options))


def catalogue_files(options: Mapping[str, Any]) -> list[tuple[str, Path | None]]:
    """The catalogue CSVs the options name (None: the packaged one), as (option, path): the files
    open_catalogue reads, which no output may replace."""
    return [("gpus-csv", options.get("gpus_csv")), ("offerings-csv", options.get("offerings_csv")),
            ("models-csv", options.get("models_csv"))]


def open_catalogue(options: dict[str, Any]) -> Catalogue:
    from vramplan.models.catalogue.catalogue import load_catalogue

    return load_catalogue(options.get("gpus_csv"), options.get("offerings_csv"), options.get("models_csv"))


models_dir_option = click.option(
    "--models-dir", type=FilePath(exists=True, file_okay=False, path_type=Path), default=None,
    help="A `model` cell that is a path is read only inside this folder [default: the jobs file's folder].")


def models_dir_of(options: dict[str, Any]) -> Path:
    """The folder a sheet's config paths must stay in: --models-dir, else the jobs file's folder
    (docs/input-rules.md#paths-in-a-batch-sheet; batch and fleet read their sheets alike)."""
    return options.get("models_dir") or options["jobs"].resolve().parent
