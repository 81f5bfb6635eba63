"""The explanations' fitting table (solver/fitting.py) is computed on the memory grids at once,
with step times added per point; timed or not, it must list exactly what the point-by-point walk
(shape_points up to the limit, then the engines' own inner_metrics) lists, in the same order:
mixed layer stacks, pins and several micro-batches and precisions included."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job
from vramplan.solver.fitting import _fitting, shape_points
from vramplan.solver.points import inner_metrics, inner_tie
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
        for timed in (False, True):
            expected = _point_by_point(space, shape, timed)
            assert _fitting(space, shape, timed) == expected
        points += len(expected)
    assert points > 100


def _point_by_point(space, shape: tuple, timed: bool) -> list:
    """The oracle: every point of the shape up to its GPU's limit (least memory first), kept where
    the engines' inner_metrics says it fits, best step time then least inner tie first."""
    limit = space.limit_mib[shape[0]]
    fitting = []
    for peak, inner in shape_points(space, shape):
        if peak > limit:
            break
        metrics = inner_metrics(space, shape, inner, timed=timed)
        if metrics is not None:
            fitting.append((inner, metrics))
    fitting.sort(key=lambda item: (item[1].step_us, inner_tie(space, item[0])))
    return fitting
