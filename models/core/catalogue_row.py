"""The base of every catalogue row's schema (models/core/catalogue_schema.py, architecture_schema.py, the
stack presets and contracts): frozen, no unknown column, whitespace stripped, a source on every row."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator


class CatalogueRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    @field_validator("source", check_fields=False)
    @classmethod
    def _source_is_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("every catalogue row needs a source")
        return value
