"""Where a query's plans can run: the GPUs, GPU counts and clusters (a GPU count of one offering at
its price) of its offerings, and what the search looks up by cluster: its offering's rank (the tie
break), the clusters of each shape, the GPUs of each count and each cluster's host RAM.

A placement reads only the offerings, the pricing and the GPU counts each instance size may rent, so
the queries that agree on those share one value (TableMemo.placement) whatever their model or job:
the batch benchmark's every-7th-group sample built 2,142 spaces over 544 placements, 970,000
clusters of which 90,000 distinct (docs/performance.md#placements-shared-by-value). It is made
whole and never changed: the spaces that share it only read it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.core.catalogue_schema import GpuSpec, Offering
from vramplan.models.time.cost import Pricing, instance_price_usd_per_hour, network_gb_per_s, num_instances
from vramplan.solver.clusters import PRICE_UNITS_PER_USD, Cluster, Shape
from vramplan.solver.query import SolveQuery
from vramplan.solver.space_domains import allowed_counts


@dataclass(frozen=True)
class Placement:
    gpus: list[GpuSpec]  # the offerings' GPUs, by name
    counts: list[int]  # every count some offering rents, ascending
    clusters: list[Cluster]  # by offering name, then count
    offering_rank: list[int]  # per cluster: its offering's rank (real providers before list/ rows, then by name)
    shape_members: dict[Shape, list[int]]  # the clusters of each shape, in cluster order
    gpus_of_count: dict[int, tuple[int, ...]]  # count index -> the GPU indices its clusters have, ascending
    host_mib_on_node: list[tuple[int, int]]  # per cluster: (the instance's host RAM in MiB, its GPUs in use)
    # per cluster: (GPU index, count index, price units, whether no other cluster has its shape): what
    # the branch-and-bound's first tier reads of every cluster (cpsat_engine.UnitSearch.best)
    tier0_fields: list[tuple[int, int, int, bool]]

    def host_budget_mib_per_gpu(self, capacity_per_mille: int) -> list[int]:
        """Per cluster, the host RAM a GPU may use at this capacity fraction (Job.capacity_per_mille)."""
        return [host_mib * capacity_per_mille // 1000 // on_node for host_mib, on_node in self.host_mib_on_node]


def counts_by_instance_size(offerings: Sequence[Offering], query: SolveQuery, sizes: list[int],
                            model_type: str) -> dict[int, tuple[int, ...]]:
    """The GPU counts an offering rents, by its GPUs per instance: allowed_counts reads nothing else
    of the offering, so the offerings of one instance size share them."""
    by_size: dict[int, tuple[int, ...]] = {}
    for offering in offerings:
        if offering.num_gpus not in by_size:
            by_size[offering.num_gpus] = tuple(allowed_counts(offering, query, sizes, model_type))
    return by_size


def placement_key(offerings: Sequence[Offering], pricing: Pricing, by_size: dict[int, tuple[int, ...]]) -> tuple:
    """Everything a placement reads (the catalogue aside, which TableMemo checks by identity)."""
    return pricing, tuple(o.name for o in offerings), tuple(sorted(by_size.items()))


def make_placement(catalogue: Catalogue, offerings: Sequence[Offering], pricing: Pricing,
                   by_size: dict[int, tuple[int, ...]]) -> Placement:
    """The clusters of `offerings` (query_offerings: sorted by name) at the counts `by_size` allows."""
    gpus = sorted({catalogue.gpu(o.gpu).name: catalogue.gpu(o.gpu) for o in offerings}.values(), key=lambda g: g.name)
    gpu_index = {g.name: i for i, g in enumerate(gpus)}
    counts = sorted({n for o in offerings for n in by_size[o.num_gpus]})
    count_index = {n: i for i, n in enumerate(counts)}
    clusters = []
    for offering in offerings:
        g = gpu_index[offering.gpu]
        hourly = instance_price_usd_per_hour(offering, pricing)
        network = network_gb_per_s(offering, gpus[g])
        for n in by_size[offering.num_gpus]:
            instances = num_instances(n, offering)
            clusters.append(Cluster(offering, g, count_index[n], n, instances,
                                    round(instances * hourly * PRICE_UNITS_PER_USD), network))
    # Tie-break on the offering: real providers before the generic list-price rows, then by name.
    names = sorted({c.offering.name for c in clusters}, key=lambda name: (name.startswith("list/"), name))
    rank = {name: i for i, name in enumerate(names)}
    shape_members: dict[Shape, list[int]] = {}
    gpus_of_count: dict[int, set[int]] = {}
    for c, cluster in enumerate(clusters):
        shape_members.setdefault(cluster.shape, []).append(c)
        gpus_of_count.setdefault(cluster.count_index, set()).add(cluster.gpu_index)
    return Placement(
        gpus=gpus, counts=counts, clusters=clusters, offering_rank=[rank[c.offering.name] for c in clusters],
        shape_members=shape_members, gpus_of_count={n: tuple(sorted(gs)) for n, gs in sorted(gpus_of_count.items())},
        host_mib_on_node=[(int(c.offering.host_memory_gib * 1024), min(c.num_gpus, c.offering.num_gpus)) for c in clusters],
        tier0_fields=[(c.gpu_index, c.count_index, c.price_units, len(shape_members[c.shape]) == 1) for c in clusters])
