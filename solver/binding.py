"""The binding resource of an infeasible query, in the user's words: an empty search space (which
filter emptied it: "lambda has no spot prices"), host RAM when offload needs more than any allowed
instance has, and the least budget or deadline that a fitting plan needs."""

from __future__ import annotations

from collections.abc import Callable

from vramplan.models.architecture.parallel import interleaving_rule
from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.core.units import BYTES_PER_GIB, BYTES_PER_MIB
from vramplan.models.time.cost import PRICING_WORDS, has_price, usd_text
from vramplan.solver.fitting import shape_points
from vramplan.solver.points import cluster_accepts, host_mib_per_gpu, inner_metrics, step_cap_us
from vramplan.solver.query import SolvedPlan, SolveQuery
from vramplan.solver.space import SearchSpace
from vramplan.solver.space_domains import in_place, place_label, plannable

Solver = Callable[[SolveQuery], SolvedPlan | None]


def _names(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(names)


def empty_space_reason(catalogue: Catalogue, query: SolveQuery) -> str:
    """Why no cluster is left to search, naming the filter that removed the last offering."""
    offerings = list(catalogue.offerings.values())
    gpus = f" {_names(query.gpus)}" if query.gpus else ""
    if query.gpus:
        offerings = [o for o in offerings if o.gpu in query.gpus]
        if not offerings:
            return f"no offering in the catalogue rents{gpus}"
    if query.providers:
        offerings = [o for o in offerings if o.provider in query.providers]
        if not offerings:
            verb = "rents" if len(query.providers) == 1 else "rent"
            return f"{_names(query.providers)} {verb} no{gpus or ' GPU'}"
    rentable = [o for o in offerings if plannable(o, query)]
    if offerings and not rentable:
        return (f"{gpus.strip() or 'these GPUs'} only {'has' if len(offerings) == 1 else 'have'} reference "
                f"prices ({_names([o.name for o in offerings])}), which plans use only with --provider list")
    offerings = rentable
    if not any(has_price(o, query.pricing) for o in offerings):
        words = PRICING_WORDS[query.pricing]
        if query.providers:
            verb = "has" if len(query.providers) == 1 else "have"
            reason = f"{_names(query.providers)} {verb} no {words} prices{' for' + gpus if gpus else ''}"
            return f"{reason} (use --pricing on-demand or another --provider)"
        return f"no provider has {words} prices{' for' + gpus if gpus else ''} (use --pricing on-demand)"
    placed = [o for o in offerings if in_place(o, query)]
    if not placed:
        return f"none of the allowed offerings{' of' + gpus if gpus else ''} is in {place_label(query)}"
    offerings = placed
    limits = [f"--max-gpus {query.max_gpus}"] + ([f"--max-nodes {query.max_nodes}"] if query.max_nodes else [])
    if query.pins.num_gpus is not None:
        limits.append(f"--num-gpus {query.pins.num_gpus}")
    where = offerings[0].name if len(offerings) == 1 else f"any of the {len(offerings)} allowed offerings"
    # Counts are a data-parallel degree dividing the global batch times a model-parallel size
    # (space_domains.gpu_counts).
    return (f"no GPU count within {', '.join(limits)} is a divisor of the global batch of "
            f"{query.effective_global_batch} times a model-parallel size (TP x PP x CP) and rents whole "
            f"instances of {where}")


def interleaving_reason(space: SearchSpace) -> str | None:
    """When the pinned interleaving (--vpp > 1) leaves no layout a micro-batch count its stack's
    schedule runs at any GPU count (models.architecture.parallel.interleaving_refuses: Megatron a
    multiple of pp, torch a multiple of its m // pp rounds), say so; else None."""
    vpp = space.query.pins.vpp
    if vpp is None or vpp == 1 or any(space.count_layouts.values()):
        return None
    rule = interleaving_rule(space.job.stack)
    runs = f" ({rule})" if rule else ""
    return (f"the {space.job.stack} stack's interleaved schedule (vpp {vpp}) runs none of the micro-batch counts "
            f"global batch {space.global_batch} leaves at any GPU count{runs}: another global batch, or vpp 1")


def host_ram_reason(space: SearchSpace) -> str | None:
    """When plans fit GPU memory only by offloading and no allowed instance has the host RAM:
    the offload plan that comes closest, its host RAM per node and the instance's limit."""
    best: tuple[int, int, int] | None = None  # (shortfall MiB per GPU, host MiB per GPU, cluster)
    for shape in sorted({c.shape for c in space.clusters}):
        members = space.clusters_of_shape(shape)
        # Only a budget or a deadline (a step cap) reads the step time: without one, the shape's
        # step-time tables are not filled for every offload point under the limit.
        timed = any(step_cap_us(space, c) is not None for c in members)
        for peak, inner in shape_points(space, shape):  # least GPU memory first
            if peak > space.limit_mib[shape[0]]:
                break
            if not host_mib_per_gpu(space, shape[1], inner):
                continue  # no offload: nothing on the host
            metrics = inner_metrics(space, shape, inner, memory=False, timed=timed)
            if metrics is None:
                continue
            for c in members:
                if cluster_accepts(space, c, metrics, memory=False):
                    shortfall = metrics.host_mib_per_gpu - space.host_budget_mib_per_gpu[c]
                    if best is None or shortfall < best[0]:
                        best = (shortfall, metrics.host_mib_per_gpu, c)
    if best is None or best[0] <= 0:
        return None
    _, host_mib, c = best
    cluster = space.clusters[c]
    on_node = min(cluster.num_gpus, cluster.offering.num_gpus)
    need_gib = host_mib * on_node * BYTES_PER_MIB / BYTES_PER_GIB
    capacity_gib = cluster.offering.host_memory_gib
    limit_gib = capacity_gib * space.job.capacity_per_mille / 1000
    offloads = "activation offloading" if space.job.activation_offload else "ZeRO-Offload"
    return (f"host RAM is the binding resource: plans fit GPU memory only with {offloads}, and the leanest "
            f"needs {need_gib:,.1f} GiB of host RAM per node ({on_node} GPU{'s' if on_node > 1 else ''} of "
            f"{cluster.offering.name}), above its "
            f"{limit_gib:,.1f} GiB limit ({space.job.capacity_fraction:.0%} of {capacity_gib:,.0f} GiB)")


def budget_deadline_reasons(query: SolveQuery, conflicts: list[str], solve_one: Solver) -> list[str]:
    """The least budget and the shortest deadline a fitting plan needs, when those conflict."""
    reasons = []
    budget_label = f"--budget-usd {query.budget_usd:g}" if query.budget_usd is not None else None
    deadline_label = f"--deadline-hours {query.deadline_hours:g}" if query.deadline_hours is not None else None
    if budget_label in conflicts:
        plan, kept = _without(query, {"budget_usd": None, "objective": "cost"}, "deadline_hours", solve_one)
        if plan is not None and plan.cost.usd_total > query.budget_usd:
            within = f" within {deadline_label}" if kept else ""
            reasons.append(f"the cheapest plan that fits{within} costs {usd_text(plan.cost.usd_total)} "
                           f"({plan.plan.num_gpus} x {plan.plan.gpu}), above {budget_label}")
    if deadline_label in conflicts:
        plan, kept = _without(query, {"deadline_hours": None, "objective": "time"}, "budget_usd", solve_one)
        if plan is not None and plan.cost.hours > query.deadline_hours:
            within = f" within {budget_label}" if kept else ""
            reasons.append(f"the fastest plan that fits{within} takes {plan.cost.hours:,.1f} hours "
                           f"({plan.plan.num_gpus} x {plan.plan.gpu}), beyond {deadline_label}")
    return reasons


def _without(query: SolveQuery, update: dict, other: str, solve_one: Solver) -> tuple[SolvedPlan | None, bool]:
    """Solve with `update` applied, keeping the other limit if a plan meets it, else dropping it too."""
    if getattr(query, other) is not None:
        plan = solve_one(query.model_copy(update=update))
        if plan is not None:
            return plan, True
    return solve_one(query.model_copy(update=update | {other: None})), False
