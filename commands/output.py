"""Where results go and in which shape: the screen a table is drawn for, JSON and CSV text, and
writing to stdout or the -o file. No computation happens here; tables are in render_*.py."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

from vramplan.models.core.errors import VramplanError

# Below this many columns tables drop to their compact layout (fewer columns, wrapped text).
COMPACT_BELOW_COLUMNS = 100
# Tables are never drawn narrower: below it rich broke every word over lines (`COLUMNS=10`: a
# letter or a few a line, names cut to `v100-sxm-…`). A narrower screen gets lines this wide,
# which a terminal wraps at its edge and a pipe keeps whole.
MIN_TABLE_COLUMNS = 60


# -o FILE without --format writes the format its extension names; any other extension, a table.
EXTENSION_FORMATS = {".json": "json", ".csv": "csv"}


def chosen_format(options: Mapping[str, Any]) -> str:
    """An explicit --format wins; else the -o file's extension; else a table."""
    if options.get("output_format"):
        return options["output_format"]
    output = options.get("output")
    return EXTENSION_FORMATS.get(output.suffix.lower(), "table") if output is not None else "table"


@dataclass(frozen=True)
class Screen:
    """What a table is drawn for: `width` columns (None: as wide as the table needs, for pipes
    and files without $COLUMNS), and `plain` (no box drawing, no colour) unless a terminal."""

    width: int | None
    plain: bool

    @property
    def compact(self) -> bool:
        return self.width is not None and self.width < COMPACT_BELOW_COLUMNS


def screen_for(output: Path | None) -> Screen:
    """A terminal gets its own width with boxes; a pipe or a file gets plain text, $COLUMNS wide
    when that is set (as `COLUMNS=80 vramplan ... | less`), else as wide as the table needs."""
    if output is None and sys.stdout is not None and sys.stdout.isatty():
        return Screen(width=max(shutil.get_terminal_size().columns, MIN_TABLE_COLUMNS), plain=False)
    return Screen(width=columns_width(os.environ.get("COLUMNS", "")), plain=True)


def columns_width(columns: str) -> int | None:
    """$COLUMNS as a table width: ASCII digits of a number above 0 (else None: as wide as the
    table needs), never below MIN_TABLE_COLUMNS. `COLUMNS=²` passed str.isdigit() and stopped every
    table command with `internal error: ValueError`."""
    text = columns.strip()
    if not (text.isascii() and text.isdigit()) or int(text) == 0:
        return None
    return max(int(text), MIN_TABLE_COLUMNS)


def console_environ() -> dict[str, str]:
    """The environment a rich Console reads: without a COLUMNS or LINES that is not ASCII digits.
    rich tests them with str.isdigit() and then calls int(), so `COLUMNS=²` or `LINES=²` stopped
    every table (and batch's progress bar) with `internal error: ValueError`."""
    return {name: value for name, value in os.environ.items()
            if name not in ("COLUMNS", "LINES") or (value.isascii() and value.isdigit())}


def emit(text: str, output: Path | None) -> None:
    """Write the result to stdout, or to a file through the one output writer (atomically over a
    regular file, directly into a device or pipe: sheets/output_file.py)."""
    if output is None:
        if sys.stdout is None:  # started with stdout closed (`>&-`): Python has no sys.stdout at all
            from vramplan.models.core.errors import CommandFailure

            raise CommandFailure("stdout is closed: the result cannot be shown; write it with -o FILE")
        click.echo(text, nl=False)
        return
    from vramplan.sheets.output_file import output_target, write_text_output

    write_text_output(output_target(output), text)


def files_read(options: Mapping[str, Any]) -> list[tuple[str, Path | None]]:
    """The files a command reads from its options: the model's config.json (--model PATH) and the
    catalogue CSVs. No output may be one of them."""
    from vramplan.commands.options import catalogue_files
    from vramplan.models.catalogue.config_file import config_path

    model = options.get("model")
    return [("model config", config_path(model) if isinstance(model, str) else None), *catalogue_files(options)]



def _foreign_extensions() -> set[str]:
    """Extensions of files these commands do not write: the sheets batch and fleet write (but CSV),
    the pictures of --plot and the pages of --report. `gpus -o g.xlsx` wrote a text table Excel cannot open."""
    from vramplan.commands.plot import IMAGE_SUFFIXES
    from vramplan.sheets.sheet_files import SUFFIX_FORMATS

    sheets = {suffix for suffix, fmt in SUFFIX_FORMATS.items() if fmt != "csv"}
    return sheets | {".xls", *IMAGE_SUFFIXES, ".html", ".htm"}


# What --report and --launch-config write, and the extensions of what they never write: `--report
# r.json` wrote an HTML page, `--launch-config l.png` a JSON configuration, under those names.
_OTHER_WRITES = {"report": ("an HTML page (.html)", {".json", ".jsonl", ".csv", ".txt", ".md"}),
                 "launch-config": ("the stack's launch configuration (JSON, TOML or arguments)",
                                   {".csv", ".html", ".htm"})}


def claim(options: Mapping[str, Any], outputs: list[tuple[str, Path | None]]) -> None:
    """Before any work: no output is a file the command reads, nor another of its outputs, nor (-o
    without --format) a file of a kind the command does not write, nor a --report or --launch-config
    named as a kind of file they do not write (exit 2)."""
    from vramplan.sheets.output_file import claim_outputs

    output = options.get("output")
    if output is not None and not options.get("output_format") and output.suffix.lower() in _foreign_extensions():
        raise VramplanError("output", str(output), f"this command writes a table, JSON (.json) or CSV (.csv), not "
                                                   f"{output.suffix}; name the file so, or give --format")
    claim_outputs(outputs, files_read(options))  # first: "is the model config file itself" says more
    for option, path in outputs:
        if path is None or option not in _OTHER_WRITES:
            continue
        writes, also_foreign = _OTHER_WRITES[option]
        foreign = (_foreign_extensions() | also_foreign) - ({".html", ".htm"} if option == "report" else set())
        if path.suffix.lower() in foreign:
            raise VramplanError(option, str(path), f"--{option} writes {writes}, not {path.suffix}; name the file so")


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one flat row with dotted keys (lists become JSON text)."""
    row: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            row.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            row[name] = json.dumps(value)
        else:
            row[name] = value
    return row


def _cell(value: Any) -> Any:
    return str(value).lower() if isinstance(value, bool) else value


def csv_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """CSV with every text cell (header included) neutralised like batch output (OWASP CSV injection)."""
    from vramplan.sheets.sheet_files import neutralise

    def safe(value: Any) -> Any:
        value = _cell(value)
        return neutralise(value) if isinstance(value, str) else value

    rows = [{neutralise(str(key)): safe(value) for key, value in row.items()} for row in rows]
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def json_text(value: BaseModel | list[BaseModel] | list[dict[str, Any]]) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json(indent=2) + "\n"
    items = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    return json.dumps(items, indent=2) + "\n"
