"""One reading of every row (issue 11): JSON-lines columns are the union of all records, resume
keys follow what a row parses to, odd files are one line naming the file, odd cells stay in their
row, and workers neither print tracebacks nor outlive a batch killed with -9."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from vramplan.sheets.rows import MAX_CELL_CHARS
from vramplan.cli import main

FAST = {"gpus": "h100-sxm-80gb", "max_gpus": "8"}
GOOD = {"model": "llama-3.1-8b", "seq_len": "2048", **FAST}


def run(*args: str):
    return CliRunner().invoke(main, ["batch", *args, "--workers", "1"])


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    header = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def test_jsonl_columns_are_every_records_keys(tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    records = [{"id": "a", **GOOD}, {"id": "b", **GOOD, "num_gpus": 4}]
    jobs.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q")
    assert result.exit_code == 0, result.stderr
    rows = read_rows(tmp_path / "plans.csv")
    assert [row["num_gpus"] for row in rows] == ["", "4"]  # the pin of the second record is read
    assert rows[1]["plan_num_gpus"] == "4"


def test_a_misspelled_key_in_a_later_jsonl_record_is_reported(tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "seqlen": 4096}) + "\n", encoding="utf-8")
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 2
    assert result.stderr == "error: column='seqlen': unknown column; did you mean 'seq_len'?\n"


def test_resume_does_not_reuse_an_answer_for_a_cell_that_parses_differently(tmp_path):
    jobs, output = tmp_path / "jobs.csv", tmp_path / "plans.csv"
    write_csv(jobs, [{**GOOD, "global_batch": "1000"}])
    assert run(str(jobs), "-o", str(output), "-q").exit_code == 0
    write_csv(jobs, [{**GOOD, "global_batch": "1e3"}])  # the same number as a float, not as an integer
    resumed = run(str(jobs), "-o", str(output), "--resume", "-q")
    fresh_output = tmp_path / "fresh.csv"
    fresh = run(str(jobs), "-o", str(fresh_output), "-q")
    assert resumed.exit_code == fresh.exit_code
    assert read_rows(output) == read_rows(fresh_output)


def test_an_oversized_cell_is_its_rows_error_only(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [{"id": "big", **GOOD, "gpus": "x" * (MAX_CELL_CHARS + 1)},
                                              {"id": "ok", **GOOD}])
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q")
    assert result.exit_code == 3, result.stderr
    big, ok = read_rows(tmp_path / "plans.csv")
    assert big["status"] == "error" and f"{MAX_CELL_CHARS + 1:,} characters" in big["error"]
    assert len(big["error"]) < 200 and len(big["gpus"]) == MAX_CELL_CHARS + 1  # the cell is kept as it was
    assert ok["status"] == "optimal"


def test_an_unterminated_quote_is_one_line_naming_the_line(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text('id,model,seq_len\na,llama-3.1-8b,2048\nb,"llama-3.1-8b,2048\nc,llama-3.1-8b,1024\n',
                    encoding="utf-8")
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 2
    assert result.stderr == (f"error: jobs={str(jobs)!r}: line 3: a quoted cell starts on this line and its "
                             "quote is never closed\n")


def test_blank_rows_are_skipped_with_one_warning(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("model,seq_len,gpus,max_gpus\nllama-3.1-8b,2048,h100-sxm-80gb,8\n\n,,,\n"
                    "llama-3.1-8b,1024,h100-sxm-80gb,8\n,,,\n\n", encoding="utf-8")
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning")]
    assert warnings == [f"warning: {jobs}: 2 blank rows skipped (row 3, 4)"]  # trailing ones are not counted
    assert [row["seq_len"] for row in read_rows(tmp_path / "plans.csv")] == ["2048", "1024"]


def test_a_list_cell_is_written_to_xlsx_as_its_json(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"id": [1, {"a": 2}], **GOOD}) + "\n", encoding="utf-8")
    result = run(str(jobs), "-o", str(tmp_path / "plans.xlsx"), "-q")
    assert result.exit_code == 0, result.stderr
    sheet = openpyxl.load_workbook(tmp_path / "plans.xlsx").active
    assert sheet["A2"].value == '[1, {"a": 2}]'


def _xml_bomb(path: Path) -> None:
    pytest.importorskip("openpyxl")
    import pandas

    pandas.DataFrame([GOOD]).to_excel(path, index=False)
    entities = '<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
    bomb = (f'<?xml version="1.0"?><!DOCTYPE worksheet [{entities}]>'
            '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
            '<row r="1"><c r="A1" t="inlineStr"><is><t>&i;</t></is></c></row></sheetData></worksheet>')
    with zipfile.ZipFile(path) as source:
        members = {name: source.read(name) for name in source.namelist()}
    members["xl/worksheets/sheet1.xml"] = bomb.encode()
    with zipfile.ZipFile(path, "w") as target:
        for name, data in members.items():
            target.writestr(name, data)


@pytest.mark.parametrize("case", ["not-a-zip", "xml-bomb", "latin-1", "binary", "latin-1-jsonl"])
def test_an_unreadable_jobs_file_is_one_line_naming_it_exit_2(tmp_path, case):
    suffix = {"not-a-zip": ".xlsx", "xml-bomb": ".xlsx", "latin-1-jsonl": ".jsonl"}.get(case, ".csv")
    jobs = tmp_path / f"jobs{suffix}"
    if case == "not-a-zip":
        jobs.write_bytes(b"PK\x03\x04 this is not a workbook")
    elif case == "xml-bomb":
        _xml_bomb(jobs)
    elif case == "latin-1":
        jobs.write_bytes("model,seq_len,id\nllama-3.1-8b,2048,Zürich\n".encode("latin-1"))
    elif case == "latin-1-jsonl":
        jobs.write_bytes('{"model": "llama-3.1-8b", "seq_len": 2048, "id": "Zürich"}\n'.encode("latin-1"))
    else:
        jobs.write_bytes(bytes(range(256)) * 4)
    started = time.monotonic()
    result = run(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert time.monotonic() - started < 60
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"error: jobs={str(jobs)!r}: ")
    if case.startswith("latin-1"):
        assert "is not UTF-8 text (byte" in result.stderr
    assert not (tmp_path / "plans.csv").exists()


def test_more_workers_than_cpus_is_clamped_with_one_warning(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [GOOD])
    result = CliRunner().invoke(main, ["batch", str(jobs), "-o", str(tmp_path / "plans.csv"), "--workers", "300"])
    assert result.exit_code == 0, result.stderr
    available = len(os.sched_getaffinity(0))
    assert result.stderr.splitlines()[0] == (f"warning: --workers 300: this machine runs {available} at once; "
                                             f"using {available}")


WORKER_BUG = """
import sys
from vramplan.batch import worker
from vramplan.models.catalogue.catalogue import load_catalogue
def broken(catalogue, query, **kwargs):
    raise RuntimeError("a bug")
worker.solve = broken
worker.init_pool_worker(load_catalogue())
from vramplan.sheets.rows import parse_row
job = parse_row({"model": "llama-3.1-8b", "seq_len": "2048"}).model_dump(mode="json")
answer = worker.solve_job(worker._worker_catalogue, job)
print(answer["status"], answer["error"])
"""


def test_a_worker_exception_prints_no_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "VRAMPLAN_DEBUG"}
    done = subprocess.run([sys.executable, "-c", WORKER_BUG], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.strip() == "error internal error: RuntimeError: a bug"


def _descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc (parents first)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_kill_9_of_a_batch_takes_its_workers_forkserver_and_tracker_with_it(tmp_path):
    rows = [{"model": "llama-3.1-8b", "seq_len": str(512 + i)} for i in range(400)]  # unrestricted: slow
    jobs = write_csv(tmp_path / "jobs.csv", rows)
    output = tmp_path / "plans.csv"
    batch = subprocess.Popen([sys.executable, "-m", "vramplan", "batch", str(jobs), "-o", str(output),
                              "--workers", "2", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    journal = tmp_path / "plans.csv.partial.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not journal.exists() or journal.read_text().count("\n") < 2):
        time.sleep(0.2)
    helpers = _descendants(batch.pid)
    assert len(helpers) >= 3, helpers  # forkserver, resource tracker, workers
    batch.send_signal(signal.SIGKILL)
    stdout, stderr = batch.communicate(timeout=30)  # returns only once nobody holds the pipes open
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(pid) for pid in helpers):
        time.sleep(0.2)
    assert [pid for pid in helpers if _alive(pid)] == []
