"""Where batch chunks run: the common interface, a local process pool, and in-process (serial).

A backend takes chunks (a list of job dicts, tagged with an integer id), and reports each chunk
as done (the worker's vramplan version and one answer row per job) or lost (its worker died).
Ray and Dask backends live in batch/cluster.py and are imported only when chosen.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from concurrent import futures
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Protocol

from vramplan.batch import worker as batch_worker
from vramplan.batch.pool import pool_context, start_helpers_ignoring_ctrl_c
from vramplan.models.catalogue.catalogue import Catalogue

log = logging.getLogger(__name__)


class BatchError(RuntimeError):
    """The batch itself cannot run: no cluster, mismatched versions, workers that keep dying."""


@dataclass(frozen=True)
class ChunkDone:
    chunk: int
    version: str
    answers: list[dict[str, Any]]


@dataclass(frozen=True)
class ChunkLost:
    chunk: int
    reason: str


Outcome = ChunkDone | ChunkLost


class Backend(Protocol):
    parallelism: int  # chunks that can run at once (sizes the chunks)
    min_chunk_size: int  # per-task overhead: one row per task is as dear as a solve on a cluster
    max_chunk_size: int  # small chunks balance the load and lose less work to a crash or Ctrl-C

    def worker_versions(self) -> set[str]: ...

    def submit(self, chunk: int, jobs: list[dict[str, Any]], retry: bool = False) -> None: ...

    def wait(self, timeout_s: float) -> list[Outcome]: ...

    def close(self, cancel: bool) -> None: ...


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class LocalBackend:
    """A ProcessPoolExecutor; the catalogue is sent once per worker process (initializer).

    A worker that dies breaks the whole pool and fails every future in it, so only one chunk per
    worker is handed to the pool at a time (the rest wait here): a crash then blames only the
    chunks that were running, and a retried chunk goes first so that a row that kills its worker
    is found quickly.
    """

    min_chunk_size = 1
    max_chunk_size = 16  # local tasks are cheap (docs/performance.md#batch-chunks)

    def __init__(self, catalogue: Catalogue, workers: int) -> None:
        self._catalogue = catalogue
        self.parallelism = workers
        self._queue: deque[tuple[int, list[dict[str, Any]]]] = deque()
        self._futures: dict[futures.Future, int] = {}
        self._executor = self._start()

    def _start(self) -> futures.ProcessPoolExecutor:
        start_helpers_ignoring_ctrl_c()
        return futures.ProcessPoolExecutor(
            max_workers=self.parallelism,
            mp_context=pool_context(),
            initializer=batch_worker.init_pool_worker,
            initargs=(self._catalogue, os.getpid()),
        )

    def worker_versions(self) -> set[str]:
        return set()  # the pool runs this very installation; each chunk still reports its version

    def submit(self, chunk: int, jobs: list[dict[str, Any]], retry: bool = False) -> None:
        if retry:
            self._queue.appendleft((chunk, jobs))
        else:
            self._queue.append((chunk, jobs))

    def _top_up(self) -> None:
        while self._queue and len(self._futures) < self.parallelism:
            chunk, jobs = self._queue.popleft()
            self._futures[self._executor.submit(batch_worker.solve_chunk_in_pool, jobs)] = chunk

    def _outcome(self, future: futures.Future, chunk: int) -> Outcome:
        try:
            version, answers = future.result()
        except BrokenProcessPool as error:
            return ChunkLost(chunk, f"worker process died ({error})")
        return ChunkDone(chunk, version, answers)

    def wait(self, timeout_s: float) -> list[Outcome]:
        self._top_up()
        if not self._futures:
            return []
        done, _ = futures.wait(self._futures, timeout=timeout_s, return_when=futures.FIRST_COMPLETED)
        outcomes = [self._outcome(future, self._futures.pop(future)) for future in done]
        if any(isinstance(outcome, ChunkLost) for outcome in outcomes):
            # A dead worker breaks the whole pool: the chunks running beside it are lost too.
            log.warning("a batch worker process died; restarting the pool and retrying its chunks")
            for future, chunk in self._futures.items():
                lost = not future.done() or future.cancelled() or future.exception() is not None
                outcomes.append(ChunkLost(chunk, "pool restarted") if lost else self._outcome(future, chunk))
            self._futures.clear()
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = self._start()
        self._top_up()
        return outcomes

    def close(self, cancel: bool) -> None:
        self._queue.clear()
        if not cancel:
            self._executor.shutdown(wait=True)
            return
        processes = list((getattr(self._executor, "_processes", None) or {}).values())
        self._executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:  # chunks in flight are dropped: their rows were never reported
            process.terminate()
        for process in processes:
            process.join(timeout=5)


class SerialBackend:
    """Solves in this process, one chunk per wait(): for debugging and the Python API. It leaves
    this process's garbage collector as it is (no gc.freeze: batch/gc_pacing.py is for workers)."""

    min_chunk_size = 1
    max_chunk_size = 16
    parallelism = 1

    def __init__(self, catalogue: Catalogue) -> None:
        self._catalogue = catalogue
        self._queue: list[tuple[int, list[dict[str, Any]]]] = []

    def worker_versions(self) -> set[str]:
        return set()

    def submit(self, chunk: int, jobs: list[dict[str, Any]], retry: bool = False) -> None:
        self._queue.append((chunk, jobs))

    def wait(self, timeout_s: float) -> list[Outcome]:
        if not self._queue:
            return []
        chunk, jobs = self._queue.pop(0)
        version, answers = batch_worker.solve_chunk(self._catalogue, jobs, pace_gc=False)
        return [ChunkDone(chunk, version, answers)]

    def close(self, cancel: bool) -> None:
        self._queue.clear()
