"""batch/gc_pacing.py: a batch worker freezes what survives each row, so CPython's cyclic
collector stops rescanning the table memo, and still frees a frozen reference cycle once the
process's allocated blocks have doubled. Its CPU effect is measured in bench/, never timed here."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest

from vramplan.batch import gc_pacing
from vramplan.batch import worker as batch_worker
from vramplan.batch.run import BatchOptions, plan_jobs, run_batch
from vramplan.solver.table_memo import TableMemo


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def _cycle() -> weakref.ref:
    """A reference cycle (only the cyclic collector frees it), reachable only through the weakref."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def unfrozen():
    gc.collect()
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()
    gc.collect()


def test_a_frozen_cycle_waits_for_the_doubling_then_is_freed():
    pacing = gc_pacing.GcPacing()
    pacing.after_row()  # everything alive now is frozen
    alive = _cycle()
    pacing.after_row()  # the cycle is frozen while still in use ...
    gc.collect()
    assert alive() is not None  # ... so collections skip it (what spares the memo's objects)
    pacing.after_chunk()  # fewer than twice the allocated blocks of the last full collection
    assert alive() is not None
    pacing.blocks_after_full = sys.getallocatedblocks() // 2 - 1  # as if the heap had doubled since
    pacing.after_chunk()
    assert alive() is None  # unfrozen, collected, frozen again
    assert gc.get_freeze_count() > 0
    assert pacing.blocks_after_full > sys.getallocatedblocks() // 2  # the new reference


def test_garbage_of_the_row_in_progress_is_still_collected():
    pacing = gc_pacing.GcPacing()
    pacing.after_row()
    dead = _cycle()  # made after the freeze: an ordinary young cycle
    gc.collect()
    assert dead() is None


def test_a_batch_chunk_freezes_what_its_rows_keep(catalogue, monkeypatch):
    plan = plan_jobs(enumerate([{"model": "gpt2-124m", "seq_len": "1024", "gpus": "h100-sxm-80gb", "max_gpus": "2"}]))
    monkeypatch.setattr(batch_worker, "_tables", TableMemo())
    monkeypatch.setattr(batch_worker, "_gc_pacing", gc_pacing.GcPacing())
    gc.unfreeze()
    _, answers = batch_worker.solve_chunk(catalogue, plan.jobs)
    assert answers[0]["status"] == "optimal"
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == gc_pacing.YOUNG_OBJECTS  # young collections per 50,000 new objects
    spaces = batch_worker._tables._spaces  # the memo's store of spaces, a tracked container
    assert spaces and gc.is_tracked(spaces)
    assert id(spaces) not in {id(obj) for obj in gc.get_objects()}  # in no generation: frozen


def test_the_serial_backend_leaves_the_callers_collector_alone(catalogue, monkeypatch):
    monkeypatch.setattr(batch_worker, "_tables", TableMemo())
    gc.unfreeze()
    rows = [{"model": "gpt2-124m", "seq_len": "1024", "gpus": "h100-sxm-80gb", "max_gpus": "2"}]
    thresholds = gc.get_threshold()
    answers = list(run_batch(catalogue, enumerate(rows), BatchOptions(backend="serial")))
    assert answers[0][1]["status"] == "optimal"
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
