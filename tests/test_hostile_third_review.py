"""Hostile inputs a third review found (2026-12-07), each now refused in one line or answered right.

- `-o` into the packaged catalogues folder (`stacks -o catalogues/stacks.csv` in a source checkout)
  replaced a catalogue every later run reads, and every command after it failed.
"""

from __future__ import annotations

import pytest
from helpers.cli import assert_error_line, invoke
from helpers.paths import CATALOGUE_DIR


@pytest.mark.parametrize("args", [("stacks",), ("models", "--format", "json"), ("estimate", "--model", "llama-3.1-8b")])
@pytest.mark.parametrize("name", ["stacks.csv", "offerings.csv", "a-new-file.csv"])
def test_no_output_goes_into_the_packaged_catalogues(args, name):
    target = CATALOGUE_DIR / name
    before = target.read_bytes() if target.exists() else None
    result = invoke(*args, "-o", str(target))
    assert result.exit_code == 2
    assert_error_line(result, "packaged catalogues folder", "write to another file")
    assert (target.read_bytes() if target.exists() else None) == before
