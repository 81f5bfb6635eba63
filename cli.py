"""vramplan command line: parse options, call the library, format the answer.

Exit codes: 0 ok, 1 error (I/O, internal), 2 bad input (usage, invalid value), 3 infeasible or
unsolved (a plan that does not fit, a solve with no answer). Results go to stdout, errors to stderr
as one line; never a traceback (set VRAMPLAN_DEBUG=1 to see one).
"""

from __future__ import annotations

import importlib
import sys

import click

from vramplan.commands.exits import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from vramplan.commands.literal import literal

MAX_ERROR_CHARS = 1000


def _say(text: str, err: bool = True) -> None:
    """One stderr line whatever the message holds (solver logs, worker reasons): whitespace runs
    become one space, and the line is cut at MAX_ERROR_CHARS."""
    line = literal(" ".join(text.split()))  # control characters shown escaped, never run
    click.echo(line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "...", err=err)


def _exit_code(invoke) -> int:
    """Run invoke(); turn every failure into one line on stderr and an exit code."""
    try:
        invoke()
    except click.exceptions.Exit as stop:
        return stop.exit_code
    except click.exceptions.Abort:
        _say("aborted", err=True)
        return EXIT_INTERRUPTED
    except click.UsageError as error:
        _say(f"error: {error.format_message()}", err=True)
        return EXIT_USAGE
    except click.ClickException as error:
        _say(f"error: {error.format_message()}", err=True)
        return EXIT_ERROR
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else EXIT_ERROR
    except Exception as error:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        # Imported here, not at the top: models.errors loads pydantic, which `vramplan --help` does not need.
        from vramplan.models.core.debug import debug_enabled
        from vramplan.models.core.errors import CommandFailure, VramplanError

        if isinstance(error, (VramplanError, CommandFailure)):
            _say(f"error: {error}", err=True)
            return EXIT_USAGE if isinstance(error, VramplanError) else EXIT_ERROR
        if debug_enabled():
            raise
        if isinstance(error, OSError) and error.errno is not None:  # the system said no: a closed
            _say(f"error: {error.strerror or error}", err=True)  # stdout (EBADF), a full disk, a limit
            return EXIT_ERROR
        _say(f"internal error: {type(error).__name__}: {error}", err=True)
        return EXIT_ERROR
    return EXIT_OK


class VramplanGroup(click.Group):
    """A click group whose errors are one line and whose exit codes are documented."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        code = _exit_code(
            lambda: super(VramplanGroup, self).main(
                args=args, prog_name=prog_name or "vramplan", complete_var=complete_var, standalone_mode=False, **extra
            )
        )
        if standalone_mode:
            sys.exit(code)
        return code


# name -> (module, attribute, short help). The group's --help lists these without importing a
# command module; a command's module (and with it pydantic, ortools, pandas or rich) is imported
# only when that command runs or shows its own --help. tests/commands/test_help_imports.py checks
# that each short help here is the command's own.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "batch": ("vramplan.commands.batch", "batch",
              "Solve every row of JOBS (CSV, XLSX, Parquet or JSON lines; one job per row) and write the plans."),
    "catalogue": ("vramplan.commands.catalogue", "catalogue", "Import and check catalogue files."),
    "estimate": ("vramplan.commands.estimate", "estimate_command",
                 "Memory per GPU, throughput and cost of one fixed training configuration."),
    "fleet": ("vramplan.commands.fleet", "fleet",
              "Plan many training jobs jointly on a finite GPU inventory (CP-SAT)."),
    "gpus": ("vramplan.commands.listings", "gpus", "List the GPU catalogue."),
    "models": ("vramplan.commands.listings", "models", "List the architecture catalogue with exact parameter counts."),
    "offerings": ("vramplan.commands.listings", "offerings",
                  "List the offerings (how GPUs are rented) with their dated prices."),
    "stacks": ("vramplan.commands.listings", "stacks",
               "List the training stacks and the recipe defaults each sets (catalogues/stacks.csv)."),
    "solve": ("vramplan.commands.solve", "solve_command",
              "Find, prove and explain the best cluster and training configuration."),
}


class LazyGroup(VramplanGroup):
    """Imports a command's module only when the command is looked up to run or show its help."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)  # as click.Group does
        rows = [(name, click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="vramplan")
def main() -> None:
    """Plan GPU clusters and training configurations that fit in memory, cheapest or fastest."""
