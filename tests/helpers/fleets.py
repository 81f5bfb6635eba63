"""Random tiny fleets in integer units and a minute-by-minute schedule check: the fleet oracle's
cases (fleet/test_oracle.py), shared by the bound and LNS tests and the Ctrl-C child process."""

from __future__ import annotations

import random

from vramplan.fleet.domain import IntFleet, IntJob, IntPool, Slot, Window


def random_fleet(seed: int, objective: str) -> IntFleet:
    """At most 5 jobs, 2 pools (one bounded with two availability windows, one bounded or
    unbounded) and 1-3 slots per job."""
    rng = random.Random(seed)
    horizon = rng.randint(30, 60)
    split = rng.randint(5, horizon - 5)
    pools = [IntPool("a", (Window(0, split, rng.choice([4, 8])), Window(split, horizon, rng.choice([0, 4, 8]))),
                     committed=rng.random() < 0.5)]
    pools.append(IntPool("b", None if rng.random() < 0.3 else (Window(rng.randint(0, 10), horizon, rng.choice([2, 4])),)))
    jobs = []
    for _ in range(rng.randint(1, 5)):
        slots = tuple(Slot(pool=rng.randint(0, 1), gpus=rng.choice([1, 2, 4, 8]), duration_min=rng.randint(3, 25),
                           cost_cents=rng.randint(0, 50)) for _ in range(rng.randint(1, 3)))
        release = rng.randint(0, 15)
        deadline = release + rng.randint(5, 45) if rng.random() < 0.7 else None
        jobs.append(IntJob(release_min=release, deadline_min=deadline, weight=rng.randint(0, 3),
                           required=rng.random() < 0.2, slots=slots))
    return IntFleet(jobs=tuple(jobs), pools=tuple(pools), horizon_min=horizon, objective=objective)  # type: ignore[arg-type]


def check_schedule(fleet: IntFleet, schedule) -> None:
    """The schedule itself is valid: windows, deadlines and every pool's GPUs at every minute."""
    for job, c, start in zip(fleet.jobs, schedule.slot, schedule.start_min):
        if c is None:
            continue
        slot = job.slots[c]
        assert start >= job.release_min and start + slot.duration_min <= fleet.latest_end(job)
    for p, pool in enumerate(fleet.pools):
        if pool.windows is None:
            continue
        for minute in range(fleet.horizon_min):
            used = sum(job.slots[c].gpus for job, c, s in zip(fleet.jobs, schedule.slot, schedule.start_min)
                       if c is not None and job.slots[c].pool == p and s <= minute < s + job.slots[c].duration_min)
            assert used <= (pool.gpus_at(minute) or 0), (p, minute)
