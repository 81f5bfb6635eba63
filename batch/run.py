"""Batch execution: solve many spreadsheet rows on a backend, yield each answer as it completes.

    for row_index, answer in run_batch(catalogue, rows, BatchOptions(backend="local")):
        ...  # answer: the answer columns of sheets/rows.py (status, error, plan, memory, cost)

- Rows are validated here, in the client: a bad row is answered at once with status=error and
  never travels. Identical jobs (the same SolveQuery, whatever the `id` or the spelling of a
  number) are solved once and the answer fanned out: it is a pure function of the job and the
  catalogue.
- Jobs go to the backend in chunks of several rows per task (a task costs about as much as a
  solve on Ray or Dask). A chunk whose worker died is retried up to `max_retries` times (first in
  line), then split into single rows with as many retries each; a row whose worker dies every
  time is answered with status=error. Workers that die before any chunk ever finishes, or keep
  dying with nothing finished in between, stop the batch with a BatchError.
- Every chunk reports the vramplan version of its worker; one that differs from this client's
  stops the batch with a BatchError (so do Ray/Dask probes before the first task).
- `progress(done_rows, total_rows)` is called as rows complete; setting `stop` (a
  threading.Event, e.g. from a SIGINT handler) cancels what is still running and ends the
  iteration; the rows already yielded are the ones to keep.

No printing and no file I/O here: the CLI (commands/batch.py) reads and writes the spreadsheets.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from vramplan.batch import worker as batch_worker
from vramplan.batch.backends import (
    Backend,
    BatchError,
    ChunkDone,
    LocalBackend,
    SerialBackend,
    default_workers,
)
from vramplan.batch.pool import start_helpers_ignoring_ctrl_c
from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.errors import VramplanError
from vramplan.sheets.rows import error_row, parse_row

log = logging.getLogger(__name__)

BackendName = Literal["local", "ray", "dask", "serial"]
BACKENDS: tuple[BackendName, ...] = ("local", "ray", "dask", "serial")
CHUNKS_PER_WORKER = 8  # enough chunks for every worker to stay busy to the end
GROUP_CHUNK_FACTOR = 4  # a default chunk keeps a (model, job, global batch) group whole up to 4x its size
POLL_S = 0.2  # how often `stop` is checked while waiting
MAX_FAILURES_IN_A_ROW = 12  # pool breaks (or lost tasks) with no chunk finished in between
START_HINT = {"local": "; a script that runs a batch must start it under `if __name__ == '__main__':`"}

__all__ = ["BACKENDS", "BatchError", "BatchOptions", "JobPlan", "chunk_size", "plan_jobs", "run_batch"]


@dataclass(frozen=True)
class BatchOptions:
    backend: BackendName = "local"
    workers: int | None = None  # default: the CPUs this process may use (local cluster size too)
    address: str | None = None  # Ray address / Dask scheduler address or scheduler file
    chunk_size: int | None = None  # rows per task; default from the number of jobs and workers
    models_dir: Path | None = None  # a `model` cell that is a path is read only inside it; default: cwd
    max_retries: int = 2

    def __post_init__(self) -> None:
        """The command's domains (commands/batch.py), one VramplanError naming the field: a chunk size of
        -1 submitted no chunk and returned no answer, a worker count of -1 failed deep in the process pool."""
        if self.backend not in BACKENDS:
            raise VramplanError("backend", self.backend, f"unknown; choose one of {', '.join(BACKENDS)}")
        for name, low, high in (("workers", 1, 4096), ("chunk_size", 1, 10_000), ("max_retries", 0, 100)):
            value = getattr(self, name)
            if value is None and name != "max_retries":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise VramplanError(name, value, f"must be a whole number from {low} to {high:,}")
        if self.address is not None and not isinstance(self.address, str):
            raise VramplanError("address", self.address, "must be text (a Ray address or a Dask scheduler)")
        if self.address is not None and self.backend not in ("ray", "dask"):  # it would run here, the address unread
            raise VramplanError("address", self.address, f"applies to the ray or dask backend, not {self.backend}")
        if self.models_dir is not None and not isinstance(self.models_dir, (str, Path)):
            raise VramplanError("models_dir", self.models_dir, "must be a folder path")


@dataclass
class JobPlan:
    """Rows answered without solving (bad rows), and the unique jobs with the rows that share each."""

    answered: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    rows_of_job: list[list[int]] = field(default_factory=list)
    groups: list[tuple[str, str, int]] = field(default_factory=list)  # per job: (model, job, global batch)
    architectures: dict[str, Architecture] = field(default_factory=dict)  # config files, read by the client

    @property
    def num_rows(self) -> int:
        return len(self.answered) + sum(len(rows) for rows in self.rows_of_job)


def _read_model_file(catalogue: Catalogue, model: str, models_dir: Path, plan: JobPlan,
                     failed: dict[str, VramplanError]) -> None:
    """A model cell that is not a catalogue name: its config.json, read once here in the client
    (only inside models_dir) and shipped in the workers' catalogue, so workers never open paths."""
    if model in catalogue.architectures or model in plan.architectures:
        return
    if model not in failed:
        try:
            plan.architectures[model] = catalogue.architecture(model, models_dir)
            return
        except VramplanError as error:
            failed[model] = error
    raise failed[model]


def plan_jobs(rows: Iterable[tuple[int, Mapping[str, Any]]], catalogue: Catalogue | None = None,
              models_dir: Path | None = None) -> JobPlan:
    """Parse every row; with `catalogue`, also read the config files that model cells name. Unique
    jobs are grouped by (model, job, global batch), so that the jobs of one chunk share their
    workers' table memo (solver/table_memo.py); answers keep their row index."""
    plan = JobPlan()
    index_of: dict[str, int] = {}
    failed: dict[str, VramplanError] = {}
    groups: list[tuple[str, str, int]] = []
    for position, item in enumerate(rows):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int) and not isinstance(item[0], bool)):
            raise VramplanError("rows", _shown(item), f"item {position} is not a (row index, row) pair: pass "
                                                      "enumerate(rows) or (index, row) tuples")
        row_index, row = item
        try:
            if not isinstance(row, Mapping) or not all(isinstance(key, str) for key in row):
                raise VramplanError("row", _shown(row), "must be a mapping of column names (text) to cells")
            query = parse_row(row)
            if catalogue is not None:
                _read_model_file(catalogue, query.model, models_dir or Path.cwd(), plan, failed)
        except VramplanError as error:
            plan.answered.append((row_index, error_row(str(error))))
            continue
        key = query.model_dump_json()
        if key not in index_of:
            index_of[key] = len(plan.jobs)
            plan.jobs.append(query.model_dump(mode="json"))
            plan.rows_of_job.append([])
            groups.append((query.model, query.job.model_dump_json(), query.effective_global_batch))
        plan.rows_of_job[index_of[key]].append(row_index)
    order = sorted(range(len(plan.jobs)), key=lambda job: (groups[job], job))
    plan.jobs = [plan.jobs[job] for job in order]
    plan.rows_of_job = [plan.rows_of_job[job] for job in order]
    plan.groups = [groups[job] for job in order]
    return plan


def _shown(value: object) -> object:
    """A value as an error line names it: itself, or its repr cut to 80 characters where longer."""
    text = repr(value)
    return value if len(text) <= 80 else text[:77] + "..."


def chunk_size(num_jobs: int, parallelism: int, minimum: int = 1, maximum: int = 64) -> int:
    """Rows per task: about CHUNKS_PER_WORKER tasks per worker, within [minimum, maximum]."""
    wanted = math.ceil(num_jobs / (max(1, parallelism) * CHUNKS_PER_WORKER))
    return max(1, min(maximum, max(minimum, wanted)))


def group_chunks(groups: list, size: int, most: int) -> list[list[int]]:
    """Consecutive jobs in chunks of about `size` that never split a (model, job, global batch)
    group of at most `most` jobs: a worker's table memo serves a whole group, where two workers
    sharing one would each tabulate its units (see docs/performance.md#batch-chunks). Larger groups
    are cut into near-equal pieces of at most `most`."""
    chunks: list[list[int]] = []
    current: list[int] = []
    start = 0
    while start < len(groups):
        end = start
        while end < len(groups) and groups[end] == groups[start]:
            end += 1
        members = list(range(start, end))
        if len(members) > most:
            if current:
                chunks.append(current)
                current = []
            pieces = math.ceil(len(members) / most)
            cuts = [len(members) * i // pieces for i in range(pieces + 1)]
            chunks += [members[cuts[i]:cuts[i + 1]] for i in range(pieces)]
        else:
            if current and len(current) + len(members) > size:
                chunks.append(current)
                current = []
            current += members
        start = end
    if current:
        chunks.append(current)
    return chunks


def open_backend(options: BatchOptions, catalogue: Catalogue) -> Backend:
    workers = options.workers or default_workers()
    if options.backend == "local":  # more processes than CPUs only cost memory and start-up time
        return LocalBackend(catalogue, min(workers, default_workers()))
    if options.backend == "serial":
        return SerialBackend(catalogue)
    from vramplan.batch import cluster as batch_cluster  # imports Ray or Dask only now

    if options.backend == "ray":
        return batch_cluster.RayBackend(catalogue, workers, options.address)
    if options.backend == "dask":
        return batch_cluster.DaskBackend(catalogue, workers, options.address)
    raise VramplanError("backend", options.backend, f"unknown; choose one of {', '.join(BACKENDS)}")


def _mismatch(worker_version: str, client_version: str) -> BatchError:
    return BatchError(
        f"vramplan version mismatch: the workers run {worker_version}, this client runs {client_version}; "
        f"install vramplan=={client_version} on every worker"
    )


def check_versions(worker_versions: Iterable[str], client_version: str) -> None:
    for version in sorted(set(worker_versions)):
        if version != client_version:
            raise _mismatch(version, client_version)


class _Chunks:
    """Chunks in flight: their jobs and attempts; lost ones are resubmitted, split, or given up."""

    def __init__(self, backend: Backend, plan: JobPlan, max_retries: int, backend_name: str) -> None:
        self.backend, self.plan, self.max_retries, self.backend_name = backend, plan, max_retries, backend_name
        self.any_done = False
        self.members: dict[int, list[int]] = {}
        self.attempts: dict[int, int] = {}
        self._next_id = 0

    def submit(self, members: list[int], attempts: int = 0) -> None:
        chunk = self._next_id
        self._next_id += 1
        self.members[chunk], self.attempts[chunk] = members, attempts
        self.backend.submit(chunk, [self.plan.jobs[job] for job in members], retry=attempts > 0)

    def lost(self, chunk: int, reason: str) -> list[tuple[int, dict[str, Any]]]:
        """Retry a lost chunk; the rows given up on, answered with status=error."""
        members, tries = self.members.pop(chunk), self.attempts.pop(chunk) + 1
        log.debug("batch chunk %d (%d jobs) lost, attempt %d: %s", chunk, len(members), tries, reason)
        if tries <= self.max_retries:
            self.submit(members, tries)
            return []
        if len(members) > 1:  # find the row that kills its worker: each alone, with its own retries
            for job in reversed(members):
                self.submit([job], 1)
            return []
        if not self.any_done:  # nothing ever finished: the workers are broken, not this row
            raise BatchError(f"batch workers keep dying without finishing any work ({reason})"
                             f"{START_HINT.get(self.backend_name, '')}")
        log.warning("giving up on a row whose worker died %d times: %s", tries, reason)
        answer = error_row(f"the worker solving this row died {tries} times ({reason})")
        return [(row, dict(answer)) for row in self.plan.rows_of_job[members[0]]]


def run_batch(
    catalogue: Catalogue,
    rows: Iterable[tuple[int, Mapping[str, Any]]],
    options: BatchOptions = BatchOptions(),
    progress: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (row_index, answer) for every row, in completion order (see the module docstring)."""
    if not isinstance(catalogue, Catalogue):  # None reached the local workers: a bare RuntimeError there
        raise VramplanError("catalogue", type(catalogue).__name__, "must be a vramplan.Catalogue (load_catalogue())")
    if not isinstance(options, BatchOptions):  # None or a dict was an AttributeError
        raise VramplanError("options", type(options).__name__, "must be a vramplan.BatchOptions")
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):  # None was a TypeError
        raise VramplanError("rows", type(rows).__name__, "must be an iterable of (row index, row mapping) pairs")
    if options.backend == "local":
        # The forkserver imports the solver (about a second) while this process plans the rows;
        # the pool forks its workers from it once the plan is made. (Started here, inside the
        # batch command's Ctrl-C handling, not before the sheet is read: there, a Ctrl-C that
        # came while a loaded machine spawned it was lost.)
        start_helpers_ignoring_ctrl_c()
    plan = plan_jobs(rows, catalogue, options.models_dir)
    if plan.architectures:
        catalogue = replace(catalogue, architectures={**catalogue.architectures, **plan.architectures})
    total, done = plan.num_rows, 0
    report = progress or (lambda done_rows, total_rows: None)
    for row_index, answer in plan.answered:
        done += 1
        yield row_index, answer
    report(done, total)
    if not plan.jobs or (stop is not None and stop.is_set()):
        return
    backend = open_backend(options, catalogue)
    finished = False
    try:
        client_version = batch_worker.package_version()
        check_versions(backend.worker_versions(), client_version)
        size = options.chunk_size or chunk_size(len(plan.jobs), backend.parallelism, backend.min_chunk_size,
                                                  backend.max_chunk_size)
        log.info("batch: %d rows, %d unique jobs, %d per task, backend %s (parallelism %d)",
                 total, len(plan.jobs), size, options.backend, backend.parallelism)
        chunks = _Chunks(backend, plan, options.max_retries, options.backend)
        if options.chunk_size:  # exactly what was asked
            pieces = [list(range(start, min(start + size, len(plan.jobs)))) for start in range(0, len(plan.jobs), size)]
        else:
            pieces = group_chunks(plan.groups, size, GROUP_CHUNK_FACTOR * size)
        for members in pieces:
            chunks.submit(members)
        failures_in_a_row = 0  # waits that brought lost chunks and nothing done
        while chunks.members:
            if stop is not None and stop.is_set():
                log.info("batch stopped with %d of %d rows done", done, total)
                return
            outcomes = backend.wait(POLL_S)
            if any(isinstance(outcome, ChunkDone) for outcome in outcomes):
                failures_in_a_row, chunks.any_done = 0, True
            elif outcomes:
                failures_in_a_row += 1
                if failures_in_a_row > MAX_FAILURES_IN_A_ROW:
                    raise BatchError(f"batch workers keep dying ({outcomes[0].reason})")
            for outcome in outcomes:
                if isinstance(outcome, ChunkDone):
                    if outcome.version != client_version:
                        raise _mismatch(outcome.version, client_version)
                    chunks.attempts.pop(outcome.chunk)
                    members = chunks.members.pop(outcome.chunk)
                    finished_rows = [(row, dict(answer)) for job, answer in zip(members, outcome.answers)
                                     for row in plan.rows_of_job[job]]
                else:
                    finished_rows = chunks.lost(outcome.chunk, outcome.reason)
                for row_index, answer in finished_rows:
                    done += 1
                    yield row_index, answer
                if finished_rows:
                    report(done, total)
        finished = True
    finally:
        backend.close(cancel=not finished)
