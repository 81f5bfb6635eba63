"""When nothing fits: which restrictions conflict, how close the closest miss came and which pillar
dominates it, and the smallest change that fits, tried from the least to the most disruptive:
activation checkpointing, ZeRO-2/3, smaller micro-batch with more accumulation, 8-bit optimizer
states, offload, more GPUs, bigger GPUs, LoRA/QLoRA."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import combinations, groupby, product

from vramplan.models.catalogue.catalogue import Catalogue, load_stack_capabilities, load_stacks
from vramplan.models.catalogue.stack import restacked
from vramplan.models.catalogue.stack_contract import architecture_parts, broader_stacks
from vramplan.models.core.units import BYTES_PER_GIB, BYTES_PER_MIB
from vramplan.solver.binding import budget_deadline_reasons, empty_space_reason, host_ram_reason, interleaving_reason
from vramplan.solver.engine import STEP_WORK, Budget, TimeLimitReached, limit_label
from vramplan.solver.fitting import explained_layouts, least_peak_mib, shape_points
from vramplan.solver.points import Choice, step_cap_us, step_us
from vramplan.solver.query import Explanation, Mitigation, SolvedPlan, SolveQuery
from vramplan.solver.restrictions import (
    conflicting_restrictions,
    only_restrictions,
    restrictions_of,
    unrestricted_max_gpus,
    within,
)
from vramplan.solver.space import SearchSpace
from vramplan.solver.space_build import kept_valid_layouts
from vramplan.solver.space_domains import gpu_counts

Solver = Callable[[SolveQuery], SolvedPlan | None]
Fits = Callable[[SolveQuery], bool]  # whether any plan of the query fits (api.plan_exists)


def stack_mitigation(stack: str) -> str:
    """The change that switches to another stack, as explanations word it."""
    return f"the {stack} stack (--stack {stack})"

def closest_miss(space: SearchSpace, budget: Budget | None = None) -> tuple[Choice, int] | None:
    """The point of the user's space that overshoots GPU memory by the fewest MiB (then the
    fastest, then the first in shape and point order), ignoring memory bounds but keeping budget
    and deadline. Per shape the points come least memory first (fitting.memory_peaks): the first
    memory level with an accepted point is that shape's closest miss. Each shape is charged to
    `budget` (the solve's) in shape order: once it runs out, the shapes not yet charged are
    skipped: the closest miss of those charged.

    A point needs only its step time (the grid gave its memory, and every point of shape_points
    is valid: points.inner_metrics would not reject it), and a member cluster accepts it when the
    step is within the cluster's cap (points.step_cap_us, taken once per cluster). A shape whose
    least compute (SearchSpace.least_compute_us: the tier-0 bound, at most every point's step
    time) is above every member's cap holds no accepted point and is not walked (the 405B row of
    bench/solve_bench.py: every shape, 17,000 points a solve; docs/performance.md#explanations).
    The shapes are walked by their least overshoot (fitting.least_peak_mib: the least peak of
    their memory grid, before the stack's refusals), least first; once it exceeds the overshoot
    found, no shape left can do better, and their step times are never tabulated."""
    charged = []
    for shape in sorted({c.shape for c in space.clusters}):
        if budget is not None:
            try:
                budget.charge(STEP_WORK)
            except TimeLimitReached:
                break
        charged.append(shape)
    walks = []  # (least overshoot, shape order, shape, its members, their caps)
    for k, shape in enumerate(charged):
        members = space.clusters_of_shape(shape)
        caps = [step_cap_us(space, c) for c in members]
        least = space.least_compute_us.get((shape[0], shape[1]))
        if least is not None and all(cap is not None and least > cap for cap in caps):
            continue
        peak = least_peak_mib(space, shape)
        if peak is not None:
            walks.append((peak - space.limit_mib[shape[0]], k, shape, members, caps))
    best: tuple[tuple[int, int, int], Choice] | None = None  # ((overshoot, step, shape order), the point)
    for bound, k, shape, members, caps in sorted(walks, key=lambda walk: walk[:2]):
        if best is not None and bound > best[0][0]:
            break  # every shape left overshoots more than the miss found
        limit = space.limit_mib[shape[0]]
        for peak, level in groupby(shape_points(space, shape), key=lambda item: item[0]):
            if best is not None and peak - limit > best[0][0]:
                break
            for _, inner in level:
                step = step_us(space, space.on_use.step_tables(shape, [inner.layout]), shape, inner)
                key = (peak - limit, step, k)
                if best is not None and key >= best[0]:
                    continue
                m = next((m for m, cap in enumerate(caps) if cap is None or step <= cap), None)
                if m is not None:
                    best = (key, Choice(members[m], *inner))
            if best is not None and best[0][0] == peak - limit:
                break  # a later level overshoots more
    return None if best is None else (best[1], best[0][0])


def leanest_model_states(space: SearchSpace) -> tuple[int, str]:
    """The fewest model-state bytes per GPU any plan of the space holds (weights + gradients +
    optimizer states on its most loaded checked pipeline rank), and how (ZeRO stage, offload,
    layout, GPUs): over every count, layout, ZeRO x offload and precision of the space. Kept in
    the family's UnitMemo by the counts and layouts (the rest of the domain is the family's)."""
    key = (tuple(space.counts), tuple(space.layouts))
    if key not in space.shared.leanest_states:
        space.shared.leanest_states[key] = _leanest_model_states(space)
    return space.shared.leanest_states[key]


def _leanest_model_states(space: SearchSpace) -> tuple[int, str]:
    """The first least (count, layout, ZeRO x offload, precision) in the space's order. A count
    whose ranks hold at least 1/n of the single-GPU states (states are never held less than once:
    Tables.least_share_bytes) above the least of the largest count cannot hold the least, and is
    not walked."""
    if not space.counts:
        return (0, "")
    largest = _count_leanest(space, len(space.counts) - 1)
    best = None
    for n_i, n in enumerate(space.counts):
        bars = [found[0] for found in (largest, best) if found is not None]
        if bars and min(space.tables.least_share_bytes(zero, offload, precision, n)[0]
                        for (zero, offload), precision in product(space.zero_offloads, space.precisions)) > min(bars):
            continue
        found = _count_leanest(space, n_i)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    return best if best is not None else (0, "")


def _count_leanest(space: SearchSpace, n_i: int) -> tuple[int, str] | None:
    best = None
    n = space.counts[n_i]
    for li in space.count_layouts[n_i]:
        layout = space.layouts[li]
        stages = set(space.checked_stages(layout.pipeline))
        for (zf, (zero, offload)), precision in product(enumerate(space.zero_offloads), space.precisions):
            if not space.pair_allows(zf, li, n_i):  # a pair the stack does not run (SearchSpace.pair_allows)
                continue
            total = max(space.tables.rank_states(layout, zero, offload, n, precision, stage).gpu_bytes
                        for stage in stages)
            if best is None or total < best[0]:
                parallel = f", {layout.label()}" if layout.model_parallel * layout.ep > 1 else ""
                best = (total, f"ZeRO-{zero}, offload {offload}{parallel}, {n} GPU{'s' if n > 1 else ''}")
    return best


# Subsets of at most 6 restrictions: at most 63 questions, of which only the first infeasible
# subset has to be proven so (the others stop at their first plan), and the relaxed space is built
# once for the subsets that differ in --max-days and --min-mfu alone (solver/table_memo.py
# NOT_IN_SPACE). The defaults --min-mfu 0.05 and --max-days 365 count, so a batch row with a GPU
# list, a GPU limit and two pins has 6. At 4, the 120 infeasible rows of the batch benchmark's
# every-7th-group sample took 56 s of CPU and 16 of them named no conflict (the conflict-set model's
# set did not hold on the full space); at 6, 32.5 s, and each names its smallest conflict
# (docs/performance.md#explanations).
MAX_CONFLICT_SEARCH_RESTRICTIONS = 6


def smallest_conflict(query: SolveQuery, fits: Fits) -> list[str] | None:
    """The fewest of the query's restrictions that alone leave nothing to fit, by asking whether
    the relaxed query with each subset put back fits (full space, any plan), smallest first
    (putting a restriction back only shrinks the space, so the first infeasible subset is a
    smallest conflict; [] when nothing fits even without restrictions); None with more than
    MAX_CONFLICT_SEARCH_RESTRICTIONS restrictions."""
    labels = sorted(r.label for r in restrictions_of(query))
    if len(labels) > MAX_CONFLICT_SEARCH_RESTRICTIONS:
        return None
    for size in range(len(labels)):
        for subset in combinations(labels, size):
            if not fits(only_restrictions(query, list(subset))):
                return list(subset)
    return labels  # only all of them together: the user's query, known to be infeasible


def smallest_lift(query: SolveQuery, conflict: list[str], fits: Fits) -> list[str] | None:
    """The fewest of the query's restrictions whose removal leaves a plan (every other one kept),
    smallest first, or None when none does within MAX_CONFLICT_SEARCH_RESTRICTIONS. A conflict says
    which restrictions cannot hold together; it need not be enough to lift: 405B on 8 A100s with
    `--recompute none` named `--max-gpus 8`, and without it `--recompute none` alone still left
    nothing (a review of 2026-12-06). Only sets meeting the conflict are asked (one that misses it
    keeps it, so nothing fits); the conflict itself is asked first of its size."""
    labels = sorted(r.label for r in restrictions_of(query))
    if not conflict or len(labels) > MAX_CONFLICT_SEARCH_RESTRICTIONS:
        return None
    for size in range(1, len(labels) + 1):
        subsets = [list(s) for s in combinations(labels, size) if set(s) & set(conflict)]
        subsets.sort(key=lambda s: s != sorted(conflict))
        for subset in subsets:
            if fits(only_restrictions(query, [label for label in labels if label not in subset])):
                return subset
    return None


MAX_OTHER_STACKS = 1  # other stacks an explanation tries: each is one more solve (+4% on the batch sample each)
MAX_NAMED_GPUS = 3  # bigger GPUs named in a change, more counted (the 21 over an RTX 4090 made 300 characters)


def _mitigations(query: SolveQuery, space: SearchSpace,
                 catalogue: Catalogue) -> Iterator[tuple[str, SolveQuery, SolveQuery | None]]:
    """(change, the query with it, a query whose plans include those of every change of its kind:
    the "more GPUs" counts share one; None for the others)."""
    pins, job = query.pins, query.job
    overlap = job.moe_a2a_overlap  # Megatron refuses full recompute, a pipeline without vpp, activation offload beside it
    if overlap:
        yield "no MoE all-to-all overlap (--no-moe-a2a-overlap)", query.model_copy(
            update={"job": job.model_copy(update={"moe_a2a_overlap": False})}), None
    if pins.recompute in ("none", "selective") and not overlap:
        unpinned = query.model_copy(update={"pins": pins.model_copy(update={"recompute": None})})
        yield "allow activation checkpointing (--recompute full)", unpinned, None
    if pins.zero is not None and pins.zero < 3:
        yield "allow ZeRO-2/3 (unpin --zero)", query.model_copy(update={"pins": pins.model_copy(update={"zero": None})}), None
    if pins.micro_batch is not None and pins.micro_batch > 1:
        yield "smaller micro-batch with more gradient accumulation", query.model_copy(
            update={"pins": pins.model_copy(update={"micro_batch": None})}), None
    if pins.vpp is not None and pins.vpp > 1 and not (overlap and (pins.pp or 1) > 1):
        # interleaving holds more in flight, and takes fewer micro-batch counts (a pinned pipeline under
        # the overlap keeps it: vpp 1 is refused there)
        yield "no interleaved stages (unpin --vpp)", query.model_copy(update={"pins": pins.model_copy(update={"vpp": None})}), None
    if job.optimizer == "adamw" and "adamw-8bit" in load_stack_capabilities()[job.stack].optimizers:
        yield "8-bit optimizer states (--optimizer adamw-8bit)", query.model_copy(
            update={"job": job.model_copy(update={"optimizer": "adamw-8bit"})}), None
    if job.loss != "fused":  # fused linear + cross-entropy (Liger, Unsloth, Cut Cross-Entropy): no fp32 logits
        yield "a fused loss kernel (--loss fused)", query.model_copy(
            update={"job": job.model_copy(update={"loss": "fused"})}), None
    if pins.offload == "none":
        yield "allow ZeRO-Offload (unpin --offload)", query.model_copy(update={"pins": pins.model_copy(update={"offload": None})}), None
    if not job.activation_offload and load_stack_capabilities()[job.stack].activation_offload and not overlap:
        yield "activation offloading to host RAM (--activation-offload)", query.model_copy(
            update={"job": job.model_copy(update={"activation_offload": True})}), None
    # Every count a plan can run beyond the largest the user's space has, up to the GPU limit the
    # conflict search relaxes to: a divisor of the global batch times a model-parallel size (a
    # model that fits only with model parallelism beyond the batch needs more GPUs than it has sequences).
    sizes = {layout.model_parallel for layout in kept_valid_layouts(space.tables, query, space.max_tp)}
    most = max(space.counts, default=pins.num_gpus or 0)  # an empty space's pinned count is the one to exceed
    larger = [n for n in gpu_counts(sizes, space.global_batch, unrestricted_max_gpus(query)) if n > most]
    if larger:
        # Any count up to the largest: where nothing of it fits, no count of the list does.
        every_count = query.model_copy(update={
            "pins": pins.model_copy(update={"num_gpus": None}), "max_gpus": max(query.max_gpus, larger[-1]), "max_nodes": None})
    for n in larger:
        yield f"more GPUs ({n})", query.model_copy(update={
            "pins": pins.model_copy(update={"num_gpus": n}), "max_gpus": max(query.max_gpus, n), "max_nodes": None}), every_count
    if query.gpus:
        largest = max(query.gpus, key=lambda name: catalogue.gpu(name).memory_usable_mib)
        limit = catalogue.gpu(largest).memory_usable_mib
        if bigger := tuple(sorted(g.name for g in catalogue.gpus.values() if g.memory_usable_mib > limit)):
            which = ", ".join(bigger) if len(bigger) <= MAX_NAMED_GPUS else f"the {len(bigger)} with more memory than {largest}"
            yield f"bigger GPUs ({which})", query.model_copy(update={"gpus": bigger}), None
    # Another stack, where the job's own runs less parallelism (the recipe defaults follow the stack,
    # as --stack fills them): say which stack runs the fix.
    others = broader_stacks(load_stack_capabilities(), job.stack, space.arch.model_type, architecture_parts(space.arch))
    for stack in others[:MAX_OTHER_STACKS]:
        yield stack_mitigation(stack), query.model_copy(
            update={"job": restacked(job, stack, load_stacks())}), None
    if job.method == "lora" and "none" not in (load_stack_capabilities()[job.stack].qlora_parallel or {"none"}):
        yield "QLoRA instead of LoRA (--method qlora)", query.model_copy(
            update={"job": job.model_copy(update={"method": "qlora"})}), None
    if job.method == "full":
        # an adapter job needs fewer GPUs than the full one: the count is left to the search, and said
        count_freed = f", without --num-gpus {pins.num_gpus}" if pins.num_gpus is not None else ""
        for method in ("lora", "qlora"):
            change = f"{'LoRA' if method == 'lora' else 'QLoRA'} instead of full fine-tuning (--method {method}{count_freed})"
            yield change, query.model_copy(
                update={"job": job.model_copy(update={"method": method}), "pins": pins.model_copy(update={"num_gpus": None})}), None


def mitigations(query: SolveQuery, space: SearchSpace, catalogue: Catalogue, solve_one: Solver,
                fits: Fits | None = None, conflict: SolveQuery | None = None) -> list[Mitigation]:
    """Each fix applied alone to the user's query, least disruptive first; more GPUs stops at the
    first count that fits. A fix within (restrictions.within) a query nothing fits is not solved:
    `conflict` (the user's conflicting restrictions alone, when known) and, asked of `fits` before
    the first count, the query of every "more GPUs" count (docs/performance.md#explanations)."""
    found: list[Mitigation] = []
    empty = [conflict] if conflict is not None else []  # queries nothing fits
    asked = None  # the cover last asked of `fits` (the "more GPUs" counts come one after another)
    more_gpus_fitted = False
    for change, changed, cover in _mitigations(query, space, catalogue):
        if change.startswith("more GPUs") and more_gpus_fitted:
            continue
        try:
            known_empty = any(within(changed, q) for q in empty)
            if not known_empty and cover is not None and fits is not None and cover is not asked:
                asked = cover  # asked once, and only when the conflict does not already cover the counts
                known_empty = not fits(cover)
                if known_empty:
                    empty.append(cover)
            plan = None if known_empty else solve_one(changed)
        except TimeLimitReached:
            found.append(Mitigation(change=change, fits=False, tried=False))
            break
        if plan is None and change.startswith("more GPUs"):
            continue  # only the smallest count that fits is worth reporting
        more_gpus_fitted |= change.startswith("more GPUs") and plan is not None
        found.append(Mitigation(change=change, fits=plan is not None, plan=plan.plan if plan else None,
                                objective_value=plan.objective_value if plan else None))
    return found


def _lift_note(conflict: list[str], lift: list[str] | None) -> str:
    """What lifting the conflict does: nothing said where lifting exactly it gives a plan; a smaller
    set that does, or that it is not enough and what is (smallest_lift: the smallest set first)."""
    if lift is None:
        return ""
    if sorted(lift) == sorted(conflict):
        return ""
    if set(lift) < set(conflict):
        return f" (lifting {', '.join(lift)} alone gives a plan)"
    if len(lift) < len(conflict):  # smaller, though not a part of it: whether the conflict is enough was not asked
        return f" (lifting {', '.join(lift)} gives a plan)"
    return f" (lifting {'it' if len(conflict) == 1 else 'them'} is not enough: lifting {', '.join(lift)} gives a plan)"


def _gib(num_bytes: int) -> str:
    """Memory in the unit of the tables beside the explanation (GiB = 2^30 bytes)."""
    return f"{num_bytes / BYTES_PER_GIB:,.1f} GiB"


def explain(catalogue: Catalogue, query: SolveQuery, space: SearchSpace, miss: SolvedPlan | None, over_mib: int | None,
            solve_one: Solver, budget: Budget | None = None, fits: Fits | None = None) -> Explanation:
    """`budget` (the solve's, which solve_one and fits share) bounds the conflict search; `fits`
    answers its yes/no questions (default: whether solve_one finds a plan)."""
    if fits is None:
        def fits(changed: SolveQuery) -> bool:
            return solve_one(changed) is not None
    try:
        conflicts = None
        if space.clusters and len(restrictions_of(query)) <= MAX_CONFLICT_SEARCH_RESTRICTIONS:
            # Few restrictions: ask the full space directly (at most 63 yes/no questions, each
            # stopping at the first plan). The conflict-set model below took more CPU and named no
            # conflict where its set did not hold on the full space (docs/performance.md#explanations).
            conflicts = smallest_conflict(query, fits)
        elif space.clusters:
            conflicts = conflicting_restrictions(catalogue, query, space, budget)
            if conflicts is not None and fits(only_restrictions(query, conflicts)):
                # Found on the least parallel layouts only, and the full space has a plan under
                # these restrictions (model parallelism): not a conflict, and too many
                # restrictions to search the subsets, so none is named.
                conflicts = None
    except TimeLimitReached:
        conflicts = None  # not confirmed on the full space in time
    states_bytes, how = leanest_model_states(space)
    largest_limit = max(space.limit_mib, default=0) * BYTES_PER_MIB
    parts = ["no plan fits"]
    host = host_ram_reason(space) if miss is not None and over_mib is not None and over_mib <= 0 else None
    interleaving = interleaving_reason(space) if space.clusters else None
    if not space.clusters:
        parts.append(empty_space_reason(catalogue, query))
    elif interleaving is not None:
        parts.append(interleaving)
    elif states_bytes > largest_limit:
        parts.append(f"model states alone need at least {_gib(states_bytes)} per GPU ({how}), above the "
                     f"{_gib(largest_limit)} limit of the largest allowed GPU")
    elif host is not None:
        parts.append(host)
    elif miss is not None and over_mib is not None and over_mib > 0:
        limits = [name for name, value in (("budget", query.budget_usd), ("deadline", query.deadline_hours)) if value]
        within = f" within the {' and '.join(limits)}" if limits else ""
        # the closest miss walks the least parallel layout only (fitting.explained_layouts): said, as a
        # model-parallel plan can come far closer (Qwen3-235B on H100s: 1,351.6 GiB over on one GPU)
        least = space.layouts[explained_layouts(space)[0]].label() or "data parallelism alone"
        parts.append(f"the closest plan of the least parallel layout ({least}){within} is "
                     f"{_gib(over_mib * BYTES_PER_MIB)} over the GPU memory limit, "
                     f"dominated by {miss.memory.dominant_pillar.replace('_', ' ')}")
    try:
        parts += budget_deadline_reasons(query, conflicts or [], solve_one)
    except TimeLimitReached:
        pass
    lift = None
    if conflicts:
        try:
            lift = smallest_lift(query, conflicts, fits)
        except TimeLimitReached:
            lift = None
        parts.append(f"conflicting restrictions: {', '.join(conflicts)}" + _lift_note(conflicts, lift))
    elif conflicts == []:
        parts.append("no restriction is to blame: nothing in the catalogue fits this job")
    # A proven conflict: nothing of the relaxed query with these restrictions fits (asked of
    # `fits`; all of them: the user's query, infeasible; []: the relaxed query itself).
    conflict = only_restrictions(query, conflicts) if conflicts is not None else None
    fixes = mitigations(query, space, catalogue, solve_one, fits, conflict)
    fitting = [m for m in fixes if m.fits]
    if fixes and not fixes[-1].tried:
        parts.append(f"{limit_label(budget.reached if budget else None, query)} ran out before '{fixes[-1].change}' "
                     f"and the changes after it were tried")
    if fitting:
        parts.append("smallest change: " + _describe(fitting[0]))
        if len(fitting) > 1:
            parts.append("also fits: " + "; ".join(_describe(m) for m in fitting[1:4]))
    return Explanation(
        summary="; ".join(parts),
        conflicting_restrictions=conflicts or [],
        static_bytes_per_gpu=states_bytes if space.clusters else None,
        closest_miss=miss,
        over_limit_bytes=over_mib * BYTES_PER_MIB if over_mib is not None else None,
        dominant_pillar=miss.memory.dominant_pillar if miss is not None else None,
        mitigations=fixes,
        smallest_change=fitting[0].change if fitting else None,
    )


def _describe(m: Mitigation) -> str:
    if m.plan is None:
        return m.change
    p = m.plan
    return f"{m.change}: {p.num_gpus} x {p.gpu}, ZeRO-{p.zero}, recompute {p.recompute_label}, offload {p.offload}"
