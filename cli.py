"""vramplan command line: parse options, call the library, format the answer.

Exit codes: 0 ok, 1 error (I/O, internal), 2 bad input (usage, invalid value), 3 infeasible or
unsolved (a plan that does not fit, a solve with no answer). Results go to stdout, errors to stderr
as one line; never a traceback (set VRAMPLAN_DEBUG=1 to see one).
"""

from __future__ import annotations

import os
import sys

import click

from vramplan.commands.exits import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from vramplan.models.errors import CommandFailure, VramplanError


def _exit_code(invoke) -> int:
    """Run invoke(); turn every failure into one line on stderr and an exit code."""
    try:
        invoke()
    except click.exceptions.Exit as stop:
        return stop.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return EXIT_INTERRUPTED
    except click.UsageError as error:
        click.echo(f"error: {error.format_message()}", err=True)
        return EXIT_USAGE
    except VramplanError as error:
        click.echo(f"error: {error}", err=True)
        return EXIT_USAGE
    except click.ClickException as error:
        click.echo(f"error: {error.format_message()}", err=True)
        return EXIT_ERROR
    except CommandFailure as error:
        click.echo(f"error: {error}", err=True)
        return EXIT_ERROR
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else EXIT_ERROR
    except Exception as error:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        if os.environ.get("VRAMPLAN_DEBUG"):
            raise
        click.echo(f"internal error: {type(error).__name__}: {error}", err=True)
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


@click.group(cls=VramplanGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="vramplan")
def main() -> None:
    """Plan GPU clusters and training configurations that fit in memory, cheapest or fastest."""


def _register() -> None:
    from vramplan.commands.batch import batch
    from vramplan.commands.estimate import estimate_command
    from vramplan.commands.listings import gpus, models, offerings, stacks
    from vramplan.commands.solve import solve_command

    for command in (estimate_command, solve_command, batch, gpus, models, offerings, stacks):
        main.add_command(command)


_register()
