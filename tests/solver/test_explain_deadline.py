"""The limits bound the explanation of an infeasible answer too, not only CP-SAT's search.

A review of hostile input measured 16 s for an infeasible query over 1,000 offerings with `--time-limit 1`: the
closest-miss scan and the conflict-set model had no deadline. Each part now charges the solve's
Budget (work, and the wall-clock safety net) and stops when it is spent; a part cut short is not
kept in the batch memo, so a later row with time to spare still gets the full explanation. Here the
clock has passed the deadline (tests/solver/test_deterministic_limits.py: the work limit)."""

from __future__ import annotations

import time

import pytest

from vramplan.models.core.setup import Job
from vramplan.solver.api import _explanation, solve
from vramplan.solver.engine import Budget, TimeLimitReached
from vramplan.solver.explain import closest_miss
from vramplan.solver.query import SolveQuery
from vramplan.solver.restrictions import conflicting_restrictions
from vramplan.solver.space_build import build_space
from vramplan.solver.table_memo import TableMemo

INFEASIBLE = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, gpus=("a100-sxm-80gb",),
                        pins={"num_gpus": 2, "offload": "none"})


def spent() -> Budget:
    """A budget whose wall-clock deadline has passed (work left)."""
    return Budget(limit=10**12, deadline=time.monotonic() - 1)


def test_a_spent_deadline_stops_the_conflict_search_and_is_not_remembered(catalogue) -> None:
    space = build_space(catalogue, INFEASIBLE, memo=TableMemo())
    with pytest.raises(TimeLimitReached):
        conflicting_restrictions(catalogue, INFEASIBLE, space, spent())
    # With time left the same memo (the space's) answers in full: the cut-short attempt was not kept.
    assert conflicting_restrictions(catalogue, INFEASIBLE, space, Budget.of(INFEASIBLE)) == [
        "--num-gpus 2", "--offload none"]


def test_a_spent_deadline_skips_the_closest_miss_scan(catalogue) -> None:
    space = build_space(catalogue, INFEASIBLE)
    assert closest_miss(space, spent()) is None
    assert closest_miss(space) is not None


def test_an_explanation_cut_short_says_so(catalogue) -> None:
    space = build_space(catalogue, INFEASIBLE)
    explanation = _explanation(catalogue, INFEASIBLE, space, spent())
    assert "ran out before" in explanation.summary
    assert explanation.conflicting_restrictions == []  # not confirmed in time, so not claimed
    assert explanation.closest_miss is None
    full = solve(catalogue, INFEASIBLE).explanation
    assert full.conflicting_restrictions == ["--num-gpus 2", "--offload none"] and full.closest_miss is not None
