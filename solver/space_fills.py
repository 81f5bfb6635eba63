"""The integer tables of one search space that the search tabulates when it first reads them:
each (count, layout, precision)'s model states and host RAM, each (count, layout, micro-batch)'s
checked-rank places, each checked rank's activations, each shape's step-time terms, and the
explanations' peak grids and representatives. The branch-and-bound prunes most (count, layout)
pairs before anything needs them, so filling them up front would cost most of a solve
(docs/performance.md#tabulated-precisions).

SearchSpace (solver/space.py) holds the query's domains, clusters and what is derived from them
when it is built, and never changes after; this object, its `on_use`, is the one part that grows,
keyed by the space's domain indices (the models/ values behind every entry are the job's Tables'
memo, keyed by value). Units as in solver/space.py: MiB, microseconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vramplan.solver.choice_keys import MicroKey, RankPlace, layout_chunk_layers
from vramplan.solver.space_tables import StepTables, fill_rank_places, fill_states, fill_step_tables

if TYPE_CHECKING:
    from vramplan.solver.clusters import Shape
    from vramplan.solver.space import SearchSpace


@dataclass
class SpaceFills:
    """A space's tables filled on first read (see the module docstring); `space` is the space
    whose domain indices key them, a weak proxy (the space owns its fills: SearchSpace.on_use)."""

    space: SearchSpace = field(repr=False)
    # Memory per checked-rank column j (0: the first stage, 1: the last, 2: another candidate).
    static_mib: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict)  # (zf, n, p, l, j)
    host_mib_per_gpu: dict[tuple[int, int, int, int], int] = field(default_factory=dict)  # (zf, n, p, l)
    # What more than one micro-batch a step adds to static_mib (unsharded gradient accumulation: litgpt)
    accumulation_mib: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict)  # (zf, n, p, l, j)
    # The fp32 gradient copies the optimizer step holds beside static_mib, without the activations
    # (Megatron with a 16-bit gradient buffer: ModelStates.step_grad_copy_bytes); only the non-zero
    # cells are kept (step_copy_mib reads the rest as 0)
    step_copies_mib: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict)  # (zf, n, p, l, j)
    rank_places: dict[tuple[int, int, int, int], RankPlace] = field(default_factory=dict)  # (n, l, b, j), on first read
    activations_mib: dict[tuple[int, int, int, int, int, int], int] = field(default_factory=dict)  # (r, b, p, l, n, j)
    # (r, b, p, t, a share's chunk) -> MicroKey: the job's Tables' dict, shared by the spaces of its domains
    micro_keys: dict[tuple[int, int, int, int, int], MicroKey] = field(default_factory=dict)
    filled_states: set[tuple[int, int, int]] = field(default_factory=set)  # (n, l, p) in static_mib, host_mib_per_gpu
    timing: dict[tuple, StepTables] = field(default_factory=dict)  # per shape, its layouts filled on first read
    peaks: dict[tuple, tuple] = field(default_factory=dict)  # fitting.memory_peaks grids per (n, precisions, layouts)
    representatives: dict[tuple, list[Any]] = field(default_factory=dict)  # restrictions._representatives

    def step_tables(self, shape: Shape, layouts: list[int]) -> StepTables:
        """A shape's step-time terms for these layouts, tabulated on first read: the search visits
        few (shape, layout) pairs, and only those pay for their traffic terms."""
        tables = self.timing.get(shape)
        if tables is None:
            tables = self.timing[shape] = StepTables()
        for li in layouts:
            if li not in tables.layouts:
                fill_step_tables(self.space, shape, li, tables)
                tables.layouts.add(li)
        return tables

    def fill_count(self, n: int, layouts: list[int], precisions: tuple[int, ...] | list[int]) -> None:
        """Tabulate count index n's model states and host RAM in these precisions, for these layouts
        on first read: the branch-and-bound's bounds prune most (count, layout) pairs before
        anything needs them, and a bound or model reads only its GPU's precisions (a space with
        V100s runs fp16 too; docs/performance.md#tabulated-precisions). The checked ranks' places
        (no models/ evaluation) are made per micro-batch when its activations are first read
        (rank_place): a bound reads the smallest micro-batch's alone."""
        for li in layouts:
            for p in precisions:
                if (n, li, p) not in self.filled_states:
                    fill_states(self.space, self, n, li, p)
                    self.filled_states.add((n, li, p))

    def step_copy_mib(self, zf: int, n: int, p: int, li: int, j: int) -> int:
        """What the optimizer step holds beside checked rank j's model states (MiB; fill_count first)."""
        return self.step_copies_mib.get((zf, n, p, li, j), 0)

    def activation_mib(self, r: int, b: int, p: int, li: int, n: int, j: int) -> int:
        """Activations of checked pipeline rank j (rank_columns) in MiB, tabulated on first read:
        one micro-batch's terms (r, b, p and the layout's tp, cp, sp) on the rank's layers and
        in-flight micro-batches (the count n, the layout, b)."""
        key = (r, b, p, li, n, j)
        value = self.activations_mib.get(key)
        if value is None:
            place = self.rank_places.get((n, li, b, j)) or self.rank_place(n, li, b, j)  # (a RankPlace is never empty)
            value = self.activations_mib[key] = self.space.tables.activation_mib(  # type: ignore[union-attr]
                self.micro_key(r, b, p, li), place)
        return value

    def rank_place(self, n: int, li: int, b: int, j: int) -> RankPlace:
        """Where checked rank j of count index n and layout l sits at micro-batch b, made with the
        micro-batch's other columns on first read (space_tables.fill_rank_places)."""
        place = self.rank_places.get((n, li, b, j))
        if place is None:
            fill_rank_places(self.space, self, n, li, b)
            place = self.rank_places[n, li, b, j]
        return place

    def micro_key(self, r: int, b: int, p: int, li: int) -> MicroKey:
        """What one micro-batch's activations depend on, for recompute r, micro-batch b, precision p
        on layout l: its (tp, cp, sp) and the recompute as its model chunks run it (a share of a
        chunk's layers resolved: RecomputeChoice.resolved); made on first read and kept with the
        domains' Tables."""
        space = self.space
        recompute = space.recomputes[r]
        chunk = layout_chunk_layers(space.arch.num_layers, space.layouts[li]) if recompute.share is not None else 0
        key = (r, b, p, space.tcs_index[li], chunk)
        micro = self.micro_keys.get(key)
        if micro is None:
            tp, cp, sp = space.tcs[space.tcs_index[li]]
            micro = self.micro_keys[key] = MicroKey(tp, cp, sp, recompute.resolved(space.arch.num_layers, space.layouts[li]),
                                                    space.micro_batches[b], space.precisions[p])
        return micro

    def ranks_activation_mib(self, r: int, b: int, p: int, li: int, n: int) -> list[int]:
        """activation_mib of every checked rank j, each distinct rank once (columns repeat the first
        rank: with pp = 1 every column is rank 0)."""
        aliases = self.space.column_aliases(self.space.layouts[li].pipeline)
        values = [0] * len(aliases)
        for j, alias in enumerate(aliases):
            values[j] = self.activation_mib(r, b, p, li, n, j) if alias == j else values[alias]
        return values

    def offloaded_mib(self, r: int, b: int, p: int, li: int, n: int) -> int:
        """Activations offloaded to host memory per GPU (MiB): the most any checked rank offloads
        (models.memory.memory_per_gpu takes the same maximum); 0 without activation offloading."""
        space = self.space
        if not space.job.activation_offload:
            return 0
        aliases = space.column_aliases(space.layouts[li].pipeline)
        micro = self.micro_key(r, b, p, li)
        return max(space.tables.offloaded_mib(micro, self.rank_place(n, li, b, j))  # type: ignore[union-attr]
                   for j, alias in enumerate(aliases) if alias == j)
