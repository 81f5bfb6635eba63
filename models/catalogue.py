"""The one module that reads catalogue CSVs: the packaged defaults or a user's own files."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from vramplan.models.catalogue_schema import Architecture, GpuSpec, Offering
from vramplan.models.errors import VramplanError, from_validation_error, unknown_name_error
from vramplan.models.hf_config import architecture_from_config_file
from vramplan.models.hf_hub import hub_config_path, looks_like_hub_id

Row = TypeVar("Row", bound=BaseModel)

GPUS_CSV = "gpus.csv"
OFFERINGS_CSV = "offerings.csv"
ARCHITECTURES_CSV = "architectures.csv"


def _read_text(path: Path | None, packaged_name: str, option: str) -> tuple[str, str]:
    if path is None:
        return resources.files("vramplan.catalogues").joinpath(packaged_name).read_text(encoding="utf-8"), packaged_name
    try:
        return Path(path).read_text(encoding="utf-8-sig"), str(path)
    except OSError as error:
        raise VramplanError(option, str(path), f"cannot read: {error.strerror or error}") from None


def parse_rows(text: str, model: type[Row], origin: str, option: str) -> list[Row]:
    """Validate every row of a catalogue CSV; the first bad cell is a one-line error."""
    reader = csv.DictReader(io.StringIO(text))
    expected = list(model.model_fields)
    if reader.fieldnames != expected:
        missing = [c for c in expected if c not in (reader.fieldnames or [])]
        extra = [c for c in (reader.fieldnames or []) if c not in expected]
        detail = f"missing columns {missing}" if missing else f"unknown columns {extra}" if extra else "column order"
        raise VramplanError(option, origin, f"header does not match the schema ({detail}); see catalogues/README.md")
    rows = []
    for raw in reader:
        line_number = reader.line_num
        if None in raw:
            raise VramplanError(
                option, origin, f"line {line_number} has more cells than the header's {len(expected)} columns"
            )
        cells = {key: value for key, value in raw.items() if value not in ("", None)}
        try:
            rows.append(model.model_validate(cells))
        except ValidationError as error:
            bad = from_validation_error(error, raw)
            raise VramplanError(option, origin, f"line {line_number}, {bad}") from None
    return rows


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

    def architecture(self, name_or_path: str) -> Architecture:
        """A catalogue name (case-insensitive), a path to a Hugging Face config.json (or its folder),
        or a hub id such as Qwen/Qwen3-8B (models/hf_hub.py)."""
        if name_or_path in self.architectures:
            return self.architectures[name_or_path]
        by_lower = {name.lower(): arch for name, arch in self.architectures.items()}
        if name_or_path.lower() in by_lower:
            return by_lower[name_or_path.lower()]
        path = Path(name_or_path)
        if path.is_dir() and (path / "config.json").is_file():
            return architecture_from_config_file(path / "config.json")
        if name_or_path.endswith(".json") or path.is_file():
            return architecture_from_config_file(path)
        if looks_like_hub_id(name_or_path):
            arch = architecture_from_config_file(hub_config_path(name_or_path))
            return arch.model_copy(update={"name": name_or_path.split("/")[1].lower(), "source": f"hub:{name_or_path}"})
        raise unknown_name_error("model", name_or_path, self.architectures)


def load_catalogue(
    gpus_csv: Path | None = None, offerings_csv: Path | None = None, models_csv: Path | None = None
) -> Catalogue:
    """Load the packaged catalogues, or the user's files where given (same schema)."""
    text, origin = _read_text(gpus_csv, GPUS_CSV, "gpus_csv")
    gpus = _unique(parse_rows(text, GpuSpec, origin, "gpus_csv"), lambda g: g.name, origin, "gpus_csv")
    text, origin = _read_text(offerings_csv, OFFERINGS_CSV, "offerings_csv")
    offerings = _unique(parse_rows(text, Offering, origin, "offerings_csv"), lambda o: o.name, origin, "offerings_csv")
    for offering in offerings.values():
        if offering.gpu not in gpus:
            raise VramplanError("offerings_csv", origin, f"offering {offering.name} names unknown gpu {offering.gpu!r}")
    text, origin = _read_text(models_csv, ARCHITECTURES_CSV, "models_csv")
    architectures = _unique(
        parse_rows(text, Architecture, origin, "models_csv"), lambda a: a.name, origin, "models_csv"
    )
    return Catalogue(gpus=gpus, offerings=offerings, architectures=architectures)
