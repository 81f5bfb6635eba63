"""The CP-SAT model of one cluster: the inner decisions as integer variables, the pillars as
constraints over them, the step time as a sum of tabulated terms.

Variables: zf (ZeRO x offload), r (recompute), p (precision), b (micro-batch), each a domain index;
the accumulation follows from global batch = micro-batch x accumulation x dp, which the micro-batch
domain (divisors of global batch / dp) keeps exact. Every pillar is a term over at most three
decisions, tabulated by models/ in space.py and linked to the variables by element constraints
on mixed-radix indices:

    static_mib[zf, p] + activation_mib[r, b, p] <= limit_mib          (GPU memory, MiB)
    static_mib[zf, p] + buffers_mib[b, p] + copy_mib[zf, p] <= limit_mib    (the optimizer step, where it copies)
    host_mib[zf, p] (+ offloaded_mib[r, b, p]) <= host budget         (ZeRO-Offload, activation offload)
    step_us = compute_us[r, p, l] + parallel_us + bubble_us + max(0, fwd_comm_us[z, b, p] - fwd_window_us[r, p, l])
              + max(bwd_comm_us[z, b, p] - bwd_window_us[r, p, l], tail_us[z, b, p])
              + optimizer_us[zf, b, p]                                 (solver/step_time.py add_step)
    (where ZeRO-0/1 reduce once a step, both windows are the last micro-batch's: [r, p, l, b])

No product of two variables appears (cost = price x step is left to the branch-and-bound in
cpsat_engine.py, where the price is a constant per cluster), and no enforced linear constraint
carries a large coefficient (ortools#5293), so every coefficient stays far inside int64.
The objective is step_us x radix + inner tie (points.inner_tie): one integer that orders the
points of a cluster exactly as the brute-force oracle does; when step_ub x radix would not keep
2^62 of room, the model minimises step time and then the tie in two stages instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product

from ortools.sat.python import cp_model

from vramplan.models.time.performance import reduces_each_micro_batch
from vramplan.solver.points import Inner, accumulated_mib, inner_tie_radix
from vramplan.solver.space import SearchSpace
from vramplan.solver.step_time import add_step, tail_us

INT64_ROOM = 2**62


class LeanCpModel(cp_model.CpModel):
    """A CpModel without ortools' pre-PEP 8 aliases: CpModel.__init__ wraps each add_/new_/clear_
    method again under its camelCase name, a cost per model
    (docs/performance.md#cp-sat-parameters-of-the-unit-models); vramplan calls only the snake_case names."""

    def _add_pre_pep8_methods(self) -> None:
        pass


@dataclass
class ClusterModel:
    """One cluster's model; `exclude` are (host budget, step cap) of same-hardware clusters that
    come first (cheaper): a point they accept is theirs, so the same plan is never listed twice."""

    model: cp_model.CpModel
    decisions: tuple[cp_model.IntVar, ...]  # zf, r, p, b, l
    step: cp_model.IntVar
    key: cp_model.LinearExpr
    single_objective: bool
    layouts: list  # the building space's layouts (what the layout variable's values index)
    cells: int = 0  # the table constraints' values: the model's size (table_cells)
    points: list[tuple[Inner, int]] = field(default_factory=list)  # found so far, best first: (inner, step)
    exhausted_at_cap: int | None = None  # no further point has step <= this

    def inner(self, solver: cp_model.CpSolver) -> Inner:
        return Inner(*(solver.value(v) for v in self.decisions))


def _var(model: cp_model.CpModel, values: list[int], name: str) -> cp_model.IntVar:
    return model.new_int_var_from_domain(cp_model.Domain.from_values(values), name)


def _table(model: cp_model.CpModel, decisions: list[tuple[cp_model.IntVar, list[int]]], fn,
           names: tuple[str, ...], uppers: dict[str, int]) -> list[cp_model.IntVar]:
    """Terms tabulated over the same few decisions, linked by one table constraint (one allowed
    tuple per combination of the decisions' values, the terms' values after them); each term's
    largest value goes to uppers[name] (cheaper than reading the proto domain back, same
    section of docs/performance.md)."""
    # A decision with one value (one precision, a pinned ZeRO stage or recompute) is fixed by its
    # domain: its column would repeat that value in every row (CP-SAT expands a table into one
    # clause per row and cell, so the solve's cost grows with the cells).
    rows = [(*values, *fn(*values)) for values in product(*(domain for _, domain in decisions))]
    columns = [k for k, (_, domain) in enumerate(decisions) if len(domain) > 1]
    if len(columns) < len(decisions):
        kept = [*columns, *range(len(decisions), len(decisions) + len(names))]
        rows = [tuple(row[k] for k in kept) for row in rows]
    arity = len(columns)
    targets = []
    for k, name in enumerate(names):
        values = sorted({row[arity + k] for row in rows})
        targets.append(_var(model, values, name))
        uppers[name] = values[-1]
    model.add_allowed_assignments([decisions[k][0] for k in columns] + targets, rows)
    return targets


def build_cluster_model(space: SearchSpace, cluster_index: int, step_cap: int | None,
                        exclude: list[tuple[int, int | None]], layouts: list[int] | None = None) -> ClusterModel | None:
    """The model of one cluster over these of its layouts (default: all); None when the domains
    are empty (no precision its GPU runs, no layout)."""
    cluster = space.clusters[cluster_index]
    g, n, _, _ = cluster.shape
    nz, nr, np_, nb = len(space.zero_offloads), len(space.recomputes), len(space.precisions), len(space.micro_batches)
    precisions = list(space.gpu_precisions[g])
    if layouts is None:
        layouts = space.cluster_layouts(cluster.shape)
    if not precisions or not layouts:
        return None
    steps = space.on_use.step_tables(cluster.shape, layouts)
    space.on_use.fill_count(n, layouts, precisions)
    model = LeanCpModel()
    allowed_zf, allowed_r = space.count_choices(n)  # what the stack runs on this many GPUs
    if not allowed_zf or not allowed_r:
        return None
    zf, r = _var(model, sorted(allowed_zf), "zf"), _var(model, sorted(allowed_r), "r")
    p, li = _var(model, precisions, "p"), _var(model, layouts, "layout")
    refused = [(z, lay) for z in sorted(allowed_zf) for lay in layouts if not space.pair_allows(z, lay, n)]
    if refused:  # ZeRO x offload beside a layout the stack does not run together here (SearchSpace.pair_allows)
        model.add_forbidden_assignments([zf, li], refused)
    # (layout, micro-batch) pairs that keep global batch = micro x accumulation x dp exact.
    pairs = [(lay, b_) for lay in layouts for b_ in space.valid_batches[n, lay]]
    lb = model.new_int_var(0, len(pairs) - 1, "layout_batch")
    b = _var(model, sorted({b_ for _, b_ in pairs}), "b")
    model.add_allowed_assignments([lb, li, b], [(i, lay, b_) for i, (lay, b_) in enumerate(pairs)])
    zfs, rs, lbs = (zf, sorted(allowed_zf)), (r, sorted(allowed_r)), (lb, list(range(len(pairs))))
    # The checked pipeline ranks (tables.rank_columns) that are some layout's own rank: a column that
    # repeats an earlier rank on every layout of the model (every column but the first when pp = 1)
    # would only repeat that rank's columns and constraint.
    pipelines = {space.layouts[lay].pipeline for lay in layouts}
    checked = [j for j in range(space.num_rank_columns) if any(space.column_aliases(pipeline)[j] == j for pipeline in pipelines)]
    ps, ls = (p, precisions), (li, layouts)
    uppers: dict[str, int] = {}  # each tabulated term's largest value (_table)

    # Memory per checked pipeline rank j: static[zf, p, l] + (buffers + activations)[r, p, (l, b)] <= limit,
    # the activations being micro-batch pieces (tp, cp, sp, recompute, micro-batch, precision)
    # on the rank's layers and in-flight chunks (pp, vpp, accumulation): SearchSpace.activation_mib.
    # Step time (points.inner_metrics): compute + model-parallel collectives + bubble
    # + max(comm - window, tail) + optimizer.

    offloading = space.job.activation_offload

    # The ZeRO stages that reduce the gradients once a step (ZeRO-0/1), whose windows are the last
    # micro-batch's (step_time.py point_step_us); the others reduce every micro-batch.
    once = [i for i in sorted(allowed_zf) if not reduces_each_micro_batch(space.zero_offloads[i][0])]

    def by_recompute(i: int, jj: int, k: int) -> tuple[int, ...]:
        """Activations + buffers of each checked rank; compute + model-parallel collectives + stalls
        (bubble, exposed offload transfer); the (forward, backward) windows of a once-a-step reduction;
        with activation offloading, what it keeps on the host."""
        lay, b_ = pairs[k]
        base = steps.compute_us[i, jj, lay] + steps.parallel_us[i, jj, lay] + steps.bubble_us[i, jj, lay, b_]
        buffers = space.buffer_mib[b_, jj, lay]
        ranks = space.on_use.ranks_activation_mib(i, b_, jj, lay, n)
        once_windows = steps.once_windows_us[i, jj, lay, b_] if once else ()
        offloaded = (space.on_use.offloaded_mib(i, b_, jj, lay, n),) if offloading else ()
        return (*(buffers + ranks[j] for j in checked), base, *once_windows, *offloaded)

    # Unsharded gradient accumulation (a stack that reduce-scatters only the last micro-batch: litgpt):
    # model states grow with (ZeRO stage, layout, micro-batch) together: its own columns of by_zero.
    accumulating = any(space.on_use.accumulation_mib[i, n, jj, lay, j] for i in allowed_zf for jj in precisions
                       for lay in layouts for j in checked)

    # The optimizer step's fp32 gradient copies (Megatron with a 16-bit gradient buffer:
    # SpaceFills.step_copy_mib): the step holds them with the states and buffers but no activations,
    # a second memory sum per checked rank (points.memory_columns_mib's max), stated only where a copy is.
    copying = bool(space.on_use.step_copies_mib) and any(
        space.on_use.step_copy_mib(i, n, jj, lay, j) for i in allowed_zf for jj in precisions for lay in layouts for j in checked)

    def by_zero(i: int, jj: int, k: int) -> tuple[int, ...]:
        """Data-parallel traffic (forward, backward), its one-layer tail, the optimizer step (and
        what gradient accumulation adds to each checked rank's model states; the step's gradient
        copies with the micro-batch's buffers)."""
        lay, b_ = pairs[k]
        forward, backward = steps.comm_us[space.zero_offloads[i][0], b_, jj, lay]
        grown = tuple(accumulated_mib(space, i, n, jj, lay, j, b_) for j in checked) if accumulating else ()
        copies = tuple(space.on_use.step_copy_mib(i, n, jj, lay, j) + space.buffer_mib[b_, jj, lay]
                       for j in checked) if copying else ()
        return (forward, backward, tail_us(forward + backward, space.arch.num_layers), steps.optimizer_us[i, b_, jj, lay],
                *grown, *copies)

    *static, host = _table(model, [zfs, ps, ls], lambda i, jj, lay: (
        *(space.on_use.static_mib[i, n, jj, lay, j] for j in checked), space.on_use.host_mib_per_gpu[i, n, jj, lay]),
        (*(f"static{j}" for j in checked), "host_mib"), uppers)
    dynamic_names = (*(f"activations{j}" for j in checked), "compute_parallel_bubble_us",
                     *(("once_fwd_window_us", "once_bwd_window_us") if once else ()), *(("offloaded_mib",) if offloading else ()))
    dynamic = _table(model, [rs, ps, lbs], by_recompute, dynamic_names, uppers)
    once_windows = None
    if once:
        once_windows = (dynamic.pop(len(checked) + 1), dynamic.pop(len(checked) + 1))
    if offloading:  # host RAM: offloaded states (zf, p, l) + offloaded activations (r, p, (l, b))
        *dynamic, base, offloaded = dynamic
        total_host = model.new_int_var(0, uppers["host_mib"] + uppers["offloaded_mib"], "host_total_mib")
        model.add(total_host == host + offloaded)
        host = total_host
    else:
        *dynamic, base = dynamic
    model.add(host <= space.host_budget_mib_per_gpu[cluster_index])
    windows = None  # the whole phases' windows, where some allowed ZeRO stage reduces every micro-batch
    if len(once) < len(allowed_zf):
        if len({space.layout_chunk[lay] for lay in layouts}) == 1:  # the compute of every layout alike (tables.compute_class)
            windows = _table(model, [rs, ps], lambda k, jj: steps.windows_us[k, jj, layouts[0]],
                             ("fwd_window_us", "bwd_window_us"), uppers)
        else:
            windows = _table(model, [rs, ps, ls], lambda k, jj, lay: steps.windows_us[k, jj, lay],
                             ("fwd_window_us", "bwd_window_us"), uppers)
    fwd, bwd, tail, opt, *held = _table(
        model, [zfs, ps, lbs], by_zero,
        ("fwd_comm_us", "bwd_comm_us", "tail_us", "optimizer_us", *(f"accumulated{j}" for j in checked if accumulating),
         *(f"step_copy{j}" for j in checked if copying)), uppers)
    grown, copies = (held[:len(checked)], held[len(checked):]) if accumulating else ([], held)
    for j, (rank_static, rank_dynamic) in enumerate(zip(static, dynamic)):  # memory of each checked pipeline rank
        states = rank_static + (grown[j] if grown else 0)
        model.add(states + rank_dynamic <= space.limit_mib[g])
        if copies:  # the optimizer step: states, buffers and the gradient copies, no activations
            model.add(states + copies[j] <= space.limit_mib[g])
    fwd_window, bwd_window = _dp_windows(model, zf, once, sorted(allowed_zf), once_windows, windows, uppers)
    stated = add_step(model, base, (fwd, bwd), (fwd_window, bwd_window), tail, opt, uppers, step_cap)
    if stated is None:
        return None
    step, step_ub = stated
    for other_host, other_cap in exclude:  # not (host <= other's budget and step <= other's cap)
        taken = model.new_bool_var("taken")
        model.add(host <= other_host).only_enforce_if(taken)
        model.add(host >= other_host + 1).only_enforce_if(taken.Not())
        if other_cap is None:
            model.add(taken == 0)
        else:
            model.add(step >= other_cap + 1).only_enforce_if(taken)
    tie = (((li * nz + zf) * nr + r) * nb + (nb - 1 - b)) * np_ + p  # points.inner_tie
    radix = inner_tie_radix(space)
    single = (step_ub + 1) * radix < INT64_ROOM
    return ClusterModel(model, (zf, r, p, b, li), step, step * radix + tie if single else tie, single, space.layouts,
                        table_cells(model))


def _dp_windows(model: cp_model.CpModel, zf: cp_model.IntVar, once: list[int], allowed: list[int],
               once_windows: Sequence[cp_model.IntVar] | None, windows: Sequence[cp_model.IntVar] | None,
               uppers: dict[str, int]) -> tuple[cp_model.IntVar, cp_model.IntVar]:
    """The (forward, backward) windows of the ZeRO x offload choice zf: the last micro-batch's
    (once_windows) where its stage reduces the gradients once a step (`once`), the whole phases'
    (windows) elsewhere (step_time.point_step_us); each table is built only where some allowed stage reads it."""
    if windows is None:
        assert once_windows is not None
        return once_windows[0], once_windows[1]
    if once_windows is None:
        return windows[0], windows[1]
    reduces_once = model.new_bool_var("reduces_once")
    model.add_allowed_assignments([zf, reduces_once], [(i, int(i in once)) for i in allowed])
    chosen = []
    for phase, (short, whole) in zip(("fwd", "bwd"), zip(once_windows, windows)):
        window = model.new_int_var(0, max(uppers[f"{phase}_window_us"], uppers[f"once_{phase}_window_us"]), f"{phase}_dp_window_us")
        model.add(window == short).only_enforce_if(reduces_once)
        model.add(window == whole).only_enforce_if(reduces_once.Not())
        chosen.append(window)
    return chosen[0], chosen[1]


def table_cells(model: cp_model.CpModel) -> int:
    """The values of the model's table constraints (rows x columns): what CP-SAT expands into clauses,
    so what its solve grows with (docs/performance.md#cp-sat-parameters-of-the-unit-models)."""
    return sum(len(c.table.values) for c in model.proto.constraints if c.has_table())
