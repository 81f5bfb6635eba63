"""The objectives a query can ask for, as plain constants: the CLI's --help lists them without
importing pydantic (solver/query.py re-exports them)."""

from __future__ import annotations

from typing import Literal

Objective = Literal["cost", "time", "throughput", "hourly"]
OBJECTIVES: tuple[Objective, ...] = ("cost", "time", "throughput", "hourly")
