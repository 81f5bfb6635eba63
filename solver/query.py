"""The question `solve` answers (SolveQuery) and its answer (SolveResult): plain pydantic types
shared by the solver, the CLI and the batch runner."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vramplan.models.core.choices import (
    DAYS_PER_YEAR,
    JURISDICTIONS,
    MAX_RESTART_OVERHEAD,
    MAX_TOKENS,
    MFU_FLOOR,
    MIN_TOKENS,
    Jurisdiction,
    Stack,
)
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.layout import Layout
from vramplan.models.core.numbers import Count, Real
from vramplan.models.core.results import (
    CostReport,
    MemoryReport,
    ModelInfo,
    PerformanceReport,
)
from vramplan.models.core.setup import (
    MAX_GLOBAL_BATCH,
    MAX_GPUS,
    Job,
    Offload,
    Precision,
    Recompute,
    ZeroStage,
    recompute_label,
    refuse_boolean,
)
from vramplan.models.time.cost import Pricing, refuse_unspot_restarts
from vramplan.solver.choices import OBJECTIVES, Objective  # noqa: F401  (re-exported)

Engine = Literal["cpsat", "brute"]
Status = Literal["optimal", "feasible", "infeasible", "unknown"]

MAX_BUDGET_USD = 1e12
MAX_DEADLINE_HOURS = 1e6  # about 114 years
# Plans nobody would run are not answers unless asked (issue 31: the team sheet's 512 x 1-GPU VMs
# at 1.4% MFU, plans over a year): the MFU floor of models/estimate.py's warnings, and a year.
DEFAULT_MIN_MFU = MFU_FLOOR
DEFAULT_MAX_DAYS = float(DAYS_PER_YEAR)
# The limits of a solve (docs/input-rules.md#time-limits): deterministic work units decide the answer
# (sized far above what the benchmarks' queries spend: docs/performance.md#work-limit); wall-clock
# seconds are only an outer safety net, far above what that work takes on a loaded machine.
DEFAULT_WORK_LIMIT = 50_000.0
MAX_WORK_LIMIT = 1e8
DEFAULT_TIME_LIMIT_S = 600.0
TOKENS_PER_STEP_DEFAULT = 2**20  # default global batch: about a million tokens per optimizer step


def default_global_batch(seq_len: int) -> int:
    """About a million tokens per step, within the global batch's own domain (a 5-token sequence
    would otherwise ask for 209,715 sequences a step, past MAX_GLOBAL_BATCH)."""
    return min(MAX_GLOBAL_BATCH, max(1, TOKENS_PER_STEP_DEFAULT // seq_len))


class Pins(BaseModel):
    """Decisions the user fixed; None leaves the decision to the solver."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    zero: ZeroStage | None = None
    recompute: Recompute | None = None
    precision: Precision | None = None
    micro_batch: Count | None = Field(default=None, ge=1, le=MAX_GLOBAL_BATCH)
    offload: Offload | None = None
    num_gpus: Count | None = Field(default=None, ge=1, le=MAX_GPUS)
    tp: Count | None = Field(default=None, ge=1, le=1024)
    pp: Count | None = Field(default=None, ge=1, le=1024)
    cp: Count | None = Field(default=None, ge=1, le=1024)
    ep: Count | None = Field(default=None, ge=1, le=1024)
    vpp: Count | None = Field(default=None, ge=1, le=1024)
    sequence_parallel: bool | None = None

    def layout(self) -> Layout:
        """The pinned degrees, every degree left open at 1 (sequence parallelism off)."""
        return Layout(self.tp or 1, self.pp or 1, self.cp or 1, self.ep or 1, self.vpp or 1, bool(self.sequence_parallel))

    @field_validator("zero", mode="before")
    @classmethod
    def _zero_is_no_boolean(cls, value: object) -> object:
        return refuse_boolean("zero", value)


DEFAULT_MAX_GPUS = 512  # the GPU limit of a query that sets none (`--max-gpus`, the batch's `max_gpus`)


class SolveQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    job: Job = Job()
    global_batch: Count | None = Field(default=None, ge=1, le=MAX_GLOBAL_BATCH, description="sequences per step")
    tokens: Real = Field(default=1e9, ge=MIN_TOKENS, le=MAX_TOKENS, allow_inf_nan=False)
    objective: Objective = "cost"
    gpus: tuple[str, ...] = Field(default=(), description="allowed GPU names; empty = all")
    providers: tuple[str, ...] = Field(default=(), description="allowed providers; empty = all")
    regions: tuple[str, ...] = Field(default=(), description="allowed regions (offerings' `regions`); empty = all")
    countries: tuple[str, ...] = Field(default=(), description="allowed ISO 3166-1 alpha-2 countries; empty = all")
    jurisdiction: Jurisdiction | None = Field(default=None, description="eu: offerings in EU member states only")
    max_gpus: Count = Field(default=DEFAULT_MAX_GPUS, ge=1, le=MAX_GPUS)
    max_nodes: Count | None = Field(default=None, ge=1, le=MAX_GPUS)
    budget_usd: Real | None = Field(default=None, gt=0, le=MAX_BUDGET_USD, allow_inf_nan=False)
    deadline_hours: Real | None = Field(default=None, gt=0, le=MAX_DEADLINE_HOURS, allow_inf_nan=False)
    pricing: Pricing = "on-demand"
    # 0 lifts either: the least MFU (against the GPU's 16-bit dense peak) and, without a deadline
    # (which replaces it), the most days a plan may take.
    # On spot: the share of the work preemptions make the run do again (models/time/cost.py worked_tokens).
    restart_overhead: Real = Field(default=0.0, ge=0, le=MAX_RESTART_OVERHEAD, allow_inf_nan=False)
    min_mfu: Real = Field(default=DEFAULT_MIN_MFU, ge=0, lt=1, allow_inf_nan=False)
    max_days: Real = Field(default=DEFAULT_MAX_DAYS, ge=0, le=MAX_DEADLINE_HOURS / 24, allow_inf_nan=False)
    pins: Pins = Pins()
    # Several stacks searched together (`--stack any`, `--stack hf,megatron`): each is solved with
    # the job's recipe defaults restacked (models/catalogue/stack.py restacked) and the plans
    # merged; empty = the job's stack alone.
    stacks: tuple[Stack, ...] = ()
    top_k: Count = Field(default=1, ge=1, le=100)
    pareto: bool = False
    engine: Engine = "cpsat"
    work_limit: Real = Field(default=DEFAULT_WORK_LIMIT, gt=0, le=MAX_WORK_LIMIT, allow_inf_nan=False)
    time_limit_s: Real = Field(default=DEFAULT_TIME_LIMIT_S, gt=0, le=3600, allow_inf_nan=False)
    random_seed: Count = Field(default=0, ge=0, le=2**31 - 1)  # CP-SAT's seed is an int32 (2**31 was a TypeError)
    # CP-SAT workers of the unit models: one. A parallel portfolio on these small models is slower
    # (docs/design.md) and does not stop at the work limit's deterministic time: an infeasible
    # explanation that takes 0.25 s on one worker ran to its 30 s time limit on two, a different
    # answer (limit_reached) on a loaded machine. Kept as a field so that code passing 1 still runs.
    num_workers: Count = Field(default=1, ge=1, le=1, description="CP-SAT workers of the unit models: 1 "
                               "(a parallel portfolio ignores the work limit's deterministic time)")

    @property
    def effective_global_batch(self) -> int:
        return self.global_batch if self.global_batch is not None else default_global_batch(self.job.seq_len)

    def feasibility_key(self, ignored: frozenset[str]) -> str:
        """The query as JSON without the `ignored` fields, and without the tokens when no budget,
        deadline or --max-days reads them (tokens only scale time and cost): the key under which the batch memo
        keeps answers that depend on what fits, not on what is optimised."""
        limits = self.budget_usd is not None or self.deadline_hours is not None or self.max_days > 0
        return self.model_dump_json(exclude=set(ignored) if limits else set(ignored) | {"tokens"})

    @field_validator("countries")
    @classmethod
    def _countries_are_codes(cls, countries: tuple[str, ...]) -> tuple[str, ...]:
        """Two letters, any case: `--country USA` (or `nan`, `*`) matched no offering and was answered
        infeasible, with changes to try that could not help."""
        for country in countries:
            if not (len(country) == 2 and country.isascii() and country.isalpha()):
                raise VramplanError("country", country, "is not an ISO 3166-1 alpha-2 code: two letters, such as US or DE")
        return countries

    @model_validator(mode="after")
    def _pins_fit_the_limits(self) -> SolveQuery:
        if self.pins.num_gpus is not None and self.pins.num_gpus > self.max_gpus:
            raise VramplanError("num_gpus", self.pins.num_gpus, f"is above max_gpus={self.max_gpus}")
        refuse_unspot_restarts(self.restart_overhead, self.pricing)
        if self.jurisdiction is not None:  # each filter asks one region of the offering: both at once meant neither
            outside = [c for c in self.countries if c.upper() not in JURISDICTIONS[self.jurisdiction]]
            if outside:
                raise VramplanError("country", outside[0], f"is outside --jurisdiction {self.jurisdiction}: "
                                                           "no plan can be in both")
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
    recompute_layers: int | None = None  # partial full recompute chosen by the solver (Plan.recompute_layers)
    precision: Precision
    micro_batch: int
    grad_accum: int
    optimizer: str
    attention: str
    kernels: str
    offload: Offload
    method: str
    stack: str = "hf"  # the training stack that runs the plan (several may be searched: SolveQuery.stacks)
    seq_len: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    vpp: int = 1
    sequence_parallel: bool = False
    stage_layers: tuple[int, ...] | None = None  # the pipeline's split when not the default (Plan.stage_layers)

    @property
    def recompute_label(self) -> str:
        return recompute_label(self.recompute, self.recompute_layers, self.pp)

    @property
    def layout(self) -> Layout:
        """The parallel degrees, as Plan.layout (the JSON keeps the flat fields)."""
        return Layout.of(self)


class SolvedPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    plan: PlanChoice
    objective_value: float
    memory: MemoryReport
    performance: PerformanceReport
    cost: CostReport
    warnings: list[str] = []  # EstimateResult.warnings: a plan that fits but that nobody would run


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
    tried: bool = True  # False: --work-limit (or --time-limit) ran out before this change was solved
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


class SearchReport(BaseModel):
    """How big the space was and how much work the search did."""

    model_config = ConfigDict(extra="forbid")

    combinations: int = Field(description="product of the decision domains")
    evaluations: int = Field(description="models/ function evaluations made to fill the tables")
    cpsat_models: int = 0
    cpsat_solves: int = 0
    work: float = Field(default=0.0, description="work units spent, the explanation's included (--work-limit)")


class SolveResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Status
    objective: ObjectiveReport
    model: ModelInfo
    global_batch: int
    tokens: float
    engine: Engine
    space_size: int
    search: SearchReport
    solve_time_s: float
    plans: list[SolvedPlan] = []
    pareto: list[SolvedPlan] = []
    explanation: Explanation | None = None
    # The limit that cut the solve short: "work" (--work-limit) or "time" (--time-limit), else None.
    limit_reached: Literal["work", "time"] | None = None
