"""Issue 35: a query's GPUs, counts and clusters (solver/placement.py) are one value shared by every
space over the same offerings, pricing and counts per instance size, whatever the model or job, and
the step caps are derived per shape. Each is checked against what it replaced: the clusters built
offering by offering for the query alone, allowed_counts per offering, and the caps per cluster."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job
from vramplan.models.time.cost import instance_price_usd_per_hour, network_gb_per_s, num_instances
from vramplan.solver.clusters import PRICE_UNITS_PER_USD
from vramplan.solver.placement import counts_by_instance_size
from vramplan.solver.query import SolveQuery
from vramplan.solver.space import MAX_STEP_CAP_US
from vramplan.solver.space_build import build_space
from vramplan.solver.space_domains import allowed_counts, gpu_counts, query_offerings
from vramplan.solver.table_memo import TableMemo

FULL_70B = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9)
LORA_8B = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048, method="lora"), global_batch=64, tokens=1e9)


def _clusters_alone(catalogue, space) -> list[tuple]:
    """The clusters as build_space made them for the query alone before placements were shared:
    offering by offering (sorted by name), each count allowed_counts gives it."""
    query, arch = space.query, space.arch
    offerings = query_offerings(catalogue, query)
    sizes = gpu_counts({lay.model_parallel for lay in space.layouts}, space.global_batch, query.max_gpus)
    gpus = sorted({o.gpu for o in offerings})
    counts = sorted({n for o in offerings for n in allowed_counts(o, query, sizes, arch.model_type)})
    made = []
    for o in offerings:
        gpu = catalogue.gpu(o.gpu)
        for n in allowed_counts(o, query, sizes, arch.model_type):
            price = num_instances(n, o) * instance_price_usd_per_hour(o, query.pricing)
            made.append((o.name, gpus.index(o.gpu), counts.index(n), n, num_instances(n, o),
                         round(price * PRICE_UNITS_PER_USD), network_gb_per_s(o, gpu)))
    return made


def _clusters(space) -> list[tuple]:
    return [(c.offering.name, c.gpu_index, c.count_index, c.num_gpus, c.num_instances, c.price_units, c.network_gb_per_s)
            for c in space.clusters]


def test_spaces_of_other_models_and_jobs_share_one_placement_equal_to_their_own(catalogue):
    memo = TableMemo()
    full, lora = build_space(catalogue, FULL_70B, memo=memo), build_space(catalogue, LORA_8B, memo=memo)
    assert full.placement is lora.placement and full.clusters is lora.clusters  # one value for both
    assert len(full.clusters) > 500
    for space in (full, lora):
        assert _clusters(space) == _clusters_alone(catalogue, space)
        assert [g.name for g in space.gpus] == sorted({c.offering.gpu for c in space.clusters})
        names = sorted({c.offering.name for c in space.clusters}, key=lambda name: (name.startswith("list/"), name))
        assert space.offering_rank == [names.index(c.offering.name) for c in space.clusters]
        assert all(space.clusters[c].shape == shape for shape, members in space.shape_members.items() for c in members)
        assert sorted(c for members in space.shape_members.values() for c in members) == list(range(len(space.clusters)))


@pytest.mark.parametrize("change", [{"pricing": "spot"}, {"max_nodes": 2}, {"gpus": ("h100-sxm-80gb",)}],
                         ids=["pricing", "max-nodes", "gpus"])
def test_what_a_placement_reads_gives_another(catalogue, change):
    memo = TableMemo()
    base, changed = build_space(catalogue, FULL_70B, memo=memo), build_space(catalogue, FULL_70B.model_copy(update=change), memo=memo)
    assert changed.placement is not base.placement
    assert _clusters(changed) == _clusters_alone(catalogue, changed)


@pytest.mark.parametrize("update", [{}, {"max_nodes": 3}, {"max_gpus": 24}], ids=["default", "max-nodes", "max-gpus"])
def test_counts_by_instance_size_are_each_offerings_allowed_counts(catalogue, update):
    """allowed_counts reads only the offering's GPUs per instance, so one instance size's offerings share them."""
    query = LORA_8B.model_copy(update=update)
    offerings = query_offerings(catalogue, query)
    sizes = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128]
    by_size = counts_by_instance_size(offerings, query, sizes, "llama")
    assert len(by_size) >= 3
    assert all(by_size[o.num_gpus] == tuple(allowed_counts(o, query, sizes, "llama")) for o in offerings)


@pytest.mark.parametrize("limits", [{}, {"budget_usd": 3000.0}, {"deadline_hours": 100.0, "min_mfu": 0.3},
                                    {"max_days": 0, "min_mfu": 0.0}],
                         ids=["defaults", "budget", "deadline-and-floor", "none"])
def test_step_caps_per_shape_are_each_clusters_own(catalogue, limits):
    space = build_space(catalogue, FULL_70B.model_copy(update=limits))
    fixed = [cap for cap in (space.deadline_bound_us, space.duration_bound_us) if cap is not None]
    budget = space.budget_bound_cost_units
    for c, cluster in enumerate(space.clusters):
        mfu = space.mfu_bound_us(c)
        bounds = fixed + ([mfu] if mfu is not None else []) + ([budget // max(1, cluster.price_units)] if budget is not None else [])
        assert space.step_caps_us[c] == (min(*bounds, MAX_STEP_CAP_US) if bounds else None)
