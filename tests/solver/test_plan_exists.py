"""Yes/no questions of the explanation (api.plan_exists, cpsat_exists.find_cpsat).

The conflict search asks whether a relaxed query fits; it needs any plan, not the best one, so
the CP-SAT engine stops at the first point, visiting the roomiest units first. The answer must
be the full solve's (feasible exactly when the solve finds a plan), the point it stops at must be
a plan of the space that fits in exact bytes and meets the budget and deadline, and an
infeasible space still answers no."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job
from vramplan.solver.api import plan_exists, solve
from vramplan.solver.cpsat_exists import find_cpsat
from vramplan.solver.engine import TimeLimitReached
from vramplan.solver.points import evaluate
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.space_build import build_space
from vramplan.solver.table_memo import TableMemo
from vramplan.solver.verify import verified_plan

QUERIES = [
    # fits only with TP x PP on many small GPUs (tests/solver/test_explain_conflicts.py)
    SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), gpus=("rtx4090-24gb",), max_gpus=64),
    SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), gpus=("rtx4090-24gb",), max_gpus=4),  # no plan
    SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), max_gpus=8),
    SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), gpus=("l4-24gb",), max_gpus=2, pins={"zero": 0}),
    # a deadline the roomiest clusters meet but a budget they break: the cap skips them
    SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), tokens=1e8, budget_usd=8, max_gpus=64),
    SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), tokens=1e9, budget_usd=1, max_gpus=64),  # no plan
    SolveQuery(model="qwen3-30b-a3b", job=Job(seq_len=4096), deadline_hours=2, tokens=1e8, max_gpus=64),
]


SLOW_QUERIES = (4, 5, 6)  # 7-13 s each on 2 cores: the brute force proves "no plan" point by point


@pytest.mark.parametrize("query", [pytest.param(q, marks=pytest.mark.slow) if i in SLOW_QUERIES else q
                                   for i, q in enumerate(QUERIES)],
                         ids=lambda q: f"{q.model}-{q.gpus}-{q.max_gpus}-{q.budget_usd}")
def test_plan_exists_answers_as_the_full_solve_does(catalogue, query: SolveQuery) -> None:
    solved = solve(catalogue, query, explain_infeasible=False)
    assert solved.status in ("optimal", "infeasible")
    assert plan_exists(catalogue, query) is (solved.status == "optimal")
    # The brute force proves "no plan" by enumerating every point (about 12 s for the budget case):
    # a time-out raises TimeLimitReached rather than answering no, so it gets the time it needs
    # (a "yes" needs only the points seen within the query's limit).
    brute = query.model_copy(update={"engine": "brute"})
    if solved.status == "infeasible":
        brute = brute.model_copy(update={"time_limit_s": 120})
    assert plan_exists(catalogue, brute) is (solved.status == "optimal")
    space = build_space(catalogue, query)
    choice = find_cpsat(space)
    assert (choice is None) is (solved.status == "infeasible")
    if choice is not None:  # a point of the space within every limit, fitting in exact bytes
        metrics = evaluate(space, choice)
        assert metrics is not None
        plan = verified_plan(space, choice)
        assert plan.memory.fits
        if query.budget_usd is not None:
            assert plan.cost.usd_total <= query.budget_usd
        if query.deadline_hours is not None:
            assert plan.cost.hours <= query.deadline_hours


def test_a_time_out_is_not_an_answer(catalogue) -> None:
    """Out of time, the yes/no question raises instead of answering no: a conflict the explanation
    names must be proven (tests/solver/test_explain_deadline.py), and the batch memo keeps answers only."""
    query = QUERIES[5].model_copy(update={"time_limit_s": 1e-6})
    with pytest.raises(TimeLimitReached):
        plan_exists(catalogue, query)
    with pytest.raises(TimeLimitReached):
        plan_exists(catalogue, query.model_copy(update={"engine": "brute"}))
    fits = QUERIES[4]
    memo = TableMemo()  # a time-out is not kept: the same question with time answers
    with pytest.raises(TimeLimitReached):
        plan_exists(catalogue, fits.model_copy(update={"time_limit_s": 1e-6}), memo=memo)
    assert plan_exists(catalogue, fits, memo=memo) is True


def test_the_budget_case_is_one_the_roomiest_cluster_breaks(catalogue) -> None:
    """The budget query above is a real test of the step cap: the roomiest cluster of its space
    (the order find_cpsat starts from) has no plan within the budget, yet the space has one."""
    query = QUERIES[4]
    roomiest = max(catalogue.gpus.values(), key=lambda g: g.memory_usable_mib).name
    on_it = solve(catalogue, query.model_copy(update={"gpus": (roomiest,), "pins": Pins(num_gpus=64)}),
                  explain_infeasible=False)
    assert on_it.status == "infeasible"
    assert solve(catalogue, query, explain_infeasible=False).status == "optimal"
