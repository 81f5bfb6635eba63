"""A cluster: a GPU count of one offering at its price, and its shape, what its memory and step time
depend on; a branch, the layouts of one pipeline depth and TP degree; a unit's shape by value
(docs/glossary.md: cluster, shape, branch, unit). solver/space.py holds a query's clusters; the
engines index them; the family's per-unit work is kept by UnitShape and Branch."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

from vramplan.models.core.catalogue_schema import Offering
from vramplan.models.core.layout import Layout

PRICE_UNITS_PER_USD = 10_000


class Shape(NamedTuple):
    """What a cluster's memory and step time depend on (docs/glossary.md: shape): its GPU and GPU
    count as domain indices of the space, the GPUs of one NVLink domain of its offering, and the
    network bandwidth per GPU between its instances. Clusters of one shape are the same hardware
    at different prices; SearchSpace.unit_shape is the shape by value."""

    gpu_index: int  # into SearchSpace.gpus
    count_index: int  # into SearchSpace.counts
    per_instance: int  # the offering's NVLink domain (Offering.domain_gpus)
    network_gb_per_s: float  # between instances (models/time/cost.py network_gb_per_s)


class Branch(NamedTuple):
    """The layouts of one pipeline depth and TP degree (docs/glossary.md: branch): what one CP-SAT
    model of a cluster covers (branch_of)."""

    pp: int
    tp: int


def branch_of(layout: Layout) -> Branch:
    """(pp, tp): one CP-SAT model per cluster and branch keeps each model's (layout, micro-batch)
    tables small. CP-SAT's presolve of the table constraints grows faster than the tables
    (see docs/performance.md#units-and-tiers); each branch gets its own bound, so the
    branch-and-bound still builds only the branches that can win."""
    return Branch(layout.pp, layout.tp)


class UnitShape(NamedTuple):
    """A shape by value, and the set of layouts it runs (SearchSpace.unit_shape): what the family's
    per-unit work (solver/space.py UnitMemo) is kept by, whatever domains index it in one query."""

    gpu: str  # GpuSpec.name
    num_gpus: int
    per_instance: int
    network_gb_per_s: float
    layout_set: int  # the family's number for the shape's layouts (UnitMemo.layout_sets)


@dataclass(frozen=True)
class Cluster:
    """num_gpus GPUs of one offering (whole instances beyond one instance)."""

    offering: Offering
    gpu_index: int
    count_index: int
    num_gpus: int
    num_instances: int
    price_units: int  # 1e-4 USD per hour for the whole cluster
    # Per GPU between instances: the offering's, or where its catalogue row leaves it empty the GPU's
    # usual fabric (as models.performance reads an empty one); never None in a shape.
    network_gb_per_s: float

    @functools.cached_property
    def shape(self) -> Shape:
        """What memory and step time depend on: (GPU, count, GPUs per instance, the network
        bandwidth between instances). Price does not. Kept: the searches ask it per cluster pair
        (cpsat_engine's exclusions), millions of times a batch."""
        return Shape(self.gpu_index, self.count_index, self.offering.domain_gpus, self.network_gb_per_s)
