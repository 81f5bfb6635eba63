"""The fleet question (jobs on pools) and its answer, as pydantic types; hours from the plan's start."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vramplan.fleet.domain import (
    MAX_HORIZON_DAYS,
    MAX_POOL_GPUS,
    MAX_SEED,
    MAX_TIME_LIMIT_S,
    FleetObjective,
)
from vramplan.models.core.catalogue_schema import MAX_USD_PER_HOUR, MIN_USD_PER_HOUR
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.numbers import Count, Real
from vramplan.solver import SolvedPlan, SolveQuery

HOURS_PER_DAY = 24
QUARTER_DAYS = 91
# Times (deadline, earliest_start, available_from/_to) are hours from the start in solve's own
# deadline domain (solver/query.py MAX_DEADLINE_HOURS, 1e6 h: read from the public SolveQuery, as
# fleet/ imports only the solver's public names); a pool's own price in the catalogue's price
# domain (models/core/catalogue_schema.py), per GPU-hour (docs/fleet.md#domains).
MAX_TIME_HOURS = next(m.le for m in SolveQuery.model_fields["deadline_hours"].metadata if hasattr(m, "le"))
MIN_PRICE_USD, MAX_PRICE_USD = MIN_USD_PER_HOUR, MAX_USD_PER_HOUR
MAX_PRIORITY = 10_000


class PoolWindow(BaseModel):
    """num_gpus GPUs from from_hours to to_hours (None = the end of the horizon)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    from_hours: Real = Field(default=0.0, ge=0, le=MAX_TIME_HOURS, allow_inf_nan=False)
    to_hours: Real | None = Field(default=None, ge=0, le=MAX_TIME_HOURS, allow_inf_nan=False)  # 0: _ends_after_it_starts says why
    num_gpus: Count = Field(ge=0, le=MAX_POOL_GPUS)

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> PoolWindow:
        """As the inventory sheet refuses it (fleet/sheet.py): a window ending at or before its start
        held no GPU, and the unserved job was told to add GPUs to the pool."""
        if self.to_hours is not None and self.to_hours <= self.from_hours:
            raise VramplanError("available_to", self.to_hours, f"is not after available_from ({self.from_hours:g} h)")
        return self


class Pool(BaseModel):
    """Inventory (one offering, bounded by windows) or one provider of the on-demand market."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    offering: str | None = None  # catalogue key provider/instance_type; None for a market pool
    market_provider: str | None = None
    committed: bool = False  # already paid for: marginal cost 0, idle time reported
    price_usd_per_gpu_hour: Real | None = Field(default=None, ge=MIN_PRICE_USD, le=MAX_PRICE_USD)
    windows: tuple[PoolWindow, ...] | None = None  # None = unbounded (a market provider without a quota)

    @model_validator(mode="after")
    def _one_kind(self) -> Pool:
        if (self.offering is None) == (self.market_provider is None):
            raise VramplanError("pool", self.name, "needs exactly one of an offering or a market provider")
        # what the inventory sheet and --market cannot say, and what was resolved silently (a committed
        # market pool was unbounded free GPUs; a market pool's own price was ignored)
        if self.market_provider is not None and self.committed:
            raise VramplanError("committed", True, f"pool {self.name!r} is the market's, rented by the hour: "
                                                   "a committed pool is an offering with windows")
        if self.market_provider is not None and self.price_usd_per_gpu_hour is not None:
            raise VramplanError("price_usd_per_gpu_hour", self.price_usd_per_gpu_hour, f"pool {self.name!r} is the "
                                "market's, priced by the catalogue: a negotiated price is an offering pool's")
        if self.offering is not None and self.windows is None:
            raise VramplanError("windows", None, f"pool {self.name!r} of an offering needs windows of GPUs "
                                                 "(an unbounded pool is a market provider's)")
        for a, b in zip(sorted(self.windows or (), key=lambda w: w.from_hours), sorted(self.windows or (), key=lambda w: w.from_hours)[1:]):
            if a.to_hours is None or a.to_hours > b.from_hours:
                raise VramplanError("available_from", b.from_hours, f"pool {self.name!r} has overlapping windows")
        return self


class FleetJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    query: SolveQuery
    earliest_start_hours: Real = Field(default=0.0, ge=0, le=MAX_TIME_HOURS, allow_inf_nan=False)
    deadline_hours: Real | None = Field(default=None, ge=0, le=MAX_TIME_HOURS, allow_inf_nan=False)  # > earliest_start
    priority: Real = Field(default=1.0, ge=0, le=MAX_PRIORITY, allow_inf_nan=False)
    required: bool = False
    pools: tuple[str, ...] = ()  # pools the job may run on; empty = any

    @model_validator(mode="after")
    def _deadline_after_start(self) -> FleetJob:
        if self.deadline_hours is not None and self.deadline_hours <= self.earliest_start_hours:
            raise VramplanError("deadline", self.deadline_hours,
                                f"is not after earliest_start ({self.earliest_start_hours:g} h from the start)")
        return self


class FleetQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: tuple[FleetJob, ...]
    pools: tuple[Pool, ...]
    objective: FleetObjective = "cost"
    horizon_hours: Real = Field(default=QUARTER_DAYS * HOURS_PER_DAY, gt=0, le=MAX_HORIZON_DAYS * HOURS_PER_DAY,
                                 allow_inf_nan=False)
    # The whole plan_fleet() call: candidate plans, schedule and explanations (fleet/clock.py).
    time_limit_s: Real = Field(default=60.0, gt=0, le=MAX_TIME_LIMIT_S, allow_inf_nan=False)
    num_workers: Count = Field(default=2, ge=1, le=64)
    random_seed: Count = Field(default=0, ge=0, le=MAX_SEED)
    explain_limit: Count = Field(default=20, ge=0, description="unserved jobs to explain with extra solves")

    @model_validator(mode="after")
    def _unique_pools(self) -> FleetQuery:
        names = [p.name for p in self.pools]
        for name in names:
            if names.count(name) > 1:
                raise VramplanError("pool", name, "appears twice")
        for job in self.jobs:
            for name in job.pools:
                if name not in names:
                    raise VramplanError("pools", name, f"is not a pool of the inventory ({', '.join(names)})")
        return self


# unplanned: the time limit ran out before the job's candidate plans were computed (fleet/clock.py).
JobStatus = Literal["scheduled", "late", "unserved", "unplanned"]


class Assignment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: JobStatus
    pool: str | None = None
    start_hours: float | None = None
    end_hours: float | None = None
    plan: SolvedPlan | None = None
    pool_gpus: int | None = None  # GPUs the plan blocks in its pool (whole instances)
    usd_marginal: float | None = None
    late_hours: float | None = None
    explanation: str | None = None


class PoolUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pool: str
    offering: str | None
    committed: bool
    gpu_hours_available: float | None  # None: unbounded market
    gpu_hours_used: float
    idle_gpu_hours: float | None
    utilisation: float | None
    num_jobs: int
    usd_marginal: float


class StageSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    status: str
    value: float | None
    bound: float | None
    gap: float | None
    wall_s: float
    first_solution_s: float | None


class FleetResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["optimal", "feasible", "unknown"]
    objective: FleetObjective
    objective_value: float | None  # USD, hours (makespan) or priority-weighted hours late
    best_bound: float | None
    gap: float | None
    interrupted: bool = False
    num_unplanned: int = 0  # jobs the time limit left without candidate plans (status unplanned)
    stages: list[StageSummary]
    assignments: list[Assignment]
    pools: list[PoolUsage]
    usd_marginal_total: float
    num_candidates: int
    candidate_time_s: float
    solve_time_s: float
