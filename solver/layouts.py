"""The parallel layouts a query searches: (tp, pp, cp, ep, vpp, sequence parallelism, split).

Megatron-Core's rank layout (models/architecture/parallel.py): num_gpus = tp x pp x cp x dp, expert
parallelism carved from the dp x cp ranks. The solver searches power-of-two degrees (what
Megatron and torchtitan users run, and what keeps dp integral on power-of-two clusters):
tp up to one instance's GPUs (NVLink) and 8, pp up to 16 stages (Llama 3 405B ran 16), vpp 1, 2
or 4 with pp > 1 (interleaved 1F1B), ep among the power-of-two divisors of the expert count up
to 8, and cp up to 8 from 16k tokens of context (flash attention only; Llama 3 used CP only
for its 128k stage). Sequence parallelism comes with TP (Megatron users enable it with TP: it
shards the activations TP alone replicates, for the same communication volume in
models.parallel_time), unless pinned off. Pins widen or fix each domain (any power of two up to
1024). Each layout is checked by models.parallel.check_layout; a pinned value no layout can take
is a one-line error naming it. A pipeline without interleaving also comes in the uneven splits
of models.parallel.balanced_splits (Megatron's first/last rank counts): the split is a value of
the unit model's layout decision, so CP-SAT chooses it with the rest.
"""

from __future__ import annotations

from itertools import product

from vramplan.models.architecture.parallel import balanced_splits, check_layout
from vramplan.models.catalogue.catalogue import load_stack_capabilities
from vramplan.models.catalogue.stack_contract import layout_refusal, refusal_message
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan
from vramplan.solver.query import Pins

MAX_TP, MAX_PP, MAX_CP, MAX_EP, VPPS = 8, 16, 8, 8, (1,)
# Under Megatron's MoE all-to-all overlap a pipeline needs virtual stages (stack_contract.a2a_overlap_refusal):
# the search then tries these, where it otherwise leaves vpp to a pin.
A2A_OVERLAP_VPPS = (1, 2, 4)
MAX_SCALE_UP = 64  # TP and EP degrees inside an NVLink domain wider than a node (GB200 NVL72: 64 of 72)
CP_FROM_SEQ_LEN = 16384


def tp_reach(domain_gpus: int) -> int:
    """The largest TP degree a cluster whose NVLink domain holds this many GPUs can run (TP stays
    inside one domain: an instance, or an NVL72 rack of 4-GPU trays)."""
    return min(domain_gpus, MAX_SCALE_UP)


def degree_limit(widest_domain: int) -> int:
    """The largest TP (and EP) degree searched: MAX_TP, or the widest allowed NVLink domain's
    power of two up to MAX_SCALE_UP where one reaches past a node."""
    return max(MAX_TP, _powers(min(widest_domain, MAX_SCALE_UP))[-1] if widest_domain >= 1 else MAX_TP)


def _powers(limit: int) -> list[int]:
    return [2**i for i in range(limit.bit_length()) if 2**i <= limit]


def _pinned(values: list, pin) -> list:
    return [v for v in values if pin is None or v == pin]


def _degrees(limit: int, pin: int | None) -> list[int]:
    """Powers of two up to limit, or the pinned value alone."""
    return _powers(limit) if pin is None else [pin]


def layout_domain(arch: Architecture, job: Job, pins: Pins, max_gpus: int,
                  valid: list[Layout] | None = None, max_tp: int = MAX_TP) -> list[Layout]:
    """The layouts valid for the model and job on some cluster of at most max_gpus GPUs (the
    instance size and the count are checked per cluster), most preferred first; `valid` is
    valid_layouts' answer when the caller keeps it (it does not depend on max_gpus)."""
    layouts = [lay for lay in (valid_layouts(arch, job, pins, max_tp) if valid is None else valid)
               if lay.model_parallel <= max_gpus]
    if not layouts:
        _raise_for_pins(arch, job, pins, max_gpus)
    return layouts


# The pins valid_layouts and layout_domain read (the explanation's "more GPUs" re-solves pin
# only num_gpus: they share the domain instead of validating every layout again).
LAYOUT_PINS = frozenset({"tp", "pp", "cp", "ep", "vpp", "sequence_parallel"})


def valid_layouts(arch: Architecture, job: Job, pins: Pins, max_tp: int = MAX_TP) -> list[Layout]:
    """Every layout models.parallel.check_layout accepts for the model, job and pins, most
    preferred first; TP and EP up to `max_tp` (degree_limit of the allowed NVLink domains)."""
    cp_limit = MAX_CP if job.seq_len >= CP_FROM_SEQ_LEN and job.attention == "flash" else 1
    tps = _degrees(max_tp, pins.tp)
    pps = _degrees(min(MAX_PP, arch.num_layers), pins.pp)
    cps = _degrees(cp_limit, pins.cp)
    eps = [e for e in _degrees(min(max(MAX_EP, max_tp), arch.num_experts), pins.ep)
           if arch.num_experts % e == 0 or e == pins.ep]
    vpps = list(A2A_OVERLAP_VPPS if job.moe_a2a_overlap else VPPS) if pins.vpp is None else [pins.vpp]
    caps = load_stack_capabilities()[job.stack]  # only what the job's stack runs
    layouts = []
    for tp, pp, cp, ep, vpp in product(tps, pps, cps, eps, vpps):
        sp = tp > 1 and caps.sequence_parallel if pins.sequence_parallel is None else pins.sequence_parallel
        if sp and tp == 1:  # a pinned sequence parallelism shards over TP: it came back as TP 1 with SP
            continue
        layout = Layout(tp, pp, cp, ep, vpp, sp)
        if (vpp > 1 and pp == 1) or layout_refusal(caps, job.method, layout, job.activation_offload, job.moe_a2a_overlap,
                                                        job.optimizer_in_backward) is not None \
                or valid_layout_error(arch, job, layout, tp) is not None:
            continue
        layouts.append(layout)
        if vpp == 1 and caps.uneven_split:  # a pipeline's uneven splits (interleaved: the default, Megatron's equal chunks)
            layouts += [split for split in (layout._replace(split=s) for s in balanced_splits(arch.num_layers, pp))
                        if valid_layout_error(arch, job, split, tp) is None]
    return sorted(layouts, key=Layout.preference)


_PLAN = Plan.model_construct(gpu="")  # what layout_plan copies: every field at its default


def layout_plan(layout: Layout, **fields) -> Plan:
    """An unvalidated Plan carrying the layout (every value comes from a validated domain): a copy
    of a default Plan with these fields, what Plan.model_construct makes at half its cost (see
    docs/performance.md#layout-plans)."""
    return _PLAN.model_copy(update={**layout.plan_fields(), "offering": None, **fields})


def valid_layout_error(arch: Architecture, job: Job, layout: Layout, gpus_per_instance: int,
                       gpu: GpuSpec | None = None) -> VramplanError | None:
    # pp micro-batches a step: a count every stack's interleaved schedule runs (the search keeps the
    # counts each runs: space_tables._layout_domains)
    plan = layout_plan(layout, gpu="", num_gpus=layout.model_parallel * layout.ep, zero=0, recompute="none",
                       precision="bf16", micro_batch=1, grad_accum=layout.pp, offload="none")
    try:
        check_layout(arch, job, plan, gpu or _ANY_GPU, gpus_per_instance)
    except VramplanError as error:
        return error
    return None


def _raise_for_pins(arch: Architecture, job: Job, pins: Pins, max_gpus: int) -> None:
    pinned = pins.layout()
    # an unpinned EP degree is the search's to choose: the overlap's EP > 1 is not the pins' fault
    # (a dense model has no EP degree but 1, and the overlap's refusal of it is the answer)
    checked = pinned._replace(ep=2) if job.moe_a2a_overlap and pins.ep is None and arch.is_moe else pinned
    if pins.sequence_parallel and pins.tp is None:  # pinned SP shards over TP: the stack's SP is what to check
        checked = checked._replace(tp=2)
    refusal = layout_refusal(load_stack_capabilities()[job.stack], job.method, checked, job.activation_offload,
                             job.moe_a2a_overlap, job.optimizer_in_backward)
    if refusal is not None:
        raise VramplanError("stack", job.stack, refusal_message(job.stack, refusal))
    if pins.sequence_parallel and pinned.tp == 1:
        raise VramplanError("sequence_parallel", True, "needs tp > 1" + (
            "" if pins.tp is not None else f", and no TP > 1 layout of the model is within max_gpus={max_gpus}"))
    error = valid_layout_error(arch, job, pinned, pinned.tp)
    if error is not None:
        raise error
    if pinned.model_parallel > max_gpus:
        name = next(n for n in ("tp", "pp", "cp") if getattr(pins, n) is not None)
        raise VramplanError(name, getattr(pins, name), f"tp x pp x cp = {pinned.model_parallel} is above max_gpus={max_gpus}")
    raise VramplanError("vpp", pins.vpp, "interleaved stages need pp > 1")


class _AnyGpu:
    name = "any GPU"


_ANY_GPU = _AnyGpu()
