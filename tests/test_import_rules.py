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
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE_LOADER = "models/catalogue/catalogue.py"

# Built by concatenation so that this file does not itself contain the strings it forbids.
UP_SHARED = ".." + "/shared"
ABS_SHARED = "/" + "shared" + "/"
CATALOGUE_FILE = re.compile(r"^(catalogues/)?(gpus|offerings|architectures)\.csv$")


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


# --- reading sources --------------------------------------------------------------------------------


PACKAGE = "vramplan"


def module_name(path: str) -> str:
    """'models/architecture/params.py' -> 'vramplan.models.architecture.params'; 'solver/__init__.py' -> 'vramplan.solver';
    the repository root is the package itself ('cli.py' -> 'vramplan.cli')."""
    parts = [PACKAGE] + list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parse(source: str, path: str) -> tuple[ast.Module | None, list[Violation]]:
    try:
        return ast.parse(source, filename=path), []
    except SyntaxError as error:
        return None, [Violation(path, error.lineno or 0, f"cannot parse: {error.msg}")]


def imported_modules(tree: ast.Module, path: str) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import, relative ones resolved, dynamic ones included."""
    name = module_name(path)
    package = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base:
                found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}" if base else alias.name) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            target = node.args[0].value
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__") and isinstance(target, str):
                found.append((node.lineno, target))
    return found


def top_level(module: str) -> str:
    """The part a rule is about: the subpackage for vramplan's own modules, else the top name."""
    parts = module.split(".")
    if parts[0] == PACKAGE and len(parts) > 1:
        return parts[1]
    return parts[0]


def is_cli_module(module: str) -> bool:
    top = top_level(module)
    return top in ("cli", "__main__", "commands") or top.startswith("cli_")


def docstring_nodes(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def string_constants(tree: ast.Module, skip_docstrings: bool = True) -> list[tuple[int, str]]:
    skip = docstring_nodes(tree) if skip_docstrings else set()
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
    ]


def called_names(tree: ast.Module) -> list[tuple[int, str]]:
    return [
        (node.lineno, node.func.id)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]


# --- the rules --------------------------------------------------------------------------------------

# The layers, lowest first; a layer imports only layers of a lower rank (or its own).
LAYER_RANK = {"catalogues": 0, "models": 1, "solver": 2, "sheets": 3, "batch": 4, "fleet": 4, "cli": 5}
# models/ subpackages (estimate = models/estimate.py, the top), lowest first.
MODELS_RANK = {"core": 0, "architecture": 1, "catalogue": 2, "memory": 2, "time": 3, "estimate": 4}
NO_CLICK = ("models", "solver", "sheets", "batch", "fleet")


def layer_of(path: str) -> str | None:
    folder = path.split("/")[0]
    if folder in ("models", "solver", "sheets", "batch", "fleet"):
        return folder
    if folder == "commands" or ("/" not in path and path.endswith(".py")):
        return "cli"
    if folder == "tests":
        return "tests"
    return None


def layer_of_module(module: str) -> str | None:
    """The layer an imported module belongs to (None: not vramplan's, e.g. ortools)."""
    top = top_level(module)
    if is_cli_module(module):
        return "cli"
    return top if top in LAYER_RANK else None


def models_part(name: str) -> str | None:
    """'models/memory/x.py' or 'vramplan.models.memory.x' -> 'memory'; models/estimate.py -> 'estimate'."""
    parts = name.removesuffix(".py").replace("/", ".").split(".")
    if parts[0] == PACKAGE:
        parts = parts[1:]
    if len(parts) < 2 or parts[0] != "models":
        return None
    return parts[1] if parts[1] in MODELS_RANK else None


def solver_public() -> frozenset[str]:
    """The names solver/__init__.py exports (the keys of its _PUBLIC table), read with ast."""
    tree = ast.parse((ROOT / "solver" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_PUBLIC" for t in node.targets):
            assert isinstance(node.value, ast.Dict)
            return frozenset(k.value for k in node.value.keys if isinstance(k, ast.Constant))
    raise AssertionError("solver/__init__.py has no _PUBLIC table")


def forbidden_import(layer: str, module: str, at_module_level: bool = True, path: str = "") -> str | None:
    top = top_level(module)
    if layer in NO_CLICK and top == "click":
        return f"{layer}/ imports {module} (only the CLI uses click; it turns errors into exit codes)"
    if layer == "models" and top == "ortools":
        return f"models/ imports {module} (models/ is plain Python: no ortools, no click)"
    if layer == "cli":
        if top == "ortools":
            return f"the CLI imports {module} (cli never imports ortools; call solver/)"
        if top == "pandas" and at_module_level:
            return f"the CLI imports {module} at module level (import it inside the function that needs it)"
    target = layer_of_module(module)
    if layer in LAYER_RANK and target is not None and target != layer and LAYER_RANK[target] >= LAYER_RANK[layer]:
        return (f"{layer}/ imports {module} (imports flow cli -> commands -> {{batch, fleet}} -> sheets -> solver "
                "-> models, never back or sideways)")
    parts = module.split(".")
    if layer == "fleet" and parts[:2] == [PACKAGE, "solver"] and len(parts) > 2 and parts[2] not in solver_public():
        return f"fleet/ imports {module} (fleet/ uses only the solver's public names: from vramplan.solver import ...)"
    if layer == "models":
        own, other = models_part(path), models_part(module)
        if own is not None and other is not None and other != own and MODELS_RANK[other] >= MODELS_RANK[own]:
            return (f"models/{own} imports {module} (inside models/: core <- architecture <- "
                    "{catalogue, memory} <- time <- estimate)")
    return None


def module_level_lines(tree: ast.Module) -> set[int]:
    """Lines of the imports that run when the module is imported (not inside a function)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            lines.add(node.lineno)
    inner = {n.lineno for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines - inner


def check_source(source: str, path: str) -> list[Violation]:
    """Every rule violation in one file; `path` is relative to the repository root, with '/'."""
    layer = layer_of(path)
    tree, violations = parse(source, path)
    if tree is None or layer is None:
        return violations
    if layer in LAYER_RANK:
        top_lines = module_level_lines(tree)
        for line, module in imported_modules(tree, path):
            reason = forbidden_import(layer, module, at_module_level=line in top_lines, path=path)
            if reason:
                violations.append(Violation(path, line, reason))
        if path != CATALOGUE_LOADER:
            for line, module in imported_modules(tree, path):
                if top_level(module) == "catalogues":
                    violations.append(Violation(path, line, f"imports {module}; only {CATALOGUE_LOADER} reads catalogues/"))
            for line, text in string_constants(tree):
                if text == "catalogues" or CATALOGUE_FILE.match(text):
                    violations.append(
                        Violation(path, line, f"refers to {text!r}; only {CATALOGUE_LOADER} reads catalogues/")
                    )
    if layer in ("solver", "fleet"):
        for line, name in called_names(tree):
            if name == "print":
                violations.append(Violation(path, line, f"{layer}/ calls print() (use logging; the CLI prints)"))
            if name == "open" and layer == "solver":
                violations.append(Violation(path, line, "solver/ calls open() (the solver never opens files)"))
    if layer == "tests":
        for line, text in string_constants(tree, skip_docstrings=False):
            if UP_SHARED in text or ABS_SHARED in text:
                violations.append(
                    Violation(path, line, f"test refers to the shared workspace folder ({text!r}); use repo files")
                )
    return violations


def checked_files() -> list[str]:
    paths = [p for folder in ("models", "solver", "sheets", "batch", "fleet", "commands", "tests") for p in (ROOT / folder).rglob("*.py")]
    paths += ROOT.glob("*.py")
    return sorted(p.relative_to(ROOT).as_posix() for p in paths if "__pycache__" not in p.parts)


def violations_in(layer: str) -> list[Violation]:
    found = []
    for path in checked_files():
        if layer_of(path) == layer:
            found += check_source((ROOT / path).read_text(encoding="utf-8"), path)
    return found


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
