"""Keep CPython's cyclic garbage collector off a batch worker's table memo.

A worker's memo (solver/table_memo.py) grows to hundreds of thousands of container objects
(tables, bounds, cluster models) that live for the whole batch and form almost no reference
cycles. CPython's full collections scan every tracked object, and one is triggered each time the
tracked objects grow by a quarter, most of that scanning finding no garbage (see
docs/performance.md#garbage-collector-pacing).

So the worker freezes what is alive after each row (gc.freeze: collections skip those objects;
O(1), the generations' lists are spliced), and a collection only sees the objects the row in
progress made. Frozen objects still die by reference counting; only a cycle among them would
outlive its use, so after each chunk, once the process's allocated blocks have doubled since the
last full collection, everything is unfrozen, collected and frozen again: memory stays within
twice what a fully collected worker holds, at one full collection per doubling. The blocks are a
counter (sys.getallocatedblocks; gc.get_freeze_count walks the frozen list: too slow to ask per
chunk).

A row allocates hundreds of thousands of short-lived containers (keys, plans, CP-SAT wrappers),
nearly all freed by reference counting, so a worker collects the young generation per
YOUNG_OBJECTS instead of CPython's 700 (see docs/performance.md#garbage-collector-pacing). The
cycles a row leaves behind wait for at most that many new objects."""

from __future__ import annotations

import gc
import sys

from vramplan.solver.collector import YOUNG_OBJECTS  # new objects per young collection (CPython: 700), as a solve's


class GcPacing:
    """after_row() once a row is answered, after_chunk() once a chunk is."""

    def __init__(self) -> None:
        self.blocks_after_full = sys.getallocatedblocks()  # at the last full collection (or at start)
        self.paced = False

    def after_row(self) -> None:
        if not self.paced:  # the first row of this worker process
            self.paced = True
            gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])
        gc.freeze()

    def after_chunk(self) -> None:
        if sys.getallocatedblocks() > 2 * self.blocks_after_full:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.blocks_after_full = sys.getallocatedblocks()
