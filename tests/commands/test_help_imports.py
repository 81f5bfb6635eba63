"""`--help` pays for no solver, data-frame or table library (the CLI imports a command's module only when it runs).

A behaviour test, not a timing: in a fresh interpreter, importing vramplan.cli and showing the
group's and each command's --help must leave ortools, pandas and rich out of sys.modules (they
cost about 0.4 s of CPU; bench/help_bench.py measures the latency).
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from helpers.cli import invoke

from vramplan.cli import COMMANDS, main

# Not on any --help: the group lists the commands without importing them, and each command's module
# declares its options from plain constants (models/core/choices.py, solver/choices.py, sheets/formats.py)
# and imports pydantic, the models, the solver and the sheet machinery when it runs: pydantic alone
# is ~60 ms, the models ~150 ms, the batch rows and journal ~300 ms (bench/help_bench.py).
HEAVY = ("ortools", "pandas", "rich", "matplotlib", "pydantic", "vramplan.models.core.setup", "vramplan.solver.query",
         "vramplan.sheets.rows")
CHEAP_HELP = ["estimate", "solve", "batch", "fleet", "gpus", "models", "offerings", "stacks"]

PROBE = """
import json, sys
import vramplan.cli
after_import = [m for m in {heavy!r} if m in sys.modules]
from click.testing import CliRunner
result = CliRunner().invoke(vramplan.cli.main, {args!r})
print(json.dumps({{"after_import": after_import, "code": result.exit_code, "usage": result.output[:6],
                  "after_help": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def _probe(args: list[str], heavy: tuple[str, ...] = HEAVY) -> dict:
    code = PROBE.format(heavy=heavy, args=args)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"]] + [[name, "--help"] for name in CHEAP_HELP])
def test_help_imports_no_heavy_library(args):
    seen = _probe(args)
    assert seen["code"] == 0 and seen["usage"] == "Usage:"
    assert seen["after_import"] == []
    assert seen["after_help"] == [], f"{' '.join(args)} imported {seen['after_help']}"


def test_group_help_lists_each_command_with_its_own_short_help():
    text = invoke("--help").output
    for name, (_, _, short_help) in COMMANDS.items():
        command = main.get_command(click.Context(main), name)
        assert isinstance(command, click.Command) and command.name == name
        assert short_help == command.get_short_help_str(limit=10_000), name
        assert f"  {name}  " in text


def test_group_help_is_what_click_would_print_from_the_modules():
    eager = click.Group("vramplan", help=main.help, params=main.params,
                        context_settings=main.context_settings)
    for name in COMMANDS:
        eager.add_command(main.get_command(click.Context(main), name))
    expected = CliRunner().invoke(eager, ["--help"], prog_name="vramplan").output
    assert CliRunner().invoke(main, ["--help"], prog_name="vramplan").output == expected


def test_unknown_command_is_a_usage_error():
    result = invoke("solv")
    assert result.exit_code == 2 and "solv" in result.stderr
