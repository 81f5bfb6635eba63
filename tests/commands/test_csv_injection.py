"""CSV injection outside batch (hostile input): every CSV the tool writes neutralises formula cells the
way batch output does (sheets/sheet_files.py neutralise: a leading apostrophe before = + - @ tab CR)."""

from __future__ import annotations

import csv
import io
import json

from helpers.catalogue import packaged_text
from helpers.cli import invoke
from helpers.paths import HF_CONFIGS

from vramplan.commands.output import csv_text

PAYLOAD = "=cmd|' /C calc'!A0"


def cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def assert_neutralised(text: str) -> None:
    found = cells(text)
    assert "'" + PAYLOAD in found, found[:40]
    assert PAYLOAD not in found


def stdout_of(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_csv_text_neutralises_text_cells_and_header_but_not_numbers():
    text = csv_text([{PAYLOAD: "-5", "n": -5, "s": "+1", "ok": "llama"}])
    assert cells(text) == ["'" + PAYLOAD, "n", "s", "ok", "'-5", "-5", "'+1", "llama"]


def one_row_csv(header: str, row: list[str]) -> str:
    """A CSV file's text: the header line and one row."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(row)
    return header + "\n" + buffer.getvalue()


def test_gpus_csv_listing_neutralises_a_catalogue_source(tmp_path):
    lines = packaged_text("gpus.csv").splitlines()
    header, first = lines[0], next(csv.reader([lines[1]]))
    first[-1] = PAYLOAD
    path = tmp_path / "gpus.csv"
    path.write_text(one_row_csv(header, first))
    offerings = tmp_path / "offerings.csv"
    offering_lines = packaged_text("offerings.csv").splitlines()
    offerings.write_text("\n".join([offering_lines[0]] + [row for row in offering_lines[1:]
                                                         if f",{first[0]}," in row]) + "\n")
    assert_neutralised(stdout_of("gpus", "--gpus-csv", str(path), "--offerings-csv", str(offerings), "--format", "csv"))


def test_offerings_csv_listing_neutralises_a_source(tmp_path):
    lines = packaged_text("offerings.csv").splitlines()
    row = next(csv.reader([lines[1]]))
    row[-1] = PAYLOAD
    path = tmp_path / "offerings.csv"
    path.write_text(one_row_csv(lines[0], row))
    assert_neutralised(stdout_of("offerings", "--offerings-csv", str(path), "--format", "csv"))


def test_models_csv_listing_neutralises_a_name(tmp_path):
    lines = packaged_text("architectures.csv").splitlines()
    row = next(csv.reader([lines[1]]))
    row[0] = PAYLOAD
    path = tmp_path / "models.csv"
    path.write_text(one_row_csv(lines[0], row))
    assert_neutralised(stdout_of("models", "--models-csv", str(path), "--format", "csv"))


def test_estimate_and_solve_csv_neutralise_a_folder_name(tmp_path):
    folder = tmp_path / PAYLOAD.replace("/", "_")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(json.loads((HF_CONFIGS / "tiny-llama.json").read_text())))
    estimate = stdout_of("estimate", "--model", str(folder), "--seq-len", "128", "--format", "csv")
    assert not any(cell.startswith("=") for cell in cells(estimate))
    assert any(cell.startswith("'=cmd") for cell in cells(estimate))
    solve = stdout_of("solve", "--model", str(folder), "--seq-len", "128", "--format", "csv", "--max-gpus", "8")
    assert not any(cell.startswith("=") for cell in cells(solve))
