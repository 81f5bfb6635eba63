"""TP and EP groups reach across a whole NVLink domain (issue 34): a GB200 NVL72 rack rented as
4-GPU trays (offerings.csv scale_up_gpus 72) runs TP 16-64 at NVLink speed, where an HGX node
stops at 8."""

from __future__ import annotations

from helpers.cli import invoke, one_line_error

from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.layouts import degree_limit
from vramplan.solver.query import Pins, SolveQuery

QUERY = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192, stack="custom"), global_batch=64, tokens=2e9,
                   gpus=("gb200-186gb",), objective="time")


def test_the_degree_limit_follows_the_widest_domain() -> None:
    assert [degree_limit(n) for n in (1, 8, 72, 576)] == [8, 8, 64, 64]


def test_gb200_nvl72_runs_tp_beyond_8_where_that_is_faster(catalogue) -> None:
    """64 sequences a step, as fast as possible: data parallelism stops at 64 ranks, so the
    fastest plan shards each replica over TP 16-32 inside the rack; pinned to TP 8 it is slower."""
    best = solve(catalogue, QUERY).plans[0]
    assert best.plan.offering == "coreweave/gb200-4x" and best.plan.tp > 8
    assert best.cost.gpus_per_instance == 4
    tp8 = solve(catalogue, QUERY.model_copy(update={"pins": Pins(tp=8)})).plans[0]
    assert best.performance.tokens_per_s > 1.2 * tp8.performance.tokens_per_s


def test_estimate_checks_tp_against_the_domain_not_the_instance() -> None:
    args = ["estimate", "--model", "llama-3.1-70b", "--seq-len", "8192", "--gpu", "gb200-186gb", "--num-gpus", "16",
            "--tp", "16", "--stack", "custom", "--format", "json"]
    assert invoke(*args, "--offering", "coreweave/gb200-4x").exit_code == 0
    hgx = ["estimate", "--model", "llama-3.1-70b", "--seq-len", "8192", "--gpu", "h100-sxm-80gb", "--num-gpus", "16",
           "--tp", "16", "--stack", "custom", "--offering", "aws/p5.48xlarge"]
    assert "tp" in one_line_error(invoke(*hgx))
