"""Issue 35: the branch-and-bound's first tier reads every cluster at once (cpsat_engine.UnitSearch
._first_tier, UnitBounds.may_fit_each): the same heap entries as asking each cluster in turn
whether it may fit (any least share within both its GPU limit and its host budget), whether a
cheaper same-hardware cluster takes its points, and its tier-0 bound against its step cap."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job
from vramplan.models.core.units import BYTES_PER_MIB
from vramplan.solver.cpsat_engine import UnitSearch
from vramplan.solver.engine import Budget
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.space_build import build_space

HEADLINE = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9)
QUERIES = {
    "headline": HEADLINE,
    "time": HEADLINE.model_copy(update={"objective": "time"}),
    "budget-spot": HEADLINE.model_copy(update={"budget_usd": 2500.0, "pricing": "spot"}),
    "offload-small-gpus": SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096), global_batch=32, tokens=1e9,
                                     gpus=("rtx4090-24gb", "l4-24gb", "a100-sxm-40gb"), pins=Pins(offload="optimizer")),
    "405b": SolveQuery(model="llama-3.1-405b", job=Job(seq_len=8192), global_batch=2048, tokens=15.6e12, objective="time",
                       max_gpus=4096, gpus=("h100-sxm-80gb",)),
}


def _may_fit_alone(search: UnitSearch, c: int) -> bool:
    """may_fit as it read one cluster: a least share within the GPU's limit and the cluster's host budget."""
    space, cluster = search.space, search.space.clusters[c]
    limit, host = space.limit_mib[cluster.gpu_index], space.host_budget_mib_per_gpu[c]
    shares = search.bounds._least_shares(cluster.count_index, space.gpu_precisions[cluster.gpu_index])
    return any(gpu <= limit * BYTES_PER_MIB and host_bytes <= host * BYTES_PER_MIB for gpu, host_bytes in shares)


@pytest.mark.parametrize("name", QUERIES)
def test_the_first_tier_is_each_clusters_own(catalogue, name):
    query = QUERIES[name]
    space = build_space(catalogue, query)
    search = UnitSearch(space, Budget.of(query))
    fits = search.bounds.may_fit_each()
    assert fits == [_may_fit_alone(search, c) for c in range(len(space.clusters))]
    assert any(fits) and (name != "offload-small-gpus" or not all(fits))  # the test sees both answers
    caps = list(space.step_caps_us)
    expected = []
    for c in range(len(space.clusters)):
        if not _may_fit_alone(search, c) or search.dominated(c):
            continue
        bound = search.bounds.primary_bound(c, None, query.objective, tier=0)
        if bound is not None and (caps[c] is None or search.bounds.compute_step_us(c) <= caps[c]):
            expected.append((bound, 0, c, ()))
    assert search._first_tier(query.objective, caps) == expected
    assert expected
