"""The plan search: a SolveQuery in, a proven-optimal SolveResult out.

The names below are the solver's public surface, the one other packages (fleet/, the facade)
import. They load on first use, so importing a light submodule (solver.choices for `--help`)
does not pay for ortools.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vramplan.solver.api import check_job_runs, plan_exists, solve
    from vramplan.solver.engine import SolverInternalError
    from vramplan.solver.query import Pins, PlanChoice, SolvedPlan, SolveQuery, SolveResult
    from vramplan.solver.query_fields import named_list, query_from_fields, split_list

_PUBLIC = {
    "solve": "api",
    "check_job_runs": "api",
    "plan_exists": "api",
    "SolverInternalError": "engine",
    "Pins": "query",
    "PlanChoice": "query",
    "SolvedPlan": "query",
    "SolveQuery": "query",
    "SolveResult": "query",
    "query_from_fields": "query_fields",
    "split_list": "query_fields",
    "named_list": "query_fields",
}
__all__ = [  # _PUBLIC's names (tests/test_import_rules.py reads _PUBLIC; test_facade checks they agree)
    "Pins", "PlanChoice", "SolveQuery", "SolveResult", "SolvedPlan", "SolverInternalError", "check_job_runs", "named_list",
    "plan_exists", "query_from_fields", "solve", "split_list",
]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'vramplan.solver' has no attribute {name!r}")
    return getattr(importlib.import_module(f"vramplan.solver.{_PUBLIC[name]}"), name)
