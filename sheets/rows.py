"""One row of a `vramplan batch` spreadsheet: its columns, its job, and its answer as flat cells.

A row's raw cells (strings from a CSV, numbers or strings from XLSX/Parquet; empty = default) are
validated by pydantic into a SolveQuery exactly like `vramplan solve`'s options; a bad cell is a
one-line VramplanError naming the column and the value. The answer of a solve is flattened into
the answer columns (ANSWER_COLUMNS), the same for every row, whatever its status.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from vramplan.models.architecture.parallel import split_label
from vramplan.models.core.errors import VramplanError, closest_names, from_validation_error
from vramplan.models.core.numbers import Count, Real
from vramplan.models.core.results import PILLARS
from vramplan.models.core.setup import RuntimeReserve
from vramplan.models.core.units import BYTES_PER_GIB
from vramplan.solver.query import SolveQuery, SolveResult
from vramplan.solver.query_fields import query_from_fields, refuse_contradictions

# Input columns: name -> (default as docs/batch.md states it, what it is), in docs/batch.md's order.
INPUT_COLUMNS: dict[str, tuple[str, str]] = {
    "id": ("", "your label for the row; copied to the output, not part of the job"),
    "model": ("required", "catalogue name (vramplan models) or a Hugging Face config.json inside --models-dir "
                          "(a sheet never resolves hub ids)"),
    "method": ("full", "full | lora | qlora"),
    "seq_len": ("required", "tokens per sequence"),
    "global_batch": ("about 1M tokens / seq_len", "sequences per optimizer step"),
    "tokens": ("1e9", "tokens to train on"),
    "objective": ("cost", "cost | time | throughput | hourly"),
    "max_gpus": ("512", "most GPUs"),
    "max_nodes": ("no limit", "most instances to rent"),
    "gpus": ("all", "allowed GPU names, separated by ;"),
    "providers": ("all", "allowed providers, separated by ;"),
    "regions": ("all", "allowed regions (us-east-1), separated by ;"),
    "countries": ("all", "allowed countries (ISO 3166-1 alpha-2: DE), separated by ;"),
    "jurisdiction": ("anywhere", "eu: offerings in EU member states only"),
    "budget_usd": ("no limit", "most USD for the whole job"),
    "deadline_hours": ("no limit", "most wall-clock hours for the whole job"),
    "min_mfu": ("0.05", "least MFU (of the 16-bit peak) a plan on several GPUs may run at; 0 lifts it"),
    "max_days": ("365", "most days a plan may take when no deadline_hours is given; 0 lifts it"),
    "lora_rank": ("16", "LoRA rank r"),
    "lora_dropout": ("0", "PEFT lora_dropout; above 0 each adapter keeps its own dropped-out input"),
    "lora_targets": ("all linear", "PEFT target_modules, separated by ;"),
    "qlora_bits": ("4", "4 (NF4) | 8 (LLM.int8)"),
    "optimizer": ("the stack's", "adamw | adamw-8bit | sgd | adamw-8bit-paged"),
    "accounting": ("the stack's", "zero (16-bit gradients) | hf (fp32 gradients)"),
    "attention": ("the stack's", "flash | eager"),
    "kernels": ("the stack's", "eager | fused"),
    "capacity_fraction": ("0.9", "plan to at most this fraction of GPU memory"),
    "memory_bound": ("estimate", "estimate | upper: what must fit, the estimate or the top of its range"),
    "base_dtype": ("16bit", "16bit | fp32: LoRA's unquantised frozen base as loaded"),
    "cuda_context_mib": (str(RuntimeReserve().cuda_context_mib), "CUDA context per GPU"),
    "cublas_workspace_mib": (str(RuntimeReserve().cublas_workspace_mib), "cuBLAS workspace per GPU"),
    "nccl_mib": (str(RuntimeReserve().nccl_mib), "NCCL buffers per GPU (more than one GPU)"),
    "pricing": ("on-demand", "on-demand | spot | 1yr | 3yr"),
    "restart_overhead": ("0", "on spot: the share of the work preemptions make the run do again"),
    "zero": ("solver chooses", "pin the ZeRO stage: 0 | 1 | 2 | 3"),
    "recompute": ("solver chooses", "pin recomputation: none | selective | op | full"),
    "precision": ("solver chooses", "pin the precision: bf16 | fp16 | fp32 | fp8"),
    "micro_batch": ("solver chooses", "pin the micro-batch"),
    "offload": ("solver chooses", "pin ZeRO-Offload: none | optimizer | optimizer+params"),
    "num_gpus": ("solver chooses", "pin the GPU count"),
    "tp": ("solver chooses (1-8)", "pin the tensor-parallel degree (inside one instance)"),
    "pp": ("solver chooses (1-16)", "pin the pipeline-parallel stages"),
    "cp": ("solver chooses (1-8 from 16k tokens)", "pin the context-parallel degree"),
    "ep": ("solver chooses (1-8)", "pin the expert-parallel degree (MoE)"),
    "vpp": ("1", "pin the virtual pipeline stages per rank (interleaved 1F1B)"),
    "sequence_parallel": ("on with TP", "true | false: pin Megatron sequence parallelism"),
    "stack": ("hf", "hf | deepspeed | megatron | torchtitan | torchtune | litgpt | unsloth: the recipe defaults"),
    "master_weights": ("the stack's", "fp32 | none (pure 16-bit)"),
    "loss": ("the stack's", "eager | chunked | fused"),
    "loss_chunks": ("the stack's", "chunks of the chunked loss"),
    "selective": ("the stack's", "what recompute=selective means: attention | op"),
    "recompute_layers": ("all", "layers full recompute checkpoints"),
    "optimizer_in_backward": ("the stack's", "true | false: no full gradient buffer"),
    "activation_offload": ("the stack's", "true | false: saved activations in host memory"),
    "qlora_prep": ("the stack's", "16bit | peft (non-quantised parameters in fp32)"),
    "fragmentation_fraction": ("the stack's", "reserve as a fraction of the largest transient block"),
    "compile": ("the stack's", "true | false | model: torch.compile the blocks and the loss, nothing, or the "
                               "blocks only"),
    "tp_overlap": ("the stack's", "true | false: TP communication overlapped with the GEMMs (Megatron "
                                  "--tp-comm-overlap, torchtitan async TP)"),
    "moe_dispatcher": ("the stack's", "alltoall | deepep | hybridep: the EP token dispatcher (Megatron's "
                                      "all-to-all, or its flex dispatcher on DeepEP / HybridEP)"),
    "moe_a2a_overlap": ("the stack's", "true | false: EP all-to-alls beside another micro-batch's compute (Megatron "
                                       "--overlap-moe-expert-parallel-comm; EP > 1, no full recompute)"),
    "cuda_graphs": ("the stack's", "none | attn | full-iteration: CUDA graphs of the step (Megatron "
                                   "--cuda-graph-impl), what a MoE layer waits for the host"),
}
REQUIRED_COLUMNS = ("model", "seq_len")
MAX_CELL_CHARS = 131_072  # a longer cell is its row's error (the csv module's own default limit)

# Answer columns and their types (int, float or str; every cell may be empty).
PLAN_COLUMNS = ("gpu", "offering", "stack", "num_gpus", "dp", "zero", "recompute", "recompute_layers", "precision", "micro_batch",
                "grad_accum",
                "offload", "tp", "pp", "cp", "ep", "vpp", "sequence_parallel")
# total_low/high_gib, tokens_per_s_low/high: where measured runs landed around the estimate
# (models/core/fidelity_ranges.py).
MEMORY_COLUMNS = tuple(f"{pillar}_gib" for pillar in PILLARS) + ("total_gib", "total_low_gib", "total_high_gib",
                                                                "limit_gib")
ANSWER_TYPES: dict[str, type] = {
    "status": str, "error": str, "explanation": str,
    "gpu": str, "offering": str, "stack": str, "num_gpus": int, "dp": int, "zero": int, "recompute": str, "recompute_layers": int,
    "precision": str,
    "micro_batch": int, "grad_accum": int, "offload": str, "tp": int, "pp": int, "cp": int, "ep": int, "vpp": int,
    "sequence_parallel": bool, "stage_layers": str,
    **{column: float for column in MEMORY_COLUMNS},
    "tokens_per_s": float, "tokens_per_s_low": float, "tokens_per_s_high": float, "mfu": float, "hours": float,
    "usd_per_hour": float, "usd_total": float,
    "host_gib": float, "warnings": str,
}
ANSWER_COLUMNS = tuple(ANSWER_TYPES)
ANSWERED_STATUSES = ("optimal", "feasible", "infeasible", "error")


class _Cells(BaseModel):
    """The row's cells with their types (numbers in the grammar of models/core/numbers.py, the CLI's too);
    ranges and choices are checked by Job, Pins and SolveQuery."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: Any = None  # free text, a number, a date: never part of the job
    model: str
    method: str | None = None
    seq_len: Count
    global_batch: Count | None = None
    tokens: Real | None = None
    objective: str | None = None
    max_gpus: Count | None = None
    max_nodes: Count | None = None
    gpus: str | None = None
    providers: str | None = None
    regions: str | None = None
    countries: str | None = None
    jurisdiction: str | None = None
    budget_usd: Real | None = None
    deadline_hours: Real | None = None
    min_mfu: Real | None = None
    max_days: Real | None = None
    lora_rank: Count | None = None
    lora_dropout: Real | None = None
    lora_targets: str | None = None
    qlora_bits: Count | None = None
    optimizer: str | None = None
    accounting: str | None = None
    attention: str | None = None
    kernels: str | None = None
    capacity_fraction: Real | None = None
    memory_bound: str | None = None
    base_dtype: str | None = None
    cuda_context_mib: Count | None = None
    cublas_workspace_mib: Count | None = None
    nccl_mib: Count | None = None
    pricing: str | None = None
    restart_overhead: Real | None = None
    zero: Count | None = None
    recompute: str | None = None
    precision: str | None = None
    micro_batch: Count | None = None
    offload: str | None = None
    num_gpus: Count | None = None
    tp: Count | None = None
    pp: Count | None = None
    cp: Count | None = None
    ep: Count | None = None
    vpp: Count | None = None
    sequence_parallel: bool | None = None
    stack: str | None = None
    master_weights: str | None = None
    loss: str | None = None
    loss_chunks: Count | None = None
    selective: str | None = None
    recompute_layers: Count | None = None
    optimizer_in_backward: bool | None = None
    activation_offload: bool | None = None
    qlora_prep: str | None = None
    fragmentation_fraction: Real | None = None
    compile: Any = None  # true / false or a Compile value, read by models/core/setup.py Job.compile
    tp_overlap: bool | None = None
    moe_dispatcher: str | None = None
    moe_a2a_overlap: bool | None = None
    cuda_graphs: str | None = None


def is_empty(value: Any) -> bool:
    """An empty cell: None, NaN (pandas' missing value), or blank text."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


# A header cell shown back in an error only when it looks like a column name: a file that is not a
# sheet (`--inventory /proc/self/environ`) must not have its first line printed.
COLUMN_NAME = re.compile(r"[\w. -]{1,40}")


def unreadable_header_error(name: str) -> VramplanError | None:
    """The fixed-wording error for a header cell that is no column name (None when it may be one)."""
    if COLUMN_NAME.fullmatch(name):
        return None
    return VramplanError("column", f"<{len(name)} characters>", "is not a column name (letters, digits, '_', '.', "
                                                                  "'-' or spaces, at most 40); is this file a sheet?")


def unknown_column_error(name: str) -> VramplanError:
    unreadable = unreadable_header_error(name)
    if unreadable is not None:
        return unreadable
    if name in ANSWER_TYPES or name.removeprefix("plan_") in ANSWER_TYPES:
        return VramplanError("column", name, "is an answer column of `vramplan batch` output, not a job column; "
                                             "delete the answer columns to solve this sheet again")
    typo = misspells(name)
    close = [typo] if typo is not None else closest_names(name, INPUT_COLUMNS, limit=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known columns: {', '.join(INPUT_COLUMNS)}"
    return VramplanError("column", name, f"unknown column; {hint}")


MISSPELLING_RATIO = 0.8  # difflib ratio of normalised names above which a column is a typo of ours


def _normalised(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def misspells(name: str, columns: Iterable[str] = INPUT_COLUMNS) -> str | None:
    """The known column (of `columns`) that `name` is a misspelling of (seq-len, seqlen, Seq_Len,
    optimiser, budget), or None for a column of the user's own (team, notes, owner)."""
    typed = _normalised(name)
    best, ratio = None, 0.0
    for known in columns:
        target = _normalised(known)
        if typed == target or (len(typed) >= 4 and target.startswith(typed)):
            return known
        score = difflib.SequenceMatcher(None, typed, target).ratio()
        if score > ratio:
            best, ratio = known, score
    return best if ratio >= MISSPELLING_RATIO else None


def refuse_repeated_columns(columns: list[str]) -> None:
    """A column named twice: one of its two cells would be dropped silently (batch's and fleet's sheets)."""
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            raise VramplanError("column", name, "appears twice in the header")
        seen.add(name)


def check_columns(columns: list[str], strict: bool = True) -> list[str]:
    """The header: known names, each once, the required ones present. Raises before anything runs.

    With strict=False a column that is neither ours nor a misspelling of ours (nor an answer
    column) is the user's own: it is returned, to be copied to the output unchanged."""
    refuse_repeated_columns(columns)
    extra = []
    for name in columns:
        if name not in INPUT_COLUMNS:
            answer = name in ANSWER_TYPES or name.removeprefix("plan_") in ANSWER_TYPES
            if strict or answer or misspells(name) is not None:
                raise unknown_column_error(name)
            extra.append(name)
    for name in REQUIRED_COLUMNS:
        if name not in columns:
            # a sheet separated by ';' or tabs reads as one column whose name holds them all
            other = next((mark for mark in (";", "\t") if any(name in column.split(mark) for column in columns)), None)
            hint = f"; the header holds {name} inside one column: columns are separated by ',' (not {other!r})" if other else ""
            raise VramplanError("column", name, f"is required (the required columns are {', '.join(REQUIRED_COLUMNS)}){hint}")
    return extra


def parse_row(row: Mapping[str, Any]) -> SolveQuery:
    """A row's raw cells as the SolveQuery a batch solves (top_k=1, no Pareto front, CP-SAT).

    Raises VramplanError naming the column and the user's own text for the first bad cell.
    """
    raw = {name: value for name, value in row.items() if not is_empty(value)}
    for name in row:
        if name not in INPUT_COLUMNS:
            raise unknown_column_error(name)
    for name, value in raw.items():
        if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
            raise VramplanError(name, value[:20] + "...", f"the cell has {len(value):,} characters; "
                                                          f"at most {MAX_CELL_CHARS:,}")
    for name in REQUIRED_COLUMNS:
        if name not in raw:
            raise VramplanError(name, "", "is required; the cell is empty")
    try:
        cells = _Cells.model_validate(raw)
        query = query_from_fields(cells.model_dump(), top_k=1, pareto=False, engine="cpsat")
    except ValidationError as error:
        raise from_validation_error(error, raw) from None
    # a filled cell the row's others make meaningless (lora_rank with method full, recompute_layers beside
    # recompute none) is the row's error, as the same options are on the command line
    refuse_contradictions(lambda name: name in raw, raw, query.job)
    return query


def error_row(message: str) -> dict[str, Any]:
    """The answer of a row that could not be solved: status=error and the one-line reason."""
    answer: dict[str, Any] = dict.fromkeys(ANSWER_COLUMNS)
    answer.update(status="error", error=" ".join(message.split()))
    return answer


def _explanation_text(result: SolveResult) -> str:
    """The explanation's summary, which already ends with the smallest change that fits."""
    explanation = result.explanation
    if explanation is None:
        return "no plan in the search space fits"
    return " ".join(explanation.summary.split())


def output_row(result: SolveResult) -> dict[str, Any]:
    """The answer columns of one solved row (GiB as floats, the best plan only)."""
    if result.status == "unknown":
        which = "work limit (--work-limit)" if result.limit_reached == "work" else "time limit"
        return error_row(f"no plan found within the solver's {which} (status unknown: not proven infeasible)")
    answer: dict[str, Any] = dict.fromkeys(ANSWER_COLUMNS)
    answer["status"] = result.status
    if result.status == "infeasible" or not result.plans:
        answer["status"] = "infeasible"
        answer["explanation"] = _explanation_text(result)
        return answer
    best = result.plans[0]
    for column in PLAN_COLUMNS:
        answer[column] = getattr(best.plan, column)
    memory = best.memory
    if memory.num_stages > 1:  # the pipeline's split, as --stage-layers takes it
        answer["stage_layers"] = split_label(tuple(memory.stage_layers))
    for pillar in PILLARS:
        answer[f"{pillar}_gib"] = round(getattr(memory, f"{pillar}_bytes") / BYTES_PER_GIB, 4)
    for column in ("total", "total_low", "total_high"):
        answer[f"{column}_gib"] = round(getattr(memory, f"{column}_bytes") / BYTES_PER_GIB, 4)
    answer["limit_gib"] = round(memory.limit_bytes / BYTES_PER_GIB, 4)
    for column in ("tokens_per_s", "tokens_per_s_low", "tokens_per_s_high"):
        answer[column] = round(getattr(best.performance, column), 2)
    answer["mfu"] = round(best.performance.mfu_fraction, 5)
    answer["hours"] = round(best.cost.hours, 4)
    answer["usd_per_hour"] = round(best.cost.usd_per_hour, 4)
    answer["usd_total"] = round(best.cost.usd_total, 2)
    answer["host_gib"] = round(memory.host_bytes / BYTES_PER_GIB, 4)
    answer["warnings"] = "; ".join(best.warnings) or None
    return answer
