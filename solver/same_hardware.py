"""The same hardware under several prices: clusters of one shape (GPU, count, instance size,
network) offered by several providers or price rows. A plan is shown once, at its best price: a
cluster's CP-SAT model excludes the points a cheaper same-hardware cluster accepts
(solver/cpsat_model.py `exclude`), and a cluster all of whose points such a cluster accepts has none
of its own."""

from __future__ import annotations

from vramplan.solver.points import step_cap_us
from vramplan.solver.space import SearchSpace


def cheaper_twins(space: SearchSpace, c: int) -> list[tuple[int, int | None]]:
    """(host RAM budget per GPU, step cap) of each same-hardware cluster listed before this one
    (cheaper, then by offering rank): the points it accepts are not this cluster's."""
    mine = space.clusters[c]
    rank = (mine.price_units, space.offering_rank[c])
    return [(space.host_budget_mib_per_gpu[o], step_cap_us(space, o))
            for o in space.clusters_of_shape(mine.shape)
            if o != c and (space.clusters[o].price_units, space.offering_rank[o]) < rank]


def dominated(space: SearchSpace, c: int) -> bool:
    """Whether a cheaper same-hardware cluster accepts every point this one could hold: its host
    RAM budget is at least this one's and its step cap no tighter (the same GPUs, so the same GPU
    memory and step times); every point of this cluster is then excluded from its model. Under
    `--objective time` the price prunes no such cluster: 5 of the 6 H100 offerings of the 405B
    megatron query of bench/solve_bench.py were solves proving nothing fits."""
    cap = step_cap_us(space, c)
    host = space.host_budget_mib_per_gpu[c]
    return any(other_host >= host and (other_cap is None or (cap is not None and cap <= other_cap))
               for other_host, other_cap in cheaper_twins(space, c))
