"""The domains of a query's search space: the offerings it may rent, the GPU counts each offering
rents (any count up to one instance, whole instances beyond), and the ZeRO x offload, precision
and recompute values its pins leave. solver/space.py builds the space from them."""

from __future__ import annotations

from itertools import product

from vramplan.models.catalogue.catalogue import Catalogue, load_stack_capabilities, load_stacks
from vramplan.models.catalogue.stack import recompute_layers_conflict
from vramplan.models.catalogue.stack_contract import (
    StackCapabilities,
    count_refusal,
    distributed_offload_refusal,
    job_refusal,
    precision_refusal,
    recompute_refusal,
    refusal_message,
    states_refusal,
)
from vramplan.models.core.catalogue_schema import GpuSpec, Offering
from vramplan.models.core.choices import JURISDICTIONS
from vramplan.models.core.errors import VramplanError, closest_names
from vramplan.models.core.setup import OFFLOADS, RECOMPUTES, ZERO_STAGES, offload_refusal
from vramplan.models.memory.memory import check_gpu_precision
from vramplan.models.time.cost import has_price, num_instances
from vramplan.solver.choice_keys import RecomputeChoice
from vramplan.solver.query import SolveQuery

HALF_PRECISIONS = ("bf16", "fp16")  # searched by default; fp8 and fp32 only when pinned


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def gpu_counts(model_parallel_sizes: set[int], global_batch: int, max_gpus: int) -> list[int]:
    """The GPU counts a layout domain can run, ascending: a model-parallel size (TP x PP x CP,
    experts sharded inside) times a data-parallel degree that divides the global batch, up to max_gpus."""
    return sorted({mp * d for mp in model_parallel_sizes for d in divisors(global_batch) if mp * d <= max_gpus})


def stack_caps(query: SolveQuery) -> StackCapabilities:
    """What the query's stack runs (cached: models.catalogue)."""
    return load_stack_capabilities()[query.job.stack]


def allowed_counts(offering: Offering, query: SolveQuery, sizes: list[int], model_type: str) -> list[int]:
    """GPU counts an offering can rent: any count up to one instance, whole instances beyond, as
    many GPUs and instances as the stack runs (for this model type: distributed_offload_refusal)."""
    per, caps = offering.num_gpus, stack_caps(query)
    counts = [n for n in sizes if n <= query.max_gpus and (n <= per or n % per == 0)
              and count_refusal(caps, query.job.method, n, per) is None
              and distributed_offload_refusal(query.job, model_type, n) is None]
    if query.max_nodes is not None:
        counts = [n for n in counts if num_instances(n, offering) <= query.max_nodes]
    if query.pins.num_gpus is not None:
        counts = [n for n in counts if n == query.pins.num_gpus]
    return counts


def plannable(offering: Offering, query: SolveQuery) -> bool:
    """list/ rows are reference prices nobody rents: plans use them only when --provider names them."""
    return offering.rentable or offering.provider in query.providers


def in_place(offering: Offering, query: SolveQuery) -> bool:
    """Whether the offering is in a region, country and jurisdiction the query allows: one of its
    regions (countries) is listed; an offering without regions (list/ rows) is in none."""
    regions = {r for r in offering.regions.split(";") if r}
    countries = {c.upper() for c in offering.countries.split(";") if c}
    if query.regions and not regions & set(query.regions):
        return False
    if query.countries and not countries & {c.upper() for c in query.countries}:
        return False
    return query.jurisdiction is None or bool(countries & JURISDICTIONS[query.jurisdiction])


def place_label(query: SolveQuery) -> str:
    """The place restrictions as the user wrote them (restrictions.restrictions_of's labels)."""
    return ", ".join(place_labels(query))


def place_labels(query: SolveQuery) -> list[str]:
    labels = []
    if query.regions:
        labels.append(f"--region {','.join(query.regions)}")
    if query.countries:
        labels.append(f"--country {','.join(query.countries)}")
    if query.jurisdiction:
        labels.append(f"--jurisdiction {query.jurisdiction}")
    return labels


def query_offerings(catalogue: Catalogue, query: SolveQuery) -> list[Offering]:
    for name in query.gpus:
        catalogue.gpu(name)  # unknown names are errors with suggestions
    known_providers = {o.provider for o in catalogue.offerings.values()}
    for provider in query.providers:
        if provider not in known_providers:
            raise VramplanError("provider", provider, f"no offering; known: {', '.join(sorted(known_providers))}")
    refuse_unknown_regions(catalogue, query.regions)
    chosen = [
        o
        for o in catalogue.offerings.values()
        if (not query.gpus or o.gpu in query.gpus)
        and (not query.providers or o.provider in query.providers)
        and has_price(o, query.pricing)
        and in_place(o, query)
        and plannable(o, query)
    ]
    return sorted(chosen, key=lambda o: o.name)  # independent of catalogue row order


def refuse_unknown_regions(catalogue: Catalogue, regions: tuple[str, ...]) -> None:
    """A region no offering of the catalogue lists is a typo, refused like an unknown provider:
    `--region US-EAST-1` was answered infeasible ("none of the allowed offerings is in --region
    US-EAST-1") with a table of changes that could not help. Regions match exactly (providers spell
    them in either case: us-east-1, CA-MTL-1)."""
    if not regions:
        return
    known = {r for o in catalogue.offerings.values() for r in o.regions.split(";") if r}
    for region in regions:
        if region not in known:
            close = sorted(r for r in known if r.lower() == region.lower()) or closest_names(region, sorted(known))
            hint = f"did you mean {', '.join(close)}?" if close else "see `vramplan offerings --format csv`"
            raise VramplanError("region", region, f"is a region of no offering in the catalogue; {hint}")


def gpu_runs(gpu: GpuSpec, precision: str) -> bool:
    try:
        check_gpu_precision(gpu, precision)
    except VramplanError:
        return False
    return True


# Partial full recompute the solver tries, as shares of each model chunk's layers (resolved per
# layout: RecomputeChoice.resolved), by what the stack can run (catalogues/stacks.csv
# partial_recompute): Megatron any count per chunk (--recompute-num-layers), torchtitan every 2nd /
# 4th block of its model part.
PARTIAL_RECOMPUTE_SHARES = {"none": (), "any": ((1, 8), (1, 4), (3, 8), (1, 2), (3, 4)), "every-nth": ((1, 4), (1, 2))}


def recompute_domain(query: SolveQuery, num_layers: int) -> list[RecomputeChoice]:
    """Recompute modes, least recompute first (the tie-break), with the stack's partial full
    recompute before full when neither the mode nor the job's recompute_layers is fixed (the
    job's count is then the full mode's, the only one: each model chunk checkpoints that many layers)."""
    pins, caps = query.pins, stack_caps(query)
    offloading, overlap, graphs = query.job.activation_offload, query.job.moe_a2a_overlap, query.job.cuda_graphs
    job_layers = query.job.recompute_layers
    if job_layers is not None and (why := recompute_layers_conflict(pins.recompute)) is not None:  # the Python API
        raise VramplanError("recompute_layers", job_layers, f"applies to recompute full; {why}")
    # --recompute-layers N is N layers of full recompute: with the mode free it is the mode (the search
    # returned plans that recompute none, the option ignored)
    pinned = pins.recompute if pins.recompute is not None or job_layers is None else "full"
    if pinned is not None and (refusal := recompute_refusal(caps, pinned, offloading, overlap, graphs)) is not None:
        raise VramplanError("stack", query.job.stack, refusal_message(query.job.stack, refusal))
    choices = [RecomputeChoice(r, job_layers if r == "full" else None) for r in RECOMPUTES
               if (pinned is None or r == pinned) and recompute_refusal(caps, r, offloading, overlap, graphs) is None]
    if pins.recompute is None and job_layers is None and choices and choices[-1].mode == "full":
        kind = load_stacks()[query.job.stack].partial_recompute  # cached: models.catalogue
        choices[-1:-1] = [RecomputeChoice("full", share=share) for share in PARTIAL_RECOMPUTE_SHARES[kind]]
    return choices


def pinned_domains(query: SolveQuery) -> tuple[list[tuple[int, str]], list[str]]:
    """The ZeRO x offload pairs and the precisions the pins and the stack leave; a pin (or a job)
    the stack does not run is bad input naming the stack."""
    pins, caps, method = query.pins, stack_caps(query), query.job.method
    contradiction = offload_refusal(pins.zero, pins.offload) if pins.zero is not None and pins.offload else None
    if contradiction is not None:  # --zero 1 --offload optimizer+params: no stack runs it
        raise VramplanError("offload", pins.offload, f"{contradiction}; --zero is {pins.zero}")
    pairs = [(z, f) for z, f in product(ZERO_STAGES, OFFLOADS)  # what the pins leave of the pairs that can run
             if offload_refusal(z, f) is None and pins.zero in (None, z) and pins.offload in (None, f)]
    zero_offloads = [(z, f) for z, f in pairs if states_refusal(caps, method, z, f, query.job.optimizer) is None]
    refusal = job_refusal(caps, query.job)
    if refusal is None and pins.precision is not None:
        refusal = precision_refusal(caps, pins.precision, query.job.moe_a2a_overlap)
    if refusal is None and not zero_offloads:
        refusal = states_refusal(caps, method, *pairs[0], query.job.optimizer)
    if refusal is None and pins.num_gpus is not None:
        refusal = count_refusal(caps, method, pins.num_gpus, pins.num_gpus)  # more than one instance: per offering
    if refusal is not None:
        raise VramplanError("stack", query.job.stack, refusal_message(query.job.stack, refusal))
    precisions = [pins.precision] if pins.precision is not None else list(HALF_PRECISIONS)
    return zero_offloads, precisions
