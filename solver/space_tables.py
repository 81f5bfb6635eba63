"""The integer tables of a search space, filled from solver/tables.py's memoised models/ terms:
the layout domains and the tables every count shares when the space is built, and on first read
each (count, layout)'s memory and each (shape, layout)'s step-time terms (into the space's
SpaceFills, solver/space_fills.py). solver/space.py owns the SearchSpace; this module only writes
its tables (units as there: MiB, microseconds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import TYPE_CHECKING

from vramplan.models.architecture.parallel import interleaving_refuses
from vramplan.models.catalogue.stack_contract import accumulation_refusal
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.units import to_us, to_us_array
from vramplan.models.memory.memory import check_gpu_precision
from vramplan.models.memory.pipeline_buffers import keeps_receive_buffers
from vramplan.models.time.performance import once_a_step_windows_s
from vramplan.solver.choice_keys import compute_class, rank_place
from vramplan.solver.step_time import floor_us, windows_us
from vramplan.solver.tables import Tables

if TYPE_CHECKING:
    from vramplan.solver.clusters import Shape
    from vramplan.solver.space import SearchSpace
    from vramplan.solver.space_fills import SpaceFills


def fill_layout_domains(space: SearchSpace) -> None:
    """Per count, the layouts whose degrees divide it (EP carved from dp x cp), their data-parallel
    degree and the micro-batches that keep global batch = micro x accumulation x dp exact. Kept in
    the Tables by the domains they index (every query of the job with those counts, layouts and
    micro-batches shares one copy; nothing writes them after)."""
    key = ("layout-domains", tuple(space.counts), tuple(space.layouts), tuple(space.micro_batches))
    space.tcs, space.tcs_index, space.count_layouts, space.valid_batches = space.tables.kept(
        key, lambda: _layout_domains(space))


def _layout_domains(space: SearchSpace) -> tuple[list, list, dict, dict]:
    tcs = sorted({(lay.tp, lay.cp, lay.sp) for lay in space.layouts})
    tcs_index = [tcs.index((lay.tp, lay.cp, lay.sp)) for lay in space.layouts]
    count_layouts: dict[int, list[int]] = {}
    valid_batches: dict[tuple[int, int], list[int]] = {}
    by_dp: dict[int, list[int]] = {}  # the micro-batches of a data-parallel degree (one list, shared)
    stack = space.job.stack  # whose interleaved schedule refuses some micro-batch counts (parallel.check_layout)
    degrees = [(lay.model_parallel, lay.cp, lay.ep) for lay in space.layouts]
    for n_i, n in enumerate(space.counts):
        count_layouts[n_i] = []
        for li, (mp, cp, ep) in enumerate(degrees):
            if n % mp or (n // mp * cp) % ep:
                continue
            dp = n // mp
            batches = by_dp.get(dp)
            if batches is None:
                batches = by_dp[dp] = [b for b, micro in enumerate(space.micro_batches) if space.global_batch % (micro * dp) == 0]
            layout = space.layouts[li]
            if space.job.optimizer_in_backward:  # no accumulation beside it
                batches = [b for b in batches if accumulation_refusal(
                    space.job, space.global_batch // (space.micro_batches[b] * dp)) is None]
            if layout.vpp > 1:
                batches = [b for b in batches if not interleaving_refuses(
                    stack, layout.pp, space.global_batch // (space.micro_batches[b] * dp))]
            if batches:
                count_layouts[n_i].append(li)
                valid_batches[n_i, li] = batches
    return tcs, tcs_index, count_layouts, valid_batches


def fill_memory_tables(space: SearchSpace, tables: Tables) -> None:
    """The tables every count shares; each count's own (model states, host RAM, checked-rank places)
    are filled on first read (SpaceFills.fill_count). The micro-batch buffers and activation
    keys are kept in the Tables by the domains they index, like the layout domains."""
    _fill_valid_precisions(space)
    used = tuple(sorted({p for _, p in space.valid_gpu_precision}))
    domains = (tuple(space.layouts), tuple(space.micro_batches), tuple(space.precisions), used)
    space.buffer_mib = tables.kept(("buffer-table", *domains), lambda: _buffer_table(space, tables, used))
    # Filled on first read (SpaceFills.micro_key): a space reads a few of the keys its domains allow.
    space.on_use.micro_keys = tables.kept(("micro-keys", *domains, tuple(space.recomputes)), dict)
    permille = space.job.capacity_per_mille
    gpu_permille = space.job.gpu_capacity_per_mille
    space.limit_mib = [g.memory_usable_mib * gpu_permille // 1000 for g in space.gpus]
    space.host_budget_mib_per_gpu = space.placement.host_budget_mib_per_gpu(permille)


def _buffer_table(space: SearchSpace, tables: Tables, used: tuple[int, ...]) -> dict[tuple[int, int, int], int]:
    """Tables.buffer_mib per (micro-batch, precision, layout): the layouts of one buffer_class (what
    the buffers read) share their values, looked up once per class."""
    by_class: dict[tuple, list[tuple[tuple[int, int], int]]] = {}
    table = {}
    for li, lay in enumerate(space.layouts):
        cls = tables.buffer_class(lay)
        values = by_class.get(cls)
        if values is None:
            values = by_class[cls] = [((b, p), tables.buffer_mib(lay, micro, space.precisions[p]))
                                      for (b, micro), p in product(enumerate(space.micro_batches), used)]
        for (b, p), mib in values:
            table[b, p, li] = mib
    return table


def fill_states(space: SearchSpace, fills: SpaceFills, n_i: int, li: int, p: int) -> None:
    """Model states, host RAM and the optimizer step's gradient copies of count index n_i, layout l
    and precision p, per checked rank."""
    tables, layout, n = space.tables, space.layouts[li], space.counts[n_i]
    stages = space.checked_stages(layout.pipeline)
    distinct = tuple(dict.fromkeys(stages))  # columns repeat the first rank (pp = 1: every column)
    zero_offloads = tuple(space.zero_offloads)
    grid = tables.states_grid(layout, n, space.precisions[p], zero_offloads, distinct)  # type: ignore[union-attr]
    copies = tables.step_copy_grid(layout, n, space.precisions[p], zero_offloads, distinct)  # type: ignore[union-attr]
    for zf, (row, copy_row) in enumerate(zip(grid, copies)):
        cells = dict(zip(distinct, row))
        copy_cells = dict(zip(distinct, copy_row))
        for j, stage in enumerate(stages):
            static, _, accumulated = cells[stage]
            fills.static_mib[zf, n_i, p, li, j] = static
            fills.accumulation_mib[zf, n_i, p, li, j] = accumulated
            if copy_cells[stage]:  # the step's fp32 gradient copies (SpaceFills.step_copy_mib)
                fills.step_copies_mib[zf, n_i, p, li, j] = copy_cells[stage]
        fills.host_mib_per_gpu[zf, n_i, p, li] = max(host for _, host, _ in row)


def fill_rank_places(space: SearchSpace, fills: SpaceFills, n_i: int, li: int, b: int) -> None:
    """Where each checked pipeline rank of count index n_i and layout l sits at micro-batch b (with
    the step's micro-batch count where the job's pipeline keeps receive buffers per micro-batch:
    models/memory/pipeline_buffers.py)."""
    layout, n = space.layouts[li], space.counts[n_i]
    stages = space.checked_stages(layout.pipeline)
    accum = space.tables.accumulation(layout, n, space.micro_batches[b])
    keeps_buffers = keeps_receive_buffers(space.job)
    ranks = {stage: rank_place(space.arch, layout, accum, stage, keeps_buffers) for stage in dict.fromkeys(stages)}
    for j, stage in enumerate(stages):
        fills.rank_places[n_i, li, b, j] = ranks[stage]


def _fill_valid_precisions(space: SearchSpace) -> None:
    pinned = space.query.pins.precision is not None
    for (g, gpu), (p, precision) in product(enumerate(space.gpus), enumerate(space.precisions)):
        try:
            check_gpu_precision(gpu, precision)
        except VramplanError:
            continue
        if not pinned and precision == "fp16" and gpu.bf16_dense_tflops > 0:
            continue  # unpinned half precision means bf16 where the GPU has it, fp16 where not (V100)
        space.valid_gpu_precision.add((g, p))
    space.gpu_precisions = [tuple(p for p in range(len(space.precisions)) if (g, p) in space.valid_gpu_precision)
                            for g in range(len(space.gpus))]


def fill_compute_tables(space: SearchSpace, tables: Tables) -> None:
    """Compute time per (GPU, count, recompute, precision) and layout class: a replica's tokens
    split over its tp x pp x cp GPUs, the same on every layout of a count but for fp8 and a partial
    full recompute (tables.compute_layout, compute_class). compute_s keeps the least over the
    count's layouts: the branch-and-bound's lower bound."""
    classes = [compute_class(lay, tuple(space.recomputes), tuple(space.precisions), space.arch.num_layers)
               for lay in space.layouts]
    numbers = {c: i for i, c in enumerate(dict.fromkeys(classes))}  # each class's number, in first-seen order
    chunkings = list(numbers)
    space.layout_chunk = [numbers[c] for c in classes]
    for n_i, gpu_indices in space.placement.gpus_of_count.items():  # by count index, GPU indices ascending
        if not space.count_layouts[n_i]:
            continue
        n = space.counts[n_i]
        # One layout of the count per class: every other computes alike.
        first = {space.layout_chunk[li]: space.layouts[li] for li in reversed(space.count_layouts[n_i])}
        for g in gpu_indices:
            ps = space.gpu_precisions[g]
            # One GPU and count's compute times, kept in the Tables for every space of the job by
            # value (the same precision index names another precision in a space with other pins).
            names = tuple(space.precisions[p] for p in ps)
            for k, layout in sorted(first.items()):
                # kept() calls the factory at once when the row is missing: it never outlives the loop.
                row = tables.kept(("compute-row", space.gpus[g].name, n, names, tuple(space.recomputes), chunkings[k]),
                                  lambda: [tables.compute_s(space.gpus[g], layout, n, recompute, precision)  # noqa: B023
                                           for precision, recompute in product(names, space.recomputes)])  # noqa: B023
                for (p, r), seconds in zip(product(ps, range(len(space.recomputes))), row):
                    space.chunk_compute_s[g, n_i, r, p, k] = seconds
                    least = space.compute_s.get((g, n_i, r, p))
                    space.compute_s[g, n_i, r, p] = seconds if least is None else min(least, seconds)


@dataclass
class StepTables:
    """One shape's step-time terms in whole microseconds (points.step_us adds them): the
    compute and its (forward, backward) overlap windows (r, p, l; where the gradients reduce once a
    step, the last micro-batch's, r, p, l, b), data-parallel traffic (forward,
    backward) (z, b, p, l), the optimizer step (zf, b, p, l), the model-parallel collectives TP +
    PP p2p + CP + EP (r, p, l) and the stalls (r, p, l, b): the pipeline bubble and the exposed
    activation-offload transfer."""

    compute_us: dict[tuple[int, int, int], int] = field(default_factory=dict)
    windows_us: dict[tuple[int, int, int], tuple[int, int]] = field(default_factory=dict)
    # the windows where the gradients reduce once a step (ZeRO-0/1), (r, p, l, b)
    once_windows_us: dict[tuple[int, int, int, int], tuple[int, int]] = field(default_factory=dict)
    comm_us: dict[tuple[int, int, int, int], tuple[int, int]] = field(default_factory=dict)
    optimizer_us: dict[tuple[int, int, int, int], int] = field(default_factory=dict)
    parallel_us: dict[tuple[int, int, int], int] = field(default_factory=dict)
    bubble_us: dict[tuple[int, int, int, int], int] = field(default_factory=dict)
    layouts: set[int] = field(default_factory=set)  # the layouts tabulated so far


def fill_step_tables(space: SearchSpace, shape: Shape, li: int, out: StepTables) -> None:
    """One layout's step-time terms on a cluster shape, each family of terms as one grid."""
    g, n_i, per_instance, network = shape
    tables, gpu, n = space.tables, space.gpus[g], space.counts[n_i]
    assert tables is not None  # build_space sets it
    zeros = tuple(sorted({z for z, _ in space.zero_offloads}))
    layout = space.layouts[li]
    ps = space.gpu_precisions[g]
    if not ps:
        return
    batches = space.valid_batches[n_i, li]
    micros = tuple(space.micro_batches[b] for b in batches)
    names = tuple(space.precisions[p] for p in ps)
    for p, precision in zip(ps, names):
        for r, recompute in enumerate(space.recomputes):
            compute = space.chunk_compute_s[g, n_i, r, p, space.layout_chunk[li]]
            out.compute_us[r, p, li] = to_us(compute)
            forward_share = tables.forward_share(recompute, layout)
            out.windows_us[r, p, li] = windows_us(forward_share, compute)
            for b, micro in zip(batches, micros):
                out.once_windows_us[r, p, li, b] = floor_us(once_a_step_windows_s(
                    compute, forward_share, layout.pp, layout.vpp, tables.accumulation(layout, n, micro), space.job.stack))
            parallel = tables.parallel_s(layout, n, recompute, precision, gpu, per_instance, network, compute)
            out.parallel_us[r, p, li] = to_us(parallel)
            micro_keys = tuple(space.on_use.micro_key(r, b, p, li) for b in batches)
            # the MoE all-to-all overlap's unhidden share depends on the accumulation: with the bubble
            a2a = tables.all_to_all_s(layout, n, recompute, precision, gpu, per_instance, network) \
                if tables.overlaps_a2a(layout) else 0.0
            for b, bubble in zip(batches, tables.bubble_us(layout, n, micro_keys, compute, parallel, gpu, a2a).tolist()):
                out.bubble_us[r, p, li, b] = bubble
    traffic_s = tables.comm_s(layout, n, zeros, micros, names, gpu, per_instance, network)
    forward, backward = (to_us_array(grid).tolist() for grid in traffic_s)  # whole microseconds, rounded up
    optimizer = tables.optimizer_us(layout, n, tuple(space.zero_offloads), micros, names, gpu).tolist()
    for (i, b), (k, p) in product(enumerate(batches), enumerate(ps)):
        for z, zero in enumerate(zeros):
            out.comm_us[zero, b, p, li] = (forward[z][i][k], backward[z][i][k])
        for zf in range(len(space.zero_offloads)):
            out.optimizer_us[zf, b, p, li] = optimizer[zf][i][k]
