"""The explanation's yes/no question on a space: is there any plan? (api.plan_exists). The order is
free when nothing is optimised, so the units most likely to hold a point come first; the same unit
search as solve_cpsat (solver/cpsat_engine.py) skips units on their bounds and asks CP-SAT for one point."""

from __future__ import annotations

from vramplan.solver.cpsat_bounds import LAST_TIER
from vramplan.solver.cpsat_engine import UnitSearch, checked_point
from vramplan.solver.engine import STEP_WORK, Budget, TimeLimitReached
from vramplan.solver.points import Choice, step_cap_us
from vramplan.solver.space import SearchSpace


def find_cpsat(space: SearchSpace, budget: Budget | None = None) -> Choice | None:
    """Any point of the space (None: none; TimeLimitReached when `budget` (default: the query's own)
    runs out first): what the explanation's yes/no questions need (does this relaxed query fit?).
    The order is free when nothing is optimised, so the units most likely to hold a point come
    first: the largest GPU memory, then the most GPUs (ZeRO and model parallelism shard more). A
    unit is skipped on its bounds when it cannot fit (memory, or the deadline's and budget's step
    cap) and its CP-SAT model asked for one point otherwise; an infeasible space is exhausted as
    by solve_cpsat."""
    search = UnitSearch(space, Budget.of(space.query) if budget is None else budget)
    by_room = sorted(range(len(space.clusters)),
                     key=lambda c: (-space.limit_mib[space.clusters[c].gpu_index], -space.clusters[c].num_gpus, c))
    for c in by_room:
        if not search.bounds.may_fit(c) or search.dominated(c):
            continue
        cap = step_cap_us(space, c)
        for branch in search.branches(c):
            search.budget.charge(STEP_WORK)
            # The tiers in order, each at most the next: the first that leaves nothing (None, or
            # above the cap) skips the unit as the last tier would, before the dearer tiers run.
            if any(lower is None or (cap is not None and lower > cap)
                   for lower in (search.bounds.step_bound_us(c, branch, tier) for tier in range(1, LAST_TIER + 1))):
                continue
            found = search.point((c, branch), 0, None)
            if found is not None:
                return checked_point(space, c, found)[0]
            if search.timed_out:  # CP-SAT stopped at a limit: "no point" is not proven
                raise TimeLimitReached(search.budget.reached)
    return None
