"""The throughput model against published measured training throughputs (tests/data/measured_throughput.csv).

Within 20% of the measured tokens/s/GPU (or MFU) on every run on a GPU generation whose efficiency
is calibrated (models/time/calibration.py) that is not a known miss. Runs on uncalibrated
generations (Blackwell, CDNA) are listed in docs/fidelity.md with their error but not held to the
tolerance: their efficiency is borrowed. A known miss names its regime (`known_miss`) and is
asserted to still miss, so a fix must update its row.
"""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue
from measured_throughput import MEASURES, TOLERANCE, compare, load_runs

from vramplan.models.time.calibration import generation_efficiency

RUNS = load_runs()
KNOWN_MISSES = [run for run in RUNS if run.known_miss]


def _calibrated(catalogue, run) -> bool:
    return generation_efficiency(catalogue.gpu(run.cells["gpu"]).architecture).calibrated


HELD = [run for run in RUNS if not run.known_miss and _calibrated(packaged_catalogue(), run)]


def test_the_evidence_covers_twenty_five_runs_on_four_gpus() -> None:
    assert len(RUNS) >= 25
    gpus = {run.cells["gpu"] for run in RUNS}
    assert {"a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "b200-180gb"} <= gpus
    assert len({run.id for run in RUNS}) == len(RUNS)
    assert all(run.cells["source"] and run.cells["settings"] and run.cells["measure"] in MEASURES for run in RUNS)
    assert any(run.cells.get("precision") == "fp8" for run in RUNS)
    assert any(int(run.cells.get("ep") or 1) > 1 for run in RUNS)  # MoE runs
    for degree in ("tp", "pp", "cp"):
        assert any(int(run.cells.get(degree) or 1) > 1 for run in RUNS), degree


def test_known_misses_are_named_regimes(catalogue) -> None:
    assert all(" " not in run.known_miss and len(run.known_miss) <= 40 for run in KNOWN_MISSES)
    calibrated = [run for run in RUNS if _calibrated(catalogue, run)]
    assert sum(bool(run.known_miss) for run in calibrated) < len(calibrated) / 2


def test_most_runs_are_held_to_the_tolerance() -> None:
    assert len(HELD) >= 20


@pytest.mark.parametrize("run", HELD, ids=lambda run: run.id)
def test_within_20_percent_on_calibrated_gpus(catalogue, run) -> None:
    comparison = compare(run, catalogue)
    assert abs(comparison.ratio - 1) <= TOLERANCE, f"predicted / measured = {comparison.ratio:.3f}"


@pytest.mark.parametrize("run", KNOWN_MISSES, ids=lambda run: f"{run.id}[{run.known_miss}]")
def test_each_known_miss_is_still_a_miss(catalogue, run) -> None:
    """When this fails the regime is fixed (or moved): clear the row's known_miss and update docs/fidelity.md."""
    assert not compare(run, catalogue).within_tolerance
