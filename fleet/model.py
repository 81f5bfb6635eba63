"""The fleet solved in stages on one CP-SAT model: which slot each job takes, and when.

The model (fleet/build.py): per job one literal per usable slot (plan x pool) and an
`unserved` literal, exactly one true; a start and an end shared by the job's slots, each slot an
optional interval over them; per bounded pool `add_cumulative` of the slots' GPUs against its
windows' capacity. Unbounded pools (the market without a quota) need none.

Objectives, solved lexicographically (each stage keeps the previous optimum as a constraint and
starts from the previous solution as a hint):
1. `served`: the summed penalties of unserved jobs (required jobs outweigh all optional ones);
2. the user's objective: `cost` (cents, deadlines hard), `makespan` (the last end, deadlines
   hard) or `tardiness` (weighted minutes late, deadlines soft);
3. a tie-break among the schedules that keep stage 2's proven optimum: cost for makespan and
   tardiness; for cost, the GPU-hours on committed pools (free at the margin, so without it the
   sizes there would be arbitrary; with it, smaller and longer plans leave room for more work).
The served and cost stages, when a probe does not prove them, continue with the large-neighbourhood
search of lns.py (see FleetSession._two_runs; the energy relaxation's hint stays behind LNS_RELAX).
Under the `cost` objective the cost stage's bound is also bound.py's time-indexed LP, run in a
thread beside those searches (BackgroundBound); its LP solution narrows most of the cost stage's
neighbourhoods.
A stage stopped by the time limit (or Ctrl-C, which CP-SAT catches and treats the same way)
keeps its best solution, value and bound; later stages then do not run. The time limit counts
from the session's start: the greedy first schedule and the model's build are inside it, and
when the build cannot finish in time the greedy schedule is the answer (status feasible).
"""

from __future__ import annotations

import logging
import time

from ortools.sat.python import cp_model

from vramplan.fleet.bound import BackgroundBound
from vramplan.fleet.build import build, relaxed_assignment, solve_keeping_ctrl_c
from vramplan.fleet.clock import TimeUp
from vramplan.fleet.domain import (
    IntFleet,
    IntSchedule,
    Stage,
    StageReport,
)
from vramplan.fleet.lns import improve, objective_value, stage_key
from vramplan.fleet.sgs import cheapen, greedy, repair, valid
from vramplan.solver import SolverInternalError

log = logging.getLogger(__name__)

_STATUS = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible", cp_model.INFEASIBLE: "infeasible",
           cp_model.UNKNOWN: "unknown"}
# The most of the remaining time a stage may take. The primary stage takes all of it: the tie-break
# runs only after the primary stage's proof, so time kept back for it was idle whenever the primary
# stage hit the limit; after a proof the tie-break gets whatever is left.
STAGE_SHARE = {"served": 0.5, "primary": 1.0}
PROBE_SHARE = 0.15  # of the cost stage: CP-SAT alone, enough to prove the fleets it proves at once
RELAX_SHARE = 0.4  # of the rest: the energy relaxation, its repair and the local moves
RELAX_SOLVE_SHARE = 0.5  # of that: CP-SAT on the relaxation; the rest is the repair and the moves
MIN_RELAX_S = 3.0
LNS_STAGES = ("served", "cost")  # stages whose second run is preceded by lns.improve
LNS_PROBE_SHARE = 0.3  # of an LNS stage: CP-SAT alone, long enough (under load) for its LP bound
LNS_RELAX = False  # whether an LNS stage takes the relaxation's hint first
FINAL_SHARE = 0.3  # of a two-run stage: CP-SAT's last run from the LNS incumbent (its bound, maybe a proof)
EARLY_BOUND_SLOTS = 2000  # usable slots from which the bound starts with the first LNS stage's probe
BOUNDED_PROBE_SHARE = 0.1  # of the cost stage when bound.py's background bound already runs
INTERRUPT_SLACK = 0.9  # a stage that stopped before this fraction of its limit was interrupted


class _Recorder(cp_model.CpSolverSolutionCallback):
    """Keeps the newest solution (CP-SAT reports improving ones) for Ctrl-C and the time limit."""

    def __init__(self, session: FleetSession) -> None:
        super().__init__()
        self.session = session
        self.first_s: float | None = None

    def on_solution_callback(self) -> None:
        if self.first_s is None:
            self.first_s = time.perf_counter() - self.session.started
        self.session.keep(self.session.read(self))


class FleetSession:
    """Builds the model once and runs the stages; `best` is always the newest full schedule."""

    def __init__(self, fleet: IntFleet, time_limit_s: float, num_workers: int = 1, random_seed: int = 0) -> None:
        self.fleet = fleet
        self.time_limit_s = time_limit_s
        self.num_workers = num_workers
        self.random_seed = random_seed
        self.started = time.perf_counter()
        until = self.started + time_limit_s
        # The first stage's hint, and the answer should no stage find one (or the model not be built in time).
        self.first = greedy(fleet, until)
        try:
            self.model, self.v, self.objectives = build(fleet, until)
            self.built = True
        except TimeUp:
            self.built = False
        self.best: IntSchedule | None = None
        self.stage_name: Stage | None = None
        self.interrupted = False  # a stage or the LNS stopped early (Ctrl-C): later stages do not run
        self.background: BackgroundBound | None = None  # the cost stage's column-generation bound

    def keep(self, schedule: IntSchedule) -> None:
        """`schedule` becomes the answer so far unless, in the served or cost stage, the one kept
        is at least as good in that stage, the served stage's ties broken by cost (the LNS
        incumbent against a worse CP-SAT solution)."""
        name = self.stage_name
        if self.best is not None and name in ("served", "cost") and \
                stage_key(self.fleet, self.best, name) <= stage_key(self.fleet, schedule, name):
            return
        schedule.stages = self.best.stages if self.best is not None else []
        self.best = schedule
        if name == "served" and self.background is not None:
            self.background.set_budget(objective_value(self.fleet, schedule, "served"))

    def read(self, values: cp_model.CpSolverSolutionCallback | cp_model.CpSolver) -> IntSchedule:
        slots: list[int | None] = []
        starts: list[int | None] = []
        for j, lits in enumerate(self.v.literals):
            chosen = [c for c, lit in lits.items() if values.boolean_value(lit)]
            if len(chosen) > 1:
                raise SolverInternalError(f"CP-SAT chose {len(chosen)} slots for job {j}")
            slots.append(chosen[0] if chosen else None)
            starts.append(values.value(self.v.start[j]) if chosen else None)
        stages = list(self.best.stages) if self.best is not None else []
        return IntSchedule(slot=slots, start_min=starts, stages=stages)

    def _hint(self, schedule: IntSchedule) -> None:
        self.model.clear_hints()
        for j, lits in enumerate(self.v.literals):
            for c, lit in lits.items():
                self.model.add_hint(lit, schedule.slot[j] == c)
            self.model.add_hint(self.v.unserved[j], schedule.slot[j] is None)
            c = schedule.slot[j]
            start = schedule.start_min[j] if c is not None else self.fleet.jobs[j].release_min
            self.model.add_hint(self.v.start[j], start)
            duration = self.fleet.jobs[j].slots[c].duration_min if c is not None else 0
            self.model.add_hint(self.v.end[j], start + duration if c is not None else start)

    def _stage(self, name: Stage, limit_s: float) -> StageReport:
        objective = self.objectives[name]
        self.stage_name = name
        self.model.minimize(objective)
        if self.best is not None:
            self._hint(self.best)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = self.num_workers
        solver.parameters.random_seed = self.random_seed
        solver.parameters.max_time_in_seconds = max(0.01, limit_s)
        # No probing: its presolve delayed the first solution by seconds (docs/performance.md#fleet-stages).
        solver.parameters.cp_model_probing_level = 0
        recorder = _Recorder(self)
        began = time.perf_counter()
        code = solve_keeping_ctrl_c(solver, self.model, recorder)
        if code == cp_model.MODEL_INVALID:
            raise SolverInternalError(f"CP-SAT MODEL_INVALID: {self.model.validate()}")
        report = StageReport(name=name, status=_STATUS[code], wall_s=time.perf_counter() - began,
                             first_solution_s=recorder.first_s)
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            report.bound = round(solver.best_objective_bound)
            self.keep(self.read(solver))
            report.value = round(solver.objective_value) if name not in ("served", "cost") else \
                objective_value(self.fleet, self.best, name)  # type: ignore[arg-type]
        if report.status in ("feasible", "unknown") and report.wall_s < INTERRUPT_SLACK * limit_s:
            self.interrupted = True
        log.info("fleet stage %s: %s value=%s bound=%s in %.2f s", name, report.status, report.value, report.bound,
                 report.wall_s)
        return report

    def _two_runs(self, name: Stage, limit_s: float, served: int | None) -> StageReport:
        """A stage in two runs when the first does not prove it: a probe, then a better hint from
        the energy relaxation (this model without start times, each bounded pool's cumulative
        replaced by its energy cuts; for the cost stage with the served stage's jobs kept served),
        repaired into a real schedule by the serial scheme and improved by local moves
        (sgs.repair, cheapen), then CP-SAT again from that hint. Measured:
        docs/performance.md#fleet-stages.

        The served and cost stages (LNS_STAGES) take a longer probe (LNS_PROBE_SHARE: long enough
        under load for CP-SAT's first bound), then lns.improve from the incumbent instead of the relaxation's
        hint (which stays behind LNS_RELAX), and CP-SAT once more only when the probe left no bound.
        The value is the incumbent's; the bound is CP-SAT's (or the value itself when a
        neighbourhood holding every job and pool was proven). Measured: docs/performance.md#fleet-stages.

        Under `cost`, the time-indexed bound (bound.BackgroundBound) runs from the first
        unproven probe on (from the first LNS stage's probe on fleets of EARLY_BOUND_SLOTS), and
        the cost stage's bound is the best of it and CP-SAT's. It is the stronger of the two on large
        fleets, so once it runs the
        cost stage's probe is only BOUNDED_PROBE_SHARE, a chance of a quick proof."""
        began = time.perf_counter()
        lns = name in LNS_STAGES and (served is not None or name == "served")
        solved = False
        # With the time-indexed bound running since the served stage, CP-SAT's probe is only a quick
        # chance of a proof (its LP bound is the weaker one): the search gets the rest.
        if lns and len(self.v.start) and sum(map(len, self.v.literals)) >= EARLY_BOUND_SLOTS:
            self._start_background(served)  # a large fleet: CP-SAT's probe will not prove it
        bounded = lns and name == "cost" and self.background is not None and served is not None and \
            self.background.bound(served) is not None
        probe = self._stage(name, limit_s * (BOUNDED_PROBE_SHARE if bounded else LNS_PROBE_SHARE if lns else PROBE_SHARE))
        left = limit_s - (time.perf_counter() - began)
        if probe.status in ("optimal", "infeasible") or self.interrupted or left <= 0.01:
            if probe.value is None and self.best is not None and name in ("served", "cost"):
                # CP-SAT found nothing in time: the stage's value is the incumbent's (the greedy schedule's).
                probe.status, probe.value = "feasible", objective_value(self.fleet, self.best, name)
            return probe
        if lns:
            self._start_background(served)  # unproven by CP-SAT: the time-indexed bound runs beside the search
        if probe.value is not None and (served is not None or name == "served") and left >= MIN_RELAX_S and \
                (not lns or LNS_RELAX):
            self._relaxed_hint(name, served, probe.value, left * RELAX_SHARE)
        if lns and self.best is not None:
            budget = served if served is not None else objective_value(self.fleet, self.best, "served")
            # With the probe's bound in hand, the search takes the rest; else CP-SAT runs again at the end for one.
            until = began + limit_s * (1 - FINAL_SHARE * (probe.bound is None and not bounded))
            support = self.background.support if name == "cost" and self.background is not None else None
            _, stopped, solved = improve(self.fleet, self.best, name, budget, until, self.num_workers,
                                         self.random_seed, on_better=self.keep, bound=probe.bound, support=support)
            self.interrupted = self.interrupted or stopped
        final = not self.interrupted and (not lns or probe.bound is None and not solved and not bounded)
        report = self._stage(name, limit_s - (time.perf_counter() - began)) if final else \
            StageReport(name=name, status="feasible")
        if probe.first_solution_s is not None:
            report.first_solution_s = probe.first_solution_s
        report.wall_s = time.perf_counter() - began
        if report.status not in ("optimal", "infeasible") and name in ("served", "cost") and self.best is not None:
            # The incumbent may be the LNS's (CP-SAT's last run found nothing better, or no time was left).
            report.value = objective_value(self.fleet, self.best, name)
            report.status = "feasible"
        background = self.background.bound(served) if name == "cost" and self.background and served is not None else None
        bounds = [b for b in (probe.bound, report.bound, background) if b is not None] + [report.value] * (lns and solved)
        report.bound = max(0, *bounds) if bounds else None  # costs and penalties are never negative
        if report.status == "feasible" and report.value is not None and report.bound is not None and \
                report.value <= report.bound and not self.interrupted:
            report.status = "optimal"  # the incumbent meets a valid bound (a probe's, or a whole-fleet neighbourhood)
        if report.value is None:  # cannot happen from a complete valid hint; the probe's answer then
            probe.wall_s = report.wall_s
            return probe
        return report

    def _start_background(self, served: int | None) -> None:
        """The cost stage's time-indexed bound (bound.py) in a thread until the time limit, from
        the incumbent at its served penalty (lowered as the served stage improves, see keep)."""
        if self.fleet.objective == "cost" and self.background is None and self.best is not None:
            budget = served if served is not None else objective_value(self.fleet, self.best, "served")
            self.background = BackgroundBound(self.fleet, budget, self.best, self.started + self.time_limit_s)

    def _relaxed_hint(self, name: Stage, served: int | None, value: int, limit_s: float) -> None:
        """Replace the hint (self.best) by a valid schedule from the energy relaxation that is
        better in this stage: less unserved penalty (served stage), or cheaper at the served
        stage's penalty (cost stage)."""
        assert self.best is not None
        relax_until = time.perf_counter() + limit_s
        penalties = self.fleet.unserved_penalties()
        jobs = set(range(len(self.fleet.jobs)))
        if name == "served":
            slots = relaxed_assignment(self.fleet, None, limit_s * RELAX_SOLVE_SHARE, self.num_workers,
                                        self.random_seed, list(self.best.slot), set(), set())
            budget = None if slots is None else sum(p for p, c in zip(penalties, slots) if c is None)
        else:
            # The jobs the served stage serves, and only those: a relaxation free to serve others at
            # the same penalty served jobs that no repair could place (a 210-hour job needing all 16
            # GPUs of a pool), four relaxations in a row on the fleet benchmark's 200 jobs.
            kept = {j for j, c in enumerate(self.best.slot) if c is not None}
            slots = relaxed_assignment(self.fleet, served, limit_s * RELAX_SOLVE_SHARE, self.num_workers,
                                        self.random_seed, list(self.best.slot), jobs - kept, kept)
            budget = served
        if slots is None or budget is None:
            return
        candidate = cheapen(self.fleet, repair(self.fleet, slots, budget, relax_until), relax_until)
        cost = sum(self.fleet.jobs[j].slots[c].cost_cents for j, c in enumerate(candidate.slot) if c is not None)
        lost = sum(p for p, c in zip(penalties, candidate.slot) if c is None)
        log.info("fleet %s hint: repaired relaxation at %s cents, penalty %s (relaxed %s)", name, cost, lost, budget)
        better = lost < value if name == "served" else lost <= budget and cost < value
        if better and valid(self.fleet, candidate):
            candidate.stages = self.best.stages
            self.best = candidate

    def run(self) -> IntSchedule:
        try:
            return self._run()
        finally:
            if self.background is not None:
                self.background.stop()
                self.background = None

    def _names(self) -> list[Stage]:
        return ["served", self.fleet.objective, "cost" if self.fleet.objective != "cost" else "committed_gpu_hours"]

    def _greedy_only(self) -> IntSchedule:
        """The greedy schedule as the answer: the model could not be built within the time limit."""
        assert self.best is not None
        served = objective_value(self.fleet, self.best, "served")
        reports = [StageReport(name="served", status="optimal" if served == 0 else "feasible", value=served,
                               wall_s=time.perf_counter() - self.started, first_solution_s=0.0)]
        for name in self._names()[1:]:  # the greedy schedule's cost is known; the other objectives are CP-SAT's
            value = objective_value(self.fleet, self.best, name) if name == "cost" else None
            reports.append(StageReport(name=name, status="skipped" if value is None else "feasible", value=value))
        self.best.stages = reports
        log.info("fleet: no time to build the model; the greedy schedule is the answer")
        return self.best

    def _run(self) -> IntSchedule:
        self.interrupted = False
        self.best = IntSchedule(slot=list(self.first.slot), start_min=list(self.first.start_min))
        if not self.built:
            return self._greedy_only()
        names = self._names()
        reports: list[StageReport] = []
        for k, name in enumerate(names):
            remaining = self.time_limit_s - (time.perf_counter() - self.started)
            if k == 0 and all(c is not None for c in self.best.slot):
                # The greedy schedule serves every job: penalty 0 is the optimum, nothing to prove.
                reports.append(StageReport(name=name, status="optimal", value=0, bound=0, first_solution_s=0.0))
                self.model.add(self.objectives[name] <= 0)
                continue
            # The tie-break (last) stage runs only after a proof: it must not trade the primary objective.
            runs = k == 0 or reports[-1].value is not None and (k < len(names) - 1 or reports[-1].status == "optimal")
            share = STAGE_SHARE["served"] if k == 0 else STAGE_SHARE["primary"] if k < len(names) - 1 else 1.0
            two_runs = k == 0 or name == "cost" and k == 1
            stage = self._two_runs if two_runs else lambda n, limit, _: self._stage(n, limit)
            report = stage(name, remaining * share, reports[0].value if reports else None) if runs and remaining > 0.01 and \
                not self.interrupted else None
            reports.append(report or StageReport(name=name, status="skipped"))
            if report is not None and report.value is not None:
                # Keep this stage's level (its optimum, or the best found at the time limit).
                self.model.add(self.objectives[name] <= report.value)
                if name == "served" and self.background is not None:
                    self.background.set_budget(report.value)
        if self.best is None:
            self.best = IntSchedule(slot=[None] * len(self.fleet.jobs), start_min=[None] * len(self.fleet.jobs))
        self.best.stages = reports
        self.best.interrupted = self.interrupted
        return self.best
