"""A bounded pool's free GPUs over time as a step function, for the serial schedule-generation
scheme (fleet/sgs.py): the earliest start where a job's GPUs fit for its whole duration.

free[i] is the pool's GPUs (its window at points[i]) less the GPUs of the jobs placed over
[points[i], points[i+1]); the points are 0, the horizon, the windows' edges and the placed jobs'
starts and ends. A search walks the segments once from the release: O(segments) where the
former scan tried every candidate start against every placed job (cubic; 34 s of greedy at 2,000
jobs, docs/performance.md#fleet).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from vramplan.fleet.domain import IntFleet


class Profile:
    """The free GPUs of one bounded pool of `fleet`, with `placed` (start, end, GPUs) taken."""

    def __init__(self, fleet: IntFleet, pool_index: int, placed: list[tuple[int, int, int]] = ()) -> None:  # type: ignore[assignment]
        pool = fleet.pools[pool_index]
        assert pool.windows is not None, "an unbounded pool has no profile"
        self.horizon = fleet.horizon_min
        edges = {0, self.horizon, *(w.from_min for w in pool.windows), *(w.to_min for w in pool.windows)}
        change: Counter[int] = Counter()
        for start, end, gpus in placed:
            change[start] += gpus
            change[end] -= gpus
        points = sorted(edges | set(change))
        used = np.cumsum([change[point] for point in points], dtype=np.int64)
        self.points = np.array(points, dtype=np.int64)
        self.free = np.array([pool.gpus_at(point) or 0 for point in points], dtype=np.int64) - used

    def _split(self, point: int) -> int:
        """The index of the segment starting at `point` (made so if need be)."""
        i = int(np.searchsorted(self.points, point, side="right")) - 1
        if self.points[i] == point:
            return i
        self.points = np.insert(self.points, i + 1, point)
        self.free = np.insert(self.free, i + 1, self.free[i])
        return i + 1

    def take(self, start: int, end: int, gpus: int) -> None:
        """Place a job of `gpus` GPUs over [start, end)."""
        first = self._split(start)
        last = self._split(end)  # before self.free is read: a split replaces the array
        self.free[first:last] -= gpus

    def earliest(self, release: int, duration: int, gpus: int, latest_end: int | None = None) -> int | None:
        """The earliest start >= release where `gpus` GPUs are free for `duration`, ending by the
        horizon (and by `latest_end`); None when there is none.

        The candidates are the release and the end of each segment short of GPUs in between; each
        holds if the next short segment starts `duration` or more after it (or the limit does)."""
        limit = self.horizon if latest_end is None else min(self.horizon, latest_end)
        if release + duration > limit:
            return None
        first = int(np.searchsorted(self.points, release, side="right")) - 1
        last = int(np.searchsorted(self.points, limit, side="left"))  # segments starting before the limit
        short = np.flatnonzero(self.free[first:last] < gpus) + first
        if not short.size:
            return release
        starts = np.concatenate(([release], self.points[short + 1]))
        ends = np.concatenate((self.points[short], [limit]))
        fits = np.flatnonzero(ends - starts >= duration)
        return int(starts[fits[0]]) if fits.size else None
