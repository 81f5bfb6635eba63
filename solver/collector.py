"""CPython's cyclic garbage collector paced for the length of a solve.

A solve allocates hundreds of thousands of short-lived containers (table keys, Plans, numpy
scalars, CP-SAT wrappers), nearly all freed by reference counting, while its tables and bounds
grow for the whole call. At CPython's default of one young collection per 700 new objects, the
survivors are promoted generation by generation and the growth triggers full collections, each
scanning every tracked object of the process: on the DeepSeek-V3 query of bench/solve_bench.py,
224 young, 20 middle and one full collection, about 100 ms of a 580 ms solve
(docs/performance.md#garbage-collector-pacing). A batch worker collects the young generation per
YOUNG_OBJECTS (batch/gc_pacing.py); a solve does the same while it runs and puts the caller's
threshold back after: nothing is frozen and no collection is skipped, the cycles a solve leaves
wait for at most YOUNG_OBJECTS new objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_OBJECTS = 50_000  # new container objects per young collection while a solve runs (CPython: 700)


@contextmanager
def paced_collector() -> Iterator[None]:
    """The young generation collected per YOUNG_OBJECTS new objects (or the caller's own, if
    larger) inside the block; the caller's thresholds restored on leaving it."""
    thresholds = gc.get_threshold()
    if thresholds[0] >= YOUNG_OBJECTS or thresholds[0] == 0:  # already paced, or automatic collection off
        yield
        return
    gc.set_threshold(YOUNG_OBJECTS, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
