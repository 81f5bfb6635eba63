"""Published measured peak memories (tests/data/measured_peaks.csv) and vramplan's estimate of each.

Every row pins the run's settings; the estimate uses that row's `--stack` preset plus those
settings (empty cells = the preset's value; tp/pp/cp/ep/vpp empty = 1, sequence_parallel empty =
off, precision empty = bf16, offload empty = none, grad_accum empty = 1). The cells are read by the
batch sheet's own row parser (sheets/rows.py parse_row: the same column names, types and presets
as `vramplan batch`), so a row means what the same row of a batch sheet would mean. A `model` cell
is a catalogue name or a config.json under tests/ (tests/fixtures/hf_configs/, exact Hub copies).
What is compared depends on what the run measured:
- allocated: torch.cuda.max_memory_allocated (litgpt's "Max GPU RAM", Megatron's max allocated):
  the pillars minus the CUDA context and NCCL's buffers, which torch's allocator never sees, and
  minus the fragmentation reserve. The cuBLAS workspaces stay: torch takes them from its caching
  allocator (aten/src/ATen/cuda/CublasHandlePool.cpp getNewWorkspace / getNewCUDABlasLtWorkspace:
  `c10::cuda::CUDACachingAllocator::get()->allocate(...)`), and Transformer Engine its own with
  torch.empty (transformer_engine/pytorch/cpp_extensions/gemm.py get_workspace);
- reserved: torch.cuda.max_memory_reserved (torchtune "peak memory reserved", torchtitan "memory"):
  the same plus the fragmentation reserve;
- device: nvidia-smi: everything vramplan counts.
A run that went out of memory has measured = OOM. `known_miss` names the modelling regime a run is
known to miss (docs/fidelity.md#misses-and-why); tests/models/test_measured_peaks.py asserts the
tolerance on every other run and that each known miss is still a miss.
Used by tests/models/test_measured_peaks.py and by `python tests/measured_peaks.py` (prints the
docs/fidelity.md table and its coverage figures).
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from vramplan.models.catalogue.catalogue import Catalogue, load_catalogue
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.memory import MemoryBreakdown, memory_per_gpu
from vramplan.sheets.rows import INPUT_COLUMNS, parse_row
from vramplan.solver.query_fields import estimate_recompute

TESTS = Path(__file__).parent
DATA = TESTS / "data" / "measured_peaks.csv"
UNIT_BYTES = {"GB": 10**9, "GiB": 2**30}
TOLERANCE = 0.15  # |predicted / measured - 1| of a run that is not a known miss
# Columns that are not a batch sheet's input columns: the run's GPU and what it measured.
RUN_COLUMNS = ("gpu", "grad_accum", "measure", "measured", "unit", "known_miss", "settings", "source")


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
    def known_miss(self) -> str:
        return self.cells.get("known_miss", "")

    @property
    def measured_bytes(self) -> int | None:
        return None if self.oom else round(float(self.cells["measured"]) * UNIT_BYTES[self.cells["unit"]])


def read_rows(path: Path) -> list[dict[str, str]]:
    """A data file's rows (lines starting with # are comments)."""
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(row for row in handle if not row.startswith("#")))


def load_runs() -> list[Run]:
    return [Run(row) for row in read_rows(DATA)]


def model_cell(cells: dict[str, str]) -> str:
    """The model as the catalogue resolves it: a catalogue name, or a config.json path under tests/."""
    model = cells["model"]
    return str(TESTS / model) if model.endswith(".json") else model


def job_and_plan(cells: dict[str, str], num_gpus_column: str = "num_gpus") -> tuple[Job, Plan]:
    """The run's Job (its stack's preset plus its cells) and Plan (its GPU and layout), read by the
    batch sheet's row parser. num_gpus is read apart: a sheet searches at most 4,096 GPUs, a run
    may have used more (Plan takes them)."""
    sheet = {name: value for name, value in cells.items()
             if name in INPUT_COLUMNS and name != num_gpus_column and value != ""}
    query = parse_row(sheet)
    pins = query.pins
    recompute = estimate_recompute({"stack": query.job.stack, "recompute": pins.recompute})
    plan = Plan(gpu=cells["gpu"], num_gpus=int(cells[num_gpus_column]), zero=pins.zero or 0, recompute=recompute,
                precision=pins.precision or "bf16", micro_batch=pins.micro_batch or 1,
                grad_accum=int(cells.get("grad_accum") or 1), offload=pins.offload or "none",
                tp=pins.tp or 1, pp=pins.pp or 1, cp=pins.cp or 1, ep=pins.ep or 1, vpp=pins.vpp or 1,
                sequence_parallel=bool(pins.sequence_parallel))
    return query.job, plan


def architecture(cells: dict[str, str], catalogue: Catalogue) -> Architecture:
    return catalogue.architecture(model_cell(cells))


def breakdown(run: Run, catalogue: Catalogue) -> MemoryBreakdown:
    job, plan = job_and_plan(run.cells)
    return memory_per_gpu(architecture(run.cells, catalogue), job, plan, catalogue.gpu(plan.gpu))


def predicted_bytes(run: Run, memory: MemoryBreakdown) -> int:
    """The estimate in the quantity the run measured (see the module docstring)."""
    over = memory.overhead
    # outside torch's allocator (module docstring; the EP dispatcher's: models/memory/dispatcher_buffers.py)
    runtime = over.cuda_context_bytes + over.nccl_bytes + over.dispatcher_buffers_bytes
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

    @property
    def within_tolerance(self) -> bool:
        """The prediction agrees with the run: within TOLERANCE of a measured peak, or 'does not
        fit' where the run went out of memory."""
        if self.run.oom:
            return not self.fits
        return abs(self.ratio - 1) <= TOLERANCE


def compare(run: Run, catalogue: Catalogue) -> Comparison:
    memory = breakdown(run, catalogue)
    return Comparison(run, predicted_bytes(run, memory), memory.gpu_fits)


def error_factor(ratio: float) -> float:
    """How far off, as a factor >= 1 either way (0.8 and 1.25 are both 1.25)."""
    return max(ratio, 1 / ratio)


def coverage(comparisons: list[Comparison]) -> str:
    """The coverage figures docs/fidelity.md quotes."""
    measured = [c for c in comparisons if not c.run.oom]
    ooms = [c for c in comparisons if c.run.oom]
    within = {limit: sum(abs(c.ratio - 1) <= limit for c in measured) for limit in (0.15, 0.20)}
    median = statistics.median(error_factor(c.ratio) for c in measured)
    false_fits = [c.run.id for c in ooms if c.fits]
    stacks = sorted({c.run.cells["stack"] for c in comparisons})
    misses = sum(bool(c.run.known_miss) for c in comparisons)
    return (f"{len(comparisons)} runs of {len(stacks)} stacks ({', '.join(stacks)}): {len(measured)} measured peaks, "
            f"{len(ooms)} out-of-memory runs. Within 15% on {within[0.15]} of {len(measured)} measured runs "
            f"({within[0.15] / len(measured):.0%}), within 20% on {within[0.20]} ({within[0.20] / len(measured):.0%}); "
            f"median error factor {median:.3f}; false fits (predicted to fit where the run went out of memory): "
            f"{len(false_fits)}{' (' + ', '.join(false_fits) + ')' if false_fits else ''}; "
            f"{misses} runs marked as known misses.")


def table() -> str:
    """The docs/fidelity.md table: every run, predicted / measured in the run's own unit."""
    lines = ["| run | layout and settings | GPU | measured | predicted (what it measured) | predicted / measured | known miss |",
             "|---|---|---|---:|---:|---:|---|"]
    catalogue = load_catalogue()
    comparisons = [compare(run, catalogue) for run in load_runs()]
    for comparison in comparisons:
        run, cells = comparison.run, comparison.run.cells
        unit = cells["unit"] or "GiB"
        predicted = comparison.predicted_bytes / UNIT_BYTES[unit]
        measured = "OOM" if run.oom else f"{cells['measured']} {unit}"
        ratio = "fits" if run.oom and comparison.fits else ("does not fit" if run.oom else f"{comparison.ratio:.2f}")
        lines.append(f"| {run.id} | {settings_cell(cells)} | {cells['gpu']} | {measured} | "
                     f"{predicted:.2f} {unit} ({cells['measure']}) | {ratio} | {run.known_miss} |")
    return "\n".join(lines) + "\n\n" + coverage(comparisons)


def settings_cell(cells: dict[str, str]) -> str:
    """A run's layout and settings as one cell of docs/fidelity.md's tables (no '|' inside)."""
    return f"{layout_label(cells)}{cells['settings']}".replace("|", "/")


def layout_label(cells: dict[str, str]) -> str:
    """The run's GPUs and model-parallel degrees, e.g. '512 GPUs, TP 8 x PP 8 (vpp 2), SP: '."""
    degrees = [f"{name.upper()} {cells[name]}" for name in ("tp", "pp", "cp", "ep") if cells.get(name, "") not in ("", "1")]
    vpp = f" (vpp {cells['vpp']})" if cells.get("vpp", "") not in ("", "1") else ""
    sp = ", SP" if cells.get("sequence_parallel") == "true" else ""
    gpus = f"{cells['num_gpus']} GPU{'s' if cells['num_gpus'] != '1' else ''}"
    return f"{gpus}{', ' + ' x '.join(degrees) if degrees else ''}{vpp}{sp}: "


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
