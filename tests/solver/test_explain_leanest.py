"""The explanation's leanest model states (solver/explain.py) skip the GPU counts whose 1/n share
of the single-GPU states already exceeds the least found; the answer (bytes and how) is the
exhaustive walk's, the first least in the space's order, ties included."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job
from vramplan.solver.explain import _count_leanest, _leanest_model_states
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.space_build import build_space


@pytest.mark.parametrize(("model", "method", "max_gpus", "gpus", "zero"), [
    ("llama-3.1-70b", "full", 256, ("h100-sxm-80gb",), None),
    ("deepseek-v2-lite", "full", 64, ("l4-24gb", "a100-sxm-40gb"), None),  # mixed layer stack, 4 checked ranks
    ("mixtral-8x7b", "lora", 8, ("a100-sxm-40gb",), 0),
    ("llama-3.1-8b", "full", 64, ("l4-24gb",), 3),
])
def test_pruned_walk_equals_every_count(catalogue, model: str, method: str, max_gpus: int, gpus: tuple, zero: int | None) -> None:
    space = build_space(catalogue, SolveQuery(model=model, job=Job(method=method, seq_len=4096), max_gpus=max_gpus,
                                              gpus=gpus, pins=Pins(zero=zero)))
    every = [found for n_i in range(len(space.counts)) if (found := _count_leanest(space, n_i)) is not None]
    expected = min(every, key=lambda found: found[0])  # the first of the least, in count order
    assert _leanest_model_states(space) == expected
    assert len(space.counts) > 2  # several counts, so the walk can skip some
