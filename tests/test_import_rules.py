"""The architecture test (docs/design.md section 1, docs/layout.md): imports flow one way,
cli.py -> commands/ -> {batch/, fleet/} -> sheets/ -> solver/ -> models/ -> catalogues/ (data),
and inside models/ core <- architecture <- {catalogue, memory} <- time <- estimate.py.

Every .py file is parsed with `ast` (nothing is imported or executed) and checked. Module names
are those of the installed package (`vramplan.models.architecture.params`); a rule compares the
layer (the subpackage, and for models/ its own subpackage).

- a package imports only packages below it: models/ never imports solver/, sheets/, batch/,
  fleet/ or the CLI; solver/ never sheets/ and above; sheets/ never batch/, fleet/ or the CLI;
  batch/ and fleet/ never each other nor the CLI;
- inside models/, a subpackage imports only itself and those below it (catalogue and memory are
  siblings: neither imports the other);
- fleet/ uses only the solver's public names (`from vramplan.solver import solve`), never a solver
  submodule;
- models/ never imports ortools or click; solver/, sheets/, batch/ and fleet/ never import click;
  solver/ and fleet/ never call print() and solver/ never opens files;
- the CLI (cli.py, __main__.py, commands/) never imports ortools, and imports pandas only inside
  the functions that need it (`--help` must not pay for either);
- only models/catalogue/catalogue.py refers to the `catalogues` package or its CSV files;
- no test reads the workspace's shared folder (tests must run from the repository alone).

Each violation names the file and the line. The checkers are also run on synthetic sources to
show that they catch what they claim to catch.
"""

from __future__ import annotations

import ast

import pytest
from helpers.import_rules import (
    ABS_SHARED,
    CATALOGUE_LOADER,
    ROOT,
    UP_SHARED,
    check_source,
    checked_files,
    imported_modules,
    layer_of,
    parse,
    string_constants,
    violations_in,
)

# --- the repository obeys the rules -----------------------------------------------------------------


def test_the_files_are_found():
    files = checked_files()
    assert "cli.py" in files
    assert "__main__.py" in files
    assert "batch/run.py" in files
    assert "commands/solve.py" in files
    assert CATALOGUE_LOADER in files
    assert sum(layer_of(f) == "models" for f in files) >= 10
    assert "tests/test_import_rules.py" in files


@pytest.mark.parametrize("layer", ["models", "solver", "sheets", "batch", "fleet", "cli", "tests"])
def test_layer_obeys_the_rules(layer):
    violations = violations_in(layer)
    assert not violations, "\n".join(map(str, violations))


def test_the_catalogue_loader_is_the_one_that_reads_catalogues():
    source = (ROOT / CATALOGUE_LOADER).read_text(encoding="utf-8")
    tree, _ = parse(source, CATALOGUE_LOADER)
    assert tree is not None
    texts = {text for _, text in string_constants(tree)}
    assert "vramplan.catalogues" in texts  # resources.files(...): the rule above is not vacuous


# --- the checker catches what it claims to ------------------------------------------------------------

SYNTHETIC_VIOLATIONS = {
    "models-import-ortools": ("models/x.py", "import math\nimport ortools\n", 2, "ortools"),
    "models-from-ortools": ("models/x.py", "from ortools.sat.python import cp_model\n", 1, "ortools"),
    "models-import-click-in-function": ("models/x.py", "def f():\n    import click\n", 2, "click"),
    "models-import-solver": ("models/x.py", "from solver.search import solve\n", 1, "solver"),
    "models-relative-solver": ("models/x.py", "from ..solver import search\n", 1, "solver"),
    "models-import-cli": ("models/x.py", "import cli_output\n", 1, "cli_output"),
    "models-import-sheets": ("models/x.py", "from vramplan.sheets.rows import parse_row\n", 1, "sheets"),
    "models-import-batch": ("models/x.py", "from vramplan.batch.run import run_batch\n", 1, "batch"),
    "solver-import-sheets": ("solver/x.py", "from vramplan.sheets.rows import parse_row\n", 1, "sheets"),
    "solver-import-fleet": ("solver/x.py", "from vramplan.fleet.planner import prepare\n", 1, "fleet"),
    "sheets-import-batch": ("sheets/x.py", "from vramplan.batch.run import run_batch\n", 1, "batch"),
    "sheets-import-fleet": ("sheets/x.py", "from vramplan.fleet.inputs import Pool\n", 1, "fleet"),
    "sheets-import-click": ("sheets/x.py", "import click\n", 1, "click"),
    "batch-import-fleet": ("batch/x.py", "from vramplan.fleet.planner import prepare\n", 1, "fleet"),
    "fleet-import-batch": ("fleet/x.py", "from vramplan.batch import run\n", 1, "batch"),
    "fleet-import-commands": ("fleet/x.py", "from vramplan.commands.fleet_output import rows\n", 1, "commands"),
    "fleet-import-solver-internal": ("fleet/x.py", "from vramplan.solver.space import build_space\n", 1, "public names"),
    "fleet-print": ("fleet/x.py", "print(1)\n", 1, "print"),
    "models-core-import-architecture": (
        "models/core/x.py", "from vramplan.models.architecture.params import count_params\n", 1, "inside models"),
    "models-memory-import-catalogue": (
        "models/memory/x.py", "from vramplan.models.catalogue.catalogue import Catalogue\n", 1, "inside models"),
    "models-catalogue-import-memory": (
        "models/catalogue/x.py", "from vramplan.models.memory.precision import HALF_BYTES\n", 1, "inside models"),
    "models-memory-import-time": (
        "models/memory/x.py", "from vramplan.models.time.flops import step_flops\n", 1, "inside models"),
    "models-time-import-estimate": (
        "models/time/x.py", "from vramplan.models.estimate import estimate\n", 1, "inside models"),
    "models-import-vramplan-solver": ("models/x.py", "from vramplan.solver import api\n", 1, "solver"),
    "solver-import-batch": ("solver/x.py", "from vramplan.batch import run\n", 1, "batch"),
    "solver-relative-commands": ("solver/x.py", "from ..commands import output\n", 1, "commands"),
    "batch-import-click": ("batch/x.py", "import click\n", 1, "click"),
    "batch-import-commands": ("batch/x.py", "from vramplan.commands.options import FORMATS\n", 1, "commands"),
    "commands-import-ortools": ("commands/x.py", "def f():\n    from ortools.sat.python import cp_model\n", 2, "ortools"),
    "commands-pandas-at-top": ("commands/x.py", "import pandas\n", 1, "pandas"),
    "main-import-ortools": ("__main__.py", "import ortools\n", 1, "ortools"),
    "models-dynamic-ortools": ("models/x.py", "import importlib\nimportlib.import_module('ortools')\n", 2, "ortools"),
    "models-reads-catalogues": (
        "models/memory/memory.py", "from importlib import resources\nresources.files('catalogues')\n", 2, "catalogues"),
    "models-names-gpus-csv": ("models/memory/memory.py", "NAME = 'gpus.csv'\n", 1, "gpus.csv"),
    "models-imports-catalogues": ("models/memory/memory.py", "import catalogues\n", 1, "catalogues"),
    "solver-import-click": ("solver/x.py", "import click\n", 1, "click"),
    "solver-import-cli": ("solver/x.py", "from cli import main\n", 1, "cli"),
    "solver-print": ("solver/x.py", "def f(x):\n    print(x)\n", 2, "print"),
    "solver-open": ("solver/batch.py", "with open('out.csv', 'w') as f:\n    pass\n", 1, "open"),
    "cli-import-ortools": ("cli.py", "import click\nfrom ortools.sat.python import cp_model\n", 2, "ortools"),
    "cli-helper-import-ortools": ("cli_output.py", "import ortools.sat\n", 1, "ortools"),
    "cli-reads-catalogues": ("cli.py", "from pathlib import Path\nP = Path('catalogues')\n", 2, "catalogues"),
    "tests-read-shared-relative": ("tests/test_x.py", f"open('{UP_SHARED}/DESIGN.md')\n", 1, "shared"),
    "tests-read-shared-absolute": ("tests/test_x.py", f"P = '/work{ABS_SHARED}DESIGN.md'\n", 1, "shared"),
    "unparsable": ("models/x.py", "def f(:\n", 1, "cannot parse"),
}


@pytest.mark.parametrize("case", sorted(SYNTHETIC_VIOLATIONS))
def test_checker_catches_synthetic_violation(case):
    path, source, line, fragment = SYNTHETIC_VIOLATIONS[case]
    violations = check_source(source, path)
    assert violations, f"{case}: not caught"
    assert any(v.line == line and fragment in v.message for v in violations), [str(v) for v in violations]
    assert all(str(v).startswith(f"{path}:") for v in violations)  # names the file and the line


SYNTHETIC_CLEAN = {
    "models-plain": ("models/x.py", '"""Reads catalogues/gpus.csv? No: only documents it."""\nimport math\n'),
    "models-own-imports": ("models/x.py", "from models.setup import Job\nfrom . import units\n"),
    "loader-reads-catalogues": (CATALOGUE_LOADER, "from importlib import resources\nresources.files('catalogues')\n"),
    "solver-uses-models-and-ortools": (
        "solver/x.py", "import logging\nfrom ortools.sat.python import cp_model\nfrom models.setup import Plan\n"),
    "solver-logs": ("solver/x.py", "import logging\nlogging.getLogger(__name__).info('x')\n"),
    "cli-uses-click-and-solver": ("cli.py", "import click\nfrom solver import search\nprint('ok')\n"),
    "commands-pandas-in-function": ("commands/x.py", "def read():\n    import pandas\n    return pandas\n"),
    "batch-uses-solver-and-files": ("batch/x.py", "from vramplan.solver.api import solve\nopen('x')\n"),
    "batch-uses-sheets": ("batch/x.py", "from vramplan.sheets.rows import parse_row\n"),
    "fleet-uses-public-solver-and-sheets": (
        "fleet/x.py", "from vramplan.solver import SolveQuery, solve\nfrom vramplan.sheets.sheet_files import read_table\n"),
    "models-time-uses-memory": ("models/time/x.py", "from vramplan.models.memory.recompute import recompute_layers\n"),
    "models-estimate-uses-all": ("models/estimate.py", "from vramplan.models.catalogue.catalogue import Catalogue\n"),
    "models-memory-uses-own": ("models/memory/x.py", "from vramplan.models.memory.precision import HALF_BYTES\n"),
    "tests-use-fixtures": ("tests/test_x.py", "from pathlib import Path\nP = Path(__file__).parent / 'fixtures'\n"),
    "other-folder": ("bench/x.py", "import ortools\nprint(1)\n"),
}


@pytest.mark.parametrize("case", sorted(SYNTHETIC_CLEAN))
def test_checker_passes_synthetic_clean_source(case):
    path, source = SYNTHETIC_CLEAN[case]
    assert check_source(source, path) == []


def test_relative_import_resolution():
    tree = ast.parse("from . import units\nfrom .. import solver\nfrom .sub import a\n")
    found = {name for _, name in imported_modules(tree, "models/x.py")}
    assert {"vramplan.models.units", "vramplan.solver", "vramplan.models.sub", "vramplan.models.sub.a"} <= found
    init_tree = ast.parse("from . import search\n")
    assert (1, "vramplan.solver.search") in imported_modules(init_tree, "solver/__init__.py")
