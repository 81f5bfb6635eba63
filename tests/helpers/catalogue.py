"""The packaged catalogue, loaded once per test session, and its CSV files as text or rows."""

from __future__ import annotations

import csv
import io
from functools import cache
from importlib import resources

from vramplan.models.catalogue.catalogue import Catalogue, load_catalogue


@cache
def packaged_catalogue() -> Catalogue:
    """The packaged catalogue, loaded on first use; the `catalogue` fixture (conftest.py) is this
    object. Module-level constants and parametrize lists use it directly."""
    return load_catalogue()


def packaged_text(name: str) -> str:
    """A packaged catalogue file ('gpus.csv', 'offerings.csv', 'architectures.csv') as installed."""
    return resources.files("vramplan.catalogues").joinpath(name).read_text(encoding="utf-8")


def packaged_rows(name: str) -> tuple[list[str], list[dict[str, str]]]:
    """A packaged catalogue file's header and rows (fresh dicts on every call: callers edit them)."""
    reader = csv.DictReader(io.StringIO(packaged_text(name)))
    return list(reader.fieldnames or []), list(reader)


def assert_one_line_message(error: Exception, *fragments: str) -> None:
    """A catalogue error is one non-empty line holding every fragment (the file, the field, the value)."""
    message = str(error)
    assert message.strip(), "empty error message"
    assert "\n" not in message and "\r" not in message, f"error is not one line: {message!r}"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from error {message!r}"


# The catalogue rows every release ships (the HF fixtures of these are checked against their rows).
REQUIRED_ARCHITECTURES = {
    "gpt2-124m", "gpt2-1.5b", "gpt3-175b", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b",
    "llama-3.1-70b", "llama-3.1-405b", "mistral-7b", "mixtral-8x7b", "qwen2.5-7b", "qwen2.5-72b",
    "gemma-2-9b", "gemma-2-27b",
}
