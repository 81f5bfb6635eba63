"""CSV injection outside batch (issue 11): every CSV the tool writes neutralises formula cells the
way batch output does (sheets/sheet_files.py neutralise: a leading apostrophe before = + - @ tab CR)."""

from __future__ import annotations

import csv
import io
import json
from importlib import resources
from pathlib import Path

from click.testing import CliRunner

from vramplan.cli import main
from vramplan.commands.output import csv_text

PAYLOAD = "=cmd|' /C calc'!A0"
FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"


def packaged(name: str) -> str:
    return resources.files("vramplan.catalogues").joinpath(name).read_text(encoding="utf-8")


def cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def assert_neutralised(text: str) -> None:
    found = cells(text)
    assert "'" + PAYLOAD in found, found[:40]
    assert PAYLOAD not in found


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_csv_text_neutralises_text_cells_and_header_but_not_numbers():
    text = csv_text([{PAYLOAD: "-5", "n": -5, "s": "+1", "ok": "llama"}])
    assert cells(text) == ["'" + PAYLOAD, "n", "s", "ok", "'-5", "-5", "'+1", "llama"]


def test_gpus_csv_listing_neutralises_a_catalogue_source(tmp_path):
    lines = packaged("gpus.csv").splitlines()
    header, first = lines[0], next(csv.reader([lines[1]]))
    first[-1] = PAYLOAD
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(first)
    path = tmp_path / "gpus.csv"
    path.write_text(header + "\n" + buffer.getvalue())
    offerings = tmp_path / "offerings.csv"
    offering_lines = packaged("offerings.csv").splitlines()
    offerings.write_text("\n".join([offering_lines[0]] + [row for row in offering_lines[1:]
                                                         if f",{first[0]}," in row]) + "\n")
    assert_neutralised(invoke("gpus", "--gpus-csv", str(path), "--offerings-csv", str(offerings), "--format", "csv"))


def test_offerings_csv_listing_neutralises_a_source(tmp_path):
    lines = packaged("offerings.csv").splitlines()
    row = next(csv.reader([lines[1]]))
    row[-1] = PAYLOAD
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(row)
    path = tmp_path / "offerings.csv"
    path.write_text(lines[0] + "\n" + buffer.getvalue())
    assert_neutralised(invoke("offerings", "--offerings-csv", str(path), "--format", "csv"))


def test_models_csv_listing_neutralises_a_name(tmp_path):
    lines = packaged("architectures.csv").splitlines()
    row = next(csv.reader([lines[1]]))
    row[0] = PAYLOAD
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(row)
    path = tmp_path / "models.csv"
    path.write_text(lines[0] + "\n" + buffer.getvalue())
    assert_neutralised(invoke("models", "--models-csv", str(path), "--format", "csv"))


def test_estimate_and_solve_csv_neutralise_a_folder_name(tmp_path):
    folder = tmp_path / PAYLOAD.replace("/", "_")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(json.loads((FIXTURES / "tiny-llama.json").read_text())))
    estimate = invoke("estimate", "--model", str(folder), "--seq-len", "128", "--format", "csv")
    assert not any(cell.startswith("=") for cell in cells(estimate))
    assert any(cell.startswith("'=cmd") for cell in cells(estimate))
    solve = invoke("solve", "--model", str(folder), "--seq-len", "128", "--format", "csv", "--max-gpus", "8")
    assert not any(cell.startswith("=") for cell in cells(solve))
