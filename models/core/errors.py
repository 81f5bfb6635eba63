"""The one error type users see: a field, the offending value, and why, on one line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic only to type it: the CLI's --help imports this module
    from pydantic import ValidationError


_RANGE_ERRORS = {"greater_than": (">", "gt"), "greater_than_equal": (">=", "ge"), "less_than": ("<", "lt"),
                 "less_than_equal": ("<=", "le")}


class VramplanError(ValueError):
    """Invalid input. ``str(error)`` is a one-line message naming the field and the value."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={value!r}: {reason}")


def closest_names(name: str, known: Iterable[str], limit: int = 3) -> list[str]:
    """Catalogue names most similar to ``name`` (for 'did you mean' messages)."""
    known = list(known)
    close = difflib.get_close_matches(name.lower(), known, n=limit, cutoff=0.4)
    if not close:
        close = [k for k in known if name.lower() in k or k in name.lower()][:limit]
    return close


def unknown_name_error(field: str, name: str, known: Iterable[str]) -> VramplanError:
    known = sorted(known)
    close = closest_names(name, known)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known[:12])}"
    return VramplanError(field, name, f"not in the catalogue; {hint}")


def from_validation_error(error: ValidationError, raw: Mapping[str, Any] | None = None) -> VramplanError:
    """The first pydantic error as a VramplanError naming the field and the value.

    Whole-model checks raise VramplanError themselves (pydantic keeps it in ctx["error"]); field
    checks are named by their location; `raw` gives the user's own text for the value.
    """
    first = error.errors()[0]
    original = first.get("ctx", {}).get("error")
    if isinstance(original, VramplanError):
        return original
    field = ".".join(str(part) for part in first["loc"]) or "input"
    value = raw.get(field, first.get("input")) if raw is not None else first.get("input")
    reason = first["msg"].removeprefix("Value error, ")
    if first["type"] in _RANGE_ERRORS:
        operator, key = _RANGE_ERRORS[first["type"]]
        bound = first.get("ctx", {}).get(key)
        shown = f"{bound:g}" if isinstance(bound, (int, float)) and abs(bound) >= 1e7 else bound
        reason = f"out of range: must be {operator} {shown} (docs/input-rules.md)"
    return VramplanError(field, value, reason)


class CommandFailure(Exception):
    """The command could not run (exit code 1): a file it cannot read or write, a missing optional
    extra. ``str(error)`` is one line naming the file or the extra."""
