"""The one module that reads catalogue CSVs: the packaged defaults or a user's own files."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from vramplan.models.catalogue.config_file import config_path, read_small_file
from vramplan.models.catalogue.hf_config import architecture_from_config_file
from vramplan.models.catalogue.hf_hub import hub_config_path, looks_like_hub_id
from vramplan.models.catalogue.stack import StackPreset
from vramplan.models.catalogue.stack_capabilities import StackCapabilities
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec, Offering
from vramplan.models.core.clock import date_of, refuse_today_before
from vramplan.models.core.errors import VramplanError, from_validation_error, unknown_name_error

Row = TypeVar("Row", bound=BaseModel)

GPUS_CSV = "gpus.csv"
OFFERINGS_CSV = "offerings.csv"
ARCHITECTURES_CSV = "architectures.csv"
STACKS_CSV = "stacks.csv"
STACK_CAPABILITIES_CSV = "stack_capabilities.csv"
# Rows per catalogue file. The search builds one Boolean per offering and configuration, so its
# size grows linearly with the offerings; past 1,000 rows it is slow and can overflow the integer
# model (docs/performance.md#catalogue-size).
MAX_CATALOGUE_ROWS = 1000
MAX_CATALOGUE_BYTES = 16 << 20  # 16 MiB: 1,000 rows with long sources are under 1 MiB


def packaged_folder() -> Path:
    """The folder of the packaged catalogues (in a source checkout, the working tree's catalogues/)."""
    return Path(os.path.realpath(str(resources.files("vramplan.catalogues"))))


def _read_text(path: Path | None, packaged_name: str, option: str) -> tuple[str, str]:
    if path is None:
        # the packaged file: its errors name it as such, not as an option the user did not give
        return (packaged_folder() / packaged_name).read_text(encoding="utf-8"), f"packaged {packaged_name}"
    if not isinstance(path, (str, os.PathLike)):  # load_catalogue(gpus_csv=123) was a bare TypeError
        raise VramplanError(option, repr(path)[:80], "must be a path (str or pathlib.Path) or None")
    return read_small_file(Path(path), option, str(path), MAX_CATALOGUE_BYTES), str(path)


def parse_rows(text: str, model: type[Row], origin: str, option: str) -> list[Row]:
    """Validate every row of a catalogue CSV; the first bad cell is a one-line error."""
    reader = csv.DictReader(io.StringIO(text))
    expected = list(model.model_fields)
    header = reader.fieldnames or []
    # Every column without a default, no unknown one, each once; optional columns may be left out
    # (a catalogue written before they existed still loads) and the order is free.
    required = [name for name, f in model.model_fields.items() if f.is_required()]
    missing = [c for c in required if c not in header]
    extra = [c for c in header if c not in expected]
    if missing or extra or len(set(header)) != len(header):
        detail = f"missing columns {missing}" if missing else f"unknown columns {extra}" if extra else "a repeated column"
        raise VramplanError(option, origin, f"header does not match the schema ({detail}); see catalogues/README.md")
    expected = list(header)
    rows: list[Row] = []
    try:
        for raw in reader:
            _add_row(raw, reader.line_num, rows, model, expected, origin, option)
    except csv.Error as error:
        raise VramplanError(option, origin, f"line {reader.line_num} is not valid CSV: {error}") from None
    return rows


def _add_row(raw: dict, line_number: int, rows: list, model: type[Row], expected: list[str], origin: str,
             option: str) -> None:
    """Validate one CSV row into `rows`; the first bad cell is a one-line error naming its line."""
    if len(rows) == MAX_CATALOGUE_ROWS:
        raise VramplanError(option, origin, f"has more than {MAX_CATALOGUE_ROWS} rows (the limit per catalogue "
                                            f"file; see catalogues/README.md)")
    if None in raw:
        raise VramplanError(option, origin, f"line {line_number} has more cells than the header's {len(expected)} "
                                            f"columns")
    cells = {key: value for key, value in raw.items() if value not in ("", None)}
    try:
        rows.append(model.model_validate(cells))
    except ValidationError as error:
        bad = from_validation_error(error, raw)
        raise VramplanError(option, origin, f"line {line_number}, {bad}") from None


def _unique(rows: list[Row], key, origin: str, option: str) -> dict[str, Row]:
    by_key: dict[str, Row] = {}
    for row in rows:
        name = key(row)
        if name in by_key:
            raise VramplanError(option, origin, f"duplicate name {name!r}")
        by_key[name] = row
    return by_key


@dataclass(frozen=True)
class Catalogue:
    gpus: dict[str, GpuSpec]
    offerings: dict[str, Offering]
    architectures: dict[str, Architecture]

    def gpu(self, name: str) -> GpuSpec:
        if name not in self.gpus:
            raise unknown_name_error("gpu", name, self.gpus)
        return self.gpus[name]

    def offering(self, name: str) -> Offering:
        if name not in self.offerings:
            raise unknown_name_error("offering", name, self.offerings)
        return self.offerings[name]

    def offerings_for(self, gpu: str) -> list[Offering]:
        return [o for o in self.offerings.values() if o.gpu == gpu]

    def architecture(self, name_or_path: str, models_dir: Path | None = None) -> Architecture:
        """A catalogue name (case-insensitive), a path to a Hugging Face config.json (or its folder;
        with `models_dir` only a file inside that folder, models/catalogue/config_file.py), or a hub id such as
        Qwen/Qwen3-8B (models/catalogue/hf_hub.py: its config.json only, never weights)."""
        if not name_or_path.strip():  # as a path it is the current folder: "model='config.json': cannot read"
            raise VramplanError("model", name_or_path, "is empty: name a catalogue model, a config.json or a hub id")
        if name_or_path in self.architectures:
            return self.architectures[name_or_path]
        by_lower = {name.lower(): arch for name, arch in self.architectures.items()}
        if name_or_path.lower() in by_lower:
            return by_lower[name_or_path.lower()]
        # Hub ids resolve from the command line only: a sheet (models_dir) reads files inside its
        # models folder and nothing else, so a sheet cell never makes the tool go to the network.
        hub_id = models_dir is None and looks_like_hub_id(name_or_path)
        path = config_path(name_or_path, models_dir)
        if path is not None:
            return architecture_from_config_file(path, None if models_dir is None else Path(name_or_path).name)
        if hub_id:
            arch = architecture_from_config_file(hub_config_path(name_or_path), f"hub:{name_or_path}")
            return arch.model_copy(update={"name": name_or_path.split("/")[1].lower(), "source": f"hub:{name_or_path}"})
        if _looks_like_path(name_or_path):  # './foo/bar', 'a/b/c', 'x.json': "not in the catalogue" misled
            raise VramplanError("model", name_or_path[:200], "no such config.json or folder holding one (nor a "
                                                             "catalogue name or a hub id)")
        raise unknown_name_error("model", name_or_path[:200], self.architectures)


def _looks_like_path(text: str) -> bool:
    """Meant as a file: it starts like a path, names a .json, or has more parts than a hub id's org/name."""
    return text.startswith((".", "/", "~")) or text.endswith(".json") or text.count("/") > 1 or "\\" in text


def load_catalogue(
    gpus_csv: Path | None = None, offerings_csv: Path | None = None, models_csv: Path | None = None
) -> Catalogue:
    """Load the packaged catalogues, or the user's files where given (same schema)."""
    text, origin = _read_text(gpus_csv, GPUS_CSV, "gpus_csv")
    gpus = _unique(parse_rows(text, GpuSpec, origin, "gpus_csv"), lambda g: g.name, origin, "gpus_csv")
    text, origin = _read_text(offerings_csv, OFFERINGS_CSV, "offerings_csv")
    if offerings_csv is None:
        refuse_today_before(max(date_of(row["price_date"]) for row in csv.DictReader(io.StringIO(text))),
                            "the packaged offerings")
    offerings = _unique(parse_rows(text, Offering, origin, "offerings_csv"), lambda o: o.name, origin, "offerings_csv")
    for offering in offerings.values():
        if offering.gpu not in gpus and gpus_csv is not None and offerings_csv is None:  # the user's GPUs, the packaged offerings
            raise VramplanError("gpus_csv", str(gpus_csv), f"has no gpu {offering.gpu!r}, which the packaged offerings "
                                                           f"rent ({offering.name}): add it, or pass --offerings-csv "
                                                           "with the offerings of your GPUs")
        if offering.gpu not in gpus:
            raise VramplanError("offerings_csv", origin, f"offering {offering.name} names unknown gpu {offering.gpu!r}")
    text, origin = _read_text(models_csv, ARCHITECTURES_CSV, "models_csv")
    architectures = _unique(
        parse_rows(text, Architecture, origin, "models_csv"), lambda a: a.name, origin, "models_csv"
    )
    return Catalogue(gpus=gpus, offerings=offerings, architectures=architectures)


@lru_cache(maxsize=1)
def load_stacks() -> dict[str, StackPreset]:
    """The packaged training-stack presets (catalogues/stacks.csv), keyed by stack name."""
    text, origin = _read_text(None, STACKS_CSV, "stack")
    return _unique(parse_rows(text, StackPreset, origin, "stack"), lambda s: s.name, origin, "stack")


@lru_cache(maxsize=1)
def load_stack_capabilities() -> dict[str, StackCapabilities]:
    """What each stack runs (catalogues/stack_capabilities.csv), keyed by stack name: one row per
    stack of stacks.csv (tests/catalogues checks both files name the same stacks)."""
    text, origin = _read_text(None, STACK_CAPABILITIES_CSV, "stack")
    return _unique(parse_rows(text, StackCapabilities, origin, "stack"), lambda s: s.name, origin, "stack")

