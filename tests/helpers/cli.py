"""Running `vramplan` in-process through click's CliRunner (stdout and stderr kept apart), and the
one-line error the command line promises for bad input."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner, Result

from vramplan.cli import main


def invoke(*args: str, env: dict[str, str | None] | None = None, **options: Any) -> Result:
    """`vramplan ARGS`; env sets (or, with None, unsets) environment variables for the run; options
    go to CliRunner.invoke (standalone_mode=False: exceptions are raised, not turned into exit codes)."""
    return CliRunner().invoke(main, list(args), env=env, **options)


def invoke_batch(*args: str, workers: int | None = 1, quiet: bool = False) -> Result:
    """`vramplan batch ARGS`, then `--workers N` (unless None) and `-q` (when quiet)."""
    extra = (["--workers", str(workers)] if workers is not None else []) + (["-q"] if quiet else [])
    return invoke("batch", *args, *extra)


def one_line_error(result: Result, code: int = 2) -> str:
    """The single stderr line of a command that exited with `code`, never a traceback."""
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def assert_error_line(result: Result, *fragments: str) -> None:
    """stderr is one line ending in a newline, starting with "error:", holding every fragment; no
    traceback, no usage text."""
    stderr = result.stderr
    assert "Traceback" not in stderr and "Usage:" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and stderr.endswith("\n"), f"stderr is not one line: {stderr!r}"
    assert lines[0].startswith("error:"), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} missing from {lines[0]!r}"
