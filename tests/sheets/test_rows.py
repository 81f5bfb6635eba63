"""One row of a batch sheet (sheets/rows.py): the schema is the query's, a bad header or cell names
the column and the value, and the sheet as a spreadsheet user meets it: their own columns pass
through, misspellings of ours are still errors, XLSX output keeps numbers and has a frozen,
filtered header, and an explanation says each thing once."""

from __future__ import annotations

import pytest
from helpers.cli import invoke_batch
from helpers.sheets import BAD_ROWS, FAST, job, read_rows, write_csv, write_sheet

from vramplan.batch.run import BatchOptions, run_batch
from vramplan.models.core.errors import VramplanError
from vramplan.sheets.rows import ANSWER_COLUMNS, INPUT_COLUMNS, _Cells, check_columns, misspells, output_row, parse_row
from vramplan.solver.api import solve

# --- the schema -----------------------------------------------------------------------------------


def test_one_schema():
    assert tuple(_Cells.model_fields) == tuple(INPUT_COLUMNS)
    specified_columns = ["id", "model", "method", "seq_len", "global_batch", "tokens", "objective", "max_gpus", "gpus",
                         "providers", "budget_usd", "deadline_hours", "lora_rank", "optimizer", "accounting", "attention",
                         "capacity_fraction", "pricing", "zero", "recompute", "precision", "micro_batch", "offload",
                         "num_gpus"]
    assert set(specified_columns) <= set(INPUT_COLUMNS)


@pytest.mark.parametrize("columns, fragment", [
    (["model", "seq-len"], "column='seq-len': unknown column; did you mean 'seq_len'?"),
    (["model", "seq_len", "optimiser"], "column='optimiser': unknown column; did you mean 'optimizer'?"),
    (["model", "seq_len", "status"], "column='status': is an answer column"),
    (["model", "seq_len", "model"], "column='model': appears twice"),
    (["model"], "column='seq_len': is required"),
])
def test_header_errors(columns, fragment):
    with pytest.raises(VramplanError) as error:
        check_columns(columns)
    assert fragment in str(error.value)


def test_a_good_row_is_the_query_solve_would_build():
    query = parse_row({"id": "x", "model": " llama-3.1-8b ", "seq_len": "4096.0",
                       "gpus": "h100-sxm-80gb; a100-sxm-80gb",
                       "providers": "", "zero": "3", "micro_batch": 2.0, "method": "lora", "lora_rank": "8",
                       "tokens": "2e9", "budget_usd": None, "capacity_fraction": float("nan")})
    assert query.model == "llama-3.1-8b" and query.job.seq_len == 4096 and query.job.lora_rank == 8
    assert query.gpus == ("h100-sxm-80gb", "a100-sxm-80gb") and query.providers == ()
    assert query.pins.zero == 3 and query.pins.micro_batch == 2 and query.tokens == 2e9
    assert query.budget_usd is None and query.job.capacity_fraction == 0.9  # empty and NaN cells = default
    assert (query.top_k, query.pareto, query.engine) == (1, False, "cpsat")


@pytest.mark.parametrize("id_, changes, fragment", BAD_ROWS + [
    ("pin-over-limit", {"num_gpus": "1024"}, "num_gpus=1024"),
    ("bad-zero", {"zero": "5"}, "zero='5'"),
    ("fraction", {"capacity_fraction": "1.5"}, "capacity_fraction='1.5'"),
])
def test_bad_rows_name_the_field_and_the_value(catalogue, id_, changes, fragment):
    answers = dict(run_batch(catalogue, [(0, job(id_, **changes))], BatchOptions(backend="serial")))
    assert answers[0]["status"] == "error"
    assert fragment in answers[0]["error"]
    assert "\n" not in answers[0]["error"]


def test_output_row_of_an_infeasible_answer_explains(catalogue):
    result = solve(catalogue, parse_row(job("x", model="llama-3.1-405b", seq_len="8192", gpus="a10g-24gb")))
    answer = output_row(result)
    assert answer["status"] == "infeasible" and answer["explanation"] and answer["gpu"] is None
    assert list(answer) == list(ANSWER_COLUMNS)


# --- the user's own columns, XLSX output, explanations ---------------------------------------------


@pytest.mark.parametrize("name, known", [("seq-len", "seq_len"), ("seqlen", "seq_len"), ("Seq_Len", "seq_len"),
                                         ("SEQ LEN", "seq_len"), ("optimiser", "optimizer"), ("objectve", "objective"),
                                         ("provider", "providers"), ("budget", "budget_usd"),
                                         ("deadline", "deadline_hours"), ("region", "regions")])
def test_a_misspelling_of_a_known_column_is_still_an_error(name, known):
    assert misspells(name) == known
    with pytest.raises(VramplanError) as error:
        check_columns(["model", "seq_len", name] if known != "seq_len" else ["model", name], strict=False)
    assert str(error.value) == f"column={name!r}: unknown column; did you mean {known!r}?"


@pytest.mark.parametrize("name", ["team", "notes", "owner", "cost_center", "priority", "comment", "project", "location"])
def test_a_column_of_the_users_own_is_not_a_misspelling(name):
    assert misspells(name) is None
    assert check_columns(["model", "seq_len", name], strict=False) == [name]
    with pytest.raises(VramplanError, match=f"column='{name}': unknown column"):
        check_columns(["model", "seq_len", name], strict=True)


def test_answer_columns_are_never_passed_through():
    with pytest.raises(VramplanError, match="is an answer column"):
        check_columns(["model", "seq_len", "status"], strict=False)


def test_unknown_columns_pass_through_unchanged_with_one_warning(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [["ml", "llama-3.1-8b", "2048", *FAST.values(), "=1+1"],
                                              ["infra", "llama-3.1-8b", "1024", *FAST.values(), ""]],
                     ["team", "model", "seq_len", "gpus", "max_gpus", "notes"])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == ("warning: columns 'team', 'notes' are not vramplan's: copied to the "
                                             "output unchanged (--strict-columns makes them errors)")
    rows = read_rows(tmp_path / "plans.csv")
    assert [(row["team"], row["notes"], row["status"]) for row in rows] == [("ml", "'=1+1", "optimal"),
                                                                            ("infra", "", "optimal")]
    strict = invoke_batch(str(jobs), "-o", str(tmp_path / "strict.csv"), "--strict-columns")
    assert strict.exit_code == 2 and strict.stderr.startswith("error: column='team': unknown column")
    resumed = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "--resume", "-q")
    assert resumed.exit_code == 0 and resumed.stderr == ""


def test_xlsx_output_keeps_numbers_and_has_a_frozen_filtered_header(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    import pandas

    frame = pandas.DataFrame({"id": ["007", "b"], "model": ["llama-3.1-8b"] * 2, "seq_len": [2048, 1024],
                              "gpus": [FAST["gpus"]] * 2, "max_gpus": [8, 8], "capacity_fraction": [0.9, 0.85]})
    write_sheet(tmp_path / "jobs.xlsx", frame)
    write_csv(tmp_path / "jobs.csv", frame.astype(str).values.tolist(), list(frame.columns))
    for name in ("jobs.xlsx", "jobs.csv"):
        output = tmp_path / f"{name}.xlsx"
        result = invoke_batch(str(tmp_path / name), "-o", str(output), "-q")
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


def test_an_explanation_says_the_smallest_change_once(catalogue):
    row = {"model": "llama-3.1-8b", "seq_len": "8192", "gpus": "h100-sxm-80gb", "max_gpus": "1", "zero": "0",
           "recompute": "none"}
    answer = output_row(solve(catalogue, parse_row(row)))
    assert answer["status"] == "infeasible"
    text = answer["explanation"].lower()
    # (more GPUs since ZeRO-3 on one GPU counts its working set: unpinning ZeRO no longer fits)
    smallest = text.split("smallest change: ", 1)[1].split(": ", 1)[0]
    assert smallest == "more gpus (4)"
    assert text.count("smallest change") == 1 and text.count(smallest) == 1 and "also fits" in text
