"""The values of the solver's decisions as keys of models/ terms: a recompute choice (a share of a
model chunk's layers resolved per layout), what a replica's compute depends on besides the count
(compute_layout, compute_class), one micro-batch's activations (MicroKey) and where a checked
pipeline rank sits (RankPlace, rank_columns). solver/tables.py evaluates the terms at these keys."""

from __future__ import annotations

from typing import NamedTuple

from vramplan.models.architecture.parallel import Split, candidate_stages, largest_chunk, split_of
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.layout import Layout
from vramplan.models.memory.activations import stage_place
from vramplan.models.memory.recompute import rank_recomputed


class RankPlace(NamedTuple):
    """Where a checked pipeline rank sits: models.activations.stage_activations' arguments after
    the micro-batch (the micro-batches in flight, the virtual stages, whether it is the first and
    the last rank, its decoder layers by kind)."""

    chunks: int
    vpp: int
    first: bool
    last: bool
    held: tuple  # the kinds of layer it holds and how many (models.parallel.stage_layer_kinds)
    micro_batches: int = 0  # a step's micro-batches where the pipeline keeps buffers per micro-batch, else 0
    on_first_stage: int = 0  # the first rank's micro-batches in flight on the pipeline's first stage, else 0


class RecomputeChoice(NamedTuple):
    """One value of the recompute decision: the mode and, for partial full recompute, the decoder
    layers each model chunk checkpoints (Plan.recompute_layers, Megatron's --recompute-num-layers
    with --recompute-method block; None: the job's, or every layer), or the share of a chunk's
    layers the solver tries (a / b: resolved per layout, the same share on a deep and a shallow
    pipeline)."""

    mode: str
    layers: int | None = None
    share: tuple[int, int] | None = None

    def resolved(self, num_layers: int, layout: Layout) -> RecomputeChoice:
        """A share as the layer count each of the layout's model chunks checkpoints: a / b of the
        largest chunk's layers, at least one (the rest of the model's chunks checkpoint as many,
        or all of theirs: models/memory/recompute.py rank_recomputed); all of them is full
        recompute of every layer (layers None)."""
        if self.share is None:
            return self
        a, b = self.share
        chunk = layout_chunk_layers(num_layers, layout)
        layers = max(1, chunk * a // b)
        return RecomputeChoice(self.mode, None if layers >= chunk else layers)  # all of a chunk: every layer


def layout_chunk_layers(num_layers: int, layout: Layout) -> int:
    """The most decoder layers one model chunk of the layout holds (models.parallel.largest_chunk)."""
    return largest_chunk(num_layers, layout.pipeline, layout.vpp)


NO_RECOMPUTE = RecomputeChoice("none")


class MicroKey(NamedTuple):
    """What one micro-batch's activations on one rank depend on (models.activations.microbatch_activations)."""

    tp: int
    cp: int
    sp: bool
    recompute: RecomputeChoice
    micro_batch: int
    precision: str


MIN_RANK_COLUMNS = 3  # the first, the last and one more rank: every stack of one kind of layer


def rank_columns(arch: Architecture, pipeline: int | Split, num_rank_columns: int = MIN_RANK_COLUMNS,
                 receive_buffers: bool = False) -> tuple[int, ...]:
    """The pipeline ranks whose memory is checked (models.parallel.candidate_stages: the most
    loaded rank is among them): the first, the last, then the other candidates, padded to
    num_rank_columns with the first (a repeated rank checks nothing new). Mixed stacks of layers
    have up to four candidates in the catalogue (rank_column_count); a pipeline that keeps receive
    buffers per micro-batch adds the first middle rank of each (`receive_buffers`)."""
    candidates = candidate_stages(arch, pipeline, receive_buffers)
    last = (pipeline if isinstance(pipeline, int) else len(pipeline)) - 1
    columns = (0, last, *(s for s in candidates if s not in (0, last)))
    return columns + (0,) * (num_rank_columns - len(columns))


def rank_column_count(arch: Architecture, pipelines: tuple[int | Split, ...], receive_buffers: bool = False) -> int:
    """How many pipeline ranks a space checks per layout: enough for its layouts' candidates."""
    return max(MIN_RANK_COLUMNS, *(len(rank_columns(arch, pipeline, 0, receive_buffers)) for pipeline in pipelines))


def rank_place(arch: Architecture, layout: Layout, accum: int, stage: int, keeps_buffers: bool = False) -> RankPlace:
    """models.activations.stage_place of pipeline rank `stage` at `accum` micro-batches a step, as the
    estimate takes it: the micro-batch count only where the job's pipeline keeps receive buffers per
    micro-batch (models/memory/pipeline_buffers.py keeps_receive_buffers), so other stacks' ranks
    share their places across accumulations; the first rank's micro-batches on the first stage are
    min(m, 2 pp) and the like (first_stage_inflight): the same for most accumulations."""
    return RankPlace(*stage_place(arch, layout.pipeline, layout.pp, layout.vpp, accum, stage, keeps_buffers))


def compute_layout(layout: Layout, recompute: RecomputeChoice, precision: str, num_layers: int) -> tuple | None:
    """What of a layout a replica's compute time depends on (models.performance.compute_time_s):
    nothing (None) but for fp8, whose casts depend on every degree (models/time/fp8.py
    fp8_cast_bytes: a rank's shard of each GEMM), and for a partial full recompute the layers it
    re-runs in all (each model chunk checkpoints its first N: models/memory/recompute.py
    rank_recomputed; a share resolved for the layout first)."""
    if precision == "fp8":
        return tuple(layout)
    if recompute.mode != "full" or (recompute.layers is None and recompute.share is None):
        return None
    block = recompute.resolved(num_layers, layout).layers
    return ("recomputed", sum(rank_recomputed(layers, layout.vpp, block) for layers in split_of(num_layers, layout.pipeline)))


def compute_class(layout: Layout, recomputes: tuple[RecomputeChoice, ...], precisions: tuple[str, ...],
                  num_layers: int) -> tuple:
    """The layouts whose compute is the same for every recompute and precision of a space share a
    class (compute_layout of each; it reads the precision only to tell fp8, so the others' once)."""
    others = [compute_layout(layout, r, "bf16", num_layers) for r in recomputes] if any(p != "fp8" for p in precisions) else []
    return tuple(compute_layout(layout, r, p, num_layers) if p == "fp8" else others[i]
                 for i, r in enumerate(recomputes) for p in precisions)
