"""The batch sheet as a spreadsheet user meets it (issue 7 section 3): their own columns pass
through, misspellings of ours are still errors, XLSX output keeps numbers and has a frozen,
filtered header, and an explanation says each thing once."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from vramplan.sheets.rows import check_columns, misspells, output_row, parse_row
from vramplan.cli import main
from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.errors import VramplanError
from vramplan.solver.api import solve

FAST = {"gpus": "h100-sxm-80gb", "max_gpus": "8"}


def run(*args: str):
    return CliRunner().invoke(main, ["batch", *args, "--workers", "1"])


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.mark.parametrize("name, known", [("seq-len", "seq_len"), ("seqlen", "seq_len"), ("Seq_Len", "seq_len"),
                                         ("SEQ LEN", "seq_len"), ("optimiser", "optimizer"), ("objectve", "objective"),
                                         ("provider", "providers"), ("budget", "budget_usd"),
                                         ("deadline", "deadline_hours")])
def test_a_misspelling_of_a_known_column_is_still_an_error(name, known):
    assert misspells(name) == known
    with pytest.raises(VramplanError) as error:
        check_columns(["model", "seq_len", name] if known != "seq_len" else ["model", name], strict=False)
    assert str(error.value) == f"column={name!r}: unknown column; did you mean {known!r}?"


@pytest.mark.parametrize("name", ["team", "notes", "owner", "cost_center", "priority", "comment", "project", "region"])
def test_a_column_of_the_users_own_is_not_a_misspelling(name):
    assert misspells(name) is None
    assert check_columns(["model", "seq_len", name], strict=False) == [name]
    with pytest.raises(VramplanError, match=f"column='{name}': unknown column"):
        check_columns(["model", "seq_len", name], strict=True)


def test_answer_columns_are_never_passed_through():
    with pytest.raises(VramplanError, match="is an answer column"):
        check_columns(["model", "seq_len", "status"], strict=False)


def test_unknown_columns_pass_through_unchanged_with_one_warning(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", ["team", "model", "seq_len", "gpus", "max_gpus", "notes"],
                     [["ml", "llama-3.1-8b", "2048", *FAST.values(), "=1+1"],
                      ["infra", "llama-3.1-8b", "1024", *FAST.values(), ""]])
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == ("warning: columns 'team', 'notes' are not vramplan's: copied to the "
                                             "output unchanged (--strict-columns makes them errors)")
    with (tmp_path / "plans.csv").open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["team"], row["notes"], row["status"]) for row in rows] == [("ml", "'=1+1", "optimal"),
                                                                            ("infra", "", "optimal")]
    strict = run(str(jobs), "-o", str(tmp_path / "strict.csv"), "--strict-columns")
    assert strict.exit_code == 2 and strict.stderr.startswith("error: column='team': unknown column")
    resumed = run(str(jobs), "-o", str(tmp_path / "plans.csv"), "--resume", "-q")
    assert resumed.exit_code == 0 and resumed.stderr == ""


def test_xlsx_output_keeps_numbers_and_has_a_frozen_filtered_header(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    import pandas

    frame = pandas.DataFrame({"id": ["007", "b"], "model": ["llama-3.1-8b"] * 2, "seq_len": [2048, 1024],
                              "gpus": [FAST["gpus"]] * 2, "max_gpus": [8, 8], "capacity_fraction": [0.9, 0.85]})
    frame.to_excel(tmp_path / "jobs.xlsx", index=False)
    write_csv(tmp_path / "jobs.csv", list(frame.columns), frame.astype(str).values.tolist())
    for name in ("jobs.xlsx", "jobs.csv"):
        output = tmp_path / f"{name}.xlsx"
        result = run(str(tmp_path / name), "-o", str(output), "-q")
        assert result.exit_code == 0, result.stderr
        sheet = openpyxl.load_workbook(output).active
        header = [cell.value for cell in sheet[1]]
        row = {name: cell for name, cell in zip(header, sheet[2])}
        assert row["seq_len"].value == 2048 and row["seq_len"].data_type == "n", name
        assert row["capacity_fraction"].value == 0.9 and row["max_gpus"].data_type == "n", name
        assert row["id"].value == "007" and row["id"].data_type == "s", name  # a leading zero is text
        assert sheet.freeze_panes == "A2"
        assert sheet.auto_filter.ref == f"A1:{openpyxl.utils.get_column_letter(len(header))}3"
        widths = {name: sheet.column_dimensions[openpyxl.utils.get_column_letter(i + 1)].width
                  for i, name in enumerate(header)}
        assert widths["offering"] > widths["dp"] >= 6 and max(widths.values()) <= 60


def test_an_explanation_says_the_smallest_change_once():
    catalogue = load_catalogue()
    row = {"model": "llama-3.1-8b", "seq_len": "8192", "gpus": "h100-sxm-80gb", "max_gpus": "1", "zero": "0",
           "recompute": "none"}
    answer = output_row(solve(catalogue, parse_row(row)))
    assert answer["status"] == "infeasible"
    text = answer["explanation"].lower()
    assert text.count("smallest change") == 1 and text.count("allow zero-2/3") == 1
