"""`vramplan estimate` on a plan that does not fit says which single change makes it fit
(models/estimate_changes.py), in the table and in the JSON, and still exits 3."""

from __future__ import annotations

import json

from helpers.cli import invoke

DDP_8B = ("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--num-gpus", "64")


def test_table_lists_the_changes_that_fit():
    result = invoke(*DDP_8B)
    assert result.exit_code == 3, result.output
    lines = result.stdout.splitlines()
    start = lines.index("fits with one change:")
    assert lines[start - 2].startswith("DOES NOT FIT")  # under the verdict and its reserve line
    assert lines[start + 1].startswith("  --zero 1: ") and " of 71.68 GiB, " in lines[start + 1]
    assert any(line.startswith("  --zero 3: ") and line.endswith(" USD") for line in lines[start + 1:start + 6])


def test_json_holds_the_changes_and_a_plan_that_fits_has_none():
    data = json.loads(invoke(*DDP_8B, "--format", "json").stdout)
    zero3 = next(fix for fix in data["fitting_changes"] if fix["change"] == "--zero 3")
    assert zero3["plan"]["zero"] == 3 and zero3["total_bytes"] <= zero3["limit_bytes"]
    fits = invoke(*DDP_8B, "--zero", "3", "--format", "json")
    assert fits.exit_code == 0 and json.loads(fits.stdout)["fitting_changes"] == []


def test_none_fits_points_at_solve():
    result = invoke("estimate", "--model", "llama-3.1-70b", "--gpu", "rtx4090-24gb")
    assert result.exit_code == 3
    assert "no single change of ZeRO stage, recomputation, offload or micro-batch fits: `vramplan solve`" in result.stdout
