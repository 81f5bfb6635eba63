"""The import-rule checker tests/test_import_rules.py runs (its docstring states the rules): every
.py file parsed with `ast`, nothing imported or executed."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.paths import REPO

ROOT = REPO
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
LAYER_RANK = {"catalogues": 0, "models": 1, "solver": 2, "launch": 2, "sheets": 3, "batch": 4, "fleet": 4, "cli": 5}
# models/ subpackages (estimate = models/estimate.py, the top), lowest first.
MODELS_RANK = {"core": 0, "architecture": 1, "catalogue": 2, "memory": 2, "time": 3, "estimate": 4}
NO_CLICK = ("models", "solver", "launch", "sheets", "batch", "fleet")


def layer_of(path: str) -> str | None:
    folder = path.split("/")[0]
    if folder in ("models", "solver", "launch", "sheets", "batch", "fleet"):
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
    folders = ("models", "solver", "launch", "sheets", "batch", "fleet", "commands", "tests")
    paths = [p for folder in folders for p in (ROOT / folder).rglob("*.py")]
    paths += ROOT.glob("*.py")
    return sorted(p.relative_to(ROOT).as_posix() for p in paths if "__pycache__" not in p.parts)


def violations_in(layer: str) -> list[Violation]:
    found = []
    for path in checked_files():
        if layer_of(path) == layer:
            found += check_source((ROOT / path).read_text(encoding="utf-8"), path)
    return found


