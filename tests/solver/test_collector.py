"""solver/collector.py: a solve collects the young generation per YOUNG_OBJECTS new objects while it
runs and gives the caller's thresholds back, whether it answers or raises."""

from __future__ import annotations

import gc

import pytest

from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Job
from vramplan.solver import api
from vramplan.solver.collector import YOUNG_OBJECTS, paced_collector
from vramplan.solver.query import SolveQuery


@pytest.fixture
def default_thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's defaults
    yield
    gc.set_threshold(*saved)


def test_a_solve_paces_the_collector_and_restores_it(catalogue, monkeypatch, default_thresholds) -> None:
    seen = []
    build = api.build_space

    def recording(*args, **kwargs):
        seen.append(gc.get_threshold())
        return build(*args, **kwargs)

    monkeypatch.setattr(api, "build_space", recording)
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), global_batch=8, tokens=1e8, gpus=("h100-sxm-80gb",),
                       max_gpus=8)
    assert api.solve(catalogue, query).status == "optimal"
    assert seen and all(t == (YOUNG_OBJECTS, 10, 10) for t in seen)
    assert gc.get_threshold() == (700, 10, 10)


def test_thresholds_come_back_when_the_solve_raises(default_thresholds) -> None:
    with pytest.raises(VramplanError), paced_collector():
        assert gc.get_threshold() == (YOUNG_OBJECTS, 10, 10)
        raise VramplanError("gpu", "x", "test")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_callers_own_pacing_is_left_alone() -> None:
    saved = gc.get_threshold()
    try:
        for thresholds in ((0, 10, 10), (100_000, 5, 5)):  # automatic collection off; a coarser pacing
            gc.set_threshold(*thresholds)
            with paced_collector():
                assert gc.get_threshold() == thresholds
            assert gc.get_threshold() == thresholds
    finally:
        gc.set_threshold(*saved)


@pytest.mark.parametrize("explained", [False, True])
def test_a_solve_leaves_no_cycle_for_the_collector(catalogue, explained) -> None:
    """A solve without a memo frees its spaces and tables by reference counting when it returns
    (SearchSpace.on_use refers back weakly; the solve's own memo is cleared): before, every solve
    left ~46,000 objects in cycles, 120 ms of one collection per three DeepSeek-V3 solves
    (docs/performance.md#garbage-collector-pacing). The infeasible query also runs the explanation's
    relaxed spaces and re-solves."""
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), global_batch=8, tokens=1e8, gpus=("h100-sxm-80gb",),
                       max_gpus=8 if not explained else 1, pins={"zero": 0} if explained else {})
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection frees is kept in gc.garbage, to be read
    try:
        result = api.solve(catalogue, query)
        assert gc.collect() == 0, sorted({type(o).__name__ for o in gc.garbage})[:20]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
    assert (result.status == "infeasible") == explained


def test_a_yes_no_question_leaves_no_cycle_either(catalogue) -> None:
    """plan_exists without a memo frees its own as solve does (solver/table_memo.py memo_or_own):
    1,573 objects were left in cycles before."""
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), global_batch=8, tokens=1e8, gpus=("h100-sxm-80gb",),
                       max_gpus=8)
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        assert api.plan_exists(catalogue, query)
        assert gc.collect() == 0, sorted({type(o).__name__ for o in gc.garbage})[:20]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
