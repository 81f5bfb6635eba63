"""The question `solve` answers (SolveQuery) and its answer (SolveResult): plain pydantic types
shared by the solver, the CLI and the batch runner."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vramplan.models.cost import Pricing
from vramplan.models.errors import VramplanError
from vramplan.models.results import CostReport, MemoryReport, ModelInfo, PerformanceReport
from vramplan.models.setup import Job, Offload, Precision, Recompute, ZeroStage

Objective = Literal["cost", "time", "throughput", "hourly"]
OBJECTIVES: tuple[Objective, ...] = ("cost", "time", "throughput", "hourly")
Engine = Literal["cpsat", "brute"]
Status = Literal["optimal", "feasible", "infeasible", "unknown"]

TOKENS_PER_STEP_DEFAULT = 2**20  # default global batch: about a million tokens per optimizer step


def default_global_batch(seq_len: int) -> int:
    return max(1, TOKENS_PER_STEP_DEFAULT // seq_len)


class Pins(BaseModel):
    """Decisions the user fixed; None leaves the decision to the solver."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    zero: ZeroStage | None = None
    recompute: Recompute | None = None
    precision: Precision | None = None
    micro_batch: int | None = Field(default=None, ge=1, le=1_000_000)
    offload: Offload | None = None
    num_gpus: int | None = Field(default=None, ge=1, le=1_000_000)


class SolveQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    job: Job = Job()
    global_batch: int | None = Field(default=None, ge=1, le=1_000_000_000, description="sequences per step")
    tokens: float = Field(default=1e9, gt=0, allow_inf_nan=False)
    objective: Objective = "cost"
    gpus: tuple[str, ...] = Field(default=(), description="allowed GPU names; empty = all")
    providers: tuple[str, ...] = Field(default=(), description="allowed providers; empty = all")
    max_gpus: int = Field(default=512, ge=1, le=1_000_000)
    max_nodes: int | None = Field(default=None, ge=1, le=100_000)
    budget_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    deadline_hours: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    pricing: Pricing = "on-demand"
    pins: Pins = Pins()
    top_k: int = Field(default=1, ge=1, le=100)
    pareto: bool = False
    engine: Engine = "cpsat"
    time_limit_s: float = Field(default=10.0, gt=0, le=3600, allow_inf_nan=False)
    random_seed: int = 0
    num_workers: int = Field(default=1, ge=1, le=64)

    @property
    def effective_global_batch(self) -> int:
        return self.global_batch if self.global_batch is not None else default_global_batch(self.job.seq_len)

    @model_validator(mode="after")
    def _pins_fit_the_limits(self) -> SolveQuery:
        if self.pins.num_gpus is not None and self.pins.num_gpus > self.max_gpus:
            raise VramplanError("num_gpus", self.pins.num_gpus, f"is above max_gpus={self.max_gpus}")
        return self


class PlanChoice(BaseModel):
    """One plan: every decision, so that `estimate` with these values reproduces its memory."""

    model_config = ConfigDict(extra="forbid")

    gpu: str
    offering: str
    num_gpus: int
    dp: int
    zero: ZeroStage
    recompute: Recompute
    precision: Precision
    micro_batch: int
    grad_accum: int
    optimizer: str
    attention: str
    kernels: str
    offload: Offload
    method: str
    seq_len: int


class SolvedPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plan: PlanChoice
    objective_value: float
    memory: MemoryReport
    performance: PerformanceReport
    cost: CostReport


class ObjectiveReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Objective
    value: float | None
    unit: str
    best_bound: float | None = None
    gap: float | None = None


class Mitigation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    change: str
    fits: bool
    plan: PlanChoice | None = None
    objective_value: float | None = None


class Explanation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str
    conflicting_restrictions: list[str]
    static_bytes_per_gpu: int | None = None  # model states + overhead of the leanest plan in the space
    closest_miss: SolvedPlan | None = None
    over_limit_bytes: int | None = None
    dominant_pillar: str | None = None
    mitigations: list[Mitigation] = []
    smallest_change: str | None = None


class SolveResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Status
    objective: ObjectiveReport
    model: ModelInfo
    global_batch: int
    tokens: float
    engine: Engine
    space_size: int
    solve_time_s: float
    plans: list[SolvedPlan] = []
    pareto: list[SolvedPlan] = []
    explanation: Explanation | None = None
