"""The explanations' untimed fitting table (solver/fitting.py) is computed on the memory grids at
once; it must list exactly what the point-by-point walk (memory_peaks, then inner_metrics) lists,
in the same order: mixed layer stacks, pins and several micro-batches and precisions included."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job
from vramplan.solver.fitting import _fitting, _memory_fitting
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.space_build import build_space


@pytest.mark.parametrize(("model", "method", "pins"), [
    ("llama-3.1-8b", "full", Pins()),
    ("mixtral-8x7b", "lora", Pins(zero=3)),
    ("deepseek-v2-lite", "full", Pins(pp=2)),  # mixed stack: four checked ranks
    ("gemma-2-9b", "full", Pins(micro_batch=1)),
])
def test_grid_table_equals_point_by_point(catalogue, model: str, method: str, pins: Pins) -> None:
    space = build_space(catalogue, SolveQuery(model=model, job=Job(method=method, seq_len=2048, stack="custom"), max_gpus=16, pins=pins,
                                              gpus=("l4-24gb", "h100-sxm-80gb", "v100-sxm-32gb")))
    points = 0
    for shape in sorted({c.shape for c in space.clusters}):
        expected = _fitting(space, shape, timed=False)
        assert _memory_fitting(space, shape) == expected
        points += len(expected)
    assert points > 100
