"""The fleet problem in the solver's integer units, and its answer.

Units (chosen so that nothing summed over a fleet can leave int64, docs/design.md section 2):
- time in whole minutes from the plan's start (a quarter is 129,600 minutes); a plan's duration is
  rounded up to the minute, so a schedule the solver accepts holds in real time too;
- money in whole US cents per job, rounded up (MAX_JOB_CENTS caps one job at 10^12 cents, $10^10);
- capacity in GPUs. The largest objective term is then (penalty weights) x (fleet cost bound),
  checked against MAX_OBJECTIVE by `check_bounds` before any model is built.

A job rents whole instances on a pool as on the market (models.cost.num_instances), so a slot's
`gpus` is its instances x GPUs per instance: the GPUs it blocks in the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from vramplan.models.core.errors import VramplanError

FleetObjective = Literal["cost", "makespan", "tardiness"]
FLEET_OBJECTIVES: tuple[FleetObjective, ...] = ("cost", "makespan", "tardiness")
MINUTES_PER_HOUR = 60
MINUTES_PER_DAY = 24 * MINUTES_PER_HOUR
CENTS_PER_USD = 100
WEIGHT_SCALE = 100  # priority 1.0 = lateness weight 100 per minute; priorities resolve to 0.01
MAX_JOB_CENTS = 10**12
MAX_HORIZON_MIN = 10 * 366 * MINUTES_PER_DAY  # ten years
MAX_HORIZON_DAYS = MAX_HORIZON_MIN // MINUTES_PER_DAY  # --horizon-days
MAX_OBJECTIVE = 2**62
# The fleet's input domains (docs/fleet.md#domains), checked where the input is read.
MAX_SEED = 2**31 - 1  # CP-SAT's random_seed is an int32 (ortools/sat/sat_parameters.proto: `optional int32 random_seed = 31`)
MAX_TIME_LIMIT_S = 86_400  # a day: --time-limit bounds the whole run
MAX_POOL_GPUS = 1_000_000  # a pool's (or a --quota's) GPUs at one moment


@dataclass(frozen=True)
class Slot:
    """One way to run a job: a plan on a pool, as integers."""

    pool: int
    gpus: int
    duration_min: int
    cost_cents: int


@dataclass(frozen=True)
class Window:
    """A pool's GPUs over [from_min, to_min)."""

    from_min: int
    to_min: int
    gpus: int


@dataclass(frozen=True)
class IntPool:
    name: str
    windows: tuple[Window, ...] | None  # None = unbounded (the market without a quota)
    committed: bool = False  # paid for: its GPU-minutes are the cost objective's tie-break

    @property
    def capacity_gpus(self) -> int | None:
        return None if self.windows is None else max((w.gpus for w in self.windows), default=0)

    def gpus_at(self, minute: int) -> int | None:
        if self.windows is None:
            return None
        return next((w.gpus for w in self.windows if w.from_min <= minute < w.to_min), 0)


@dataclass(frozen=True)
class IntJob:
    release_min: int
    deadline_min: int | None
    weight: int  # lateness weight per minute, and the penalty of leaving the job unserved
    required: bool
    slots: tuple[Slot, ...]


@dataclass(frozen=True)
class IntFleet:
    jobs: tuple[IntJob, ...]
    pools: tuple[IntPool, ...]
    horizon_min: int
    objective: FleetObjective

    @property
    def hard_deadlines(self) -> bool:
        return self.objective != "tardiness"

    def latest_end(self, job: IntJob) -> int:
        if self.hard_deadlines and job.deadline_min is not None:
            return min(self.horizon_min, job.deadline_min)
        return self.horizon_min

    def usable(self, job: IntJob, slot: Slot) -> bool:
        """The slot fits the job's window and the pool's largest capacity (before any sharing)."""
        capacity = self.pools[slot.pool].capacity_gpus
        if capacity is not None and slot.gpus > capacity:
            return False
        return job.release_min + slot.duration_min <= self.latest_end(job)

    def unserved_penalties(self) -> list[int]:
        """Each job's penalty for going unserved: its weight (at least 1); a required job outweighs
        every optional job together, so the solver serves required jobs first."""
        optional = [max(1, job.weight) for job in self.jobs if not job.required]
        required_penalty = sum(optional) + 1
        return [required_penalty if job.required else max(1, job.weight) for job in self.jobs]


def check_bounds(fleet: IntFleet) -> None:
    """Every objective the model may minimise stays far inside int64."""
    if fleet.horizon_min > MAX_HORIZON_MIN:
        raise VramplanError("horizon_days", fleet.horizon_min / MINUTES_PER_DAY, "is above ten years")
    for number, job in enumerate(fleet.jobs, 1):
        for slot in job.slots:
            if slot.cost_cents > MAX_JOB_CENTS:
                raise VramplanError("job", number, f"costs {slot.cost_cents / CENTS_PER_USD:.3g} USD on one plan, "
                                                  f"above the fleet's limit of {MAX_JOB_CENTS / CENTS_PER_USD:.0e}")
    penalty_total = sum(fleet.unserved_penalties())
    cost_total = sum(max((s.cost_cents for s in job.slots), default=0) for job in fleet.jobs)
    lateness_total = sum(job.weight for job in fleet.jobs) * fleet.horizon_min
    if max(penalty_total, cost_total, lateness_total, penalty_total * fleet.horizon_min) > MAX_OBJECTIVE:
        raise VramplanError("jobs", len(fleet.jobs), "too many jobs or too large weights for int64 objectives")


Stage = Literal["served", "cost", "makespan", "tardiness", "committed_gpu_hours"]


@dataclass
class StageReport:
    name: Stage
    status: str  # optimal | feasible | infeasible | unknown | skipped
    value: int | None = None
    bound: int | None = None
    wall_s: float = 0.0
    first_solution_s: float | None = None

    @property
    def gap(self) -> float | None:
        if self.value is None or self.bound is None or self.status == "optimal":
            return 0.0 if self.status == "optimal" else None
        return (self.value - self.bound) / max(1, abs(self.value))


@dataclass
class IntSchedule:
    """Per job: the slot index chosen (None = unserved) and its start minute."""

    slot: list[int | None]
    start_min: list[int | None]
    stages: list[StageReport] = field(default_factory=list)
    interrupted: bool = False

    @property
    def status(self) -> str:
        """optimal when the served and the primary stages were proven (the last stage is a tie-break
        that only runs after a proof); feasible with a schedule otherwise."""
        ran = [s for s in self.stages if s.status != "skipped"]
        if not ran:
            return "unknown"
        if all(s.status == "optimal" for s in ran) and len(ran) >= 2 and not self.interrupted:
            return "optimal"
        return "feasible" if any(s.value is not None for s in ran) else "unknown"
