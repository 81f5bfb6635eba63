"""What the Tables' mixins (solver/dp_tables.py, solver/state_tables.py) read of Tables
(solver/tables.py): its fields and the memo methods every value goes through, declared once for the
type checker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan

if TYPE_CHECKING:
    from vramplan.solver.choice_keys import RecomputeChoice


class TableReads:
    """Tables' fields and methods that its mixins' terms read."""

    arch: Architecture
    job: Job
    evaluations: int

    if TYPE_CHECKING:  # Tables' own
        def _get(self, key: tuple, compute, cost: int = 1, memo: dict | None = None): ...
        def _called(self, key: tuple, compute, memo: dict | None = None): ...
        def kept(self, key: tuple, compute): ...
        def _plan(self, layout: Layout, n: int, zero: int, offload: str, recompute: RecomputeChoice, precision: str,
                  micro: int) -> Plan: ...
        def accumulation(self, layout: Layout, n: int, micro: int) -> int: ...
        def _heaviest_rank(self, layout: Layout) -> tuple: ...
        def _groups(self, layout: Layout, n: int) -> tuple[int, int, int]: ...
