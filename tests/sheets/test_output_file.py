"""`vramplan batch` never destroys a file (sheets/output_file.py): special outputs are written, not replaced;
an output that is an input (or whose journal is) is refused; one output, one batch at a time;
temporary files of a killed final write do not survive."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers.cli import invoke_batch

from vramplan.sheets import output_file

ROW = "model,seq_len,gpus,max_gpus\nllama-3.1-8b,2048,h100-sxm-80gb,8\n"


def jobs_file(folder: Path, name: str = "jobs.csv") -> Path:
    path = folder / name
    path.write_text(ROW, encoding="utf-8")
    return path



def test_dev_null_stays_a_character_device(tmp_path):
    before = os.stat("/dev/null")
    result = invoke_batch(str(jobs_file(tmp_path)), "-o", "/dev/null", quiet=True)
    assert result.exit_code == 0, result.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert not Path("/dev/null.lock").exists() and not Path("/dev/null.partial.jsonl").exists()


def test_a_fifo_output_is_written_into_not_replaced(tmp_path):
    fifo = tmp_path / "plans.csv"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = invoke_batch(str(jobs_file(tmp_path)), "-o", str(fifo), quiet=True)
    reader.join(timeout=60)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert received and b"status" in received[0] and b"optimal" in received[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.csv", "plans.csv"]  # no journal, no lock


def test_a_symlink_to_the_parents_stdout_is_written_through(tmp_path):
    link = tmp_path / "out.csv"
    link.symlink_to("/proc/self/fd/1")
    done = subprocess.run([sys.executable, "-m", "vramplan", "batch", str(jobs_file(tmp_path)), "-o", str(link),
                           "--workers", "1", "-q"], capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"\xef\xbb\xbfmodel,seq_len") and b"optimal" in done.stdout
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"


def test_a_symlink_to_a_regular_file_stays_a_link_and_its_target_is_replaced(tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "plans.csv"
    link.symlink_to(target)
    result = invoke_batch(str(jobs_file(tmp_path)), "-o", str(link), quiet=True)
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink() and "optimal" in target.read_text(encoding="utf-8-sig")


@pytest.mark.parametrize("case", ["output-is-jobs", "journal-is-jobs", "link-to-jobs", "output-is-catalogue"])
def test_an_output_that_the_run_reads_is_refused_and_left_alone(tmp_path, case):
    jobs = jobs_file(tmp_path, "plans.csv.partial.jsonl" if case == "journal-is-jobs" else "jobs.csv")
    if case == "journal-is-jobs":
        jobs.write_text('{"model": "llama-3.1-8b", "seq_len": 2048}\n', encoding="utf-8")
    original = jobs.read_bytes()
    args = [str(jobs)]
    if case == "output-is-jobs":
        args += ["-o", str(jobs)]
    elif case == "journal-is-jobs":
        args += ["-o", str(tmp_path / "plans.csv")]
    elif case == "link-to-jobs":
        (tmp_path / "link.csv").symlink_to(jobs)
        args += ["-o", str(tmp_path / "link.csv")]
    else:
        gpus = tmp_path / "gpus.csv"
        gpus.write_text("name\n", encoding="utf-8")
        original = gpus.read_bytes()
        jobs, args = gpus, args + ["-o", str(gpus), "--gpus-csv", str(gpus)]
    result = invoke_batch(*args, quiet=True)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "write to another file" in result.stderr
    assert jobs.read_bytes() == original


def test_a_second_batch_on_the_same_output_stops_with_one_line(tmp_path):
    output = tmp_path / "plans.csv"
    lock = output_file.OutputLock(output_file.output_target(output))  # a batch already running
    try:
        result = invoke_batch(str(jobs_file(tmp_path)), "-o", str(output), quiet=True)
    finally:
        lock.release()
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "another vramplan run is writing it" in result.stderr
    assert not output.exists()
    result = invoke_batch(str(jobs_file(tmp_path)), "-o", str(output), quiet=True)
    assert result.exit_code == 0 and output.exists()
    assert not (tmp_path / f".plans.csv{output_file.LOCK_MARK}").exists()


def test_a_stale_temporary_file_of_a_killed_run_is_removed(tmp_path):
    output = tmp_path / "plans.csv"
    stale = tmp_path / f".plans.csv{output_file.TEMP_MARK}999999"
    stale.write_text("half a file", encoding="utf-8")
    result = invoke_batch(str(jobs_file(tmp_path)), "-o", str(output), quiet=True)
    assert result.exit_code == 0, result.stderr
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.csv", "plans.csv"]


SIGTERM_DURING_WRITE = """
import os, signal, sys
from pathlib import Path
from vramplan.sheets import output_file
real_fsync = os.fsync
def fsync_then_sigterm(fd):
    real_fsync(fd)
    os.kill(os.getpid(), signal.SIGTERM)
output_file.os.fsync = fsync_then_sigterm
output_file.write_output(output_file.output_target(Path(sys.argv[1])), b"x" * 1000)
"""


def test_sigterm_during_the_final_write_removes_the_temporary_file(tmp_path):
    output = tmp_path / "plans.csv"
    output.write_text("the previous plans", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", SIGTERM_DURING_WRITE, str(output)], capture_output=True, timeout=60)
    assert done.returncode == -15, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plans.csv"]
    assert output.read_text(encoding="utf-8") == "the previous plans"


def test_a_folder_or_a_missing_folder_is_one_line(tmp_path):
    for output, code in ((tmp_path, 2), (tmp_path / "missing" / "plans.csv", 1)):  # a folder: bad input, as
        result = invoke_batch(str(jobs_file(tmp_path)), "-o", str(output), quiet=True)  # for every output option
        assert result.exit_code == code and result.stderr.count("\n") == 1 and "cannot write" in result.stderr


def test_an_unwritable_output_names_the_file(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output_file, "_write_atomically", full)
    result = invoke_batch(str(jobs_file(tmp_path)), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 1
    output = str(tmp_path / "plans.csv")
    assert result.stderr.strip() == f"error: output={output!r}: cannot write: No space left on device"


def test_a_journal_that_cannot_be_written_names_it(tmp_path, monkeypatch):
    from vramplan.sheets import journal as batch_journal
    def full(self, record):
        if "row" in record:
            raise OSError(28, "No space left on device")
        self._handle.write("{}\n")

    monkeypatch.setattr(batch_journal.Journal, "_write", full)
    result = invoke_batch(str(jobs_file(tmp_path)), "-o", str(tmp_path / "plans.csv"), quiet=True)
    journal = tmp_path / "plans.csv.partial.jsonl"
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: journal={str(journal)!r}: cannot write: No space left on device"
    assert not (tmp_path / f".plans.csv{output_file.LOCK_MARK}").exists()
