"""vramplan: which cluster and training configuration trains your model without running out of GPU memory.

The Python API in one import (docs/python-api.md):

    import vramplan

    catalogue = vramplan.load_catalogue()
    job = vramplan.Job(method="full", seq_len=8192)
    answer = vramplan.solve(catalogue, vramplan.SolveQuery(model="llama-3.1-70b", job=job, objective="cost"))

Every name loads on first use (PEP 562), so `import vramplan` and `vramplan --help` stay as quick
as they were: pydantic, ortools and pandas are imported by the name that needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vramplan.batch.run import BatchOptions, run_batch
    from vramplan.fleet.inputs import Assignment, FleetJob, FleetQuery, FleetResult, Pool, PoolWindow
    from vramplan.fleet.planner import plan_fleet
    from vramplan.models.catalogue.catalogue import Catalogue, load_catalogue
    from vramplan.models.core.errors import VramplanError
    from vramplan.models.core.results import EstimateResult
    from vramplan.models.core.setup import Job, Plan
    from vramplan.models.estimate import estimate
    from vramplan.solver import Pins, SolvedPlan, SolveQuery, SolveResult, solve
    from vramplan.solver.query_fields import stack_job

# name -> the module that defines it
_FACADE = {
    "estimate": "vramplan.models.estimate",
    "solve": "vramplan.solver",
    "plan_fleet": "vramplan.fleet.planner",
    "run_batch": "vramplan.batch.run",
    "load_catalogue": "vramplan.models.catalogue.catalogue",
    "Catalogue": "vramplan.models.catalogue.catalogue",
    "Job": "vramplan.models.core.setup",
    "stack_job": "vramplan.solver.query_fields",
    "Plan": "vramplan.models.core.setup",
    "EstimateResult": "vramplan.models.core.results",
    "SolveQuery": "vramplan.solver",
    "SolveResult": "vramplan.solver",
    "SolvedPlan": "vramplan.solver",
    "Pins": "vramplan.solver",
    "FleetQuery": "vramplan.fleet.inputs",
    "FleetJob": "vramplan.fleet.inputs",
    "Pool": "vramplan.fleet.inputs",
    "PoolWindow": "vramplan.fleet.inputs",
    "FleetResult": "vramplan.fleet.inputs",
    "Assignment": "vramplan.fleet.inputs",
    "BatchOptions": "vramplan.batch.run",
    "VramplanError": "vramplan.models.core.errors",
}
__all__ = [  # _FACADE's names and __version__ (tests/test_facade.py checks they agree)
    "Assignment", "BatchOptions", "Catalogue", "EstimateResult", "FleetJob", "FleetQuery", "FleetResult", "Job", "Pins",
    "Plan", "Pool", "PoolWindow", "SolveQuery", "SolveResult", "SolvedPlan", "VramplanError", "__version__", "estimate",
    "load_catalogue", "plan_fleet", "run_batch", "solve", "stack_job",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # importlib.metadata is slow to import; --help must not pay for it (docs/performance.md#import-time).
        from importlib import metadata

        try:
            return metadata.version("vramplan")
        except metadata.PackageNotFoundError:  # running from a source tree that is not installed
            return "0+unknown"
    if name not in _FACADE:
        raise AttributeError(f"module 'vramplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(_FACADE[name]), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return __all__
