"""Keep CPython's cyclic garbage collector off a batch worker's table memo.

A worker's memo (solver/table_memo.py) grows to hundreds of thousands of container objects
(tables, bounds, cluster models) that live for the whole batch and form almost no reference
cycles. CPython's full collections scan every tracked object, and one is triggered each time the
tracked objects grow by a quarter: on 2,000 rows of the batch benchmark's mix, 32 full collections
took 13.7 s of 61.5 s CPU and freed 1,320 objects in all (gen 0 and 1: 3.5 s for 931 objects;
the garbage is import-time functions, cells and types, no table or CP-SAT model).

So the worker freezes what is alive after each row (gc.freeze: collections skip those objects;
O(1), the generations' lists are spliced), and a collection only sees the objects the row in
progress made. Frozen objects still die by reference counting; only a cycle among them would
outlive its use, so after each chunk, once the process's allocated blocks have doubled since the
last full collection, everything is unfrozen, collected and frozen again: memory stays within
twice what a fully collected worker holds, at one full collection per doubling. The blocks are a
counter (sys.getallocatedblocks); gc.get_freeze_count walks the frozen list, 0.3 s at 850,000
scattered objects, a quarter of the CPU when asked after every chunk.

A row allocates hundreds of thousands of short-lived containers (keys, plans, CP-SAT wrappers),
nearly all freed by reference counting; at CPython's default of a young collection per 700 new
objects, the 1,363-row sample of the batch benchmark made 2,551 young and 85 middle collections
(0.65 s of its 26 s of CPU); a worker collects the young generation per YOUNG_OBJECTS instead
(3 collections, 0.03 s). The cycles a row leaves behind wait for at most that many new objects."""

from __future__ import annotations

import gc
import sys

YOUNG_OBJECTS = 50_000  # new container objects per young collection in a pacing worker (CPython: 700)


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
