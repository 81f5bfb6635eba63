"""The solver holds offloaded activations against host RAM like the models/ re-evaluation does:
a plan is returned only where its node holds what it offloads (issue 31's case, on torchtune's offload)."""

from __future__ import annotations

from vramplan.models.catalogue.catalogue import Catalogue, load_stacks
from vramplan.models.catalogue.stack import with_preset
from vramplan.models.core.setup import Job
from vramplan.sheets.rows import output_row
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery

# offloading every saved activation without recompute on Unsloth's recipe: a what-if (--stack custom;
# Unsloth itself offloads only what its checkpointing saves)
JOB = Job(**with_preset({"method": "qlora", "seq_len": 32768, "stack": "unsloth", "activation_offload": True},
                        load_stacks())).model_copy(update={"stack": "custom"})


def _query(**update) -> SolveQuery:
    base = SolveQuery(model="llama-3.1-8b", job=JOB, gpus=("rtx4090-24gb",), providers=("runpod",),
                      pins=Pins(recompute="none", tp=1, cp=1), top_k=3)  # data parallelism alone, as Unsloth runs it
    return base.model_copy(update=update)


def test_offloaded_activations_need_a_node_with_the_ram(catalogue) -> None:
    """128 GiB offloaded per GPU: the 1-GPU pod (24 GiB of RAM) cannot hold it, so the answer
    rents the 8-GPU pod (192 GiB) for one GPU and says that 7 stay idle; both engines agree."""
    result = solve(catalogue, _query())
    assert result.status == "optimal"
    assert all(p.memory.host_fits for p in result.plans)
    best = result.plans[0]
    assert best.plan.offering == "runpod/8x_RTX4090_SECURE" and best.plan.num_gpus == 1
    assert any("stay idle" in w for w in best.warnings)
    brute = solve(catalogue, _query(engine="brute"))
    assert [p.plan for p in brute.plans] == [p.plan for p in result.plans]
    row = output_row(result)  # a batch sheet's answer columns say the same
    assert "stay idle" in row["warnings"] and 120 < row["host_gib"] < 135


def test_when_no_node_holds_them_host_ram_is_named(catalogue) -> None:
    """Without the 8-GPU pod: nothing fits, and the explanation names host RAM."""
    pods = {name: o for name, o in catalogue.offerings.items() if name != "runpod/8x_RTX4090_SECURE"}
    small = Catalogue(gpus=catalogue.gpus, offerings=pods, architectures=catalogue.architectures)
    result = solve(small, _query())
    assert result.status == "infeasible"
    summary = result.explanation.summary
    assert "host RAM is the binding resource" in summary and "activation offloading" in summary, summary
