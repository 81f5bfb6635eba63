"""The one number grammar of vramplan: command-line options, batch-sheet cells, catalogue cells.

Text (surrounding spaces ignored) must be a plain decimal number in ASCII:

    [+-] digits [. digits] [e|E [+-] digits]        e.g. 8, 2048, 0.9, 2e9, 1.5e3, 1E+3

- Only the ASCII digits 0-9: no `1_000`, no `1,000`, no Arabic-Indic or full-width digits.
- No `inf`, `nan`, hex (`0x10`) or fractions (`1/2`); at most MAX_TEXT_CHARS characters.
- A count (an integer field) may use the same notation when its value is a whole number:
  `1e3` = 1000 and `2.0` = 2 are counts; `1.5` and `1e-3` are not.
- Numbers that are already numbers (an XLSX or Parquet cell, a JSON value) follow the same
  rules: a float is a count only if it is whole; booleans (`TRUE`, JSON `true`) are never
  numbers, and a real number must be finite.

The allowed range of each field (its domain) is the Field bound of its pydantic model; a value
out of range is a one-line error naming the field, the value and the bound.
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

from vramplan.models.core.errors import VramplanError

MAX_TEXT_CHARS = 40
MAX_COUNT_DIGITS = 18  # every count vramplan accepts is far below 10^18
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?", re.ASCII)
GRAMMAR = "a plain decimal number in ASCII digits such as 8, 0.9 or 2e9 (no '_', ',', inf or nan)"


def _is_boolean(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy.bool_ is not a bool


def _decimal(field: str, value: Any) -> Decimal:
    """The exact value of a cell or option: text in the grammar, or a finite real number."""
    if _is_boolean(value):
        raise VramplanError(field, value, "is a boolean, not a number")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_TEXT_CHARS:  # a 50-digit count is a number, but no value vramplan takes has that many characters
            raise VramplanError(field, value[:MAX_TEXT_CHARS * 2], f"has more than {MAX_TEXT_CHARS} characters: write {GRAMMAR}")
        if not _NUMBER.fullmatch(text):
            raise VramplanError(field, value[:MAX_TEXT_CHARS * 2], f"is not a number: write {GRAMMAR}")
        return Decimal(text)
    if isinstance(value, numbers.Integral):
        return Decimal(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            raise VramplanError(field, value, "must be a finite number")
        return Decimal(number)
    raise VramplanError(field, str(value)[:MAX_TEXT_CHARS * 2], f"is not a number: write {GRAMMAR}")


def parse_count(field: str, value: Any) -> int:
    """A whole number (the range is the field's own); raises a one-line VramplanError."""
    number = _decimal(field, value)
    if number != 0 and number.adjusted() >= MAX_COUNT_DIGITS:
        raise VramplanError(field, value, f"is out of range (more than {MAX_COUNT_DIGITS} digits)")
    try:
        whole = number == number.to_integral_value()
    except InvalidOperation:
        whole = False
    if not whole:
        raise VramplanError(field, value, "must be a whole number")
    return int(number)


def parse_real(field: str, value: Any) -> float:
    """A finite real number (the range is the field's own)."""
    number = float(_decimal(field, value))
    if not math.isfinite(number):
        raise VramplanError(field, value, "must be a finite number")
    return number


def parse_positive(field: str, value: Any) -> float:
    """A finite real number > 0."""
    number = parse_real(field, value)
    if number <= 0:
        raise VramplanError(field, value, "must be a finite number > 0")
    return number


def _field(info: ValidationInfo) -> str:
    return info.field_name or "value"


def _count(value: Any, info: ValidationInfo) -> Any:
    return value if value is None else parse_count(_field(info), value)


def _real(value: Any, info: ValidationInfo) -> Any:
    return value if value is None else parse_real(_field(info), value)


# Pydantic field types with the grammar above (a bound such as Field(ge=1, le=4096) gives the domain).
Count = Annotated[int, BeforeValidator(_count)]
Real = Annotated[float, BeforeValidator(_real)]
