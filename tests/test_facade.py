"""The facade (__init__.py): `import vramplan` gives the Python API in one import, lazily."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import vramplan

ROOT = Path(__file__).resolve().parent.parent


def python_api_block() -> str:
    """The first ```python block under README.md's '## Python API' heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Python API", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README.md's Python API section has no python block"
    return match.group(1)


def test_the_readme_python_section_runs(capsys):
    exec(compile(python_api_block(), "README.md#python-api", "exec"), {})  # noqa: S102 - our own README
    printed = capsys.readouterr().out
    assert printed.strip(), "the README example prints its answer"


@pytest.mark.parametrize("name", sorted(set(vramplan.__all__) - {"__version__"}))
def test_every_facade_name_resolves_to_the_defining_module(name):
    value = getattr(vramplan, name)
    assert getattr(value, "__name__", name) == name  # the real object, not a wrapper


def test_the_exported_names_are_the_lazy_tables():
    import vramplan.solver as solver

    assert set(vramplan.__all__) == set(vramplan._FACADE) | {"__version__"}
    assert set(solver.__all__) == set(solver._PUBLIC)
    assert all(hasattr(solver, name) for name in solver.__all__)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = vramplan.nope  # type: ignore[attr-defined]


def test_version_is_the_installed_one():
    from importlib import metadata

    assert vramplan.__version__ == metadata.version("vramplan")


def test_import_vramplan_loads_nothing_heavy():
    """`import vramplan` (and so `vramplan --help`) pays for no pydantic, ortools or pandas."""
    code = ("import sys, vramplan; heavy = [m for m in ('pydantic', 'ortools', 'pandas', 'numpy') if m in sys.modules];"
            " print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_the_facade_estimate_and_solve_are_the_library_functions():
    from vramplan.models.estimate import estimate
    from vramplan.solver.api import solve

    assert vramplan.estimate is estimate
    assert vramplan.solve is solve


def test_stack_job_builds_the_job_as_the_command_line_does():
    """A review of 2026-12-06: `Job(stack="unsloth")` sets the name only (hf's eager kernels and full
    AdamW stayed), so its solve was 4.32 USD where `solve --stack unsloth` answers 1.54; stack_job
    fills the stack's recipe, and the two answers are the same JSON."""
    import json

    from helpers.cli import invoke

    import vramplan

    catalogue = vramplan.load_catalogue()
    job = vramplan.stack_job(stack="unsloth", method="qlora", seq_len=2048)
    assert (job.optimizer, job.kernels, job.loss) == ("adamw-8bit", "fused", "fused")
    api = vramplan.solve(catalogue, vramplan.SolveQuery(model="llama-3.1-8b", job=job, global_batch=16, tokens=1e8, top_k=3))
    cli = invoke("solve", "--model", "llama-3.1-8b", "--method", "qlora", "--seq-len", "2048", "--global-batch", "16",
                 "--tokens", "1e8", "--stack", "unsloth", "--format", "json")
    volatile = ("solve_time_s", "search")
    assert {k: v for k, v in json.loads(api.model_dump_json()).items() if k not in volatile} == {
        k: v for k, v in json.loads(cli.stdout).items() if k not in volatile}
    try:
        vramplan.stack_job(stack="unsloth", seq_len=0)
    except vramplan.VramplanError as error:
        assert error.field == "seq_len"
    else:
        raise AssertionError("seq_len=0 was accepted")
