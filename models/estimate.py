"""Evaluate one fixed plan end to end: memory per GPU, performance and cost, as an EstimateResult.

This is the reference the solver is checked against: every plan `solve` returns is re-evaluated
here, in exact bytes.
"""

from __future__ import annotations

import math
import numbers

from vramplan.models.architecture.lora import trainable_params
from vramplan.models.architecture.parallel import dense_moe_option_refusal, largest_chunk, plan_split
from vramplan.models.architecture.params import count_params
from vramplan.models.architecture.quantization import quantization_note, unquantised_experts_note
from vramplan.models.catalogue.catalogue import Catalogue, load_stack_capabilities
from vramplan.models.catalogue.stack import recompute_layers_conflict
from vramplan.models.catalogue.stack_contract import architecture_parts, plan_refusal, refusal_message
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec, Offering
from vramplan.models.core.choices import DAYS_PER_YEAR, MAX_RESTART_OVERHEAD, MAX_TOKENS, MFU_FLOOR, MIN_TOKENS
from vramplan.models.core.clock import days_since, today
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.fidelity_ranges import memory_range, throughput_range
from vramplan.models.core.results import (
    ActivationDetail,
    CostReport,
    EstimateResult,
    MemoryReport,
    ModelInfo,
    OverheadDetail,
    PerformanceReport,
    RankTotal,
)
from vramplan.models.core.setup import Job, Plan
from vramplan.models.estimate_changes import fitting_changes as changes_that_fit
from vramplan.models.memory.accumulation_note import accumulation_note
from vramplan.models.memory.activation_terms import xielu_note
from vramplan.models.memory.activations import activation_shape
from vramplan.models.memory.linear_attention_terms import linear_attention_note
from vramplan.models.memory.memory import MemoryBreakdown, memory_per_gpu
from vramplan.models.memory.sparse_attention_terms import sparse_attention_note
from vramplan.models.time.calibration import compute_efficiency
from vramplan.models.time.cost import (
    PRICINGS,
    Pricing,
    cost,
    has_price,
    network_gb_per_s,
    refuse_unspot_restarts,
    training_hours,
    worked_tokens,
)
from vramplan.models.time.moe_host import cuda_graphs_note
from vramplan.models.time.performance import Performance, performance

HOURS_PER_DAY = 24
MAX_REPORTED_BYTES = 2**62  # every byte count of an estimate stays an int64 for the JSON's readers


def model_info(arch: Architecture, job: Job) -> ModelInfo:
    counts = count_params(arch)
    return ModelInfo(
        name=arch.name,
        model_type=arch.model_type,
        num_params=counts.total,
        num_trainable_params=trainable_params(arch, job),
        num_active_params=counts.active,
        num_vision_params=counts.vision,
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        vocab_size=arch.vocab_size,
    )


def memory_report(memory: MemoryBreakdown, job: Job, split: tuple[int, ...] = ()) -> MemoryReport:
    acts, over = memory.activations, memory.overhead
    spread = memory_range(job.stack)
    return MemoryReport(
        weights_bytes=memory.states.weights_bytes,
        gradients_bytes=memory.states.gradients_bytes,
        optimizer_states_bytes=memory.states.optimizer_states_bytes,
        activations_bytes=acts.total_bytes,
        overhead_bytes=over.total_bytes,
        total_bytes=memory.total_bytes,
        total_low_bytes=math.floor(memory.total_bytes * spread.low),
        total_high_bytes=math.ceil(memory.total_bytes * spread.high),
        range_basis=spread.basis,
        memory_bound=job.memory_bound,
        capacity_bytes=memory.capacity_bytes,
        capacity_fraction=job.capacity_fraction,
        limit_bytes=memory.limit_bytes,
        fits=memory.fits,
        gpu_fits=memory.gpu_fits,
        headroom_bytes=memory.limit_bytes - memory.total_bytes,
        dominant_pillar=memory.dominant_pillar,
        host_bytes=memory.host_bytes,
        host_capacity_bytes=memory.host_capacity_bytes,
        host_limit_bytes=memory.host_limit_bytes,
        host_fits=memory.host_fits,
        stage=memory.stage,
        num_stages=max(1, len(split)),
        stage_layers=list(split),
        rank_totals=[RankTotal(rank=rank, layers=split[rank], total_bytes=total) for rank, total in memory.checked_ranks
                     if rank < len(split)],
        activations=ActivationDetail(**{name: getattr(acts, name) for name in ActivationDetail.model_fields}),
        overhead=OverheadDetail(**{name: getattr(over, name) for name in OverheadDetail.model_fields}),
        paged_bytes=memory.states.paged_bytes,
        step_grad_copy_bytes=memory.states.step_grad_copy_bytes,
    )


def performance_report(perf: Performance, arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> PerformanceReport:
    efficiency = compute_efficiency(gpu, job.stack)
    spread = throughput_range(job.stack, arch.is_moe, plan.precision, efficiency.calibrated)
    return PerformanceReport(
        tokens_per_s=perf.tokens_per_s,
        tokens_per_s_low=perf.tokens_per_s * spread.low,
        tokens_per_s_high=perf.tokens_per_s * spread.high,
        range_basis=spread.basis,
        mfu_fraction=perf.mfu,
        hfu_fraction=perf.hfu,
        step_time_s=perf.step_time_s,
        compute_time_s=perf.compute_time_s,
        communication_time_s=perf.communication_time_s,
        exposed_communication_s=perf.exposed_communication_s,
        optimizer_time_s=perf.optimizer_time_s,
        model_parallel_time_s=perf.model_parallel_time_s,
        pipeline_bubble_s=perf.pipeline_bubble_s,
        pipeline_imbalance_s=perf.pipeline_imbalance_s,
        moe_host_wait_s=perf.moe_host_wait_s,
        offload_exposed_s=perf.offload_exposed_s,
        tokens_per_step=perf.tokens_per_step,
        global_batch=plan.global_batch,
        model_flops_per_token=perf.model_flops_per_token,
        hardware_flops_per_token=perf.hardware_flops_per_token,
        peak_tflops=perf.peak_tflops,
        compute_efficiency=perf.compute_efficiency,
        efficiency_calibrated=efficiency.calibrated,
        efficiency_borrowed_from=efficiency.borrowed_from,
        efficiency_source=efficiency.source,
    )


HOURS_PER_YEAR = 24 * DAYS_PER_YEAR


# A plan whose MoE layers wait for the host this share of its step or more says so (models/time/moe_host.py).
HOST_BOUND_SHARE = 0.10

# Prices move monthly (the catalogue's sources are snapshots): past this age a plan says so.
MAX_PRICE_AGE_DAYS = 90


def plan_warnings(performance: PerformanceReport, cost: CostReport, num_gpus: int, price_date: str | None = None,
                  pricing: str = "on-demand") -> list[str]:
    """What makes a plan that fits one nobody would run: MFU under MFU_FLOOR, a step that waits on
    communication longer than it computes, an activation offload the host link cannot hide, over
    a year of training, rented GPUs left idle; and what to check before trusting its cost: a price
    older than MAX_PRICE_AGE_DAYS, spot instances that may be taken back."""
    found = []
    if price_date is not None and (age := days_since(price_date, today())) > MAX_PRICE_AGE_DAYS:
        found.append(f"its price was read {price_date}, {age} days ago: check it (prices move monthly)")
    if pricing == "spot":
        found.append("spot instances may be preempted: restarts from the last checkpoint add time and cost "
                     "(counted only as --restart-overhead says)")
    if performance.mfu_fraction < MFU_FLOOR:
        found.append(f"MFU {performance.mfu_fraction:.1%} is below {MFU_FLOOR:.0%}: the GPUs mostly wait")
    # exposed data-parallel traffic plus the model-parallel collectives (the pipeline bubble is idle, not traffic)
    waiting = (performance.exposed_communication_s + performance.model_parallel_time_s - performance.pipeline_bubble_s
               - performance.pipeline_imbalance_s - performance.moe_host_wait_s)
    if waiting > performance.compute_time_s:
        found.append(f"network-bound: each step waits {waiting:,.2f} s on communication against "
                     f"{performance.compute_time_s:,.2f} s of compute")
    if performance.moe_host_wait_s > HOST_BOUND_SHARE * performance.step_time_s:
        found.append(f"host-bound: its MoE layers wait {performance.moe_host_wait_s:,.2f} s a step for the CPU to launch "
                     "them (larger micro-batches, wider EP or --cuda-graphs shorten it)")
    if performance.offload_exposed_s > 0:
        found.append(f"host-link-bound: moving offloaded activations stalls each step "
                     f"{performance.offload_exposed_s:,.2f} s beyond its compute")
    if cost.hours > HOURS_PER_YEAR:
        found.append(f"takes {cost.hours / HOURS_PER_YEAR:,.1f} years")
    rented = cost.num_instances * cost.gpus_per_instance
    if rented > num_gpus:
        found.append(f"{rented - num_gpus} of the {rented} rented GPUs stay idle")
    return found


def plan_offerings(catalogue: Catalogue, gpu: str, pricing: Pricing, tp: int = 1) -> list[Offering]:
    """The offerings of this GPU priced under `pricing`; with TP, those whose instances hold a
    whole TP group (TP never spans instances) when any does."""
    priced = [o for o in catalogue.offerings_for(gpu) if has_price(o, pricing)]
    priced = [o for o in priced if o.domain_gpus >= tp] or priced
    if not priced:
        raise VramplanError("gpu", gpu, f"no offering prices this GPU ({pricing}); add one with --offerings-csv")
    return priced


def _cheapest_total(results: list[EstimateResult], rentable: dict[str, bool]) -> EstimateResult:
    """The plan's estimate on the offering where it trains for the fewest dollars in all: the
    network decides this once the plan spans instances (64 H100 as eight 100 Mbps pods take years;
    on a cluster fabric, days). An offering whose host RAM holds the plan's offloads comes first (the
    GPU memory is the same on every offering of the GPU: the cheapest A100 box with too little RAM for
    an optimizer offload answered 'does not fit' where 12 of 15 others held it); then a real provider's
    offering before the generic list-price rows (reference prices nobody rents, as `solve` uses them
    only with --provider list); on a tie, the lower hourly price, then fewer, larger instances."""
    return min(results, key=lambda r: (not r.memory.fits, not rentable[r.cost.offering], r.cost.usd_total,
                                       r.cost.usd_per_hour, r.cost.num_instances, r.cost.offering))


def estimate_plan(
    arch: Architecture,
    job: Job,
    plan: Plan,
    gpu: GpuSpec,
    offering: Offering,
    tokens: float,
    pricing: Pricing = "on-demand",
    restart_overhead: float = 0.0,
) -> EstimateResult:
    """`restart_overhead`: on spot, the share of the work a preemption makes the run do again
    (models/time/cost.py worked_tokens); the tokens reported are the user's."""
    if offering.gpu != gpu.name:
        raise VramplanError("offering", offering.name, f"sells {offering.gpu}, not {gpu.name}")
    if (dense := dense_moe_option_refusal(arch, job)) is not None:  # before any stack's refusal of the option
        raise dense
    if plan.recompute_layers is not None:  # what the command line refuses (query_fields), for the Python API
        if (why := recompute_layers_conflict(plan.recompute)) is not None:  # ignored before: estimated as if not given
            raise VramplanError("recompute_layers", plan.recompute_layers, f"applies to recompute full; {why}")
        chunk = largest_chunk(arch.num_layers, plan_split(arch, plan), plan.vpp)
        if plan.recompute_layers > chunk:
            raise VramplanError("recompute_layers", plan.recompute_layers,
                                f"counts layers of a model chunk, and {arch.name}'s hold at most {chunk} on this layout")
    refusal = plan_refusal(load_stack_capabilities()[job.stack], job, plan, offering.num_gpus, arch.model_type,
                           architecture_parts(arch))
    if refusal is not None:
        raise VramplanError("stack", job.stack, refusal_message(job.stack, refusal))
    memory = memory_per_gpu(arch, job, plan, gpu, offering)
    if memory.total_bytes > MAX_REPORTED_BYTES:  # JSON consumers read int64: 405B at 1M tokens x 65,536 was 7e21
        raise VramplanError("micro_batch", plan.micro_batch, f"at seq_len {job.seq_len:,} needs more than 2^62 bytes "
                                                             "per GPU, beyond what an estimate reports")
    perf = performance(arch, job, plan, gpu, offering.domain_gpus, offering.network_bandwidth_gb_per_s)
    hours = training_hours(worked_tokens(tokens, pricing, restart_overhead), perf.tokens_per_s)
    price = cost(offering, plan.num_gpus, hours, pricing)
    performance_summary = performance_report(perf, arch, job, plan, gpu)
    cost_report = CostReport(
        offering=offering.name,
        pricing=pricing,
        num_instances=price.num_instances,
        gpus_per_instance=offering.num_gpus,
        intra_node_gb_per_s=gpu.intra_node_bandwidth_gb_per_s,
        network_gb_per_s=network_gb_per_s(offering, gpu),
        usd_per_hour=price.usd_per_hour,
        tokens=tokens,
        hours=hours,
        days=hours / HOURS_PER_DAY,
        usd_total=price.usd_total,
    )
    return EstimateResult(
        model=model_info(arch, job),
        job=job,
        plan=plan.model_copy(update={"offering": offering.name}),
        memory=memory_report(memory, job, plan_split(arch, plan)),
        performance=performance_summary,
        cost=cost_report,
        warnings=plan_warnings(performance_summary, cost_report, plan.num_gpus, offering.price_date, pricing)
        + [note for note in (quantization_note(arch, job), unquantised_experts_note(arch, job),
                             cuda_graphs_note(arch, job), linear_attention_note(arch),
                             sparse_attention_note(arch, job, activation_shape(job, plan)),
                             xielu_note(arch), accumulation_note(arch, job, plan, memory)) if note],
    )


def _number(value: object) -> bool:
    """A real number as `solve`'s fields take one (numpy's included: np.int64(1e9) tokens were refused
    as out of range), never a boolean, a Decimal or text."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past float's range (10**400 tokens): no number vramplan takes
        return False


def _check_inputs(model: object, tokens: object, pricing: object, restart_overhead: object) -> None:
    """The API's arguments in the domains `solve` gives them, one VramplanError naming the field
    (a Path model raised AttributeError, pricing 'free' KeyError, tokens '1e9' TypeError, True was 1
    token, and a restart overhead of -5 priced a run at -6 million USD)."""
    if not isinstance(model, str):
        raise VramplanError("model", repr(model)[:80], "must be a catalogue name, a config.json path or a hub id, as text")
    for field, value in (("tokens", tokens), ("restart_overhead", restart_overhead)):
        if not _number(value):  # '1e9' or True: the type, not the range
            raise VramplanError(field, repr(value)[:80], f"must be a finite number (int or float), not {type(value).__name__}")
    if not MIN_TOKENS <= tokens <= MAX_TOKENS:  # type: ignore[operator]
        # the domain `solve` has (1e308 printed a 300-digit cost)
        raise VramplanError("tokens", tokens, f"out of range: must be a number between {MIN_TOKENS} and {MAX_TOKENS:g}")
    if pricing not in PRICINGS:
        raise VramplanError("pricing", pricing, f"must be one of {', '.join(PRICINGS)}")
    if not 0 <= restart_overhead <= MAX_RESTART_OVERHEAD:  # type: ignore[operator]
        raise VramplanError("restart_overhead", restart_overhead, f"out of range: must be a number between 0 and "
                                                                  f"{MAX_RESTART_OVERHEAD:g}")
    refuse_unspot_restarts(restart_overhead, pricing)  # type: ignore[arg-type]


def estimate(
    catalogue: Catalogue, model: str, job: Job, plan: Plan, tokens: float, pricing: Pricing = "on-demand",
    restart_overhead: float = 0.0, fitting_changes: bool = True,
) -> EstimateResult:
    """Resolve names against the catalogue and evaluate the plan (the `vramplan estimate` API);
    without an offering, on the one where the plan trains cheapest in all (_cheapest_total). A plan
    that does not fit lists the single changes that make it fit (models/estimate_changes.py; each
    one more estimate: `fitting_changes=False` skips them)."""
    _check_inputs(model, tokens, pricing, restart_overhead)
    for name, value, kind in (("catalogue", catalogue, Catalogue), ("job", job, Job), ("plan", plan, Plan)):
        if not isinstance(value, kind):  # a dict reached deep code as an AttributeError
            raise VramplanError(name, type(value).__name__, f"must be a vramplan.{kind.__name__}")
    if not isinstance(fitting_changes, bool):
        raise VramplanError("fitting_changes", repr(fitting_changes)[:80], "must be True or False")
    arch = catalogue.architecture(model)

    def estimate_one(one: Plan) -> EstimateResult:
        return _estimate(catalogue, arch, job, one, tokens, pricing, restart_overhead)

    result = estimate_one(plan)
    if fitting_changes and not result.memory.fits:
        result = result.model_copy(update={"fitting_changes": changes_that_fit(estimate_one, plan)})
    return result


def _estimate(catalogue: Catalogue, arch: Architecture, job: Job, plan: Plan, tokens: float, pricing: Pricing,
              restart_overhead: float) -> EstimateResult:
    """estimate's evaluation of one plan, its inputs checked."""
    gpu = catalogue.gpu(plan.gpu)
    if plan.offering is not None:
        return estimate_plan(arch, job, plan, gpu, catalogue.offering(plan.offering), tokens, pricing, restart_overhead)
    offerings = plan_offerings(catalogue, gpu.name, pricing, plan.tp)
    results, refusals = [], []
    for offering in offerings:
        try:
            results.append(estimate_plan(arch, job, plan, gpu, offering, tokens, pricing, restart_overhead))
        except VramplanError as error:  # e.g. a stack that runs one instance only, on 1-GPU pods
            refusals.append(error)
    if not results:
        raise refusals[0]
    return _cheapest_total(results, {o.name: o.rentable for o in offerings})
