"""A CSV line with a field missing or one too many is that row's error, the other rows are solved
(sheets/sheet_files.py read_table; before: a short line was padded silently, a long one failed the
whole sheet with `row N has more cells than the header's K`). Empty cells after the last column
(Excel exports them) are no cells. `vramplan fleet` reads its jobs the same way; its inventory,
without which no schedule means anything, stops the run with one line."""

from __future__ import annotations

import csv
import io

from helpers.cli import assert_error_line, invoke, invoke_batch
from helpers.sheets import read_rows

HEADER = "id,model,seq_len,gpus,max_gpus"
GOOD = "llama-3.1-8b,2048,h100-sxm-80gb,8"


def test_a_short_or_long_line_is_its_rows_error_only(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(f"{HEADER}\nok,{GOOD}\nshort,llama-3.1-8b,2048,h100-sxm-80gb\nlong,{GOOD},8\n"
                    f"trailing,{GOOD},,,\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 3, result.stderr  # some rows are errors; every row is written
    rows = read_rows(tmp_path / "plans.csv")
    assert [(row["id"], row["status"], row["error"]) for row in rows] == [
        ("ok", "optimal", ""), ("short", "error", "row has 4 cells, the header 5"),
        ("long", "error", "row has 6 cells, the header 5"), ("trailing", "optimal", "")]
    assert rows[1]["gpus"] == "h100-sxm-80gb" and rows[1]["max_gpus"] == ""  # its cells as read, none invented


def test_a_short_line_is_never_solved_as_if_its_cells_were_defaults(tmp_path):
    """Before, `a,llama-3.1-8b,2048` under a header with max_gpus was solved with max_gpus' default."""
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("id,model,seq_len,max_gpus\na,llama-3.1-8b,2048\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 3
    assert read_rows(tmp_path / "plans.csv")[0]["gpu"] == ""


def _fleet(tmp_path, jobs: str, inventory: str):
    (tmp_path / "jobs.csv").write_text(jobs, encoding="utf-8")
    (tmp_path / "inventory.csv").write_text(inventory, encoding="utf-8")
    out = tmp_path / "schedule.csv"
    result = invoke("fleet", str(tmp_path / "jobs.csv"), "--inventory", str(tmp_path / "inventory.csv"),
                    "-o", str(out), "--time-limit", "10")
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig")))) if out.exists() else []
    return result, rows


INVENTORY = "pool,offering,num_gpus,committed\nh100,aws/p5.48xlarge,16,true\n"
FLEET_JOBS = "id,model,seq_len,tokens,max_gpus\na,llama-3.1-8b,4096,1e9,16\nb,llama-3.1-8b,4096,1e9\n"


def test_fleet_jobs_get_the_same_row_error(tmp_path):
    result, rows = _fleet(tmp_path, FLEET_JOBS, INVENTORY)
    assert result.exit_code == 3, result.output
    assert [(row["id"], row["status"]) for row in rows] == [("a", "scheduled"), ("b", "error")]
    assert rows[1]["error"] == "row has 4 cells, the header 5"


def test_a_short_inventory_line_is_one_line_naming_the_file(tmp_path):
    result, rows = _fleet(tmp_path, FLEET_JOBS, INVENTORY + "a100,aws/p4d.24xlarge\n")
    assert result.exit_code == 2 and rows == []
    assert_error_line(result, f"inventory={str(tmp_path / 'inventory.csv')!r}: row 3 has 2 cells, the header 4")
