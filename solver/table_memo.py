"""A memo of the models/ values behind the integer tables, shared by the solves of one process.

Every table entry of a search space (solver/space.py) is a models/ function of the architecture,
the job, the global batch and one discrete choice (ZeRO stage, offload, GPU count, precision,
recompute, micro-batch, GPU, parallel layout). Rows of a batch sheet share few (model, job,
global batch) triples, so a batch worker keeps one
solver/tables.py Tables per triple and a new space only looks its terms up. The memo holds exactly
what the functions returned, so answers are the same with and without it (tests/batch/test_speed.py compares them).

    memo = TableMemo()
    solve(catalogue, query, memo=memo)  # every space built inside, explanations' included, shares `memo`

Whole spaces are kept too (the last MAX_SPACES), with what they tabulate on use (memory and
traffic tables, bounds, cluster models, memory grids): two queries that
differ only in objective, tokens, budget or deadline search the same space, and every
explanation of an infeasible row builds the same relaxed space for all rows of one model and
job. A kept space is handed out as a copy bound to the new query; the copy shares its tables,
which every query fills further with the same query-independent values.

The memo is a handle: solve() takes it (a batch worker passes one per process; without one a solve
makes its own, which its explanation's re-solves share), build_space() keeps it on the space it
builds (SearchSpace.memo), and what runs on that space (the explanation, its questions, the
conflict model) passes it on. Nothing reads it from the context.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from vramplan.models.terms import STATES_TERMS, TIME_TERMS, job_fields, job_values
from vramplan.solver.tables import Tables

T = TypeVar("T")

MAX_JOBS = 64  # (model, job, global batch) triples kept; each holds up to ~10^4 values (~2 MB)
MAX_SPACES = 32  # whole search spaces kept, with what they tabulated on use
MAX_RESULTS = 4096  # small results (an explanation's conflicting restrictions, yes/no answers) kept
STATES_FIELDS = job_fields(STATES_TERMS)  # what the shared model states are kept by
TIME_FIELDS = job_fields(TIME_TERMS)  # what the shared time terms are kept by
MAX_UNIT_MEMOS = 32  # solver/space.py UnitMemo per family (a batch chunk's rows are grouped by model and job)
MAX_PLACEMENTS = 64  # solver/placement.py Placement by its offerings, pricing and counts (~1,000 clusters each)
# Query fields a search space does not depend on: it reads them from space.query when asked (the
# step caps of the budget, deadline, --max-days and --min-mfu: SearchSpace.step_caps_us, derived per
# bound copy; the steps the tokens and restarts make: SearchSpace.steps). An explanation asks its
# questions with and without --max-days and --min-mfu (the defaults are restrictions too), so they
# share one space.
NOT_IN_SPACE = {"objective", "tokens", "restart_overhead", "budget_usd", "deadline_hours", "max_days", "min_mfu", "top_k",
                "pareto", "engine", "work_limit", "time_limit_s", "num_workers", "random_seed"}


class TableMemo:
    """Values per (catalogue, model, job, global batch), least recently used dropped first."""

    def __init__(self, max_jobs: int = MAX_JOBS) -> None:
        self.max_jobs = max_jobs
        self._jobs: OrderedDict[tuple, tuple[object, Any]] = OrderedDict()  # -> (catalogue, Tables)
        self._spaces: OrderedDict[tuple, Any] = OrderedDict()  # (catalogue id, space key) -> SearchSpace
        self._results: OrderedDict[tuple, Any] = OrderedDict()  # small results by what determines them
        self._units: OrderedDict[tuple, tuple[object, Any]] = OrderedDict()  # family key -> (catalogue, UnitMemo)
        self._states: OrderedDict[tuple, tuple[object, dict]] = OrderedDict()  # (model, job but seq_len) -> states
        self._times: OrderedDict[tuple, tuple[object, dict]] = OrderedDict()  # (model, job but optimizer, batch) -> times
        self._placements: OrderedDict[tuple, tuple[object, Any]] = OrderedDict()  # placement_key -> Placement
        self._last_space_key: tuple[Any, str] = (None, "")

    def clear(self) -> None:
        """Everything dropped. The spaces it keeps hold it (SearchSpace.memo), a cycle only the
        cyclic collector would free (solver/collector.py)."""
        self.__init__(self.max_jobs)  # type: ignore[misc]

    def tables(self, catalogue: object, model: str, arch: Any, job: Any, global_batch: int) -> Any:
        """The solver/tables.py Tables of this (catalogue, model, job, global batch), kept."""
        key = (id(catalogue), model, job.model_dump_json(), global_batch)
        entry = self._jobs.get(key)
        if entry is None or entry[0] is not catalogue or not entry[1].matches(arch, job, global_batch):
            tables = Tables(arch, job, global_batch, states_memo=self._states_of(catalogue, model, job),
                            time_memo=self._time_of(catalogue, model, job, global_batch))
            entry = (catalogue, tables)  # id() reused by a new catalogue
            self._jobs[key] = entry
            if len(self._jobs) > self.max_jobs:
                self._jobs.popitem(last=False)
        else:
            self._jobs.move_to_end(key)
        return entry[1]

    def _states_of(self, catalogue: object, model: str, job: Any) -> dict:
        """The model-state values shared by the jobs of one model that agree on the Job fields
        model states read (models/terms.py STATES_TERMS: not the sequence length, the loss or the
        kernels; a batch sheet's jobs commonly vary only the length, and its jobs are sorted by
        model and job, so one worker meets them in a row)."""
        key = (id(catalogue), model, job_values(job, STATES_FIELDS))
        return _kept(self._states, key, catalogue, dict, self.max_jobs)

    def _time_of(self, catalogue: object, model: str, job: Any, global_batch: int) -> dict:
        """The time-side values (solver/tables.py time_memo) shared by the jobs of one model and
        global batch that agree on the Job fields the time terms read (models/terms.py TIME_TERMS:
        not the optimizer, whose 8-bit mitigation an explanation re-solves)."""
        key = (id(catalogue), model, job_values(job, TIME_FIELDS), global_batch)
        return _kept(self._times, key, catalogue, dict, self.max_jobs)

    def space(self, catalogue: object, query: Any) -> Any | None:
        """A kept space of a query that differs from this one only in NOT_IN_SPACE, bound to it."""
        key = (id(catalogue), self._space_key(query))
        entry = self._spaces.get(key)
        if entry is None or entry[0] is not catalogue:
            return None
        self._spaces.move_to_end(key)
        return entry[1].for_query(query)

    def keep_space(self, catalogue: object, query: Any, space: Any) -> None:
        self._spaces[id(catalogue), self._space_key(query)] = (catalogue, space)
        if len(self._spaces) > MAX_SPACES:
            self._spaces.popitem(last=False)

    def _space_key(self, query: Any) -> str:
        """_space_key of the query, kept for the query last asked (a space is looked up, then
        kept: one JSON dump of the query instead of two)."""
        if self._last_space_key[0] is not query:
            self._last_space_key = (query, _space_key(query))
        return self._last_space_key[1]

    def units(self, catalogue: object, query: Any, make: Callable[[], T]) -> T:
        """The UnitMemo (solver/space.py) of the query's family, made on first use."""
        return _kept(self._units, (id(catalogue), _family_key(query)), catalogue, make, MAX_UNIT_MEMOS)

    def placement(self, catalogue: object, key: tuple, make: Callable[[], T]) -> T:
        """The Placement (solver/placement.py) of a placement_key, made on first use: the spaces of
        every model and job over the same offerings, pricing and counts share its clusters."""
        return _kept(self._placements, (id(catalogue), *key), catalogue, make, MAX_PLACEMENTS)

    def result(self, catalogue: object, key: tuple, compute: Callable[[], T]) -> T:
        """compute(), once per key (and catalogue); the last MAX_RESULTS kept."""
        full = (id(catalogue), *key)
        entry = self._results.get(full)
        if entry is not None and entry[0] is catalogue:
            self._results.move_to_end(full)
            return entry[1]
        value = compute()
        self._results[full] = (catalogue, value)
        if len(self._results) > MAX_RESULTS:
            self._results.popitem(last=False)
        return value


def _kept(store: OrderedDict, key: tuple, catalogue: object, make: Callable[[], T], most: int) -> T:
    """store[key]'s value, made on first use (or when id(catalogue) was reused by a new
    catalogue), most recently used last; beyond `most` entries the least recent is dropped."""
    entry = store.get(key)
    if entry is None or entry[0] is not catalogue:
        entry = store[key] = (catalogue, make())
        if len(store) > most:
            store.popitem(last=False)
    else:
        store.move_to_end(key)
    return entry[1]


def _space_key(query: Any) -> str:
    return query.model_dump_json(exclude=NOT_IN_SPACE)


def _family_key(query: Any) -> tuple:
    """What a space's per-unit work depends on (solver/space.py UnitMemo): the model, the job, the
    global batch and the pins but the GPU count; not which clusters the query allows."""
    pins = query.pins.model_copy(update={"num_gpus": None})
    return query.model, query.job.model_dump_json(), query.effective_global_batch, pins.model_dump_json()


@contextmanager
def memo_or_own(memo: TableMemo | None) -> Iterator[TableMemo]:
    """`memo`, or a memo of the call's own, cleared when the call returns (or raises), so its spaces
    and tables are freed then by reference counting instead of at a collection of their generation."""
    if memo is not None:
        yield memo
        return
    own = TableMemo()
    try:
        yield own
    finally:
        own.clear()
