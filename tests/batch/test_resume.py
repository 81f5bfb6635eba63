"""Nothing lost (batch/run.py and sheets/journal.py): --resume reuses answered rows in every output
format, a batch killed with SIGKILL keeps every completed row, Ctrl-C writes the finished rows and
exits 130, and a torn journal line is ignored.

The kill and interrupt tests use unrestricted rows (~0.1 s each) so that there is a moment to strike.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.cli import invoke_batch
from helpers.paths import REPO
from helpers.sheets import HEADER, job, read_csv, write_csv

from vramplan.sheets import journal as batch_journal


def test_resume_reuses_answered_rows_and_solves_only_the_rest(tmp_path):
    rows = [job(str(i), seq_len=str(512 * (i + 1))) for i in range(4)] + [job("bad", seq_len="abc")]
    jobs = write_csv(tmp_path / "jobs.csv", rows, HEADER)
    output = tmp_path / "plans.csv"
    assert invoke_batch(str(jobs), "-o", str(output)).exit_code == 3
    first = output.read_bytes()
    again = invoke_batch(str(jobs), "-o", str(output), "--resume")
    assert again.exit_code == 3 and "5 reused" in again.stderr
    assert output.read_bytes() == first
    rows[1] = job("1", seq_len="4096")  # an edited row is a new job
    rows.append(job("new", seq_len="1024"))
    write_csv(jobs, rows, HEADER)
    third = invoke_batch(str(jobs), "-o", str(output), "--resume")
    assert third.exit_code == 3 and "4 reused" in third.stderr
    _, plans = read_csv(output)
    assert [p["id"] for p in plans] == ["0", "1", "2", "3", "bad", "new"] and plans[1]["seq_len"] == "4096"
    assert all(p["status"] in ("optimal", "error") for p in plans)


@pytest.mark.parametrize("suffix, module", [(".xlsx", "openpyxl"), (".parquet", "pyarrow"), (".jsonl", "json")])
def test_resume_reads_back_every_output_format(tmp_path, suffix, module):
    pytest.importorskip(module)
    rows = [job("=a", seq_len="1024"), job("b", seq_len="abc"), job("c", seq_len="2048")]
    jobs = write_csv(tmp_path / "jobs.csv", rows, HEADER)
    output = tmp_path / f"plans{suffix}"
    assert invoke_batch(str(jobs), "-o", str(output)).exit_code == 3
    first = output.read_bytes() if suffix != ".xlsx" else None
    again = invoke_batch(str(jobs), "-o", str(output), "--resume")
    assert again.exit_code == 3 and "3 reused" in again.stderr, again.stderr
    if first is not None:
        assert output.read_bytes() == first


SLOW_ROWS = [{"id": str(i), "model": model, "seq_len": str(seq), "objective": objective}
             for i, (model, seq, objective) in enumerate(
                 (m, s, o) for m in ("llama-3.1-8b", "mistral-7b", "qwen2.5-7b") for s in (1024, 2048, 4096, 8192)
                 for o in ("cost", "time", "throughput"))]


def start_batch(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, Path]:
    jobs = write_csv(tmp_path / "jobs.csv", SLOW_ROWS, ["id", "model", "seq_len", "objective"])
    output = tmp_path / "plans.csv"
    command = [sys.executable, "-c", "from cli import main; main()", "batch", str(jobs), "-o", str(output),
               "--workers", "1", "--chunk-size", "1", *extra]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, output


def wait_for_rows(journal: Path, process: subprocess.Popen, count: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text(encoding="utf-8").count("\n") > count:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    raise AssertionError("no rows were written in time")


def journal_rows(journal: Path) -> dict[int, dict]:
    _, entries = batch_journal.read_journal(journal)
    return {entry["row"]: entry["answer"] for entry in entries}


def test_a_killed_batch_keeps_every_completed_row_and_resume_finishes_it(tmp_path):
    process, output = start_batch(tmp_path)
    journal = batch_journal.journal_path(output)
    wait_for_rows(journal, process, 4)
    process.kill()  # SIGKILL: no chance to clean up
    process.wait()
    kept = journal_rows(journal)
    assert len(kept) >= 4 and len(kept) < len(SLOW_ROWS)
    assert all(answer["status"] == "optimal" for answer in kept.values())
    result = invoke_batch(str(tmp_path / "jobs.csv"), "-o", str(output), "--resume", workers=2)
    assert result.exit_code == 0, result.stderr
    assert f"{len(kept)} reused" in result.stderr  # only the missing rows were solved
    _, plans = read_csv(output)
    assert [p["id"] for p in plans] == [r["id"] for r in SLOW_ROWS]
    assert all(p["status"] == "optimal" for p in plans)
    for row, answer in kept.items():  # what survived the kill is exactly what a full solve gives
        assert plans[row]["usd_total"] == repr(answer["usd_total"]) and plans[row]["gpu"] == answer["gpu"]
    assert not journal.exists()


def test_ctrl_c_writes_finished_rows_and_exits_130(tmp_path):
    process, output = start_batch(tmp_path)
    journal = batch_journal.journal_path(output)
    wait_for_rows(journal, process, 3)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "--resume" in stderr
    _, plans = read_csv(output)
    assert [p["id"] for p in plans] == [r["id"] for r in SLOW_ROWS]  # every row, in order
    finished = [p for p in plans if p["status"]]
    assert len(finished) >= 3 and len(finished) < len(SLOW_ROWS)
    assert all(p["status"] == "optimal" for p in finished)
    assert all("--resume" in p["error"] for p in plans if not p["status"])
    assert journal.exists()
    result = invoke_batch(str(tmp_path / "jobs.csv"), "-o", str(output), "--resume", workers=2)
    assert result.exit_code == 0, result.stderr
    assert f"{len(finished)} reused" in result.stderr
    _, resumed = read_csv(output)
    assert [p["id"] for p in resumed] == [r["id"] for r in SLOW_ROWS]
    assert all(p["status"] == "optimal" for p in resumed)
    assert [p for p in resumed if p["id"] in {f["id"] for f in finished}] == finished


def test_a_torn_journal_line_is_ignored_and_overwritten(tmp_path):
    path = tmp_path / "plans.csv.partial.jsonl"
    journal = batch_journal.Journal(path, fresh=True, trust_output=False)
    journal.append(0, "k0", {"status": "optimal"})
    journal.close()
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"row": 1, "key": "k1", "ans')  # killed mid-write
    assert list(journal_rows(path)) == [0]
    journal = batch_journal.Journal(path, fresh=False, trust_output=False)
    journal.append(2, "k2", {"status": "error"})
    journal.close()
    assert list(journal_rows(path)) == [0, 2]

