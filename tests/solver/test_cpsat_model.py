"""The factored CP-SAT search: extremes that once overflowed int64, list prices, duplicates,
whole instances, and the search report."""

from __future__ import annotations

import math

import pytest
from helpers.cli import invoke

from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.core.catalogue_schema import Offering
from vramplan.models.core.setup import Job
from vramplan.solver import cpsat_engine
from vramplan.solver.api import solve
from vramplan.solver.engine import Budget
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.space_build import build_space
from vramplan.solver.table_memo import TableMemo

# Extreme queries: each must answer (a plan or an explained infeasible), never MODEL_INVALID.
H100 = ("h100-sxm-80gb",)
EXTREMES = [
    SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=16384, tokens=2e9, gpus=H100),
    SolveQuery(model="llama-3.1-405b", job=Job(seq_len=8192), global_batch=4096, objective="cost", gpus=H100),
    SolveQuery(model="llama-3.1-70b", job=Job(seq_len=4096), global_batch=4096, max_gpus=4096, gpus=H100),
    SolveQuery(model="llama-3.1-8b", global_batch=30000, gpus=("a100-sxm-80gb",)),
    SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=65536, max_gpus=4096, tokens=1e13,
               objective="time", gpus=H100, pins=Pins(tp=8)),
]


@pytest.mark.parametrize("query", EXTREMES, ids=lambda q: f"{q.model}-gb{q.global_batch}-{q.objective}")
def test_extremes_answer(catalogue, query: SolveQuery) -> None:
    result = solve(catalogue, query.model_copy(update={"time_limit_s": 600}))  # wall-clock: the machine is shared
    assert result.status in ("optimal", "infeasible")
    if result.status == "optimal":
        plan = result.plans[0].plan
        assert plan.micro_batch * plan.grad_accum * plan.dp == query.global_batch
        assert result.plans[0].memory.fits


@pytest.mark.slow
def test_huge_global_batch_agrees_with_brute_force(catalogue) -> None:
    """cost = price x step at global batch 16384 reaches 6e18 (3.5e7 price units x 1.8e11 us),
    past the 2^62 of room CP-SAT's int64 objective needs (the old model answered MODEL_INVALID);
    the products now live in Python integers and both engines agree."""
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=16384, tokens=2e9,
                       gpus=("h100-sxm-80gb", "mi300x-192gb"), top_k=3,
                       time_limit_s=600)  # brute force takes ~7 s here, past the 10 s default on a loaded 2-core CI
    cpsat = solve(catalogue, query)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute"}))
    assert cpsat.status == brute.status == "optimal"
    assert [p.plan for p in cpsat.plans] == [p.plan for p in brute.plans]
    space = build_space(catalogue, query)
    worst_price = max(c.price_units for c in space.clusters)
    assert worst_price * max(space.compute_s.values()) * 1e6 > 2**62


def test_cli_global_batch_16384_prints_a_plan_and_nothing_on_stderr() -> None:
    result = invoke("solve", "--model", "llama-3.1-70b", "--seq-len", "8192", "--global-batch", "16384", "--gpu", "h100-sxm-80gb",
                    "--top", "1", "--verbose", "--time-limit", "600")
    assert result.exit_code == 0, result.output
    assert "OPTIMAL" in result.stdout and result.stderr == ""
    assert "layout: " in result.stdout and "models/ evaluations" in result.stdout


def test_list_prices_only_when_asked(catalogue) -> None:
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), global_batch=16, top_k=10)
    plans = solve(catalogue, query).plans
    assert plans and not any(p.plan.offering.startswith("list/") for p in plans)
    assert all(c.offering.provider != "list" for c in build_space(catalogue, query).clusters)
    with_list = build_space(catalogue, query.model_copy(update={"providers": ("list",)}))
    assert with_list.clusters and all(c.offering.provider == "list" for c in with_list.clusters)


@pytest.mark.parametrize("engine", ["cpsat", "brute"])
def test_top_k_and_pareto_never_show_the_same_cluster_twice(catalogue, engine: str) -> None:
    """digitalocean/mi300x-x8 and list/mi300x-192gb-x8 sell the same 8-GPU node at the same price."""
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9, top_k=8,
                       gpus=("mi300x-192gb",), providers=("digitalocean", "list"), pareto=True, engine=engine)
    result = solve(catalogue, query)

    def hardware(p):
        offering = catalogue.offering(p.plan.offering)
        return (p.plan.gpu, offering.num_gpus, offering.network_bandwidth_gb_per_s, p.plan.num_gpus, p.plan.zero,
                p.plan.offload, p.plan.recompute, p.plan.precision, p.plan.micro_batch, p.plan.tp, p.plan.pp,
                p.plan.cp, p.plan.ep, p.plan.vpp, p.plan.sequence_parallel)

    for plans in (result.plans, result.pareto):
        keys = [hardware(p) for p in plans]
        assert len(keys) == len(set(keys))


def _offering(instance_type: str, gpus: int, price: float) -> Offering:
    return Offering(provider="test", instance_type=instance_type, gpu="h100-sxm-80gb", num_gpus=gpus,
                    price_usd_per_hour=price, host_memory_gib=2048 * gpus / 8, network_bandwidth_gb_per_s=50.0,
                    price_date="2026-01", source="test")


def test_equal_price_prefers_fewer_larger_instances(catalogue) -> None:
    """16 GPUs as 2 x 8-GPU nodes or 16 x 1-GPU pods, same price per GPU and network: pinned
    data-parallel (tp = pp = 1) both cross instances, so memory and bandwidth tie; the pods' ZeRO-3
    rings take 15 network hops instead of 1 (NCCL's ring latency, models/time/collectives.py), so the
    two whole nodes come first; the pods, no cheaper, no faster and no leaner, are not listed as a
    runner-up (api.distinct_choices), and alone they cost a little more."""
    pods, node = _offering("pod1", 1, 3.0), _offering("node8", 8, 24.0)
    two_offerings = Catalogue(gpus=catalogue.gpus, offerings={o.name: o for o in (pods, node)},
                              architectures=catalogue.architectures)
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=4096), global_batch=64, num_workers=1,
                       top_k=2, pins={"num_gpus": 16, "zero": 3, "tp": 1, "pp": 1})
    result = solve(two_offerings, query)
    first = result.plans[0]
    assert first.plan.offering == "test/node8" and first.cost.num_instances == 2
    assert all(p.plan.offering != "test/pod1" for p in result.plans)
    only_pods = Catalogue(gpus=catalogue.gpus, offerings={pods.name: pods}, architectures=catalogue.architectures)
    second = solve(only_pods, query).plans[0]
    assert second.plan.offering == "test/pod1" and second.objective_value > first.objective_value
    assert second.objective_value == pytest.approx(first.objective_value, rel=1e-3)  # latency only


def test_search_report_counts_the_domains_and_the_table_work(catalogue) -> None:
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9)
    space = build_space(catalogue, query)
    result = solve(catalogue, query)
    domains = (len(space.clusters), len(space.zero_offloads), len(space.recomputes), len(space.precisions),
               len(space.micro_batches), len(space.layouts))
    assert result.search.combinations == math.prod(domains) == result.space_size
    # Tables are evaluated per term, never per combination.
    assert 0 < result.search.evaluations < result.search.combinations / 10
    assert result.search.cpsat_models >= 1 and result.search.cpsat_solves >= result.search.cpsat_models


def test_shared_tables_give_the_same_answer_with_fewer_evaluations(catalogue) -> None:
    """Rows of one (model, job, global batch) share the models/ terms: the second query only
    evaluates terms the first did not need."""
    from vramplan.solver.table_memo import TableMemo

    first = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096), global_batch=32, gpus=("h100-sxm-80gb",))
    second = first.model_copy(update={"gpus": ("h100-sxm-80gb", "a100-sxm-80gb"), "objective": "time"})
    tables = TableMemo()
    shared = [solve(catalogue, q, memo=tables) for q in (first, second)]
    alone = [solve(catalogue, q) for q in (first, second)]
    assert [r.plans[0].plan for r in shared] == [r.plans[0].plan for r in alone]
    assert shared[0].search.evaluations == alone[0].search.evaluations
    assert 0 < shared[1].search.evaluations < alone[1].search.evaluations


@pytest.mark.parametrize(("pins", "field"), [({"tp": 3}, "tp"), ({"tp": 16}, "tp"), ({"ep": 2}, "ep")])
def test_a_bad_pinned_degree_is_an_error_naming_it(catalogue, pins: dict, field: str) -> None:
    """tp must divide Llama-3.1-70B's 64 heads and stay in one 8-GPU instance; a dense model has no experts."""
    from vramplan.models.core.errors import VramplanError

    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, gpus=H100, pins=Pins(**pins))
    with pytest.raises(VramplanError) as error:
        solve(catalogue, query)
    assert error.value.field == field


def test_pinned_degrees_are_honoured_and_verified(catalogue) -> None:
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192, stack="custom"), global_batch=64, gpus=H100,
                       pins=Pins(tp=8, pp=2, num_gpus=16))
    plan = solve(catalogue, query).plans[0]
    assert (plan.plan.tp, plan.plan.pp, plan.plan.dp, plan.plan.sequence_parallel) == (8, 2, 1, True)
    assert plan.plan.micro_batch * plan.plan.grad_accum * plan.plan.dp == 64 and plan.memory.fits


def test_a_timed_out_solve_does_not_close_a_unit_model_for_the_family(catalogue, monkeypatch) -> None:
    """Unit models are kept by value for every query of the family (solver/space.py UnitMemo): one
    whose solve ran out of --time-limit must not be remembered as having no further point, or a
    later row of the batch, asking under an incumbent's step cap, would be told the unit is empty."""
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=2048), gpus=("h100-sxm-80gb",), max_gpus=8)
    fresh = cpsat_engine.UnitSearch(build_space(catalogue, query), Budget.of(query))
    unit = next((c, branch) for c in range(len(fresh.space.clusters)) for branch in fresh.branches(c)
                if fresh.point((c, branch), 0, None) is not None)  # a unit with a plan
    space = build_space(catalogue, query, memo=TableMemo())
    first = cpsat_engine.UnitSearch(space, Budget.of(query))
    real = cpsat_engine.UnitSearch._solve

    def out_of_time(self, m, objective, assumptions):
        self.budget.cpsat_stopped()
        return None
    monkeypatch.setattr(cpsat_engine.UnitSearch, "_solve", out_of_time)
    assert first.point(unit, 0, None) is None and first.timed_out
    monkeypatch.setattr(cpsat_engine.UnitSearch, "_solve", real)
    later = cpsat_engine.UnitSearch(space, Budget.of(query))  # the next row: the same unit model
    found = later.point(unit, 0, 2**40)
    alone = cpsat_engine.UnitSearch(build_space(catalogue, query), Budget.of(query)).point(unit, 0, None)
    assert found is not None and found == alone


def test_unit_models_tabulate_each_distinct_rank_once_and_no_fixed_column(catalogue) -> None:
    """CP-SAT expands a table constraint into a clause per row and cell, so a unit model leaves out
    what repeats: a checked pipeline slot that names the same rank as an earlier one on every layout
    of the model (with pp = 1 every slot is rank 0), and a decision with one value (here the pinned
    precision). What is left still checks every distinct rank: the pipelined branch keeps the
    first and the last stage's memory."""
    from vramplan.solver.choice_keys import rank_columns
    from vramplan.solver.cpsat_bounds import branch_layouts, branch_of
    from vramplan.solver.cpsat_model import build_cluster_model

    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=4096, stack="custom"), global_batch=64, gpus=H100, max_gpus=16,
                       pins=Pins(precision="bf16"))
    space = build_space(catalogue, query)
    c = next(i for i, cluster in enumerate(space.clusters) if cluster.num_gpus == 16)
    shape = space.clusters[c].shape
    branches = sorted({branch_of(space.layouts[layout]) for layout in space.cluster_layouts(shape)})
    assert {pp for pp, _ in branches} >= {1, 2}
    for branch in branches:
        layouts = branch_layouts(space, shape, branch)
        unit = build_cluster_model(space, c, None, [], layouts)
        proto = unit.model.proto
        names = [proto.variables[i].name for i in range(len(proto.variables))]
        # a slot is a column when it is its own rank on some layout of the branch (a split of its
        # own can make a middle rank a candidate: models.parallel.candidate_stages)
        ranks = len({j for li in layouts for j, alias in enumerate(space.column_aliases(space.layouts[li].pipeline))
                     if alias == j})
        assert ranks >= len(set(rank_columns(space.arch, branch[0], space.num_rank_columns)))
        assert sum(name.startswith("static") for name in names) == ranks
        assert sum(name.startswith("activations") for name in names) == ranks
        precision = names.index("p")
        tables = [proto.constraints[i].table for i in range(len(proto.constraints)) if proto.constraints[i].has_table()]
        assert tables and all(precision not in [e.vars[0] for e in table.exprs] for table in tables)
