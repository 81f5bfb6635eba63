"""Published measured training throughputs (tests/data/measured_throughput.csv) and vramplan's prediction of each.

Every row pins the run's model, layout (num_gpus, tp, pp, cp, ep, vpp, sequence parallelism,
ZeRO / FSDP), micro-batch and micro-batches per step (grad_accum), sequence length, recompute and
precision; the prediction is models/time/performance.py `performance` of that plan on the row's
GPU, with the row's GPUs per node and per-GPU network bandwidth (empty = the GPU's catalogue
values), and the row's stack preset for every recipe option the row leaves empty. The cells are
read by the batch sheet's row parser, like tests/measured_peaks.py (moe_dispatcher, the EP token
dispatcher the run used, empty = the stack preset's alltoall; and the last column, moe_a2a_overlap,
true where the run's recipe overlaps the EP all-to-alls, empty = the preset's off; accounting, zero where
the run reduces 16-bit gradients, as Megatron-Bridge's recipes set grad_reduce_in_fp32 False). What is compared:
- tokens_per_s_per_gpu: tokens per second per GPU, as torchtitan (TPS/GPU) and Megatron-Bridge
  (Tokens / sec / GPU) log them: the step's tokens over the step time, over all GPUs;
- mfu: model FLOPs utilisation against the 16-bit dense peak.
Only GPU generations whose efficiency is calibrated (models/time/calibration.py) are held to
TOLERANCE; the others are listed with their error. `known_miss` names the regime a run is known to
miss (docs/fidelity.md#throughput-misses-and-why). Used by tests/models/test_measured_throughput.py
and by `python tests/measured_throughput.py` (prints the docs/fidelity.md table and coverage figures).
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from measured_peaks import architecture, error_factor, job_and_plan, read_rows, settings_cell

from vramplan.models.catalogue.catalogue import Catalogue, load_catalogue
from vramplan.models.time.calibration import generation_efficiency
from vramplan.models.time.performance import Performance, performance

DATA = Path(__file__).parent / "data" / "measured_throughput.csv"
TOLERANCE = 0.20  # |predicted / measured - 1| of a run on a calibrated GPU that is not a known miss
MEASURES = ("tokens_per_s_per_gpu", "mfu")


@dataclass(frozen=True)
class Run:
    cells: dict[str, str]

    @property
    def id(self) -> str:
        return self.cells["id"]

    @property
    def known_miss(self) -> str:
        return self.cells.get("known_miss", "")

    @property
    def measured(self) -> float:
        return float(self.cells["measured"])


def load_runs() -> list[Run]:
    """The rows; a cell a row leaves off at its end (moe_dispatcher and moe_a2a_overlap, the last two
    columns, are written only where a run names them) reads as empty."""
    return [Run({name: value or "" for name, value in row.items()}) for row in read_rows(DATA)]


def predict(run: Run, catalogue: Catalogue) -> Performance:
    job, plan = job_and_plan(run.cells)
    gpu = catalogue.gpu(plan.gpu)
    per_node = int(run.cells["gpus_per_node"]) if run.cells.get("gpus_per_node") else None
    network = float(run.cells["network_gb_per_s"]) if run.cells.get("network_gb_per_s") else None
    return performance(architecture(run.cells, catalogue), job, plan, gpu, per_node, network)


@dataclass(frozen=True)
class Comparison:
    run: Run
    predicted: float  # in the run's measure
    calibrated: bool  # the GPU generation's efficiency is fitted to published runs

    @property
    def ratio(self) -> float:
        return self.predicted / self.run.measured

    @property
    def within_tolerance(self) -> bool:
        return abs(self.ratio - 1) <= TOLERANCE


def compare(run: Run, catalogue: Catalogue) -> Comparison:
    perf = predict(run, catalogue)
    measure = run.cells["measure"]
    predicted = perf.mfu if measure == "mfu" else perf.tokens_per_s / int(run.cells["num_gpus"])
    gpu = catalogue.gpu(run.cells["gpu"])
    return Comparison(run, predicted, generation_efficiency(gpu.architecture).calibrated)


def coverage(comparisons: list[Comparison]) -> str:
    """The coverage figures docs/fidelity.md quotes."""
    calibrated = [c for c in comparisons if c.calibrated]
    within = {limit: sum(abs(c.ratio - 1) <= limit for c in calibrated) for limit in (0.15, 0.20)}
    gpus = sorted({c.run.cells["gpu"] for c in comparisons})
    median = statistics.median(error_factor(c.ratio) for c in calibrated)
    median_all = statistics.median(error_factor(c.ratio) for c in comparisons)
    misses = sum(bool(c.run.known_miss) for c in comparisons)
    return (f"{len(comparisons)} runs on {len(gpus)} GPUs ({', '.join(gpus)}), {len(calibrated)} on GPU generations with a "
            f"calibrated efficiency. On those, within 15% on {within[0.15]} ({within[0.15] / len(calibrated):.0%}), within 20% "
            f"on {within[0.20]} ({within[0.20] / len(calibrated):.0%}); median error factor {median:.3f} "
            f"({median_all:.3f} over all {len(comparisons)}); {misses} runs marked as known misses.")


def table() -> str:
    """The docs/fidelity.md throughput table: every run, predicted / measured."""
    lines = ["| run | layout and settings | GPU | measured | predicted | predicted / measured | calibrated | known miss |",
             "|---|---|---|---:|---:|---:|---|---|"]
    catalogue = load_catalogue()
    comparisons = [compare(run, catalogue) for run in load_runs()]
    for c in comparisons:
        cells = c.run.cells
        unit = "MFU" if cells["measure"] == "mfu" else "tokens/s/GPU"
        shown = (lambda value: f"{value:.1%}") if cells["measure"] == "mfu" else (lambda value: f"{value:,.0f}")
        lines.append(f"| {c.run.id} | {settings_cell(cells)} | {cells['gpu']} | {shown(c.run.measured)} {unit} | {shown(c.predicted)} | "
                     f"{c.ratio:.2f} | {'yes' if c.calibrated else 'no'} | {c.run.known_miss} |")
    return "\n".join(lines) + "\n\n" + coverage(comparisons)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
