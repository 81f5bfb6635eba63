"""Published measured peak memories (tests/data/measured_peaks.csv) and vramplan's estimate of each.

Every row pins the run's settings; the estimate uses that row's `--stack` preset plus those
settings (empty cells = the preset's value). What is compared depends on what the run measured:
- allocated: torch.cuda.max_memory_allocated (litgpt's "Max GPU RAM"): the pillars minus the
  runtime reserve (CUDA context, cuBLAS workspace, NCCL) and minus the fragmentation reserve;
- reserved: torch.cuda.max_memory_reserved (torchtune "peak memory reserved", torchtitan "memory"):
  the same plus the fragmentation reserve;
- device: nvidia-smi: everything vramplan counts.
Used by tests/models/test_measured_peaks.py and by `python tests/measured_peaks.py` (prints the README table).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramplan.models.catalogue.catalogue import Catalogue, load_catalogue
from vramplan.models.core.setup import Plan
from vramplan.models.memory.memory import MemoryBreakdown, memory_per_gpu
from vramplan.solver.query_fields import estimate_recompute, job_from_fields

DATA = Path(__file__).parent / "data" / "measured_peaks.csv"
UNIT_BYTES = {"GB": 10**9, "GiB": 2**30}
BOOL_FIELDS = ("optimizer_in_backward", "activation_offload")
INT_FIELDS = ("lora_rank", "qlora_bits", "seq_len", "micro_batch", "num_gpus", "zero", "recompute_layers", "loss_chunks")
FLOAT_FIELDS = ("fragmentation_fraction",)
JOB_COLUMNS = ("stack", "method", "lora_rank", "lora_targets", "qlora_bits", "seq_len", "optimizer", "master_weights",
               "loss", "loss_chunks", "selective", "recompute_layers", "optimizer_in_backward", "activation_offload",
               "qlora_prep", "kernels", "accounting", "attention", "fragmentation_fraction")


@dataclass(frozen=True)
class Run:
    cells: dict[str, str]

    @property
    def id(self) -> str:
        return self.cells["id"]

    @property
    def oom(self) -> bool:
        return self.cells["measured"] == "OOM"

    @property
    def measured_bytes(self) -> int | None:
        return None if self.oom else round(float(self.cells["measured"]) * UNIT_BYTES[self.cells["unit"]])


def _typed(name: str, text: str) -> Any:
    if text == "":
        return None
    if name in BOOL_FIELDS:
        return text == "true"
    if name in INT_FIELDS:
        return int(text)
    if name in FLOAT_FIELDS:
        return float(text)
    return text


def load_runs() -> list[Run]:
    with DATA.open(encoding="utf-8") as handle:
        return [Run(row) for row in csv.DictReader(row for row in handle if not row.startswith("#"))]


def breakdown(run: Run, catalogue: Catalogue) -> MemoryBreakdown:
    fields = {name: _typed(name, run.cells.get(name, "")) for name in JOB_COLUMNS + ("recompute",)}
    job = job_from_fields(fields)
    plan = Plan(gpu=run.cells["gpu"], num_gpus=int(run.cells["num_gpus"]), zero=int(run.cells["zero"]),
                recompute=estimate_recompute(fields), precision="bf16", micro_batch=int(run.cells["micro_batch"]))
    return memory_per_gpu(catalogue.architecture(run.cells["model"]), job, plan, catalogue.gpu(plan.gpu))


def predicted_bytes(run: Run, memory: MemoryBreakdown) -> int:
    """The estimate in the quantity the run measured (see the module docstring)."""
    over = memory.overhead
    runtime = over.cuda_context_bytes + over.cublas_workspace_bytes + over.nccl_bytes
    fragmentation = memory.activations.fragmentation_reserve_bytes
    measure = run.cells["measure"]
    if measure == "allocated":
        return memory.total_bytes - runtime - fragmentation
    if measure == "reserved":
        return memory.total_bytes - runtime
    return memory.total_bytes


@dataclass(frozen=True)
class Comparison:
    run: Run
    predicted_bytes: int
    fits: bool

    @property
    def ratio(self) -> float | None:
        measured = self.run.measured_bytes
        return None if measured is None else self.predicted_bytes / measured


def compare(run: Run, catalogue: Catalogue) -> Comparison:
    memory = breakdown(run, catalogue)
    return Comparison(run, predicted_bytes(run, memory), memory.gpu_fits)


def table() -> str:
    """The README table: every run, predicted / measured in the run's own unit."""
    lines = ["| run | settings | GPU | measured | predicted (what it measured) | predicted / measured |",
             "|---|---|---|---:|---:|---:|"]
    catalogue = load_catalogue()
    for comparison in (compare(run, catalogue) for run in load_runs()):
        run, cells = comparison.run, comparison.run.cells
        unit = cells["unit"] or "GiB"
        predicted = comparison.predicted_bytes / UNIT_BYTES[unit]
        measured = "OOM" if run.oom else f"{cells['measured']} {unit}"
        ratio = "fits" if run.oom and comparison.fits else ("does not fit" if run.oom else f"{comparison.ratio:.2f}")
        lines.append(f"| {run.id} | {cells['settings']} | {cells['gpu']} | {measured} | "
                     f"{predicted:.2f} {unit} ({cells['measure']}) | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
