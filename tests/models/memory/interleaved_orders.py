"""Which micro-batches torch's ScheduleInterleaved1F1B has in flight on each of a rank's stages
(the counts tests/models/memory/test_pipeline_buffers.py holds models/memory/pipeline_buffers.py to).

Needs torch (2.13.0, CPU wheel); the tests read the CSV it wrote, not torch:

    python -m venv /tmp/venv && /tmp/venv/bin/pip install torch==2.13.0
    /tmp/venv/bin/python tests/models/memory/interleaved_orders.py > tests/models/memory/interleaved_1f1b_inflight.csv

For each pipeline size pp, stages per rank vpp, micro-batches m and rank: the rank's compute order
from the schedule's own `_calculate_single_rank_operations` (torch/distributed/pipelining/schedules.py
ScheduleInterleaved1F1B; the rounds as its __init__ sets them, and m it refuses marked `refused`),
replayed op by op: a FORWARD puts its micro-batch in flight on its stage, a FULL_BACKWARD takes it
off after it ran (backward_one_chunk pops fwd_cache[mb] and the chunk's activations go). During each
op the rank holds what is in flight; its activations peak at the ops holding the most (`peak`).
Over those peak ops: the most in flight on the rank's first local stage (`first_stage_max`), the
fewest on its last local stage while that stage runs an op (`last_stage_at_its_op`, the moment its
loss runs) and the most there at any peak op (`last_stage_max`)."""

from __future__ import annotations

import csv
import sys
from collections import Counter

import torch
from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B, _ComputationType

COLUMNS = ("pp", "vpp", "micro_batches", "rank", "peak", "first_stage_max", "last_stage_at_its_op", "last_stage_max")


def rank_order(pp: int, vpp: int, m: int, rank: int) -> list | None:
    """The rank's compute actions in order, None where the schedule refuses m."""
    schedule = ScheduleInterleaved1F1B.__new__(ScheduleInterleaved1F1B)  # its order needs no process group
    schedule.pp_group_size, schedule.n_local_stages, schedule._n_microbatches = pp, vpp, m
    schedule.number_of_rounds = max(1, m // pp)  # ScheduleInterleaved1F1B.__init__
    schedule.microbatches_per_round = m // schedule.number_of_rounds
    if m % schedule.number_of_rounds:
        return None  # __init__ raises "Interleaved 1F1B requires the number of microbatches to be a multiple..."
    return [a for a in schedule._calculate_single_rank_operations(rank) if a is not None]


def counts(pp: int, vpp: int, m: int, rank: int) -> dict | None:
    order = rank_order(pp, vpp, m, rank)
    if order is None:
        return None
    live: Counter[int] = Counter()
    during = []  # (in flight per local stage, the op's local stage) during each op
    for action in order:
        local = action.stage_index // pp
        if action.computation_type == _ComputationType.FORWARD:
            live[local] += 1
            during.append((tuple(live[i] for i in range(vpp)), local))
        else:
            during.append((tuple(live[i] for i in range(vpp)), local))
            live[local] -= 1
    peak = max(sum(held) for held, _ in during)
    at_peak = [(held, local) for held, local in during if sum(held) == peak]
    return {"peak": peak, "first_stage_max": max(held[0] for held, _ in at_peak),
            "last_stage_at_its_op": min(held[-1] for held, local in at_peak if local == vpp - 1),
            "last_stage_max": max(held[-1] for held, _ in at_peak)}


def main() -> None:
    out = sys.stdout
    out.write(f"# torch {torch.__version__} ScheduleInterleaved1F1B, written by tests/models/memory/interleaved_orders.py\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for pp in range(2, 9):
        for vpp in range(2, 5):
            for m in range(1, 3 * pp + 2):
                for rank in range(pp):
                    row = counts(pp, vpp, m, rank)
                    values = [row[c] for c in COLUMNS[4:]] if row else ["refused"] * 4
                    writer.writerow([pp, vpp, m, rank, *values])


if __name__ == "__main__":
    main()
