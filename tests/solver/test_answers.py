"""What `solve` answers: the headline query, explanations, top-k, Pareto, verification, status."""

from __future__ import annotations

import pytest

from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate import estimate
from vramplan.solver import verify
from vramplan.solver.api import _objective_report, solve
from vramplan.solver.engine import EngineResult, SolverInternalError
from vramplan.solver.points import Choice, evaluate
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.restrictions import restrictions_of
from vramplan.solver.space_build import build_space

HEADLINE = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9, objective="cost")


def test_headline_query_is_optimal_fits_and_matches_estimate(catalogue) -> None:
    result = solve(catalogue, HEADLINE)
    assert result.status == "optimal"
    best = result.plans[0]
    assert best.memory.fits and best.memory.total_bytes <= best.memory.limit_bytes
    p = best.plan
    assert p.micro_batch * p.grad_accum * p.dp == 64
    # Feeding the plan's values to estimate reproduces its memory and cost exactly.
    again = estimate(catalogue, "llama-3.1-70b", Job(seq_len=8192),
                     Plan(gpu=p.gpu, offering=p.offering, num_gpus=p.num_gpus, zero=p.zero, recompute=p.recompute,
                          precision=p.precision, micro_batch=p.micro_batch, grad_accum=p.grad_accum, offload=p.offload,
                          tp=p.tp, pp=p.pp, cp=p.cp, ep=p.ep, vpp=p.vpp, sequence_parallel=p.sequence_parallel),
                     tokens=2e9)
    assert again.memory == best.memory
    assert again.cost.usd_total == pytest.approx(result.objective.value)


def test_top_k_plans_are_distinct_and_ordered(catalogue) -> None:
    result = solve(catalogue, HEADLINE.model_copy(update={"top_k": 5}))
    plans = [p.plan for p in result.plans]
    assert len(plans) == 5 and len({p.model_dump_json() for p in plans}) == 5
    values = [p.objective_value for p in result.plans]
    assert values == sorted(values)


def _without_stage(plan) -> tuple:
    """A listed plan as the user compares it, ZeRO stage aside: decisions, memory and step time."""
    return (plan.plan.model_copy(update={"zero": 0}).model_dump_json(), plan.memory.total_bytes,
            plan.performance.step_time_s)


def test_top_k_lists_a_plan_once_not_under_several_zero_stages(catalogue) -> None:
    """With one rank in the DP x CP group ZeRO-1, 2 and 3 (no offload) shard nothing: the same
    memory, traffic and time as ZeRO-0. The headline's plan (TP 8, DP 1) used to come back as its
    own runner-up, "ZeRO-1 ... +0.0%"; GPT-2 on one GPU listed ZeRO-0 to 3 of one plan. Both
    engines list each plan once, at its least stage."""
    headline = solve(catalogue, HEADLINE.model_copy(update={"top_k": 3})).plans
    assert len({_without_stage(plan) for plan in headline}) == 3
    small = SolveQuery(model="gpt2-124m", job=Job(seq_len=512, stack="custom"), gpus=("h100-sxm-80gb",), providers=("lambda",),
                       max_gpus=1, top_k=4)
    plans = solve(catalogue, small).plans
    assert [p.plan for p in plans] == [p.plan for p in solve(catalogue, small.model_copy(update={"engine": "brute"})).plans]
    assert len({_without_stage(plan) for plan in plans}) == 4
    assert all(p.plan.zero == 0 for p in plans)  # one GPU: every stage the same plan, listed at ZeRO-0
    # A stage that does change something stays: ZeRO-3 shards the weights ZeRO-2 keeps (and its
    # host buffers differ, models/memory/model_states.offload_host_buffers_bytes).
    big = solve(catalogue, SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192, stack="custom"), top_k=12)).plans
    twins = [(a, b) for a in big for b in big if a.plan.zero < b.plan.zero
             and a.plan.model_copy(update={"zero": 0}) == b.plan.model_copy(update={"zero": 0})]
    assert twins
    for a, b in twins:
        assert (a.memory.total_bytes, a.memory.host_bytes) != (b.memory.total_bytes, b.memory.host_bytes)


def test_pareto_front_trades_cost_for_time(catalogue) -> None:
    result = solve(catalogue, HEADLINE.model_copy(update={"pareto": True, "gpus": ("h100-sxm-80gb", "a100-sxm-80gb")}))
    front = result.pareto
    assert len(front) >= 2
    costs = [p.cost.usd_total for p in front]
    hours = [p.cost.hours for p in front]
    assert costs == sorted(costs) and hours == sorted(hours, reverse=True)
    assert len(set(hours)) == len(hours)  # each point strictly faster than the previous
    assert front[0].cost.usd_total == pytest.approx(solve(catalogue, HEADLINE.model_copy(
        update={"gpus": ("h100-sxm-80gb", "a100-sxm-80gb")})).objective.value)


def test_seventy_b_on_two_a100s_is_explained(catalogue) -> None:
    query = HEADLINE.model_copy(update={"gpus": ("a100-sxm-80gb",), "pins": Pins(num_gpus=2, offload="none")})
    result = solve(catalogue, query)
    assert result.status == "infeasible" and not result.plans
    why = result.explanation
    assert why is not None
    # 16 bytes/param x 70.55B / 2 GPUs under ZeRO-3 = 564.4e9 bytes = 525.7 GiB per GPU (the
    # explanation speaks GiB, as the memory table beside it does).
    assert why.static_bytes_per_gpu == 16 * 70_553_706_496 // 2
    assert "525.7 GiB per GPU" in why.summary and " GB" not in why.summary
    assert set(why.conflicting_restrictions) <= {"--gpu a100-sxm-80gb", "--num-gpus 2", "--offload none"}
    assert "--num-gpus 2" in why.conflicting_restrictions
    fixes = {m.change.split(" (")[0]: m for m in why.mitigations}
    more = next(m for m in why.mitigations if m.change.startswith("more GPUs") and m.fits)
    assert more.plan.num_gpus >= 16 and (more.plan.zero == 3 or more.plan.tp * more.plan.pp > 1)
    qlora = fixes["QLoRA instead of full fine-tuning"]
    # QLoRA as HF/PEFT runs it (fp32 non-quantised parameters, a fragmentation reserve) needs a few
    # GPUs at 8k context, far fewer than the full fine-tune's 16 or more.
    assert qlora.fits and qlora.plan.num_gpus < more.plan.num_gpus
    # the count is the search's there, and the change says so (it read as if --method qlora alone fitted)
    assert qlora.change == "QLoRA instead of full fine-tuning (--method qlora, without --num-gpus 2)"
    assert why.closest_miss is not None and not why.closest_miss.memory.fits
    assert why.dominant_pillar == why.closest_miss.memory.dominant_pillar
    assert why.over_limit_bytes > 0


@pytest.mark.slow
def test_more_gpus_tries_counts_beyond_the_global_batch(catalogue) -> None:
    """Llama 4 Scout at 8k has a global batch of 128 sequences; without activation checkpointing it
    fits only on 512 B200s (pipeline x expert parallelism x 128 data-parallel replicas would not
    do; `vramplan solve --model llama-4-scout --seq-len 8192 --recompute none --gpu b200-180gb`).
    The "more GPUs" change used to try only divisors of the global batch, so it never named 512."""
    query = SolveQuery(model="llama-4-scout", job=Job(seq_len=8192, stack="custom"), gpus=("b200-180gb",), max_gpus=64,
                       objective="time", pins=Pins(recompute="none"))
    assert query.effective_global_batch == 128
    result = solve(catalogue, query)
    assert result.status == "infeasible"
    more = [m for m in result.explanation.mitigations if m.change.startswith("more GPUs")]
    assert [(m.change, m.fits) for m in more] == [("more GPUs (512)", True)]  # 128 and 256 do not fit
    assert more[0].plan.num_gpus == 512 and more[0].plan.dp <= 128 and more[0].plan.recompute == "none"
    assert solve(catalogue, query.model_copy(update={"max_gpus": 256})).status == "infeasible"


def test_an_empty_space_of_a_pinned_count_is_explained_in_counts_a_plan_can_run(catalogue) -> None:
    """3 GPUs is no divisor of the global batch (1,024) times a model-parallel size (powers of two):
    nothing to search, and "more GPUs" starts above the pinned 3, not at 1."""
    query = SolveQuery(model="gpt2-124m", job=Job(seq_len=1024), pins=Pins(num_gpus=3))
    result = solve(catalogue, query)
    assert result.status == "infeasible" and result.space_size == 0
    assert ("no GPU count within --max-gpus 512, --num-gpus 3 is a divisor of the global batch of 1024 times a "
            "model-parallel size") in result.explanation.summary
    more = next(m for m in result.explanation.mitigations if m.change.startswith("more GPUs"))
    assert more.change == "more GPUs (4)" and more.fits and more.plan.num_gpus == 4


def test_nothing_in_catalogue_fits_blames_no_restriction(catalogue) -> None:
    # Eager attention keeps each layer's 256k x 256k scores: no layout of up to 512 GPUs holds
    # them, not even TP 64 across a GB300 NVL72 rack (which holds the 128k case). One GPU for
    # Llama 3.1 405B at 8k was the old case, but `--max-gpus 1` is a restriction: with TP x PP it
    # fits on 64 GPUs at global batch 1.
    query = SolveQuery(model="llama-3.1-405b", job=Job(seq_len=262144, attention="eager", stack="custom"), global_batch=1)
    # The efficiency floor is on by default (plans nobody would run are not answers); it is not to blame here.
    assert [r.label for r in restrictions_of(query)] == ["--min-mfu 0.05", "--max-days 365"]
    assert solve(catalogue, query.model_copy(update={"job": Job(seq_len=8192, stack="custom")})).status == "optimal"
    assert solve(catalogue, query.model_copy(update={"job": Job(seq_len=8192, stack="custom"), "max_gpus": 1})
                 ).explanation.conflicting_restrictions == ["--max-gpus 1"]
    result = solve(catalogue, query)
    assert result.status == "infeasible"
    assert result.explanation.conflicting_restrictions == []
    assert "no restriction is to blame" in result.explanation.summary


def test_the_efficiency_floor_is_a_restriction_the_explanation_names(catalogue) -> None:
    """Issue 31: plans at < 5% MFU or over a year are not answers unless asked. Llama 3.1 70B on
    GPUs reached only over RunPod's 100 Mbps network (--gpu h100-pcie-80gb --provider runpod,
    max 8 GPUs of 1-GPU pods) would answer a plan mostly waiting on the network; the floor
    refuses it and names itself, and --min-mfu 0 / --max-days 0 bring the plan back, flagged."""
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=4096, stack="custom"), gpus=("h100-pcie-80gb",),
                       providers=("runpod",), tokens=1e9)
    result = solve(catalogue, query)
    lifted = solve(catalogue, query.model_copy(update={"min_mfu": 0.0, "max_days": 0.0}))
    assert lifted.status == "optimal"
    best = lifted.plans[0]
    assert best.performance.mfu_fraction < 0.05 or best.cost.hours > 365 * 24
    assert best.warnings
    assert result.status == "infeasible"
    assert set(result.explanation.conflicting_restrictions) & {"--min-mfu 0.05", "--max-days 365"}
    for plan in solve(catalogue, query.model_copy(update={"providers": (), "top_k": 5})).plans:
        # MFU against the 16-bit peak (the integer step may sit a few microseconds above the float one)
        assert plan.plan.precision not in ("bf16", "fp16") or plan.performance.mfu_fraction >= 0.05 * (1 - 1e-6)
        assert plan.cost.hours <= 365 * 24


def test_budget_and_deadline_are_restrictions(catalogue) -> None:
    query = HEADLINE.model_copy(update={"budget_usd": 10.0})
    result = solve(catalogue, query)
    assert result.status == "infeasible"
    assert "--budget-usd 10" in result.explanation.conflicting_restrictions
    cheap = solve(catalogue, HEADLINE)
    assert solve(catalogue, HEADLINE.model_copy(update={"budget_usd": cheap.objective.value * 1.01})).status == "optimal"
    fast = solve(catalogue, HEADLINE.model_copy(update={"objective": "time"}))
    deadline = solve(catalogue, HEADLINE.model_copy(update={"deadline_hours": fast.objective.value * 1.01}))
    assert deadline.status == "optimal" and deadline.plans[0].cost.hours <= fast.objective.value * 1.01


def test_a_wrong_table_entry_is_caught_as_an_internal_error(catalogue, monkeypatch) -> None:
    space = build_space(catalogue, HEADLINE)
    for key in space.chunk_compute_s:
        space.chunk_compute_s[key] /= 2  # the engine now believes every plan computes twice as fast
    assert evaluate(space, Choice(0, 0, 0, 0, 0), memory=False, limits=False) is not None
    with pytest.raises(SolverInternalError, match="objective mismatch"):
        verify.verified_plan(space, Choice(0, 0, 0, 0, 0), must_fit=False)


def test_time_limited_answer_reports_gap(catalogue) -> None:
    space = build_space(catalogue, HEADLINE)
    report = _objective_report(space, EngineResult(status="feasible", best_bound=900, primary_value=1000), 12.0)
    assert report.gap == pytest.approx(0.1) and report.best_bound is not None


def test_objectives_rank_as_their_names_say(catalogue) -> None:
    by = {o: solve(catalogue, HEADLINE.model_copy(update={"objective": o})).plans[0] for o in
          ("cost", "time", "throughput", "hourly")}
    assert by["cost"].cost.usd_total <= min(p.cost.usd_total for p in by.values()) * (1 + 1e-9)
    assert by["time"].cost.hours <= min(p.cost.hours for p in by.values()) * (1 + 1e-9)
    assert by["throughput"].plan == by["time"].plan
    assert by["hourly"].cost.usd_per_hour <= min(p.cost.usd_per_hour for p in by.values())


def _keep_only(query: SolveQuery, labels: list[str]) -> SolveQuery:
    """The query with every restriction dropped except those named (as restrictions_of labels)."""
    kept = {label.split()[0] for label in labels}
    pins = query.pins.model_dump()
    for name in ("zero", "offload", "recompute", "micro_batch", "num_gpus"):
        if f"--{name.replace('_', '-')}" not in kept:
            pins[name] = None
    return query.model_copy(update={
        "gpus": query.gpus if "--gpu" in kept else (),
        "providers": query.providers if "--provider" in kept else (),
        "max_gpus": query.max_gpus if "--max-gpus" in kept else max(query.max_gpus, query.effective_global_batch),
        "max_nodes": query.max_nodes if "--max-nodes" in kept else None,
        "budget_usd": query.budget_usd if "--budget-usd" in kept else None,
        "deadline_hours": query.deadline_hours if "--deadline-hours" in kept else None,
        "pins": Pins(**pins),
    })


@pytest.mark.slow
def test_reported_conflicts_alone_are_infeasible(catalogue) -> None:
    """sufficient_assumptions_for_infeasibility: the named restrictions by themselves admit no plan."""
    import random

    from helpers.queries import random_query

    checked = 0
    for seed in range(100):
        query = random_query(random.Random(seed))
        result = solve(catalogue, query)
        if result.status != "infeasible" or not result.explanation.conflicting_restrictions:
            continue
        alone = solve(catalogue, _keep_only(query, result.explanation.conflicting_restrictions), explain_infeasible=False)
        assert alone.status == "infeasible", (query, result.explanation.conflicting_restrictions)
        checked += 1
        if checked == 8:
            break
    assert checked == 8


def test_brute_force_honours_the_time_limit(catalogue) -> None:
    """The headline space with every degree free has 3 million points: enumerating it takes
    minutes, so a 0.2 s limit must end with the best points seen (feasible, not proven) or none
    (unknown), never a claim of optimality; what it returns still fits and is no better than
    CP-SAT's proven optimum."""
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192, stack="custom"), global_batch=64, tokens=2e9, time_limit_s=0.2)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute"}), explain_infeasible=False)
    assert brute.status in ("feasible", "unknown")
    assert brute.space_size > 1_000_000
    if brute.plans:
        optimum = solve(catalogue, query.model_copy(update={"time_limit_s": 10.0})).plans[0]
        assert all(p.memory.fits for p in brute.plans)
        assert brute.plans[0].objective_value >= optimum.objective_value * (1 - 1e-9)


def test_the_explanation_stops_at_the_time_limit(catalogue, monkeypatch) -> None:
    """--time-limit, the wall-clock safety net, bounds the whole solve: an explanation's solves share
    what is left of it, and the changes it had no time to try are listed as not tried, and said so,
    never as 'no'."""
    from vramplan.solver import api, engine

    query = SolveQuery(model="llama-3.1-405b", job=Job(seq_len=8192), gpus=("a10g-24gb",), max_gpus=8)
    full = solve(catalogue, query).explanation
    assert full is not None and all(m.tried for m in full.mitigations) and "ran out" not in full.summary

    class Clock:  # the solver's clock: stopped, until the search ends having taken all of --time-limit
        now = 0.0

        def monotonic(self) -> float:
            return self.now

    clock = Clock()
    monkeypatch.setattr(engine, "time", clock)
    scan = api.closest_miss

    def late(space, budget):
        clock.now += 2 * query.time_limit_s
        return scan(space, budget)

    monkeypatch.setattr(api, "closest_miss", late)
    result = solve(catalogue, query)
    explanation = result.explanation
    assert explanation is not None and len(explanation.mitigations) == 1 and result.limit_reached == "time"
    assert not explanation.mitigations[0].tried and not explanation.mitigations[0].fits
    assert f"--time-limit {query.time_limit_s:g} s ran out before '{full.mitigations[0].change}'" in explanation.summary


def test_runner_ups_are_distinct_alternatives(catalogue) -> None:
    """Issue 31: a runner-up no cheaper, no faster and not 1% leaner than a plan listed before it
    is not listed (it was: recompute saving 0.00 GiB at +12.5% cost). Llama 3.1 70B at 8k on
    MI300X, top 12: fewer distinct plans among the engine's best 36, each one cheaper, faster or
    leaner than every plan above it; both engines list the same."""
    query = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192, stack="custom"), top_k=12, gpus=("mi300x-192gb",),
                       time_limit_s=600)  # a space the brute force enumerates in seconds
    plans = solve(catalogue, query).plans
    assert 1 < len(plans) < 12
    for i, later in enumerate(plans):
        for earlier in plans[:i]:
            cheaper = later.cost.usd_total < earlier.cost.usd_total
            faster = later.performance.step_time_s < earlier.performance.step_time_s
            leaner = later.memory.total_bytes < 0.99 * earlier.memory.total_bytes
            assert cheaper or faster or leaner, (earlier.plan, later.plan)
    assert [p.plan for p in solve(catalogue, query.model_copy(update={"engine": "brute"})).plans] == [p.plan for p in plans]
