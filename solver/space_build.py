"""Building a query's SearchSpace: its domains (offerings, GPU counts, layouts, ZeRO stages,
recompute, precisions, micro-batches), its clusters, and the integer tables filled from the job's
models/ terms (solver/space_tables.py). The space itself, and what it derives from them, is
solver/space.py."""

from __future__ import annotations

import logging

from vramplan.models.architecture.parallel import dense_moe_option_refusal
from vramplan.models.catalogue.catalogue import Catalogue, load_stack_capabilities
from vramplan.models.catalogue.stack_contract import (
    architecture_parts,
    distributed_offload_refusal,
    model_refusal,
    refusal_message,
    zero_layout_refusal,
)
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.layout import Layout
from vramplan.models.memory.memory import check_job
from vramplan.models.memory.pipeline_buffers import keeps_receive_buffers
from vramplan.solver.choice_keys import rank_column_count
from vramplan.solver.layouts import LAYOUT_PINS, MAX_TP, degree_limit, layout_domain, valid_layouts
from vramplan.solver.placement import counts_by_instance_size, make_placement, placement_key
from vramplan.solver.query import SolveQuery
from vramplan.solver.space import SearchSpace, UnitMemo, derive_lookups
from vramplan.solver.space_domains import (
    divisors,
    gpu_counts,
    gpu_runs,
    pinned_domains,
    query_offerings,
    recompute_domain,
)
from vramplan.solver.space_tables import (
    fill_compute_tables,
    fill_layout_domains,
    fill_memory_tables,
)
from vramplan.solver.table_memo import TableMemo
from vramplan.solver.tables import Tables

log = logging.getLogger(__name__)


def kept_valid_layouts(tables: Tables, query: SolveQuery, max_tp: int = MAX_TP) -> list[Layout]:
    """Every layout valid for the query's model, job and layout pins (layouts.valid_layouts),
    kept with the job's tables; TP and EP up to max_tp (layouts.degree_limit)."""
    pins = query.pins.model_dump_json(include=LAYOUT_PINS)  # what valid_layouts reads of the pins
    return tables.kept(("valid-layouts", pins, max_tp), lambda: valid_layouts(tables.arch, tables.job, query.pins, max_tp))


def _refuse_unrunnable_pins(space: SearchSpace) -> None:
    """Bad input where no ZeRO stage, layout and count the pins leave is one the stack runs together
    (torchtitan's TP without FSDP: SearchSpace.pair_allows); the first combination's refusal names it."""
    if not space.pairs_restricted:
        return
    combos = [(zf, li, n) for n in range(len(space.counts)) for li in space.count_layouts[n]
              for zf in range(len(space.zero_offloads))]
    if combos and not any(space.pair_allows(zf, li, n) for zf, li, n in combos):
        zf, li, n = combos[0]
        zero, offload = space.zero_offloads[zf]
        refusal = zero_layout_refusal(space.job.stack, zero, space.layouts[li], space.counts[n], offload)
        if refusal is not None:
            raise VramplanError("stack", space.job.stack, refusal_message(space.job.stack, refusal))


def build_space(catalogue: Catalogue, query: SolveQuery, tables: Tables | None = None,
                memo: TableMemo | None = None) -> SearchSpace:
    """The query's domains and integer tables; `tables` (same model, job and global batch) reuses
    the models/ terms an earlier query evaluated (without it, `memo` supplies them, and may hand
    out a whole space built for an equivalent query). Without a memo the space gets one of its
    own; the space keeps its memo (SearchSpace.memo) for what runs on it."""
    memo = TableMemo() if memo is None else memo
    shared = memo.space(catalogue, query)
    if shared is not None:
        return shared
    arch = catalogue.architecture(query.model)
    job = query.job
    if (refusal := dense_moe_option_refusal(arch, job)) is not None:  # before any stack's refusal of the option
        raise refusal
    global_batch = query.effective_global_batch
    batch_divisors = divisors(global_batch)
    if tables is None or not tables.matches(arch, job, global_batch):
        tables = memo.tables(catalogue, query.model, arch, job, global_batch)
    pins = query.pins.model_dump_json(include=LAYOUT_PINS)  # what the layout domain reads of the pins
    offerings = query_offerings(catalogue, query)
    max_tp = degree_limit(max((o.domain_gpus for o in offerings), default=MAX_TP))
    valid = kept_valid_layouts(tables, query, max_tp)
    layouts = tables.kept(("layout-domain", pins, query.max_gpus, max_tp),
                          lambda: layout_domain(arch, job, query.pins, query.max_gpus, valid, max_tp))
    sizes = gpu_counts({lay.model_parallel for lay in layouts}, global_batch, query.max_gpus)
    by_size = counts_by_instance_size(offerings, query, sizes, arch.model_type)
    placement = memo.placement(catalogue, placement_key(offerings, query.pricing, by_size),
                               lambda: make_placement(catalogue, offerings, query.pricing, by_size))
    gpus = placement.gpus
    micro_batches = [b for b in batch_divisors if query.pins.micro_batch is None or b == query.pins.micro_batch]
    if (unbuilt := model_refusal(load_stack_capabilities()[job.stack], arch.model_type, architecture_parts(arch))) is not None:
        raise VramplanError("stack", job.stack, refusal_message(job.stack, unbuilt))  # --stack any skips the stack
    zero_offloads, precisions = pinned_domains(query)
    if query.pins.num_gpus is not None and (
            dropped := distributed_offload_refusal(job, arch.model_type, query.pins.num_gpus)) is not None:
        raise VramplanError("stack", job.stack, refusal_message(job.stack, dropped))
    recomputes = recompute_domain(query, arch.num_layers)
    for precision in precisions:
        check_job(arch, job, precision)  # a job no GPU can run is bad input, not "nothing fits"
    if query.pins.precision is not None and gpus and not any(gpu_runs(g, query.pins.precision) for g in gpus):
        raise VramplanError("precision", query.pins.precision,
                            f"not supported by any allowed GPU ({', '.join(g.name for g in gpus)})")

    widest = max((o.domain_gpus for o in offerings), default=0)
    if query.pins.tp is not None and offerings and query.pins.tp > widest:
        raise VramplanError("tp", query.pins.tp, f"TP stays inside one NVLink domain; the allowed offerings "
                                                 f"have at most {widest} GPUs in one")
    space = SearchSpace(arch, job, query, global_batch, gpus, placement.counts, placement.clusters, zero_offloads,
                        recomputes, precisions, micro_batches, layouts)
    space.max_tp = max_tp
    space.placement, space.offering_rank, space.shape_members = placement, placement.offering_rank, placement.shape_members
    pipelines = tuple(dict.fromkeys(layout.pipeline for layout in layouts))
    buffers = keeps_receive_buffers(job)  # models/memory/pipeline_buffers.py: a middle rank is checked too
    space.num_rank_columns = tables.kept(("rank-columns", pipelines, buffers), lambda: rank_column_count(arch, pipelines, buffers))
    space.tables, space.evaluations_before = tables, tables.evaluations
    space.shared = memo.units(catalogue, query, UnitMemo)
    space.memo = memo
    fill_layout_domains(space)
    fill_memory_tables(space, tables)
    fill_compute_tables(space, tables)
    derive_lookups(space)
    _refuse_unrunnable_pins(space)
    log.debug("search space: %d clusters, %d combinations", len(space.clusters), space.size)
    memo.keep_space(catalogue, query, space)
    return space
