"""What the Python API (solve, estimate, stack_job, plan_fleet and their types) took that the command
line refuses (a hostile review of the library, 2026-12-06): each was a silent wrong answer or an
internal error; each is now refused in one line naming the field, or answered as the command line
answers it. run_batch's rows and options: tests/batch/test_run.py."""

from __future__ import annotations

import pytest

import vramplan
from vramplan.models.core.choices import STACKS


def test_stack_job_refuses_a_name_that_is_no_job_field() -> None:
    with pytest.raises(ValueError, match=r"^seqlen=8192: not a field of a job \(did you mean seq_len"):
        vramplan.stack_job(stack="unsloth", seqlen=8192)  # it was dropped: a 2048-token job


def test_stack_job_takes_the_runtime_reserve() -> None:
    assert vramplan.stack_job(stack="hf", reserve={"nccl_mib": 1}).reserve.nccl_mib == 1  # it was dropped (512)
    assert vramplan.stack_job(stack="hf", reserve=vramplan.Job().reserve.model_copy(update={"nccl_mib": 7})).reserve.nccl_mib == 7
    with pytest.raises(ValueError, match=r"^reserve\.gpu_mib=1: not a field of RuntimeReserve"):
        vramplan.stack_job(stack="hf", reserve={"gpu_mib": 1})


def test_an_empty_target_list_adapts_nothing_and_is_refused() -> None:
    with pytest.raises(ValueError, match="names no module"):
        vramplan.Job(method="lora", lora_targets=())  # solved 'optimal' with 0 trainable parameters


def test_pinned_sequence_parallelism_runs_over_tensor_parallelism(catalogue) -> None:
    megatron = vramplan.stack_job(stack="megatron")
    result = vramplan.solve(catalogue, vramplan.SolveQuery(model="llama-3.1-8b", job=megatron,
                                                          pins=vramplan.Pins(sequence_parallel=True)))
    assert result.plans and all(p.plan.tp > 1 and p.plan.sequence_parallel for p in result.plans)  # was TP 1 with SP
    with pytest.raises(ValueError, match="does not run Megatron sequence parallelism"):  # hf has none
        vramplan.solve(catalogue, vramplan.SolveQuery(model="llama-3.1-8b", pins=vramplan.Pins(sequence_parallel=True)))


def test_the_random_seed_is_cp_sats_int32() -> None:
    with pytest.raises(ValueError, match="random_seed"):
        vramplan.SolveQuery(model="llama-3.1-8b", random_seed=2**31)  # a TypeError inside OR-Tools before


def test_the_work_limit_is_the_whole_multi_stack_solves(catalogue) -> None:
    """Each stack got the whole limit (1,000 work units over ten stacks spent 6,905); now the stacks
    share it, and the answer says it was reached where stacks were left unsearched."""
    query = vramplan.SolveQuery(model="llama-3.1-8b", job=vramplan.Job(seq_len=4096), stacks=tuple(STACKS),
                                global_batch=64, work_limit=50)
    result = vramplan.solve(catalogue, query)
    whole = vramplan.solve(catalogue, query.model_copy(update={"work_limit": 1e6}))
    assert whole.search.work > 100 and whole.limit_reached is None and whole.status == "optimal"
    assert result.search.work <= 50 and result.limit_reached == "work"
    assert result.status == "feasible" and result.plans  # the stacks left unsearched leave it unproven


@pytest.mark.parametrize("call", [
    lambda c: vramplan.solve(c, {"model": "llama-3.1-8b"}),
    lambda c: vramplan.estimate(c, "llama-3.1-8b", {"seq_len": 4096}, vramplan.Plan(gpu="h100-sxm-80gb"), tokens=1e9),
    lambda c: vramplan.estimate(c, "llama-3.1-8b", vramplan.Job(), {"gpu": "h100-sxm-80gb"}, tokens=1e9),
    lambda c: vramplan.estimate(None, "llama-3.1-8b", vramplan.Job(), vramplan.Plan(gpu="h100-sxm-80gb"), tokens=1e9),
    lambda c: vramplan.plan_fleet(c, {"jobs": []}),
])
def test_an_argument_of_the_wrong_kind_is_one_line_naming_it(catalogue, call) -> None:
    with pytest.raises(vramplan.VramplanError, match="must be a vramplan"):  # AttributeErrors deep inside before
        call(catalogue)


def test_numpys_numbers_are_numbers_for_estimate(catalogue) -> None:
    numpy = pytest.importorskip("numpy")
    plan = vramplan.Plan(gpu="h100-sxm-80gb")
    answer = vramplan.estimate(catalogue, "llama-3.1-8b", vramplan.Job(), plan, tokens=numpy.int64(10**9))
    assert answer.cost.tokens == 1e9  # 'np.int64(1000000000): out of range' before


@pytest.mark.parametrize(("make", "field"), [
    (lambda: vramplan.PoolWindow(from_hours=100, to_hours=50, num_gpus=16), "available_to"),
    (lambda: vramplan.Pool(name="m", market_provider="aws", committed=True), "committed"),  # free unbounded GPUs
    (lambda: vramplan.Pool(name="m", market_provider="aws", price_usd_per_gpu_hour=0.0001), "price_usd_per_gpu_hour"),
    (lambda: vramplan.Pool(name="o", offering="aws/p5.48xlarge", committed=True), "windows"),
])
def test_a_pool_the_inventory_sheet_could_not_state_is_refused(make, field) -> None:
    with pytest.raises(ValueError, match=rf"{field}="):
        make()


def test_an_unknown_market_provider_is_named(catalogue) -> None:
    job = vramplan.FleetJob(query=vramplan.SolveQuery(model="llama-3.1-8b"))
    query = vramplan.FleetQuery(jobs=(job,), pools=(vramplan.Pool(name="m", market_provider="nope"),))
    with pytest.raises(vramplan.VramplanError, match="^market_provider='nope'"):
        vramplan.plan_fleet(catalogue, query)  # the job was 'unserved: no provider has on-demand prices for'


@pytest.mark.parametrize("make", [
    lambda: vramplan.Plan(gpu="h100-sxm-80gb", num_gpus=2, tp=True),  # a boolean read as TP 1
    lambda: vramplan.Plan(gpu="h100-sxm-80gb", zero=True),
    lambda: vramplan.Pins(zero=True),  # a ZeRO-1 plan came back
    lambda: vramplan.Job(recompute_layers=True),
    lambda: vramplan.Job(fragmentation_fraction=True),
    lambda: vramplan.PoolWindow(num_gpus=True),
    lambda: vramplan.SolveQuery(model="llama-3.1-8b", num_workers=True),
    lambda: vramplan.FleetJob(query=vramplan.SolveQuery(model="llama-3.1-8b"), priority=True),
])
def test_a_boolean_is_never_a_number(make) -> None:
    with pytest.raises(ValueError, match="is a boolean, not a number"):
        make()


@pytest.mark.parametrize(("plan", "reason"), [
    (vramplan.Plan(gpu="h100-sxm-80gb", recompute="none", recompute_layers=5), "applies to recompute full"),  # ignored
    (vramplan.Plan(gpu="h100-sxm-80gb", recompute="full", recompute_layers=1000), "hold at most 32"),  # 32 layers
])
def test_a_recompute_layer_count_the_plan_cannot_use_is_refused(catalogue, plan, reason) -> None:
    with pytest.raises(vramplan.VramplanError, match=reason):
        vramplan.estimate(catalogue, "llama-3.1-8b", vramplan.Job(), plan, tokens=1e9)


def test_a_job_starting_after_the_horizon_is_told_so(catalogue) -> None:
    job = vramplan.FleetJob(query=vramplan.SolveQuery(model="llama-3.1-8b", tokens=1e8), earliest_start_hours=5000)
    pool = vramplan.Pool(name="r", offering="aws/p5.48xlarge", committed=True, windows=(vramplan.PoolWindow(num_gpus=16),))
    result = vramplan.plan_fleet(catalogue, vramplan.FleetQuery(jobs=(job,), pools=(pool,), time_limit_s=20))
    assert result.assignments[0].status == "unserved"
    assert "at or after the end of the horizon (2184 h)" in result.assignments[0].explanation  # 'the window 5000-2184 h'


def test_more_than_one_cpsat_worker_is_refused() -> None:
    """A parallel CP-SAT portfolio on the unit models ignored the work limit's deterministic time: an
    infeasible explanation of 0.25 s on one worker ran to its time limit on two (a metamorphic
    scan's finding), a different answer on a loaded machine."""
    with pytest.raises(ValueError, match="num_workers"):
        vramplan.SolveQuery(model="llama-3.1-8b", num_workers=2)
    assert vramplan.SolveQuery(model="llama-3.1-8b", num_workers=1).num_workers == 1
