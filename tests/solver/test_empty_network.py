"""An offering whose catalogue row leaves the network between instances empty means the GPU's
usual fabric (models/core/catalogue_schema.py Offering.network_bandwidth_gb_per_s), in the solver as
in `estimate`: a pipeline across instances on such an offering was an internal error
(TypeError in parallel_seconds: None x float) before the cluster's shape carried the effective value
(models/time/cost.py network_gb_per_s)."""

from __future__ import annotations

from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery

QUERY = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192, stack="megatron"), global_batch=64, tokens=1e9,
                   gpus=("h100-sxm-80gb",), max_gpus=64, pins=Pins(pp=4, num_gpus=32))


def _with_network(value_of):
    catalogue = load_catalogue()
    for name, offering in list(catalogue.offerings.items()):
        if offering.gpu == "h100-sxm-80gb":
            catalogue.offerings[name] = offering.model_copy(update={"network_bandwidth_gb_per_s": value_of(catalogue, offering)})
    return catalogue


def test_an_empty_network_cell_is_the_gpus_fabric_in_the_solver() -> None:
    empty = solve(_with_network(lambda catalogue, offering: None), QUERY)
    fabric = solve(_with_network(lambda catalogue, offering: catalogue.gpu(offering.gpu).network_bandwidth_gb_per_s), QUERY)
    assert empty.status == fabric.status == "optimal"
    assert empty.plans[0].plan.num_gpus == 32 and empty.plans[0].plan.pp == 4  # four instances: the pipeline crosses them
    assert empty.plans[0].plan == fabric.plans[0].plan
    assert empty.plans[0].performance.tokens_per_s == fabric.plans[0].performance.tokens_per_s
    assert empty.plans[0].cost.network_gb_per_s == fabric.plans[0].cost.network_gb_per_s
