"""One time budget for a whole fleet run (--time-limit, FleetQuery.time_limit_s), shared by its phases.

The budget starts when the run starts (the command: before it reads the sheets) and every phase
stops by its share of it: the candidate plans by CANDIDATE_SHARE (jobs not reached are answered
`unplanned`, never left out silently), the schedule (greedy, model, CP-SAT stages) by
SCHEDULE_SHARE, the left shift and the explanations by the end less OUTPUT_S_PER_JOB per job (what
turning the schedule into rows and writing them takes). What runs past the end is what no phase
can stop midway: one planner solve, one model build's last stretch, the rows and the file
(docs/fleet.md#time-limit has the margin measured).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

CANDIDATE_SHARE = 0.5  # of the budget, counted from its start: the candidate plans stop here
SCHEDULE_SHARE = 0.9  # the schedule (greedy, model, stages) stops here; the rest is the finish's
# The answer's rows and the output file after the explanations: 1.9 s for 10,000 jobs measured
# (0.7 s of assignments and pool use, 0.6 s of rows, 0.3 s to write, 0.3 s to exit).
OUTPUT_S_PER_JOB = 0.0002


class TimeUp(Exception):
    """The run's time budget ran out before this step finished (its result would be partial)."""


@dataclass(frozen=True)
class Budget:
    """[start, end] in time.perf_counter() seconds."""

    start: float
    end: float

    @classmethod
    def of(cls, seconds: float) -> Budget:
        now = time.perf_counter()
        return cls(now, now + seconds)

    def at(self, share: float) -> float:
        """The instant `share` of the budget has passed."""
        return self.start + share * (self.end - self.start)

    def explain_until(self, num_jobs: int) -> float:
        """When the explanations stop: the end, less the time the answer's rows will take."""
        return max(self.at(SCHEDULE_SHARE), self.end - OUTPUT_S_PER_JOB * num_jobs)


def left(until: float | None) -> float:
    """Seconds before `until` (infinite without one)."""
    return float("inf") if until is None else until - time.perf_counter()


def check(until: float | None) -> None:
    """Raise TimeUp once `until` has passed."""
    if left(until) <= 0:
        raise TimeUp
