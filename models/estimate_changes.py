"""What one change of a plan that does not fit makes it fit: `vramplan estimate`'s answer to
"DOES NOT FIT" beside the verdict (solve explains a query nothing fits by solving each change,
solver/explain.py; an estimate is one plan, so each change is one estimate).

The changes keep the job, the GPUs and the global batch (micro-batch x accumulation x data-parallel
ranks), and each lowers one pillar (docs/memory-model.md):
- a higher ZeRO stage: 1 shards the optimizer states, 2 also the gradients, 3 also the weights,
  over the ZeRO group (data-parallel x context-parallel ranks: Plan.zero_group), so none is tried
  on a group of one rank;
- activation recomputation, selective then full (the stack's saved activations per layer);
- an offload of the optimizer states, then of the parameters too (host RAM per node must hold it:
  an estimate whose host RAM does not fit does not fit);
- micro-batch 1 with the accumulation that keeps the global batch (activations scale with it).

A change the stack does not run (its refusal, models/catalogue/stack_contract.py) is skipped. The
changes are tried in that order, least disruptive first (what a run changes least: a ZeRO stage is
a config switch, recomputation costs a third more compute, an offload the PCIe traffic), and the
ones that fit are returned in that order with their memory, throughput and cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pydantic import ValidationError

from vramplan.models.core.errors import VramplanError
from vramplan.models.core.results import EstimateResult, FittingChange
from vramplan.models.core.setup import Plan, offload_refusal


def single_changes(plan: Plan) -> Iterator[tuple[str, Plan]]:
    """(the options that differ, as the command line writes them; the changed plan), in order. A
    change Plan refuses (its checks of the combination) is left out."""
    updates: list[tuple[str, dict]] = []
    if plan.zero_group > 1:
        updates += [(f"--zero {zero}", {"zero": zero}) for zero in range(plan.zero + 1, 4)]
    # selective (or torchtitan's per-op op) saves more than none, full the least
    steps = ("selective", "full") if plan.recompute == "none" else ("full",) if plan.recompute != "full" else ()
    updates += [(f"--recompute {recompute}", {"recompute": recompute}) for recompute in steps]
    if plan.recompute == "full" and plan.recompute_layers is not None:
        updates.append(("--recompute full on every layer", {"recompute_layers": None}))
    offloads = {"none": ("optimizer", "optimizer+params"), "optimizer": ("optimizer+params",)}.get(plan.offload, ())
    for offload in offloads:
        # with the least ZeRO stage the offload runs at (models/core/setup.py offload_refusal: DeepSpeed's
        # offload_optimizer needs stage 1, offload_param stage 3)
        zero = next(stage for stage in range(plan.zero, 4) if offload_refusal(stage, offload) is None)
        extra = f"--zero {zero} " if zero != plan.zero else ""
        updates.append((f"{extra}--offload {offload}", {"offload": offload, "zero": zero}))
    if plan.micro_batch > 1:
        accumulation = plan.grad_accum * plan.micro_batch  # the same global batch
        updates.append((f"--micro-batch 1 --grad-accum {accumulation}", {"micro_batch": 1, "grad_accum": accumulation}))
    for change, update in updates:
        try:
            yield change, Plan.model_validate({**plan.model_dump(), **update})
        except ValidationError:
            continue


def fitting_changes(estimate_one: Callable[[Plan], EstimateResult], plan: Plan) -> list[FittingChange]:
    """The single changes of `plan` (single_changes) whose estimate fits, least disruptive first.
    `estimate_one` estimates a plan as the caller estimated the one that did not fit (the same
    catalogue, model, job, offering or choice of offering, tokens and pricing)."""
    found = []
    for change, changed in single_changes(plan):
        try:
            result = estimate_one(changed)
        except VramplanError:  # the stack does not run it (e.g. offload under Megatron)
            continue
        if result.memory.fits:
            found.append(FittingChange(change=change, plan=result.plan, total_bytes=result.memory.total_bytes,
                                       limit_bytes=result.memory.limit_bytes,
                                       tokens_per_s=result.performance.tokens_per_s,
                                       usd_total=result.cost.usd_total))
    return found
