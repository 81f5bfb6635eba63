"""Tables.parallel_traffic computes each recompute's traffic from the first one of its layout's
degrees, count and precision (models/time/parallel_time.py parallel_traffic's same_layout): what
the recompute changes (TP bytes, the forward's share, torch's ring, the expert FLOPs) anew, the
rest read from it. Every (layout, split, count, recompute, precision) of these spaces gives the
value of a plain parallel_traffic call, field for field, in any order of first use."""

from __future__ import annotations

import random

import pytest
from helpers.queries import TRAFFIC_QUERIES

from vramplan.models.core.setup import Job
from vramplan.models.time.parallel_time import parallel_traffic
from vramplan.solver.query import SolveQuery
from vramplan.solver.space_build import build_space
from vramplan.solver.tables import Tables

CASES = {
    **TRAFFIC_QUERIES,
    # MoE without EP on the hf stack (the expert loop's kernel)
    "mixtral hf": SolveQuery(model="mixtral-8x7b", job=Job(seq_len=4096), global_batch=32, tokens=1e9, max_gpus=16,
                             gpus=("h100-sxm-80gb",)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_recompute_from_the_layouts_first_traffic(catalogue, case: str) -> None:
    space = build_space(catalogue, CASES[case])
    arch, job = space.arch, space.job
    cells = [(space.layouts[li], space.counts[n_i], recompute, precision)
             for n_i, layouts in space.count_layouts.items() for li in layouts
             for recompute in space.recomputes for precision in space.precisions]
    random.Random(0).shuffle(cells)  # the first traffic of a layout is any recompute's, any split's
    cells = cells[:3000]
    tables = Tables(arch, job, space.global_batch)
    checked = set()
    for layout, n, recompute, precision in cells:
        derived = tables.parallel_traffic(layout, n, recompute, precision)
        resolved = recompute.resolved(arch.num_layers, layout)
        plain = parallel_traffic(arch, job, tables._replica_plan(layout, n, resolved, precision))
        assert derived.layout._replace(split=None) == plain.layout._replace(split=None)
        fields = {name: getattr(derived, name) for name in derived.__dataclass_fields__ if name != "layout"}
        assert fields == {name: getattr(plain, name) for name in fields}, (layout, n, recompute, precision)
        checked.add((layout.split is not None, recompute.mode, precision))
    assert len(checked) >= 3
