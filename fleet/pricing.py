"""Single-machine pseudo-schedules of the fleet in time buckets: the pricing side of bound.py.

Every bounded pool is a set of identical machines: its unit is the gcd of its windows' and its
usable slots' GPUs (an instance), so a pool of 16 GPUs whose jobs take 8 or 16 is two machines,
and a slot of k units is k copies of the job, one per machine. Time is cut into buckets of
`bucket_min` minutes and a job's interval [s, s + p) becomes buckets [floor(s/B), floor(s/B) +
floor(p/B)); since floor(x + y) >= floor(x) + floor(y), jobs that follow each other on a machine
still do in buckets, and every copy in bucket b runs at its last minute (b + 1) B - 1, so a real
schedule's copies in a bucket never exceed the pool's machines there. Releases and latest ends
floor the same way. A machine's jobs in buckets (a pseudo-schedule: a job may repeat, as in the
time-indexed LP) are a column of bound.py's master.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np

from vramplan.fleet.domain import IntFleet

MAX_BUCKETS = 2200  # a 91-day quarter in hours
MAX_PAIRS = 4_000_000  # (end bucket, item) pairs the DP lists


def bucket_minutes(fleet: IntFleet) -> int:
    """The finest bucket with at most MAX_BUCKETS over the horizon and MAX_PAIRS pairs (estimated
    from every usable slot's window): one hour for a quarter, one minute for a tiny fleet."""
    bucket = max(1, -(-fleet.horizon_min // MAX_BUCKETS))
    window_min = sum(fleet.latest_end(job) - job.release_min for job in fleet.jobs for s in job.slots
                     if fleet.pools[s.pool].windows is not None and fleet.usable(job, s))
    return max(bucket, -(-window_min // MAX_PAIRS))


@dataclass
class Machines:
    """A bounded pool as identical machines: `count` of them, `capacity[b]` usable in bucket b."""

    pool: int
    unit_gpus: int
    count: int
    capacity: np.ndarray  # machines usable per bucket (0 where none)


@dataclass
class Items:
    """Each (job, slot) on a bounded pool as a copy of the job on one of the pool's machines."""

    machine: np.ndarray  # index into the machine list
    job: np.ndarray
    slot: np.ndarray  # index into the job's slots
    copies: np.ndarray  # k: units of the slot
    cost: np.ndarray  # cents of the whole slot
    length: np.ndarray  # buckets (floored)
    first_end: np.ndarray  # least end bucket
    last_end: np.ndarray  # greatest end bucket


def pool_machines(fleet: IntFleet, bucket_min: int, buckets: int) -> list[Machines]:
    result = []
    for p, pool in enumerate(fleet.pools):
        if pool.windows is None:
            continue
        gpus = [w.gpus for w in pool.windows] + [s.gpus for job in fleet.jobs for s in job.slots
                                                 if s.pool == p and fleet.usable(job, s)]
        unit = reduce(math.gcd, gpus, 0) or 1
        # A job in bucket b runs at its last minute: the pool's GPUs there bound the copies in b.
        capacity = np.array([(pool.gpus_at((b + 1) * bucket_min - 1) or 0) // unit for b in range(buckets)],
                            dtype=np.int64)
        result.append(Machines(p, unit, (pool.capacity_gpus or 0) // unit, capacity))
    return result


def machine_items(fleet: IntFleet, machines: list[Machines], bucket_min: int) -> Items:
    where = {m.pool: i for i, m in enumerate(machines)}
    rows = []
    for j, job in enumerate(fleet.jobs):
        for c, slot in enumerate(job.slots):
            if slot.pool not in where or not fleet.usable(job, slot):
                continue
            m = machines[where[slot.pool]]
            length = slot.duration_min // bucket_min
            first = job.release_min // bucket_min + length
            last = fleet.latest_end(job) // bucket_min
            if first <= last:
                rows.append((where[slot.pool], j, c, slot.gpus // m.unit_gpus, slot.cost_cents, length, first, last))
    rows.sort()
    columns = list(zip(*rows)) if rows else [()] * 8
    return Items(*(np.array(c, dtype=np.int64) for c in columns))


def unbounded_cost(fleet: IntFleet) -> list[float]:
    """Each job's cheapest slot on an unbounded pool (inf where it has none)."""
    return [min((s.cost_cents for s in job.slots if fleet.pools[s.pool].windows is None and fleet.usable(job, s)),
                default=math.inf) for job in fleet.jobs]


class Pricing:
    """The best pseudo-schedule per machine for given duals: a DP over end buckets, f[b] the best
    value of a schedule ending by bucket b, each item ending at b read from f[b - length]. The
    (end, item) pairs where an item may end are listed once, by end bucket and machine, so each
    bucket costs a few numpy calls over the items whose window holds it."""

    def __init__(self, items: Items, machines: list[Machines], buckets: int) -> None:
        self.items, self.machines, self.buckets = items, machines, buckets
        n = len(machines)
        timed = items.length > 0
        self.timed = np.flatnonzero(timed)
        self.instant = np.flatnonzero(~timed)
        t = self.timed
        machine, length = items.machine[t], items.length[t]
        # Every (end bucket, item) where a timed item may end: inside its window, and none of its
        # buckets where the pool has no machine; ordered by end bucket, then item (so by machine).
        first, last = items.first_end[t], items.last_end[t]
        span = last - first + 1
        item = np.repeat(np.arange(len(t)), span)
        end = first[item] + np.arange(len(item)) - np.repeat(np.cumsum(span) - span, span)
        blocked = np.array([np.concatenate(([0], np.cumsum(m.capacity == 0))) for m in machines]).reshape(n, buckets + 1)
        keep = blocked[machine[item], end] == blocked[machine[item], end - length[item]]
        item, end = item[keep], end[keep]
        order = np.lexsort((item, end))
        item, end = item[order], end[order]
        self.pair_item = item
        self.pair_end = end
        self.pair_machine = machine[item]
        # f and the bucket prices' prefix sums are (buckets + 1) x machines, read flat.
        self.pair_back = (end - length[item]) * n + self.pair_machine
        self.pair_here = end * n + self.pair_machine
        self.pair_from = np.searchsorted(end, np.arange(buckets + 2))
        new_segment = np.ones(len(end), dtype=bool)
        new_segment[1:] = (end[1:] != end[:-1]) | (self.pair_machine[1:] != self.pair_machine[:-1])
        segment = np.flatnonzero(new_segment)
        self.segment_machine = self.pair_machine[segment]
        self.segment_offset = segment - self.pair_from[end[segment]]
        self.segment_from = np.searchsorted(end[segment], np.arange(buckets + 2))

    def run(self, profit: np.ndarray, busy: np.ndarray) -> tuple[np.ndarray, list[list[tuple[int, int]]]]:
        """(best value per machine, its (item, end bucket) pairs) for per-item `profit` (before
        bucket prices) and bucket prices `busy[machine, b]` (zero where the capacity is full)."""
        n = len(self.machines)
        f = np.zeros((self.buckets + 1, n))
        flat = f.reshape(-1)
        gain = profit[self.timed][self.pair_item]
        priced = bool(busy.any())
        if priced:
            prefix = np.concatenate((np.zeros((1, n)), np.cumsum(busy.T, axis=0)), axis=0).reshape(-1)
            gain = gain - (prefix[self.pair_here] - prefix[self.pair_back])
        back, machine_of, offset = self.pair_back, self.segment_machine, self.segment_offset
        pair_from, segment_from = self.pair_from.tolist(), self.segment_from.tolist()
        maximum, reduceat = np.maximum, np.maximum.reduceat
        for b in range(1, self.buckets + 1):
            row = f[b]
            row[:] = f[b - 1]
            lo, hi = pair_from[b], pair_from[b + 1]
            if lo == hi:
                continue
            s0, s1 = segment_from[b], segment_from[b + 1]
            machines = machine_of[s0:s1]
            row[machines] = maximum(row[machines], reduceat(flat[back[lo:hi]] + gain[lo:hi], offset[s0:s1]))
        values = f[-1].copy()
        chosen: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for m in range(n):
            b = self.buckets
            while b > 0 and f[b, m] > 0:
                if f[b, m] == f[b - 1, m]:
                    b -= 1
                    continue
                lo, hi = self.pair_from[b], self.pair_from[b + 1]
                mine = lo + np.flatnonzero(self.pair_machine[lo:hi] == m)
                hit = mine[flat[back[mine]] + gain[mine] == f[b, m]][0]
                item = int(self.timed[self.pair_item[hit]])
                chosen[m].append((item, b))
                b -= int(self.items.length[item])
        # Instant items (shorter than a bucket) take no time: each job at most once per machine.
        best_instant: dict[tuple[int, int], tuple[float, int]] = {}
        for i in self.instant:
            key = (int(self.items.machine[i]), int(self.items.job[i]))
            if profit[i] > 0 and profit[i] > best_instant.get(key, (0.0, -1))[0]:
                best_instant[key] = (float(profit[i]), int(i))
        for (m, _), (gain_, i) in best_instant.items():
            values[m] += gain_
            chosen[m].append((i, 0))
        return values, chosen
