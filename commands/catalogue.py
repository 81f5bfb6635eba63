"""`vramplan catalogue import skypilot DIR` and `vramplan catalogue check FILE`: refresh prices from
the catalogue format the ecosystem keeps current, and validate a user's catalogue file."""

from __future__ import annotations

import csv
import datetime
import io
import re
from pathlib import Path
from typing import Any

import click

from vramplan.commands.options import FilePath, OnceCommand, OutputPath

MAX_VMS_CSV_BYTES = 64 * 2**20  # SkyPilot's largest vms.csv (AWS, every region and zone) is about 20 MiB


@click.group()
def catalogue() -> None:
    """Import and check catalogue files."""


@catalogue.group(name="import")
def import_() -> None:
    """Import offerings from another catalogue format."""


@import_.command(cls=OnceCommand)
@click.argument("directory", type=FilePath(file_okay=False, path_type=Path))
@click.option("--cloud", "clouds", multiple=True,
              help="Cloud directory to import (repeatable) [default: every DIR/<cloud>/vms.csv].")
@click.option("--source", default="skypilot-org/skypilot-catalog", show_default=True,
              help="Where DIR came from (repository and commit), written into each row's source.")
@click.option("--price-date", default=None, help="Date of the prices, YYYY-MM-DD [default: today].")
@click.option("-o", "--output", type=OutputPath(path_type=Path), default=None,
              help="Write the offerings CSV here [default: stdout].")
def skypilot(directory: Path, clouds: tuple[str, ...], source: str, price_date: str | None, output: Path | None) -> None:
    """Read SkyPilot catalog CSVs (DIR/<cloud>/vms.csv, as catalogs/v8/ of
    skypilot-org/skypilot-catalog) and write them as an offerings.csv; says on stderr what it
    skipped and why."""
    from vramplan.commands import output as out
    from vramplan.models.catalogue.catalogue import load_catalogue
    from vramplan.models.catalogue.config_file import read_small_file
    from vramplan.models.catalogue.skypilot import import_cloud
    from vramplan.models.core.clock import today
    from vramplan.models.core.errors import VramplanError
    from vramplan.sheets.output_file import claim_outputs

    if not directory.is_dir():
        raise VramplanError("directory", str(directory), "is not a directory (SkyPilot's catalogs/v8/)")
    names = clouds or tuple(sorted(p.parent.name for p in directory.glob("*/vms.csv")))
    if not names:
        raise VramplanError("directory", str(directory), "holds no <cloud>/vms.csv")
    # before any work: -o is none of the files read (it replaced sky/lambda/vms.csv with the offerings)
    claim_outputs([("output", output)], [("cloud", directory / cloud / "vms.csv") for cloud in names])
    date = price_date or today().isoformat()
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        raise VramplanError("price_date", date, "must be YYYY-MM-DD")
    try:  # a real calendar day, not after today (catalogue check and --offerings-csv refuse the rows otherwise)
        day = datetime.date.fromisoformat(date)
    except ValueError:
        raise VramplanError("price_date", date, "is not a calendar date") from None
    if day > today():
        raise VramplanError("price_date", date, f"is after today ({today().isoformat()})")
    packaged = load_catalogue()
    imported, skipped = [], []
    for cloud in names:
        path = directory / cloud / "vms.csv"
        text = read_small_file(path, "cloud", str(path), MAX_VMS_CSV_BYTES)
        result = import_cloud(cloud, text, set(packaged.gpus), packaged.offerings, f"{source} {cloud}/vms.csv", date)
        imported += result.offerings
        skipped += [(cloud, s) for s in result.skipped]
    out.emit(_offerings_csv(imported), output)
    _report(imported, skipped, names)


def _offerings_csv(offerings: list[Any]) -> str:
    from vramplan.models.core.catalogue_schema import Offering

    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(Offering.model_fields), lineterminator="\n")
    writer.writeheader()
    for offering in offerings:
        writer.writerow({k: ("" if v is None else v) for k, v in offering.model_dump().items()})
    return text.getvalue()


def _report(imported: list[Any], skipped: list[tuple[str, Any]], clouds: tuple[str, ...]) -> None:
    """One stderr line for the count, one per reason of the skipped GPU instance types."""
    click.echo(f"imported {len(imported)} offerings from {', '.join(clouds)}", err=True)
    by_reason: dict[str, list[str]] = {}
    for cloud, skip in skipped:
        if skip.reason != "no GPU":
            by_reason.setdefault(skip.reason, []).append(f"{cloud}/{skip.instance_type}")
    for reason, names in sorted(by_reason.items()):
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        click.echo(f"skipped {len(names)}: {reason}: {shown}", err=True)


SCHEMA_OPTIONS = {"gpus_csv": "GpuSpec", "offerings_csv": "Offering", "models_csv": "Architecture"}


@catalogue.command(cls=OnceCommand)
@click.argument("file", type=FilePath(path_type=Path))
def check(file: Path) -> None:
    """Validate a user catalogue file (GPUs, offerings or architectures, told apart by its header)
    against the schema and the packaged catalogue: exit 2 and one line naming the first bad cell;
    prices older than the warning age are listed on stderr."""
    from vramplan.models.catalogue.catalogue import MAX_CATALOGUE_BYTES, load_catalogue
    from vramplan.models.catalogue.config_file import read_small_file
    from vramplan.models.core import catalogue_schema
    from vramplan.models.core.clock import days_since, today
    from vramplan.models.core.errors import VramplanError
    from vramplan.models.estimate import MAX_PRICE_AGE_DAYS

    header = next(csv.reader(io.StringIO(read_small_file(file, "file", str(file), MAX_CATALOGUE_BYTES))), [])
    option = next((o for o, schema in SCHEMA_OPTIONS.items() if "source" in header
                   and set(header) <= set(getattr(catalogue_schema, schema).model_fields)
                   and _required(getattr(catalogue_schema, schema)) <= set(header)), None)
    if option is None:
        raise VramplanError("file", str(file), "is not a GPU, offerings or architecture catalogue (its header matches "
                                               "none of catalogues/README.md's schemas)")
    loaded = load_catalogue(**{option: file})
    kind = option.removesuffix("_csv")
    count = {"gpus": len(loaded.gpus), "offerings": len(loaded.offerings), "models": len(loaded.architectures)}[kind]
    click.echo(f"{file}: {count} {kind} rows, valid")
    if kind == "offerings":
        stale = sorted(name for name, o in loaded.offerings.items()
                       if days_since(o.price_date, today()) > MAX_PRICE_AGE_DAYS)
        if stale:
            click.echo(f"warning: {len(stale)} prices older than {MAX_PRICE_AGE_DAYS} days: {', '.join(stale[:5])}"
                       + (f" and {len(stale) - 5} more" if len(stale) > 5 else ""), err=True)


def _required(schema: Any) -> set[str]:
    return {name for name, field in schema.model_fields.items() if field.is_required()}
