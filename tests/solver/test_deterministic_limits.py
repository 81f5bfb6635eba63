"""Issue 35, answers independent of load: what a solve may do is counted in work units
(--work-limit), never timed, so a row reaches its limit on every run or on none; --time-limit
(wall clock) is only an outer safety net (docs/input-rules.md#time-limits).

Five of 50,000 batch rows came back 'feasible' and 3.3% costlier under heavy load: their
wall-clock limit ran out, not their work. Here the clock runs 100 times faster and every CP-SAT
solve sleeps, and the answers stay the same; a tiny work limit is reached at the same step on
every run, with or without the batch memo's earlier work, and the answer says so."""

from __future__ import annotations

import sys
import time

import pytest
from helpers.cli import invoke
from ortools.sat.python import cp_model

from vramplan.models.core.setup import Job
from vramplan.solver.api import plan_exists, solve
from vramplan.solver.engine import Budget, TimeLimitReached
from vramplan.solver.query import SolveQuery, SolveResult
from vramplan.solver.restrictions import relaxed_query
from vramplan.solver.table_memo import TableMemo

HEADLINE = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9)
RUNNER_UPS = HEADLINE.model_copy(update={"top_k": 3, "pareto": True})  # 13 unit models, 46 solves
# Nothing fits: the explanation asks yes/no questions and re-solves each change.
INFEASIBLE = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9,
                        gpus=("rtx4090-24gb",), max_gpus=4)


def answer(result: SolveResult) -> dict:
    """Everything a solve answers, but how long it took."""
    return result.model_dump(exclude={"solve_time_s"})


def answer_and_work(result: SolveResult) -> dict:
    """What a solve answers and the work it spent, not what a memo saved it (models built, solves made)."""
    return result.model_dump(exclude={"solve_time_s": True, "search": {"evaluations", "cpsat_models", "cpsat_solves"}})


class FastClock:
    """Every module's clock of the solver, 100 times faster than the real one."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def _now(self) -> float:
        return self.start + 100 * (time.monotonic() - self.start)

    monotonic = perf_counter = _now


def stretch(monkeypatch) -> None:
    """The solve's wall-clock time stretched: the solver's clocks run 100x, each CP-SAT solve sleeps 2 ms."""
    clock = FastClock()
    for name, module in list(sys.modules.items()):
        if name.startswith("vramplan.solver.") and hasattr(module, "time"):
            monkeypatch.setattr(module, "time", clock)
    solve_real = cp_model.CpSolver.solve

    def slow(self, *args, **kwargs):
        time.sleep(0.002)
        return solve_real(self, *args, **kwargs)

    monkeypatch.setattr(cp_model.CpSolver, "solve", slow)


@pytest.mark.parametrize("query", [RUNNER_UPS, INFEASIBLE, RUNNER_UPS.model_copy(update={"work_limit": 40})],
                         ids=["runner-ups", "explained", "cut-short"])
def test_an_answer_does_not_change_when_its_wall_clock_time_is_stretched(catalogue, monkeypatch, query) -> None:
    plain = solve(catalogue, query)
    stretch(monkeypatch)
    stretched = solve(catalogue, query)
    assert answer(stretched) == answer(plain)
    assert stretched.search.work == plain.search.work > 0


def test_a_tiny_work_limit_is_reached_at_the_same_step_every_time(catalogue) -> None:
    full = solve(catalogue, RUNNER_UPS)
    assert full.status == "optimal" and full.limit_reached is None and full.search.work > 70
    cut = [solve(catalogue, RUNNER_UPS.model_copy(update={"work_limit": 70})) for _ in range(3)]
    assert all(answer(c) == answer(cut[0]) for c in cut)
    assert cut[0].status == "feasible" and cut[0].limit_reached == "work" and cut[0].search.work == 70
    assert cut[0].plans and all(p.memory.fits for p in cut[0].plans)
    assert cut[0].plans[0].objective_value >= full.plans[0].objective_value
    nothing = solve(catalogue, HEADLINE.model_copy(update={"work_limit": 0.05}))
    assert nothing.status == "unknown" and nothing.limit_reached == "work" and not nothing.plans


def test_the_batch_memo_does_not_change_where_the_work_limit_is_reached(catalogue) -> None:
    """A worker's memo keeps unit models with the points they found and the explanations' answers:
    work is charged for what the row would compute without it, so rows a worker solved before
    change neither the work a row spends nor where its limit cuts it short."""
    for query in (RUNNER_UPS, INFEASIBLE):
        work = solve(catalogue, query).search.work
        for limit in (work / 3, work / 2, work - 0.5):
            cut = query.model_copy(update={"work_limit": limit})
            alone = solve(catalogue, cut)
            memo = TableMemo()
            solve(catalogue, query, memo=memo)  # an earlier row of the same job, with work to spare
            shared = solve(catalogue, cut, memo=memo)
            assert answer_and_work(shared) == answer_and_work(alone) and alone.limit_reached == "work", (query, limit)


def test_an_explanation_cut_short_by_work_says_so(catalogue) -> None:
    full = solve(catalogue, INFEASIBLE)
    assert full.limit_reached is None and all(m.tried for m in full.explanation.mitigations)
    cut = solve(catalogue, INFEASIBLE.model_copy(update={"work_limit": full.search.work / 2}))
    assert cut.status == "infeasible" and cut.limit_reached == "work"
    untried = [m for m in cut.explanation.mitigations if not m.tried]
    assert len(untried) == 1 and cut.explanation.mitigations[-1] is untried[0] and not untried[0].fits
    assert f"--work-limit {full.search.work / 2:g} ran out before '{untried[0].change}'" in cut.explanation.summary
    from vramplan.commands.output import Screen
    from vramplan.commands.render_solve import solve_table

    table = solve_table(cut, Screen(width=None, plain=True))  # it said "time limit" whatever the limit
    assert "not tried: work limit" in table and "not tried: time limit" not in table


def test_a_kept_yes_no_answer_charges_its_work_again(catalogue) -> None:
    """plan_exists answers are kept by the memo without their limits: one kept from a row with work
    to spare still runs out of a smaller budget, as it would have without the memo."""
    question = relaxed_query(INFEASIBLE)
    measured = Budget.of(question)
    assert plan_exists(catalogue, question, measured)
    memo = TableMemo()
    assert plan_exists(catalogue, question, memo=memo)
    again = Budget.of(question)
    assert plan_exists(catalogue, question, again, memo) and again.spent == measured.spent
    short = Budget(limit=measured.spent - 1, deadline=time.monotonic() + 600)
    with pytest.raises(TimeLimitReached):
        plan_exists(catalogue, question, short, memo)
    assert short.reached == "work"


def test_the_brute_force_engine_counts_its_points(catalogue) -> None:
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192, stack="custom"), top_k=2, gpus=("mi300x-192gb",),
                       engine="brute", work_limit=300)
    runs = [solve(catalogue, query, explain_infeasible=False) for _ in range(2)]
    assert answer(runs[0]) == answer(runs[1])
    assert runs[0].status in ("feasible", "unknown") and runs[0].limit_reached == "work"


def test_solve_takes_a_work_limit(catalogue) -> None:
    result = invoke("solve", "--model", "llama-3.1-70b", "--seq-len", "8192", "--global-batch", "64", "--tokens", "2e9",
                    "--top", "3", "--work-limit", "0.05", "--format", "json")
    parsed = SolveResult.model_validate_json(result.stdout)
    assert result.exit_code == 3 and parsed.status == "unknown" and parsed.limit_reached == "work"
    assert invoke("solve", "--model", "gpt2-124m", "--seq-len", "512", "--work-limit", "0").exit_code == 2
    # the table named neither the limit nor what to do ("status UNKNOWN" alone), and the launch
    # config's warning said "no plan fits", which UNKNOWN never means
    table = invoke("solve", "--model", "llama-3.1-70b", "--seq-len", "8192", "--global-batch", "64", "--work-limit", "0.05",
                   "--launch-config", "unwritten.sh")
    assert "work limit reached before a plan was found or it was proven that none fits: raise --work-limit" in table.stdout
    assert "the limit ran out before a plan was found, so there is no launch configuration" in table.stderr
