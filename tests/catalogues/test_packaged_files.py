"""The packaged catalogues' files (docs/design.md section 6): the header equals the pydantic model,
every row validates and is loaded, names are unique, every row has a source, the required GPUs and
architectures are there, and catalogues/README.md documents every column in each file's own table.
"""

from __future__ import annotations

import re

import pytest
from helpers.catalogue import REQUIRED_ARCHITECTURES, packaged_rows
from helpers.paths import CATALOGUE_DIR
from pydantic import BaseModel

from vramplan.models.catalogue.catalogue import ARCHITECTURES_CSV, GPUS_CSV, OFFERINGS_CSV, load_catalogue
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec, Offering

SCHEMAS: dict[str, type[BaseModel]] = {GPUS_CSV: GpuSpec, OFFERINGS_CSV: Offering, ARCHITECTURES_CSV: Architecture}
REQUIRED_GPUS = {
    "v100-sxm-32gb", "a10g-24gb", "l4-24gb", "l40s-48gb", "rtx4090-24gb", "a100-sxm-40gb", "a100-sxm-80gb",
    "h100-pcie-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "b200-180gb", "mi300x-192gb", "mi325x-256gb",
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_header_equals_schema_field_order(name):
    header, _ = packaged_rows(name)
    assert header == list(SCHEMAS[name].model_fields)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_row_validates_and_is_loaded(name, catalogue):
    _, rows = packaged_rows(name)
    assert rows, f"{name} is empty"
    loaded = {GPUS_CSV: catalogue.gpus, OFFERINGS_CSV: catalogue.offerings, ARCHITECTURES_CSV: catalogue.architectures}
    assert len(loaded[name]) == len(rows)  # no row silently dropped or merged


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_keys_are_unique(name):
    _, rows = packaged_rows(name)
    if name == OFFERINGS_CSV:
        keys = [f"{r['provider']}/{r['instance_type']}" for r in rows]
    else:
        keys = [r["name"] for r in rows]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    assert not duplicates, f"duplicate keys in {name}: {duplicates}"


def test_packaged_catalogue_equals_the_same_files_given_as_user_csvs(catalogue):
    """The user-CSV path and the packaged path read the same schema the same way."""
    explicit = load_catalogue(
        gpus_csv=CATALOGUE_DIR / GPUS_CSV,
        offerings_csv=CATALOGUE_DIR / OFFERINGS_CSV,
        models_csv=CATALOGUE_DIR / ARCHITECTURES_CSV,
    )
    assert explicit == catalogue


def test_required_gpus_present(catalogue):
    assert REQUIRED_GPUS <= set(catalogue.gpus), sorted(REQUIRED_GPUS - set(catalogue.gpus))


def test_required_architectures_present(catalogue):
    missing = REQUIRED_ARCHITECTURES - set(catalogue.architectures)
    assert not missing, sorted(missing)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_row_has_a_source(name):
    _, rows = packaged_rows(name)
    for line, row in enumerate(rows, start=2):
        assert row["source"].strip(), f"{name} line {line} has no source"
        assert len(row["source"].strip()) >= 10, f"{name} line {line}: source {row['source']!r} is too vague"


def test_readme_documents_every_column():
    readme = (CATALOGUE_DIR / "README.md").read_text(encoding="utf-8")
    for file_name, model in SCHEMAS.items():
        assert f"`{file_name}`" in readme, f"README does not name {file_name}"
        assert model.__name__ in readme, f"README does not name the schema {model.__name__}"
        undocumented = [column for column in model.model_fields if f"`{column}`" not in readme]
        assert not undocumented, f"README lacks columns of {file_name}: {undocumented}"


def test_readme_documents_columns_in_each_files_own_table():
    """Each `## \\`file\\` columns` section lists exactly that file's columns as table rows."""
    readme = (CATALOGUE_DIR / "README.md").read_text(encoding="utf-8")
    for file_name, model in SCHEMAS.items():
        match = re.search(rf"^## `{re.escape(file_name)}` columns\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
        assert match, f"README has no '## `{file_name}` columns' section"
        rows = re.findall(r"^\| `([a-z0-9_]+)` \|", match.group(1), re.M)
        assert rows == list(model.model_fields), f"{file_name} README table {rows} != schema"

