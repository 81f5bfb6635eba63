"""The installed distribution has one top-level import name, `vramplan` (docs/design.md section 1).

A user whose project has its own `models/`, `solver/` or `cli.py` must be able to install vramplan
beside it. These tests read what pip actually installed (the distribution's RECORD and
top_level.txt, and for an editable install the finder's mapping), not the pyproject.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib import metadata
from pathlib import PurePosixPath

import pytest


def installed_distribution() -> metadata.Distribution:
    """vramplan's installed .dist-info (not the source tree's egg-info that an editable build leaves
    beside pyproject.toml, which `python -m pytest` would find first through the working directory)."""
    found = [d for d in metadata.distributions(name="vramplan") if str(getattr(d, "_path", "")).endswith(".dist-info")]
    assert found, "vramplan is not installed: pip install -e '.[test]'"
    return found[0]


DIST = installed_distribution()


def installed_top_level_names() -> set[str]:
    """Importable names the install put at the top of site-packages (dist-info and scripts excluded)."""
    names = set()
    for entry in DIST.files or []:
        parts = PurePosixPath(str(entry)).parts
        if not parts or parts[0] == ".." or parts[0].endswith((".dist-info", ".egg-info")):
            continue
        if parts[0] == "__pycache__" or parts[0].endswith(".pth"):
            continue
        names.add(parts[0].removesuffix(".py"))
    return names


def editable_mapping() -> dict[str, str] | None:
    """The import names an editable install maps to source folders (setuptools' finder), if any."""
    finders = [f for f in DIST.files or [] if str(f).startswith("__editable__") and str(f).endswith("_finder.py")]
    if not finders:
        return None
    tree = ast.parse(finders[0].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "MAPPING":
            return ast.literal_eval(node.value)
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MAPPING" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"no MAPPING in {finders[0]}")


def test_top_level_txt_names_only_vramplan():
    assert DIST.read_text("top_level.txt").split() == ["vramplan"]


def test_installed_files_have_one_top_level_name():
    names = {n for n in installed_top_level_names() if not n.startswith("__editable__")}
    mapping = editable_mapping()
    if mapping is None:  # a regular (wheel) install: the files themselves
        assert names == {"vramplan"}, names
    else:  # an editable install: nothing but the finder at the top, and it maps one name
        assert names == set(), names
        assert set(mapping) == {"vramplan"}, mapping


def test_entry_point_is_in_the_package():
    scripts = {ep.name: ep.value for ep in DIST.entry_points if ep.group == "console_scripts"}
    assert scripts == {"vramplan": "vramplan.cli:main"}


def test_python_dash_m_vramplan_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "vramplan", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: vramplan")
    assert "estimate" in done.stdout and "solve" in done.stdout and "batch" in done.stdout


@pytest.mark.parametrize("name", ["models", "solver", "cli", "catalogues", "commands", "batch"])
def test_a_users_own_package_of_the_same_name_is_left_alone(tmp_path, name):
    """A project with its own `models/` (the motivating bug) imports it and vramplan side by side."""
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("MINE = True\n")
    code = (
        f"import {name}\n"
        f"assert {name}.MINE, {name}.__file__\n"
        "from vramplan.models.catalogue.catalogue import load_catalogue\n"
        "from vramplan.cli import main\n"
        "print(len(load_catalogue().gpus))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 10
